// Reader of both formats torch.save writes (one API, torch_file_*), and a byte-exact writer of the
// legacy one.
//
// Zip format (the default since PyTorch 1.6): a zip archive holding "<top>/data.pkl" (the object,
// a protocol-2 pickle), "<top>/data/<key>" (each storage's raw little-endian bytes, stored
// uncompressed), "<top>/byteorder" and "<top>/version"; the top folder's name varies. Storages are
// persistent ids ('storage', torch.XStorage, key, location, numel). The file is memory-mapped and
// a storage's bytes are touched only when a tensor over it is read, so an optimizer state inside a
// training checkpoint costs no memory. Compressed or encrypted members, a storage larger than its
// member, a member past the end of the file: one-line errors.
//
// The unpickler is restricted (like torch.load(weights_only=True)): it builds dicts, lists,
// tuples, numbers, strings, bytes, OrderedDict and tensors (_rebuild_tensor_v2, _rebuild_parameter).
// Any other class created by NEWOBJ (argparse.Namespace in a training checkpoint) becomes an opaque
// record whose BUILD state (its fields) can be read; nothing is constructed. A REDUCE of any other
// global (os.system, builtins.eval, ...) would be a call and is refused with an error naming it;
// nothing is ever executed.
//
// Legacy format: minimal reader for PyTorch's legacy, non-zip serialization: the format of
// torch.save(obj, f, _use_new_zipfile_serialization=False) and of every .pth written before
// PyTorch 1.6, among them pytorch-fid's pt_inception-2015-12-05-6726825d.pth.
//
// Layout of such a file (all pickles protocol 2):
//     pickle  magic number 0x1950a86a20f9469cfc6c
//     pickle  protocol version 1001
//     pickle  sys_info {protocol_version, little_endian, type_sizes}
//     pickle  the object: here a (Ordered)Dict name -> tensor, each tensor
//             torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)
//             with storage a persistent id ('storage', torch.FloatStorage, key, location, numel,
//             view_metadata)
//     pickle  the list of storage keys, sorted as strings
//     per key in that order: int64 element count, then the raw little-endian elements
//
// Only the pickle opcodes such files use are understood (plus a few neighbours); anything else,
// a truncated file or a foreign pickle is an error naming the file. Offsets and
// strides are honoured: a tensor is copied out as a contiguous row-major (e.g. OIHW) float array
// whatever its storage order (the FID weights keep conv weights in HWIO storage).
//
// The writer produces exactly the bytes torch 1.x writes for an OrderedDict of float32 tensors
// (each with its own storage, offset 0, requires_grad False); the test checks this against a file
// torch wrote. Little-endian hosts only.
#ifndef MALA_TORCH_LEGACY_H
#define MALA_TORCH_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"  // defines: MalaErr

#define TL_MAX_DIMS 8

typedef struct {
    const char *name;          // the state-dict key
    const char *storage_type;  // "FloatStorage", "DoubleStorage", "LongStorage", ...
    int elem_size;             // bytes per storage element
    int is_float;              // Float, Double, Half or BFloat16 storage
    int ndim;
    int64_t shape[TL_MAX_DIMS];
    int64_t stride[TL_MAX_DIMS];  // in elements
    int64_t offset;               // first element, counted from the start of `storage`
    const char *storage_key;      // the root storage's key
    int64_t storage_numel;        // elements `storage` holds (from its view start)
    const void *storage;          // raw bytes inside the file (unaligned)
} TorchTensor;

typedef struct TorchLegacy TorchLegacy;

// Maps and parses a file of either format. `weights` picks the sub-dict of a training checkpoint
// ({model, ema, opt, args}): "ema", "model", ...; NULL takes the top-level dict when it holds
// tensors, else "ema", else "model", else "state_dict" (DiT's find_model prefers ema). NULL with
// err set (one line, path first) on any problem.
TorchLegacy *torch_file_open(const char *path, const char *weights, MalaErr *err);
TorchLegacy *torch_file_open_mem(const void *buf, size_t len, const char *name, const char *weights, MalaErr *err);
int torch_file_is_zip(const TorchLegacy *t);
// The path (or the name given to the _mem opener), for messages.
const char *torch_file_name(const TorchLegacy *t);
// The sub-dict the tensors came from ("ema", "model", ...), or NULL for the top-level dict.
const char *torch_file_weights(const TorchLegacy *t);
// A string field of the checkpoint's `args` record (argparse.Namespace), e.g. "model" -> "DiT-XL/2";
// NULL when absent or not a string.
const char *torch_file_arg(const TorchLegacy *t, const char *field);
// An integer field of `args` (e.g. "image_size" -> 256) into *v; -1 when absent or not an integer.
int torch_file_arg_int(const TorchLegacy *t, const char *field, int64_t *v);

// torch_file_open(path, NULL, err) and its in-memory twin.
TorchLegacy *torch_legacy_open(const char *path, MalaErr *err);
// Parses a file image held in memory; `buf` must outlive the handle. `name` is used in messages.
TorchLegacy *torch_legacy_open_mem(const void *buf, size_t len, const char *name, MalaErr *err);
void torch_legacy_close(TorchLegacy *t);

// Tensors of the chosen dict in file order (non-tensor values are skipped).
int torch_legacy_count(const TorchLegacy *t);
const TorchTensor *torch_legacy_tensor(const TorchLegacy *t, int i);
const TorchTensor *torch_legacy_find(const TorchLegacy *t, const char *name);
int64_t torch_tensor_numel(const TorchTensor *x);

// Copies tensor x as a contiguous row-major float32 array of numel elements, converting from
// Float/Double/Half/BFloat16 storage. Non-floating tensors are an error.
int torch_legacy_read_f32(const TorchLegacy *t, const TorchTensor *x, float *out, MalaErr *err);

// ---- writer ----
typedef struct {
    const char *name;
    int ndim;
    const int64_t *shape;
    const int64_t *stride;     // strides into `storage` (row-major contiguous when NULL)
    const char *storage_key;   // digits, as torch's str(storage._cdata); must be unique
    int64_t storage_numel;
    const float *storage;
} TorchSaveTensor;

// Serialises an OrderedDict of float32 tensors into a malloc'ed buffer (*buf, *len).
int torch_legacy_serialize(const TorchSaveTensor *t, int n, unsigned char **buf, size_t *len, MalaErr *err);
// Same, written to `path` atomically (formats/atomic_file.h: temporary file, fsync, rename).
int torch_legacy_save(const char *path, const TorchSaveTensor *t, int n, MalaErr *err);

#endif

// Model files (docs/design.md §2): safetensors with PyTorch's state_dict names and the configuration in
// __metadata__. Training files add ema.<name>, opt.m.<name>, opt.v.<name> and train.* entries.
#ifndef MALA_CHECKPOINT_H
#define MALA_CHECKPOINT_H

#include "model/net.h"
#include "formats/safetensors.h"

typedef struct {
    int n;
    char **names;
} ClassNames;

void class_names_default(ClassNames *cn, int n);  // "0", "1", ...
void class_names_copy(ClassNames *dst, const ClassNames *src);
void class_names_free(ClassNames *cn);
// Index of a class given by name (case-insensitive) or number; -1 when unknown.
int class_names_find(const ClassNames *cn, const char *s);

// Reads the model configuration and class names from the file's metadata.
int ckpt_read_config(const StFile *f, NetConfig *c, ClassNames *cn, MalaErr *err);
// The same from a model file of either format (safetensors, or a PyTorch .pt via model/torch_load.h:
// its `ema` sub-dict when it has one, heads from DiT's presets or its args).
int ckpt_file_config(const char *path, NetConfig *c, ClassNames *cn, MalaErr *err);
// The command line's --weights and --heads, set once before any model is read (ckpt_file_config,
// ckpt_load_model*): `online` picks a training checkpoint's online weights in place of its EMA
// ones (a PyTorch .pt's `model` sub-dict, ours' plain tensor names), and refuses a model file of
// ours, which holds one set; heads > 0 overrides a .pt's inferred head count.
void ckpt_torch_options(int online, int heads);
// Writes the configuration and class names as metadata.
void ckpt_write_config(StWriter *w, const NetConfig *c, const ClassNames *cn);
// Copies every tensor of the model's table from `prefix + name` into dst (backend memory of
// m->n_floats floats). Missing tensors, wrong shapes and tensors the model does not know are
// refused, naming the first offending tensor. An I8 tensor (a q8 file) is dequantised: row r
// times its `NAME.q8_scale`[r], which must be there (F32, [rows], finite). A network holding int8
// weights (net.h, Net.q8; dst must be m->w) takes its quant8 tensors into them with no fp32 copy
// of the tensor kept: an I8 one row by row from the file, any other quantised as it is read.
int ckpt_load_tensors(const Net *m, const StFile *f, const char *prefix, float *dst, MalaErr *err);
// Adds the table's tensors from a host buffer under `prefix + name`. dtype CKPT_Q8: the q8 file
// type: each quant8 parameter (net.h) as I8 rows (core/quant8.h) with their F32 scales in
// `prefix + name + ".q8_scale"` (shape [rows]), every other tensor F16 (export's default type).
// A network holding int8 weights (Net.q8) gives its quant8 tensors from those (the host buffer
// has n_floats, without them): as they are for CKPT_Q8, else their values q * scale.
#define CKPT_Q8 ((StDtype)64)
void ckpt_add_tensors(StWriter *w, const Net *m, const char *prefix, const float *host, StDtype dtype);

// Opens a model for sampling: configuration from the metadata, EMA weights when present.
Net *ckpt_load_model(const char *path, const Backend *be, int max_batch, ClassNames *cn, MalaErr *err);
// The same with the network mode (NET_INFER_ATTN for the viewer's attention maps).
Net *ckpt_load_model_mode(const char *path, const Backend *be, int max_batch, int mode, ClassNames *cn,
                          MalaErr *err);
// 1 when the file holds EMA copies (ema.<name>) of the network's tensors.
int ckpt_has_ema(const Net *m, const StFile *f);
// Saves weights (host buffer of m->n_floats floats) as a sampling file.
int ckpt_save_weights(const Net *m, const ClassNames *cn, const float *host, StDtype dtype, const char *path,
                      MalaErr *err);
// The same with nkv extra metadata entries (kv: key, value, key, value, ...): provenance.
int ckpt_save_weights_meta(const Net *m, const ClassNames *cn, const float *host, StDtype dtype,
                           const char *const *kv, int nkv, const char *path, MalaErr *err);

#endif

// Reader and writer for the safetensors format (huggingface/safetensors):
//   8 bytes  little-endian u64 N, the header length
//   N bytes  JSON object: {"__metadata__": {str: str, ...},
//                          "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}, ...}
//   rest     data area; tensor bytes at [b, e) relative to its start, row-major, little-endian.
// The reader maps the file and validates it as strictly as the Python library does (every byte
// of the data area belongs to exactly one tensor), reporting one-line errors that start with the
// file name. The writer lays files out byte for byte as the Python library does and saves
// atomically.
#ifndef MALA_SAFETENSORS_H
#define MALA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/common.h"  // defines: MalaErr

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER_LEN 100000000  // the Python library's limit

typedef enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I32, ST_I64, ST_U8, ST_I8 } StDtype;

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;                     // 0 for a scalar
    int64_t shape[ST_MAX_DIMS];
    size_t begin, end;            // byte range inside the data area
} StTensor;

typedef struct {
    char *path;
    int n;                        // tensors, sorted by name
    StTensor *tensors;
    int nmeta;                    // __metadata__ entries, in file order
    char **meta_keys, **meta_vals;
    const uint8_t *data;          // the data area (inside the mapping; not aligned in general)
    size_t data_len;
    void *map;                    // the whole file, mapped read-only
    size_t map_len;
} StFile;

size_t st_dtype_size(StDtype dtype);
const char *st_dtype_name(StDtype dtype);   // "F32", "F16", "BF16", ...
int64_t st_numel(const StTensor *t);        // product of the shape (1 for a scalar)

// ---- reading ----

// Opens and validates path. Returns 0, or -1 with err->msg set and *f left closed. On success
// release with st_close; st_close on a closed (or zeroed) StFile is a no-op.
int st_open(StFile *f, const char *path, MalaErr *err);
void st_close(StFile *f);

const StTensor *st_find(const StFile *f, const char *name);  // NULL when absent
const char *st_meta(const StFile *f, const char *key);       // NULL when absent
// Raw little-endian bytes of t (t->end - t->begin of them); possibly unaligned.
const void *st_data(const StFile *f, const StTensor *t);

// Converts all st_numel(t) elements of t to float32 into dst. F32/F16/BF16/F64 convert as
// floats; I32/I64/U8/I8 convert to the nearest float.
int st_read_f32(const StFile *f, const StTensor *t, float *dst, MalaErr *err);
// 0 when tensor `name` exists with exactly this shape; else -1 with
// "FILE: tensor 'NAME' is missing" or "FILE: tensor 'NAME' has shape [a,b], the model expects [c,d]".
int st_expect(const StFile *f, const char *name, const int64_t *shape, int ndim, MalaErr *err);
// st_expect followed by st_read_f32: the usual way to load one weight.
int st_load_f32(const StFile *f, const char *name, const int64_t *shape, int ndim, float *dst, MalaErr *err);

// ---- writing ----

typedef struct StWriter StWriter;

StWriter *st_writer_new(void);
void st_writer_free(StWriter *w);
// Sets a __metadata__ entry (key and value are copied); setting a key again replaces its value.
// Entries are written in the order their keys were first set.
void st_writer_meta(StWriter *w, const char *key, const char *val);
// Adds a tensor whose float32 values src (st_numel elements, row-major) are converted to dtype
// when the file is written: F16/BF16 round to nearest even, integer dtypes round to nearest and
// saturate (NaN becomes 0). src is BORROWED: it must stay valid and unchanged until the last
// st_writer_save / st_writer_write that uses w has returned. Mistakes (more than ST_MAX_DIMS
// dimensions, a negative dimension, a repeated name) make the next save fail with a message.
void st_writer_add(StWriter *w, const char *name, StDtype dtype, const int64_t *shape, int ndim,
                   const float *src);
// Same, but copies src now, so the caller may free or reuse it at once.
void st_writer_add_copy(StWriter *w, const char *name, StDtype dtype, const int64_t *shape, int ndim,
                        const float *src);
// Atomic save (formats/atomic_file.h): writes path.tmp, flushes and fsyncs it, renames it to path and
// fsyncs the directory. Every write is checked; on failure (a full disk, a missing directory, ...) the
// error names path, path.tmp is removed and an existing file at path is left untouched.
int st_writer_save(StWriter *w, const char *path, MalaErr *err);
// Writes the whole file to an open stream and flushes it; errors are reported against `name`.
int st_writer_write(StWriter *w, FILE *fp, const char *name, MalaErr *err);

#endif

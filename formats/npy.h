// NumPy .npy / .npz files (format 1.0/2.0/3.0, C order, little-endian host).
//
// Readers accept dtypes b1, i1, u1, i2, u2, i4, u4, i8, u8, f2, f4, f8 (little-endian or
// byte-order-free); dtype strings are normalised to NumPy's spelling: "|b1", "|u1", "|i1",
// "<f4", "<i8", ... Fortran-order, big-endian, structured and object arrays are refused with a
// message. .npz archives may hold stored or deflated entries (numpy.savez /
// numpy.savez_compressed), zip64 included; CRCs are checked. Every malformed input gives an
// error in `err` (one line, file path first), never a crash.
//
// Writers are atomic (formats/atomic_file.h: `<path>.tmp`, fsync, rename, fsync of the directory);
// every write is checked, and on failure the temporary file is removed and `path` is left as it was.
// npz_save writes stored entries named `<key>.npy` like numpy.savez (zip64 when sizes need it).
#ifndef MALA_NPY_H
#define MALA_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

#define NPY_MAX_DIMS 8

typedef struct {
    char dtype[8];                 // normalised descr, e.g. "<f4", "|u1", "|b1"
    int ndim;                      // 0..NPY_MAX_DIMS (0 = scalar, one element)
    int64_t shape[NPY_MAX_DIMS];
    void *data;                    // C-order elements; owned by the array after a load
    size_t nbytes;                 // numel * itemsize
} NpyArray;

// Bytes per element of a dtype ("<f4" -> 4), or 0 for an unsupported one.
size_t npy_dtype_size(const char *dtype);
// Number of elements (product of shape; 1 for ndim 0).
int64_t npy_numel(const NpyArray *a);
// Fills a header for caller-owned data (not copied): npy_wrap(&a, "<f4", data, 2, (int64_t[]){3,4}).
// nbytes is computed from the shape. Returns 0, or -1 for a bad dtype / ndim.
int npy_wrap(NpyArray *a, const char *dtype, void *data, int ndim, const int64_t *shape);
// Frees data from a load and zeroes the struct (safe on a zeroed struct).
void npy_free(NpyArray *a);

int npy_load(const char *path, NpyArray *a, MalaErr *err);
int npy_save(const char *path, const NpyArray *a, MalaErr *err);

// Parses a whole .npy image held in memory (`name` is used in messages). Data is copied.
int npy_parse(const void *buf, size_t len, const char *name, NpyArray *a, MalaErr *err);

// Only the header of a .npy file whose first len bytes are buf (len may be less than the file):
// a->data stays NULL, a->nbytes is the data's size, *data_offset where it starts. file_size is
// the whole file's: the data must fill it exactly (for memory-mapped arrays).
int npy_parse_header(const void *buf, size_t len, uint64_t file_size, const char *name, NpyArray *a,
                     uint64_t *data_offset, MalaErr *err);
// numpy's header (magic, version, dict, padding to 64 bytes) for an array of this dtype and shape,
// into buf. Returns its length, or 0 for a bad dtype / ndim or a buffer too small.
size_t npy_header(const char *dtype, int ndim, const int64_t *shape, char *buf, size_t cap);

// Loads entry `key` (the archive member `key.npy`, or `key` itself). A missing key gives
// "<path>: no array 'key' (has: a, b, c)".
int npz_load(const char *path, const char *key, NpyArray *a, MalaErr *err);
// Lists the keys (member names without ".npy"); free with npz_keys_free.
int npz_keys(const char *path, char ***keys, int *n, MalaErr *err);
void npz_keys_free(char **keys, int n);
int npz_save(const char *path, const char **keys, const NpyArray *arrays, int n, MalaErr *err);

// Converts any numeric array to a new float64 / float32 buffer (caller frees with free()).
// `what` names the source in messages (e.g. "stats.npz:mu").
int npy_to_f64(const NpyArray *a, double **out, const char *what, MalaErr *err);
int npy_to_f32(const NpyArray *a, float **out, const char *what, MalaErr *err);

#endif

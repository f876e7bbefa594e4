// IDX files of unsigned bytes, the MNIST / Fashion-MNIST format, gzip-compressed or plain:
//   u32 big-endian magic 0x00000800 | ndims, ndims u32 big-endian sizes, then prod(sizes) bytes.
// The file must be exactly that: a gzip stream must reach its end (zlib checks the CRC and the
// length in the trailer), so a download cut short by even one byte is an error, and nothing may
// follow the data or the gzip stream. Every malformed input gives a one-line error starting
// with the file name, never a crash; memory grows with the data actually decoded, never with
// what a header claims.
#ifndef MALA_IDX_H
#define MALA_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"  // defines: MalaErr

#define IDX_MAX_DIMS  3
#define IDX_MAX_ITEMS 10000000u          // first dimension
#define IDX_MAX_BYTES ((uint64_t)1 << 32) // decoded data, and the file itself

// Decodes the IDX image buf[0..len); dims[0..ndims) get the sizes, *data (malloc'd) the bytes.
int idx_parse(const void *buf, size_t len, const char *name, int ndims, uint32_t *dims, uint8_t **data,
              MalaErr *err);
// Reads path whole, then idx_parse.
int idx_read(const char *path, int ndims, uint32_t *dims, uint8_t **data, MalaErr *err);

#endif

// PNG tEXt chunks in a PNG held in memory (PNG spec, 11.3.4.3): adding one before IEND, and
// finding one by keyword in untrusted bytes. Chunks are length (4, big-endian) | type (4) | data |
// CRC-32 of type and data (zlib's crc32). A tEXt chunk's data is keyword (1-79 bytes of printable
// Latin-1, no leading, trailing or double spaces) | 0 | text (no NUL).
// `mala sample` and the viewer write the generation parameters as tEXt "parameters"
// (pipeline/gen_params.h); `mala info FILE.png` reads them.
#ifndef MALA_PNG_TEXT_H
#define MALA_PNG_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

#define PNG_TEXT_MAX_BYTES (1 << 20)  // longest text read or written (ours are < 1 KB)

// *out (malloc'd, *out_len bytes) is png with tEXt (keyword, text) inserted just before IEND; every
// other byte is png's. -1 with err when png is not a sound chunk stream (as png_text_find checks
// it) ending with its IEND chunk, or keyword / text are not valid for tEXt. name is used in messages.
int png_text_add(const uint8_t *png, size_t len, const char *name, const char *keyword, const char *text,
                 uint8_t **out, size_t *out_len, MalaErr *err);
// Walks the chunks of png (signature to IEND, every chunk's bounds and CRC checked): 1 with *text
// (malloc'd, NUL-terminated) when a tEXt chunk keyword is present, 0 when the PNG has none, -1
// with err (naming the file, the chunk and its byte offset) for bytes that are not a sound PNG
// chunk stream or a malformed tEXt chunk.
int png_text_find(const uint8_t *png, size_t len, const char *name, const char *keyword, char **text,
                  MalaErr *err);

#endif

// Base64 (RFC 4648 §4, the standard alphabet) for the images in JSON bodies.
#ifndef MALA_BASE64_H
#define MALA_BASE64_H

#include <stddef.h>
#include <stdint.h>

// The text of n bytes (malloc'd, NUL-terminated, padded with '='); NULL when out of memory.
char *base64_encode(const uint8_t *b, size_t n);
// Decodes s[0..n): an optional data URL head ("data:image/png;base64,", as browsers and A1111
// clients send), then base64 with or without padding; ASCII whitespace is skipped (wrapped text).
// *out malloc'd, *len bytes. -1 on a character outside the alphabet, padding in the middle, a
// stray final character, or more than max bytes decoded (nothing is allocated past max).
int base64_decode(const char *s, size_t n, size_t max, uint8_t **out, size_t *len);

#endif

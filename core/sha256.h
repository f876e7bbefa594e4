// SHA-256 (FIPS 180-4), for the model hash in a PNG's generation parameters (AUTOMATIC1111's
// "Model hash": the first 10 hex digits of the file's SHA-256).
#ifndef MALA_SHA256_H
#define MALA_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    size_t fill;
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, uint8_t out[32]);
// The hash of a whole file; -1 with err when it cannot be read.
int sha256_file(const char *path, uint8_t out[32], MalaErr *err);

#endif

// SHA-256 (FIPS 180-4) of a file, as `sha256sum` prints it: the fingerprint a fine-tuned run
// records of its --init file (run.init_sha256).
#ifndef MALA_SHA256_H
#define MALA_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct {
    uint32_t h[8];
    uint64_t len;       // bytes hashed so far
    uint8_t buf[64];
    size_t fill;        // bytes in buf
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, uint8_t out[32]);
// hex[65]: the lowercase hex digest of the file at path; -1 with err naming the file when it cannot be read.
int sha256_file(const char *path, char hex[65], MalaErr *err);

#endif

// SHA-256 (FIPS 180-4) of bytes and of files: the hashes a result's manifest records (the model
// file, the feature network's weights, the reference statistics) and a partial sampling run's
// settings compare. sha256sum(1) prints the same hex digest.
#ifndef MALA_SHA256_H
#define MALA_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"  // defines: MalaErr

typedef struct {
    uint32_t h[8];
    uint64_t len;        // bytes hashed so far
    uint8_t buf[64];
    size_t nbuf;
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *p, size_t n);
void sha256_final(Sha256 *s, uint8_t out[32]);
// The hex digest (64 characters and a NUL) of n bytes.
void sha256_hex(const void *p, size_t n, char hex[65]);
// The hex digest of a file's bytes; 0, or -1 with err naming the file.
int sha256_file(const char *path, char hex[65], MalaErr *err);

#endif

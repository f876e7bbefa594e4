// defines: philox4x32_10, rng_seed, rng_seed_stream, rng_u32, rng_u64, rng_uniform, rng_below,
//          rng_normal, rng_normal_fill
#include "core/rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += PHILOX_W0; k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void rng_seed_stream(Rng *r, uint64_t seed, uint64_t stream) {
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = 0; r->ctr[1] = 0;
    r->ctr[2] = (uint32_t)stream;
    r->ctr[3] = (uint32_t)(stream >> 32);
    r->buf[0] = r->buf[1] = r->buf[2] = r->buf[3] = 0;
    r->pos = 4;
    r->has_spare = 0;
    r->spare = 0.0;
}

void rng_seed(Rng *r, uint64_t seed) { rng_seed_stream(r, seed, 0); }

uint32_t rng_u32(Rng *r) {
    if (r->pos >= 4) {
        philox4x32_10(r->buf, r->ctr, r->key);
        if (++r->ctr[0] == 0) r->ctr[1]++;   // 64-bit block counter
        r->pos = 0;
    }
    return r->buf[r->pos++];
}

uint64_t rng_u64(Rng *r) {
    uint64_t lo = rng_u32(r);
    uint64_t hi = rng_u32(r);
    return lo | (hi << 32);
}

double rng_uniform(Rng *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t rng_below(Rng *r, uint64_t n) {
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;   // reject the biased tail
    uint64_t v;
    do { v = rng_u64(r); } while (v >= limit);
    return v % n;
}

float rng_normal(Rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return (float)r->spare;
    }
    double u1 = (double)((rng_u64(r) >> 11) + 1) * 0x1.0p-53;   // (0, 1]: log is finite
    double u2 = rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1));
    double th = 6.283185307179586 * u2;
    r->spare = rad * sin(th);
    r->has_spare = 1;
    return (float)(rad * cos(th));
}

void rng_normal_fill(Rng *r, float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(r);
}

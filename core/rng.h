// Deterministic counter-based random numbers: Philox4x32-10 (Salmon et al. 2011, Random123's
// known-answer vectors hold) with Box-Muller normals. The state is a plain struct: copy it to
// checkpoint, copy it back to resume the exact same stream.
#ifndef MALA_RNG_H
#define MALA_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t key[2];     // the seed
    uint32_t ctr[4];     // counter of the next block: ctr[0..1] block index, ctr[2..3] stream
    uint32_t buf[4];     // current block of output words
    int32_t pos;         // next unread word of buf (4: empty)
    int32_t has_spare;   // a cached second Box-Muller normal is in `spare`
    double spare;
} Rng;

// One Philox4x32-10 block: out = philox(ctr, key). Exposed for the known-answer test.
void philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);

void rng_seed(Rng *r, uint64_t seed);                          // stream 0
void rng_seed_stream(Rng *r, uint64_t seed, uint64_t stream);  // independent streams per seed
uint32_t rng_u32(Rng *r);
uint64_t rng_u64(Rng *r);
double rng_uniform(Rng *r);                  // [0, 1), 53 random bits
uint64_t rng_below(Rng *r, uint64_t n);      // uniform integer in [0, n), unbiased; n > 0
float rng_normal(Rng *r);                    // standard normal
void rng_normal_fill(Rng *r, float *x, size_t n);

#endif

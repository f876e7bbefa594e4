// Fake cuRAND device API for the host emulator (tests/cuda_emu): the Philox4_32_10 generator with
// cuRAND's semantics, on core/rng.c's Philox4x32-10 block function. The key is the seed; the
// 128-bit counter holds the subsequence in its high 64 bits and the block index in its low 64
// bits; offset counts 32-bit outputs (4 per block), so an offset that is not a multiple of 4 starts
// inside a block. Integers (curand, curand4) and uniforms (u * 2^-32 + 2^-33, in (0, 1]) are
// cuRAND's bit for bit. Normals are Box-Muller pairs (sqrt(-2 ln u) times sin and cos of 2 pi v)
// computed with the host's logf, sinf, cosf, as cuRAND's own host code path does; a GPU uses its
// fast __sincosf, so its normals differ in the last bits. Only this generator is emulated.
#ifndef CUDA_EMU_CURAND_KERNEL_H
#define CUDA_EMU_CURAND_KERNEL_H

#include "cuda_runtime.h"

extern "C" void philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);  // core/rng.c

struct curandStatePhilox4_32_10 {
    uint4 ctr;       // counter of the current block
    uint4 output;    // the current block's four outputs
    uint2 key;
    unsigned STATE;  // next unread output of the block, 0..3
    int boxmuller_flag;     // curand_normal has a second value cached
    float boxmuller_extra;
};
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;

static inline void emu_philox_block(curandStatePhilox4_32_10_t *s) {
    const uint32_t c[4] = {s->ctr.x, s->ctr.y, s->ctr.z, s->ctr.w}, k[2] = {s->key.x, s->key.y};
    uint32_t o[4];
    philox4x32_10(o, c, k);
    s->output = make_uint4(o[0], o[1], o[2], o[3]);
}

// counter += n * 2^(64 hi), carrying across all 128 bits
static inline void emu_philox_add(curandStatePhilox4_32_10_t *s, unsigned long long n, int hi) {
    unsigned *w[4] = {&s->ctr.x, &s->ctr.y, &s->ctr.z, &s->ctr.w};
    unsigned long long carry = 0;
    for (int i = 0; i < 4; i++) {
        const int j = i - 2 * hi;  // this word gets word j of n
        const unsigned long long sum = *w[i] + carry + (j == 0 ? n & 0xffffffffu : j == 1 ? n >> 32 : 0);
        *w[i] = (unsigned)sum;
        carry = sum >> 32;
    }
}

// Skips n 32-bit outputs.
static inline void skipahead(unsigned long long n, curandStatePhilox4_32_10_t *s) {
    unsigned long long blocks = n / 4;
    s->STATE += (unsigned)(n % 4);
    if (s->STATE > 3) { s->STATE -= 4; blocks++; }
    emu_philox_add(s, blocks, 0);
    emu_philox_block(s);
}

// Skips n subsequences (2^64 blocks each).
static inline void skipahead_sequence(unsigned long long n, curandStatePhilox4_32_10_t *s) {
    emu_philox_add(s, n, 1);
    emu_philox_block(s);
}

static inline void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                               curandStatePhilox4_32_10_t *s) {
    s->ctr = make_uint4(0, 0, 0, 0);
    s->key = make_uint2((unsigned)seed, (unsigned)(seed >> 32));
    s->STATE = 0;
    s->boxmuller_flag = 0;
    s->boxmuller_extra = 0.0f;
    skipahead_sequence(subsequence, s);
    skipahead(offset, s);
}

static inline unsigned curand(curandStatePhilox4_32_10_t *s) {
    const unsigned o[4] = {s->output.x, s->output.y, s->output.z, s->output.w};
    const unsigned r = o[s->STATE++];
    if (s->STATE == 4) {
        emu_philox_add(s, 1, 0);
        emu_philox_block(s);
        s->STATE = 0;
    }
    return r;
}

// The next four outputs (STATE is unchanged: the window straddles two blocks when it is not 0).
static inline uint4 curand4(curandStatePhilox4_32_10_t *s) {
    const uint4 cur = s->output;
    emu_philox_add(s, 1, 0);
    emu_philox_block(s);
    const unsigned w[8] = {cur.x, cur.y, cur.z, cur.w, s->output.x, s->output.y, s->output.z, s->output.w};
    const unsigned *p = w + s->STATE;
    return make_uint4(p[0], p[1], p[2], p[3]);
}

static inline float emu_curand_u01(unsigned x) { return (float)x * 0x1p-32f + 0x1p-33f; }

// Two normals from two words, as cuRAND's Box-Muller: u in (0, 1], angle 2 pi v.
static inline float2 emu_box_muller(unsigned x, unsigned y) {
    const float two_pi_2pow32 = 0x1p-32f * 6.2831855f;
    const float u = emu_curand_u01(x), v = (float)y * two_pi_2pow32 + two_pi_2pow32 / 2;
    const float r = sqrtf(-2.0f * logf(u));
    return make_float2(sinf(v) * r, cosf(v) * r);
}

static inline float curand_uniform(curandStatePhilox4_32_10_t *s) { return emu_curand_u01(curand(s)); }

static inline float4 curand_uniform4(curandStatePhilox4_32_10_t *s) {
    const uint4 r = curand4(s);
    return make_float4(emu_curand_u01(r.x), emu_curand_u01(r.y), emu_curand_u01(r.z), emu_curand_u01(r.w));
}

static inline float curand_normal(curandStatePhilox4_32_10_t *s) {
    if (s->boxmuller_flag) {
        s->boxmuller_flag = 0;
        return s->boxmuller_extra;
    }
    const unsigned x = curand(s), y = curand(s);
    const float2 v = emu_box_muller(x, y);
    s->boxmuller_flag = 1;
    s->boxmuller_extra = v.y;
    return v.x;
}

static inline float4 curand_normal4(curandStatePhilox4_32_10_t *s) {
    const uint4 r = curand4(s);
    const float2 a = emu_box_muller(r.x, r.y), b = emu_box_muller(r.z, r.w);
    return make_float4(a.x, a.y, b.x, b.y);
}

#endif

// Device-side random fills with cuRAND's Philox4_32_10 (device API). Element i of a call is output
// i % 4 of one 4-word Philox draw: subsequence i / 4, position 4 * offset, key `seed`. So a call's
// numbers depend only on (seed, offset, i), never on the launch shape, and consecutive offsets
// give disjoint counters (the caller advances offset by one per fill, e.g. the training step).
// defines: cuda_rng_normal, cuda_rng_uniform
#include <curand_kernel.h>

#include "cuda_common.cuh"
#include "cuda/backend_cuda.h"

// kind 0: normal N(0,1) (Box-Muller on the draw); kind 1: uniform (0, 1]
__global__ void k_rng_fill(float *dst, size_t n, unsigned long long seed, unsigned long long offset, int kind) {
    const size_t groups = (n + 3) / 4;
    GRID_STRIDE(gi, groups) {
        curandStatePhilox4_32_10_t st;
        curand_init(seed, (unsigned long long)gi, 4ull * offset, &st);
        const float4 r = kind == 0 ? curand_normal4(&st) : curand_uniform4(&st);
        const float v[4] = {r.x, r.y, r.z, r.w};
        const size_t base = gi * 4;
        for (int j = 0; j < 4; j++)
            if (base + j < n) dst[base + j] = v[j];
    }
}

static void rng_fill(float *dst, size_t n, uint64_t seed, uint64_t offset, int kind) {
    if (!n) return;
    const size_t groups = (n + 3) / 4;
    k_rng_fill<<<grid1d(groups), CU_BLOCK>>>(dst, n, (unsigned long long)seed, (unsigned long long)offset, kind);
    KERNEL_CHECK();
}

extern "C" void cuda_rng_normal(float *dst, size_t n, uint64_t seed, uint64_t offset) {
    rng_fill(dst, n, seed, offset, 0);
}
extern "C" void cuda_rng_uniform(float *dst, size_t n, uint64_t seed, uint64_t offset) {
    rng_fill(dst, n, seed, offset, 1);
}

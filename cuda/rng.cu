// Counter-based random numbers on the device with cuRAND's Philox4_32_10 (device API). A call's
// numbers depend only on (seed, stream, index), never on the launch shape: element i of a
// stream is output i % 4 of the draw at position `stream` of Philox subsequence i / 4
// (curand_init(seed, i / 4, 4 * stream)), so consecutive streams use disjoint counters.
// defines: cuda_rand_normal, cuda_rand_bits
#include <curand_kernel.h>

#include "cuda/cuda_common.cuh"

// Row r of dst [rows, cols]: normals of stream stream0 + r * stride.
__global__ void k_rand_normal(float *dst, int rows, size_t cols, unsigned long long seed, unsigned long long stream0,
                              unsigned long long stride) {
    const size_t groups = (cols + 3) / 4;
    GRID_STRIDE(i, (size_t)rows * groups) {
        const size_t r = i / groups, gi = i % groups;
        curandStatePhilox4_32_10_t st;
        curand_init(seed, (unsigned long long)gi, 4ull * (stream0 + r * stride), &st);
        const float4 v4 = curand_normal4(&st);
        const float v[4] = {v4.x, v4.y, v4.z, v4.w};
        float *row = dst + r * cols;
        for (int j = 0; j < 4; j++)
            if (gi * 4 + j < cols) row[gi * 4 + j] = v[j];
    }
}

__global__ void k_rand_bits(uint32_t *dst, size_t n, unsigned long long seed, unsigned long long stream) {
    GRID_STRIDE(gi, (n + 3) / 4) {
        curandStatePhilox4_32_10_t st;
        curand_init(seed, (unsigned long long)gi, 4ull * stream, &st);
        const uint4 u = curand4(&st);
        const uint32_t v[4] = {u.x, u.y, u.z, u.w};
        for (int j = 0; j < 4; j++)
            if (gi * 4 + j < n) dst[gi * 4 + j] = v[j];
    }
}

void cuda_rand_normal(float *out, int rows, size_t cols, uint64_t seed, uint64_t stream0, uint64_t stride) {
    if (rows <= 0 || !cols) return;
    k_rand_normal<<<grid1d((size_t)rows * ((cols + 3) / 4)), CU_BLOCK>>>(out, rows, cols, seed, stream0, stride);
    KERNEL_CHECK();
}

void cuda_rand_bits(uint32_t *out, size_t n, uint64_t seed, uint64_t stream) {
    if (!n) return;
    k_rand_bits<<<grid1d((n + 3) / 4), CU_BLOCK>>>(out, n, seed, stream);
    KERNEL_CHECK();
}

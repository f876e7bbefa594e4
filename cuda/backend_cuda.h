// C interface of the CUDA backend beyond the op table (which backend_cuda() in backend.h returns).
// Include only in builds with MALA_CUDA defined; every function needs backend_cuda() to have
// returned non-NULL first.
#ifndef MALA_BACKEND_CUDA_H
#define MALA_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// on = 1: cuBLAS products in full fp32 (CUBLAS_DEFAULT_MATH); on = 0 (the default): TF32 tensor
// cores for the products (CUBLAS_TF32_TENSOR_OP_MATH). Element-wise kernels are always fp32.
// May be called before or after backend_cuda().
void cuda_set_precision_fp32(int on);

// Device-side Philox4_32_10 fills (curand device API), deterministic in (seed, offset, n-index):
// element i is output i % 4 of draw `offset` of Philox subsequence i / 4, so the same call gives
// the same numbers whatever the launch, and offsets 0, 1, 2, ... give independent draws.
// dst is device memory. normal: N(0, 1); uniform: (0, 1].
void cuda_rng_normal(float *dst, size_t n, uint64_t seed, uint64_t offset);
void cuda_rng_uniform(float *dst, size_t n, uint64_t seed, uint64_t offset);

#ifdef __cplusplus
}
#endif

#endif

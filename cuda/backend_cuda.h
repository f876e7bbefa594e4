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

// GFLOP/s of cuBLAS, in the current precision, on a DiT-S/2-shaped product (8192x384 times
// 384x1152): the ceiling `mala bench train` compares the training step against.
double cuda_gemm_gflops(void);

#ifdef __cplusplus
}
#endif

#endif

// Fake cuBLAS header for the host emulator (tests/cuda_emu): the subset cuda/*.cu uses, implemented
// in emu_cublas.cpp. GEMMs (and GEMV) are plain loops accumulating in double (so they are more accurate than
// cuBLAS, and slow for large products); in CUBLAS_TF32_TENSOR_OP_MATH the inputs are first rounded
// to TF32 (10-bit mantissa, to nearest). The arguments are checked as cuBLAS does
// (CUBLAS_STATUS_INVALID_VALUE), and the matrices must lie inside live device allocations.
// Pointer mode is host (alpha, beta are host pointers).
#ifndef CUDA_EMU_CUBLAS_H
#define CUDA_EMU_CUBLAS_H

#include "cuda_runtime.h"

typedef struct EmuBlas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
} cublasMath_t;

// library_types.h and cublas_api.h's values, for the Ex GEMMs (--precision bf16: bf16 inputs, fp32
// compute and output; the bf16 values are widened exactly, so only the rounding of the inputs,
// done by the caller's kernel, and the double accumulation remain).
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char *cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const float *alpha, const float *A, int lda, long long sA,
                                         const float *B, int ldb, long long sB, const float *beta, float *C,
                                         int ldc, long long sC, int batch);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                          int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                                          long long sA, const void *B, cudaDataType Btype, int ldb, long long sB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc, long long sC,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, const float *alpha,
                           const float *A, int lda, const float *x, int incx, const float *beta, float *y, int incy);

#endif

// --precision bf16 on CUDA: the fp32 operands of a cuBLAS product rounded to bf16
// (nearest even, as the CPU's cpu_bf16_round, so the host emulator rounds the same way) into
// grow-only device buffers, then cublasGemmEx / cublasGemmStridedBatchedEx with CUDA_R_16BF
// inputs, CUBLAS_COMPUTE_32F and an fp32 output. Our kernels read the fp32 outputs unchanged.
// Both operands are converted at every call (no weight copies kept yet); the buffers are the one
// exception to the backend's no-allocation-after-start-up rule: they grow to the largest product
// met, once, in the first steps.
// defines: gemm_rm_bf16
#include "cuda/cuda_common.cuh"

// Round to nearest even; NaN stays NaN (quiet), infinities stay.
__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

__global__ void k_to_bf16(uint16_t *out, const float *in, size_t n) {
    GRID_STRIDE(i, n) out[i] = f32_to_bf16(in[i]);
}

typedef struct { uint16_t *p; size_t cap; } Bf16Buf;
static Bf16Buf g_a, g_b;

// The n floats at x (all the matrices' span, gaps included) as bf16 in buf, at the same offsets.
static const uint16_t *to_bf16(Bf16Buf *buf, const float *x, size_t n) {
    if (n > buf->cap) {
        if (buf->p) CUDA_CHECK(cudaFree(buf->p));
        CUDA_CHECK(cudaMalloc((void **)&buf->p, n * sizeof(uint16_t)));
        buf->cap = n;
    }
    k_to_bf16<<<grid1d(n), CU_BLOCK>>>(buf->p, x, n);
    KERNEL_CHECK();
    return buf->p;
}

// Floats from a row-major matrix's first element to its last, over batch matrices s apart.
static size_t span(int rows, int cols, int ld, long long s, int batch) {
    return (size_t)(rows - 1) * ld + cols + (size_t)(batch - 1) * (size_t)s;
}

// gemm_rm's contract (backend_cuda.cu) with bf16 inputs and fp32 accumulation and output.
void gemm_rm_bf16(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                  long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC,
                  int batch) {
    const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint16_t *a = NULL, *b = NULL;
    if (K > 0) {
        a = to_bf16(&g_a, A, ta ? span(K, M, lda, sA, batch) : span(M, K, lda, sA, batch));
        b = to_bf16(&g_b, B, tb ? span(N, K, ldb, sB, batch) : span(K, N, ldb, sB, batch));
    } else {  // (no product: cuBLAS scales C by beta and reads neither)
        a = (const uint16_t *)A, b = (const uint16_t *)B;
    }
    if (batch == 1)
        CUBLAS_CHECK(cublasGemmEx(h, opB, opA, N, M, K, &alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF, lda, &beta, C,
                                  CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, opB, opA, N, M, K, &alpha, b, CUDA_R_16BF, ldb, sB, a,
                                                CUDA_R_16BF, lda, sA, &beta, C, CUDA_R_32F, ldc, sC, batch,
                                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

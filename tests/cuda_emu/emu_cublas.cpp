// The CUDA emulator's cuBLAS (declared in cublas_v2.h): column-major SGEMM, single and strided
// batched, SGEMV, and GemmEx / GemmStridedBatchedEx with bf16 or fp32 inputs, as packed
// double-precision loops.
#include <cstdarg>
#include <vector>

#include "cublas_v2.h"

struct EmuBlas {
    cublasMath_t mode;
};

static char g_msg[512];  // what the last failing call found

static cublasStatus_t failed(cublasStatus_t s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cublasStatus_t failed(cublasStatus_t s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return s;
}

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    *handle = new EmuBlas{CUBLAS_DEFAULT_MATH};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle) return failed(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode: no handle");
    handle->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
    return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : g_msg;
}

// Rounds to TF32 (10 explicit mantissa bits), to nearest with ties away from zero.
static float tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

// Whether the batch of rows x cols matrices (column-major, leading dimension ld, stride s) at X lies
// in device memory.
static bool in_device(const float *X, int rows, int cols, int ld, long long s, int batch) {
    const long long span = (long long)(batch - 1) * s, last = (rows - 1) + (long long)(cols - 1) * ld;
    const long long lo = span < 0 ? span : 0, hi = last + (span > 0 ? span : 0);
    return emu_is_device(X + lo, (size_t)(hi - lo + 1) * sizeof(float));
}

// The GEMMs; tf32_ok: the routine honours CUBLAS_TF32_TENSOR_OP_MATH (GEMV does not).
static cublasStatus_t gemm(cublasHandle_t handle, bool tf32_ok, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda, long long sA, const float *B,
                           int ldb, long long sB, const float *beta, float *C, int ldc, long long sC, int batch) {
    if (!handle) return failed(CUBLAS_STATUS_NOT_INITIALIZED, "cuBLAS GEMM: no handle");
    const int ar = ta == CUBLAS_OP_N ? m : k, br = tb == CUBLAS_OP_N ? k : n;  // stored rows of A, B
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || m < 0 || n < 0 ||
        k < 0 || batch < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1))
        return failed(CUBLAS_STATUS_INVALID_VALUE,
                      "CUBLAS_STATUS_INVALID_VALUE (GEMM ta %d tb %d m %d n %d k %d lda %d ldb %d ldc %d batch %d)",
                      (int)ta, (int)tb, m, n, k, lda, ldb, ldc, batch);
    if (!m || !n || !batch) return CUBLAS_STATUS_SUCCESS;
    const bool product = k > 0 && *alpha != 0.0f;
    const char *outside = !in_device(C, m, n, ldc, sC, batch) ? "C"
                          : product && !in_device(A, ar, ta == CUBLAS_OP_N ? k : m, lda, sA, batch) ? "A"
                          : product && !in_device(B, br, tb == CUBLAS_OP_N ? n : k, ldb, sB, batch) ? "B"
                          : nullptr;
    if (outside)
        return failed(CUBLAS_STATUS_INVALID_VALUE,
                      "cuBLAS GEMM: matrix %s reaches outside device memory (m %d n %d k %d lda %d ldb %d ldc %d "
                      "strides %lld %lld %lld batch %d)", outside, m, n, k, lda, ldb, ldc, sA, sB, sC, batch);
    const bool round = tf32_ok && handle->mode == CUBLAS_TF32_TENSOR_OP_MATH;
    // the rows of op(A) and the columns of op(B), contiguous
    std::vector<double> Ap(product ? (size_t)m * k : 0), Bp(product ? (size_t)n * k : 0);
    for (int b = 0; b < batch; b++) {
        const float *a = A + b * sA, *bb = B + b * sB;
        float *c = C + b * sC;
        if (product) {
            for (int i = 0; i < m; i++)
                for (int l = 0; l < k; l++) {
                    const float v = ta == CUBLAS_OP_N ? a[i + (size_t)l * lda] : a[l + (size_t)i * lda];
                    Ap[(size_t)i * k + l] = round ? tf32(v) : v;
                }
            for (int j = 0; j < n; j++)
                for (int l = 0; l < k; l++) {
                    const float v = tb == CUBLAS_OP_N ? bb[l + (size_t)j * ldb] : bb[j + (size_t)l * ldb];
                    Bp[(size_t)j * k + l] = round ? tf32(v) : v;
                }
        }
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0.0;
                if (product) {
                    const double *x = &Ap[(size_t)i * k], *y = &Bp[(size_t)j * k];
                    for (int l = 0; l < k; l++) s += x[l] * y[l];
                }
                float &cv = c[i + (size_t)j * ldc];
                cv = *beta == 0.0f ? (float)(*alpha * s) : (float)(*alpha * s + (double)*beta * cv);
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const float *alpha, const float *A, int lda, long long sA,
                                         const float *B, int ldb, long long sB, const float *beta, float *C,
                                         int ldc, long long sC, int batch) {
    return gemm(handle, true, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    return gemm(handle, true, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}

// y = alpha op(A) x + beta y as the GEMM with one column (unit increments only).
cublasStatus_t cublasSgemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, const float *alpha,
                           const float *A, int lda, const float *x, int incx, const float *beta, float *y, int incy) {
    if (incx != 1 || incy != 1)
        return failed(CUBLAS_STATUS_INVALID_VALUE, "cuBLAS GEMV: increments %d, %d (only 1 is emulated)", incx, incy);
    if (m < 0 || n < 0 || lda < (m > 1 ? m : 1))
        return failed(CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE (GEMV m %d n %d lda %d)", m, n, lda);
    const int rows = trans == CUBLAS_OP_N ? m : n, len = trans == CUBLAS_OP_N ? n : m;  // of y, of x
    return gemm(handle, false, trans, CUBLAS_OP_N, rows, 1, len, alpha, A, lda, 0, x, len > 1 ? len : 1, 0, beta, y,
                rows > 1 ? rows : 1, 0, 1);
}

// The Ex GEMMs: bf16 (CUDA_R_16BF) or fp32 inputs, fp32 output and compute. A bf16 operand's span is
// widened exactly (bf16 is fp32's top half) into a temporary device buffer at the same offsets, and
// the product runs as the fp32 GEMM without TF32 rounding.
static float *widen(const void *X, int rows, int cols, int ld, long long s, int batch, bool *ok) {
    const size_t n = (size_t)(cols - 1) * ld + rows + (size_t)(batch - 1) * (size_t)s;
    *ok = emu_is_device(X, n * sizeof(uint16_t));
    float *w = nullptr;
    if (!*ok || cudaMalloc((void **)&w, n * sizeof(float)) != cudaSuccess) return nullptr;
    const uint16_t *x = (const uint16_t *)X;
    for (size_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)x[i] << 16;
        memcpy(&w[i], &u, sizeof u);
    }
    return w;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m,
                                          int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                                          long long sA, const void *B, cudaDataType Btype, int ldb, long long sB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc, long long sC,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    if (Atype != Btype || (Atype != CUDA_R_16BF && Atype != CUDA_R_32F) || Ctype != CUDA_R_32F ||
        compute != CUBLAS_COMPUTE_32F || algo != CUBLAS_GEMM_DEFAULT)
        return failed(CUBLAS_STATUS_INVALID_VALUE, "cuBLAS GemmEx: types %d %d %d compute %d algo %d (emulated: bf16 "
                      "or fp32 inputs, fp32 output and compute, the default algorithm)", (int)Atype, (int)Btype,
                      (int)Ctype, (int)compute, (int)algo);
    const float *al = (const float *)alpha, *be = (const float *)beta;
    if (Atype == CUDA_R_32F || !m || !n || !batch || k <= 0)
        return gemm(handle, Atype == CUDA_R_32F, ta, tb, m, n, k, al, (const float *)A, lda, sA, (const float *)B,
                    ldb, sB, be, (float *)C, ldc, sC, batch);
    const int ar = ta == CUBLAS_OP_N ? m : k, br = tb == CUBLAS_OP_N ? k : n;
    if (lda < ar || ldb < br)
        return gemm(handle, false, ta, tb, m, n, k, al, nullptr, lda, sA, nullptr, ldb, sB, be, (float *)C, ldc, sC,
                    batch);  // (its message)
    bool oka, okb;
    float *a = widen(A, ar, ta == CUBLAS_OP_N ? k : m, lda, sA, batch, &oka);
    float *b = widen(B, br, tb == CUBLAS_OP_N ? n : k, ldb, sB, batch, &okb);
    cublasStatus_t st = !oka || !okb ? failed(CUBLAS_STATUS_INVALID_VALUE, "cuBLAS GemmEx: bf16 matrix %s reaches "
                                              "outside device memory", !oka ? "A" : "B")
                        : !a || !b ? failed(CUBLAS_STATUS_ALLOC_FAILED, "cuBLAS GemmEx: no memory to widen bf16")
                                   : gemm(handle, false, ta, tb, m, n, k, al, a, lda, sA, b, ldb, sB, be, (float *)C,
                                          ldc, sC, batch);
    if (a) cudaFree(a);
    if (b) cudaFree(b);
    return st;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    return cublasGemmStridedBatchedEx(handle, ta, tb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
                                      Ctype, ldc, 0, 1, compute, algo);
}

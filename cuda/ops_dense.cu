// Linear layers (cuBLAS) and the column sums that their bias gradient, LePE's bias gradient and
// the attention means use.
// defines: cuda_colsum, cuda_dense_init, cuda_rowsum_add, cuda_linear_fwd, cuda_linear_bwd
#include "cuda/cuda_common.cuh"

// ---------------------------------------------------------------------------------------------
// Column sums. Block (32, CS_ROWS): threadIdx.x picks a column of a 32-column tile (coalesced
// reads along a row), threadIdx.y strides over rows; partial sums meet in shared memory in a
// fixed order, so the result is deterministic. gridDim.y walks the batch.
#define CS_ROWS 16

__global__ void k_colsum(float *dst, long long dstride, const float *src, int rows, int cols, int ld,
                         long long sstride, float alpha, int accumulate) {
    __shared__ float part[CS_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x, b = blockIdx.y;
    float acc = 0.0f;
    if (c < cols) {
        const float *s = src + (size_t)b * sstride + c;
        for (int r = threadIdx.y; r < rows; r += CS_ROWS) acc += s[(size_t)r * ld];
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float t = 0.0f;
        for (int y = 0; y < CS_ROWS; y++) t += part[y][threadIdx.x];
        float *o = dst + (size_t)b * dstride + c;
        *o = accumulate ? *o + alpha * t : alpha * t;
    }
}

void cuda_colsum(float *dst, long long dstride, const float *src, int rows, int cols, int ld, long long sstride,
                 int batch, float alpha, bool accumulate) {
    if (cols <= 0 || batch <= 0) return;
    dim3 grid(cdiv(cols, 32), batch), block(32, CS_ROWS);
    k_colsum<<<grid, block>>>(dst, dstride, src, rows, cols, ld, sstride, alpha, accumulate ? 1 : 0);
    KERNEL_CHECK();
}

// Sums of many rows (bias gradients: N = B*L rows of one matrix). k_colsum would put only
// cols/32 blocks on the GPU there, so the sum is a cuBLAS GEMV against a vector of ones
// (deterministic, full fp32 whatever the math mode); longer than the ones vector, k_colsum.
#define ONES_MAX (1 << 20)
static float *g_ones;

__global__ void k_fill_ones(float *x, size_t n) { GRID_STRIDE(i, n) x[i] = 1.0f; }

void cuda_dense_init(void) {
    if (g_ones) return;
    CUDA_CHECK(cudaMalloc(&g_ones, ONES_MAX * sizeof(float)));
    k_fill_ones<<<grid1d(ONES_MAX), CU_BLOCK>>>(g_ones, ONES_MAX);
    KERNEL_CHECK();
}

// dst[cols] += sum over rows of src[rows, cols] (row-major, contiguous rows)
void cuda_rowsum_add(float *dst, const float *src, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return;
    if (rows > ONES_MAX) {
        cuda_colsum(dst, 0, src, rows, cols, cols, 0, 1, 1.0f, true);
        return;
    }
    const float one = 1.0f;
    // column-major view of src: cols x rows, leading dimension cols; y = A * ones + y
    CUBLAS_CHECK(cublasSgemv(cuda_blas(), CUBLAS_OP_N, cols, rows, &one, src, cols, g_ones, 1, &one, dst, 1));
}

// ---------------------------------------------------------------------------------------------
// Linear: out[N,O] = in[N,I] W[O,I]^T + b

__global__ void k_add_bias(float *out, const float *b, size_t total, int O) {
    GRID_STRIDE(i, total) out[i] += b[i % (size_t)O];
}

void cuda_linear_fwd(float *out, const float *in, const float *w, const float *b, int N, int I, int O) {
    if (N <= 0 || O <= 0) return;
    gemm_rm(false, true, N, O, I, 1.0f, in, I, 0, w, I, 0, 0.0f, out, O, 0, 1);
    if (b) {
        size_t total = (size_t)N * O;
        k_add_bias<<<grid1d(total), CU_BLOCK>>>(out, b, total, O);
        KERNEL_CHECK();
    }
}

// din[N,I] = din_beta din + dout[N,O] W[O,I];  dw[O,I] += dout^T in;  db[O] += sum_n dout[n]
void cuda_linear_bwd(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                     int N, int I, int O, float din_beta) {
    if (N <= 0) return;
    if (din) gemm_rm(false, false, N, I, O, 1.0f, dout, O, 0, w, I, 0, din_beta, din, I, 0, 1);
    if (dw) gemm_rm(true, false, O, I, N, 1.0f, dout, O, 0, in, I, 0, 1.0f, dw, I, 0, 1);
    if (db) cuda_rowsum_add(db, dout, N, O);
}

// Optimiser ops: AdamW (adamw_f from ops_math.h, as the CPU), EMA, and the sum of squares for the
// gradient norm (a fixed-order two-stage reduction: per-block double partials, summed on the host).
// defines: cuda_adamw, cuda_ema, cuda_sumsq, cuda_optim_init
#include <math.h>

#include "cuda/cuda_common.cuh"

#define SUMSQ_BLOCKS 1024

static double *g_partials;  // SUMSQ_BLOCKS doubles on the device, allocated once

void cuda_optim_init(void) {
    if (!g_partials) CUDA_CHECK(cudaMalloc(&g_partials, SUMSQ_BLOCKS * sizeof(double)));
}

__global__ void k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1, float b2,
                        float eps, float wd, float bc1, float bc2) {
    GRID_STRIDE(i, n) {
        float mi = m[i], vi = v[i];
        p[i] = adamw_f(p[i], g[i], &mi, &vi, lr, b1, b2, eps, wd, bc1, bc2);
        m[i] = mi;
        v[i] = vi;
    }
}

void cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                float eps, float wd, int t) {
    if (!n) return;
    // bias corrections exactly as the CPU computes them (double pow, rounded once)
    const float bc1 = (float)(1.0 - pow(beta1, t)), bc2 = (float)(1.0 - pow(beta2, t));
    k_adamw<<<grid1d(n), CU_BLOCK>>>(p, g, m, v, n, lr, beta1, beta2, eps, wd, bc1, bc2);
    KERNEL_CHECK();
}

__global__ void k_ema(float *e, const float *p, size_t n, float decay) {
    GRID_STRIDE(i, n) e[i] = e[i] * decay + p[i] * (1.0f - decay);
}

void cuda_ema(float *e, const float *p, size_t n, float decay) {
    if (!n) return;
    k_ema<<<grid1d(n), CU_BLOCK>>>(e, p, n, decay);
    KERNEL_CHECK();
}

// Block b sums x[i]^2 (in double) over its grid-stride share, then a shared-memory tree.
__global__ void k_sumsq(double *partials, const float *x, size_t n) {
    __shared__ double sh[CU_BLOCK];
    double acc = 0.0;
    GRID_STRIDE(i, n) acc += (double)x[i] * x[i];
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = CU_BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = sh[0];
}

double cuda_sumsq(const float *x, size_t n) {
    if (!n) return 0.0;
    const size_t want = (n + CU_BLOCK - 1) / CU_BLOCK;
    const int blocks = want < SUMSQ_BLOCKS ? (int)want : SUMSQ_BLOCKS;
    k_sumsq<<<blocks, CU_BLOCK>>>(g_partials, x, n);
    KERNEL_CHECK();
    double host[SUMSQ_BLOCKS];
    CUDA_CHECK(cudaMemcpy(host, g_partials, (size_t)blocks * sizeof(double), cudaMemcpyDeviceToHost));
    double s = 0.0;
    for (int b = 0; b < blocks; b++) s += host[b];
    return s;
}

// Element-wise ops: GELU (tanh and exact), SiLU, SwiGLU, add, mul, phi = ELU + 1 and
// logsigmoid / norm on strided rows, scale, fill. The per-element formulas are the ones of
// ops_math.h, shared with the CPU.
// defines: cuda_gelu_fwd, cuda_gelu_bwd, cuda_gelu_erf_fwd, cuda_gelu_erf_bwd, cuda_silu_fwd,
//          cuda_silu_bwd, cuda_swiglu_fwd, cuda_swiglu_bwd, cuda_add, cuda_mul_fwd, cuda_mul_bwd,
//          cuda_elu1_fwd, cuda_elu1_bwd, cuda_logsigmoid_fwd, cuda_logsigmoid_bwd, cuda_scale,
//          cuda_fill
#include "cuda/cuda_common.cuh"

__global__ void k_gelu_fwd(float *out, const float *x, size_t n) { GRID_STRIDE(i, n) out[i] = gelu_f(x[i]); }
__global__ void k_gelu_bwd(float *dx, const float *dout, const float *x, size_t n) {
    GRID_STRIDE(i, n) dx[i] = dout[i] * gelu_grad_f(x[i]);
}
__global__ void k_gelu_erf_fwd(float *out, const float *x, size_t n) { GRID_STRIDE(i, n) out[i] = gelu_erf_f(x[i]); }
__global__ void k_gelu_erf_bwd(float *dx, const float *dout, const float *x, size_t n) {
    GRID_STRIDE(i, n) dx[i] = dout[i] * gelu_erf_grad_f(x[i]);
}
__global__ void k_silu_fwd(float *out, const float *x, size_t n) { GRID_STRIDE(i, n) out[i] = silu_f(x[i]); }
__global__ void k_silu_bwd(float *dx, const float *dout, const float *x, size_t n) {
    GRID_STRIDE(i, n) dx[i] = dout[i] * silu_grad_f(x[i]);
}
// SwiGLU on the fused [N, 2F] rows: out[n,f] = silu(a) b with a = ab[n,f], b = ab[n,F+f]
__global__ void k_swiglu_fwd(float *out, const float *ab, int F, size_t n) {
    GRID_STRIDE(i, n) {
        const size_t a = (i / (size_t)F) * 2 * (size_t)F + i % (size_t)F;
        out[i] = silu_f(ab[a]) * ab[a + F];
    }
}
__global__ void k_swiglu_bwd(float *dab, const float *dout, const float *ab, int F, size_t n) {
    GRID_STRIDE(i, n) {
        const size_t a = (i / (size_t)F) * 2 * (size_t)F + i % (size_t)F;
        const float g = dout[i], x = ab[a];
        dab[a] += g * silu_grad_f(x) * ab[a + F];
        dab[a + F] += g * silu_f(x);
    }
}
__global__ void k_add(float *out, const float *a, const float *b, size_t n) { GRID_STRIDE(i, n) out[i] = a[i] + b[i]; }
__global__ void k_mul_fwd(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] * b[i];
}
__global__ void k_mul_bwd(float *da, float *db, const float *dout, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) {
        const float g = dout[i];
        if (da) da[i] += g * b[i];
        if (db) db[i] += g * a[i];
    }
}
__global__ void k_scale(float *x, float a, size_t n) { GRID_STRIDE(i, n) x[i] *= a; }
__global__ void k_fill(float *x, float v, size_t n) { GRID_STRIDE(i, n) x[i] = v; }

// rows x cols block of a matrix with row stride ld
__global__ void k_elu1_fwd(float *x, int cols, int ld, size_t total) {
    GRID_STRIDE(i, total) {
        float *p = x + (i / (size_t)cols) * (size_t)ld + i % (size_t)cols;
        *p = elu1_f(*p);
    }
}
__global__ void k_elu1_bwd(float *g, const float *y, int cols, int ld, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t o = (i / (size_t)cols) * (size_t)ld + i % (size_t)cols;
        g[o] *= elu1_grad_from_y(y[o]);
    }
}

// x = logsigmoid(x) / norm, and g *= sigmoid(-x) / norm from y
__global__ void k_logsigmoid_fwd(float *x, int cols, int ld, float norm, size_t total) {
    GRID_STRIDE(i, total) {
        float *p = x + (i / (size_t)cols) * (size_t)ld + i % (size_t)cols;
        *p = logsigmoid_f(*p) / norm;
    }
}
__global__ void k_logsigmoid_bwd(float *g, const float *y, int cols, int ld, float norm, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t o = (i / (size_t)cols) * (size_t)ld + i % (size_t)cols;
        g[o] *= logsigmoid_grad_from_y(norm * y[o]) / norm;
    }
}

#define LAUNCH_N(kernel, n, ...) do { if ((n) == 0) return; kernel<<<grid1d(n), CU_BLOCK>>>(__VA_ARGS__, n); \
    KERNEL_CHECK(); } while (0)

void cuda_gelu_fwd(float *out, const float *x, size_t n) { LAUNCH_N(k_gelu_fwd, n, out, x); }
void cuda_gelu_bwd(float *dx, const float *dout, const float *x, size_t n) { LAUNCH_N(k_gelu_bwd, n, dx, dout, x); }
void cuda_gelu_erf_fwd(float *out, const float *x, size_t n) { LAUNCH_N(k_gelu_erf_fwd, n, out, x); }
void cuda_gelu_erf_bwd(float *dx, const float *dout, const float *x, size_t n) {
    LAUNCH_N(k_gelu_erf_bwd, n, dx, dout, x);
}
void cuda_silu_fwd(float *out, const float *x, size_t n) { LAUNCH_N(k_silu_fwd, n, out, x); }
void cuda_silu_bwd(float *dx, const float *dout, const float *x, size_t n) { LAUNCH_N(k_silu_bwd, n, dx, dout, x); }
void cuda_swiglu_fwd(float *out, const float *ab, int N, int F) {
    if (N <= 0 || F <= 0) return;
    LAUNCH_N(k_swiglu_fwd, (size_t)N * F, out, ab, F);
}
void cuda_swiglu_bwd(float *dab, const float *dout, const float *ab, int N, int F) {
    if (N <= 0 || F <= 0) return;
    LAUNCH_N(k_swiglu_bwd, (size_t)N * F, dab, dout, ab, F);
}
void cuda_add(float *out, const float *a, const float *b, size_t n) { LAUNCH_N(k_add, n, out, a, b); }
void cuda_mul_fwd(float *out, const float *a, const float *b, size_t n) { LAUNCH_N(k_mul_fwd, n, out, a, b); }
void cuda_mul_bwd(float *da, float *db, const float *dout, const float *a, const float *b, size_t n) {
    if (!da && !db) return;
    LAUNCH_N(k_mul_bwd, n, da, db, dout, a, b);
}
void cuda_scale(float *x, float a, size_t n) { LAUNCH_N(k_scale, n, x, a); }
void cuda_fill(float *x, float v, size_t n) { LAUNCH_N(k_fill, n, x, v); }

void cuda_elu1_fwd(float *x, int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return;
    LAUNCH_N(k_elu1_fwd, (size_t)rows * cols, x, cols, ld);
}
void cuda_elu1_bwd(float *g, const float *y, int rows, int cols, int ld) {
    if (rows <= 0 || cols <= 0) return;
    LAUNCH_N(k_elu1_bwd, (size_t)rows * cols, g, y, cols, ld);
}
void cuda_logsigmoid_fwd(float *x, int rows, int cols, int ld, float norm) {
    if (rows <= 0 || cols <= 0) return;
    LAUNCH_N(k_logsigmoid_fwd, (size_t)rows * cols, x, cols, ld, norm);
}
void cuda_logsigmoid_bwd(float *g, const float *y, int rows, int cols, int ld, float norm) {
    if (rows <= 0 || cols <= 0) return;
    LAUNCH_N(k_logsigmoid_bwd, (size_t)rows * cols, g, y, cols, ld, norm);
}

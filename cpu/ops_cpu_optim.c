// CPU optimiser ops: AdamW (adamw_f from core/ops_math.h, the same per-element math as CUDA's),
// the EMA, and the sum of squares for the gradient norm (fixed chunks in a fixed order, so the
// norm has the same bits on every run). Contracts are in backend.h.
// defines: cpu_adamw, cpu_ema, cpu_sumsq
#include "cpu/ops_cpu_dense.h"

#include <math.h>

#include "core/ops_math.h"

void cpu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
               float eps, float wd, int t) {
    float bc1 = (float)(1.0 - pow(beta1, t)), bc2 = (float)(1.0 - pow(beta2, t));
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = adamw_f(p[i], g[i], &m[i], &v[i], lr, beta1, beta2, eps, wd, bc1, bc2);
}

void cpu_ema(float *e, const float *p, size_t n, float decay) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) e[i] = e[i] * decay + p[i] * (1.0f - decay);
}

// Fixed chunks summed in a fixed order: the same bits on every run (clipping uses the norm).
double cpu_sumsq(const float *x, size_t n) {
    enum { PARTS = 64 };
    double part[PARTS];
    size_t per = (n + PARTS - 1) / PARTS;
    #pragma omp parallel for schedule(static)
    for (int p = 0; p < PARTS; p++) {
        size_t i0 = (size_t)p * per, i1 = i0 + per < n ? i0 + per : n;
        double s = 0.0;
        for (size_t i = i0; i < i1; i++) s += (double)x[i] * x[i];
        part[p] = s;
    }
    double s = 0.0;
    for (int p = 0; p < PARTS; p++) s += part[p];
    return s;
}

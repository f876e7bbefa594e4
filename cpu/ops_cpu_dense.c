// CPU ops: linear (cpu_sgemm: oneDNN or OpenBLAS), LayerNorm, RMSNorm with swish gate, adaLN modulate / gated
// residual, activations (exact GELU and SwiGLU too), patches, token permutations, embeddings, scaling (the optimiser is in ops_cpu_optim.c).
// Contracts are in backend.h; loops are OpenMP-parallel.
// defines: cpu_linear_*, cpu_layernorm_* (cpu_layernorm_modulate_fwd too), cpu_rmsnorm_gate_*, cpu_modulate_*, cpu_gate_residual_*,
//          cpu_gelu_*, cpu_gelu_erf_*, cpu_silu_*, cpu_swiglu_*, cpu_add, cpu_mul_*, cpu_patchify_*, cpu_unpatchify_*,
//          cpu_permute_tokens_*, cpu_add_pos, cpu_timestep_embed, cpu_embed_*, cpu_scale
#include "cpu/ops_cpu_dense.h"

#include <math.h>
#include <string.h>

#include "cpu/cpu_clones.h"
#include "cpu/cpu_gemm.h"
#include "core/ops_math.h"

#define CHUNK 64  // channel block for reductions over tokens

void cpu_linear_fwd(float *out, const float *in, const float *w, const float *b, int N, int I, int O) {
    float beta = 0.0f;
    if (b) {
        #pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * O, b, sizeof(float) * O);
        beta = 1.0f;
    }
    cpu_sgemm_wt(0, 1, N, O, I, 1.0f, in, I, w, I, beta, out, O);
}

void cpu_linear_bwd(float *din, float *dw, float *db, const float *dout, const float *in,
                    const float *w, int N, int I, int O, float din_beta) {
    if (din) cpu_sgemm_wt(0, 0, N, I, O, 1.0f, dout, O, w, I, din_beta, din, I);
    if (dw) cpu_sgemm(1, 0, O, I, N, 1.0f, dout, O, in, I, 1.0f, dw, I);
    if (db) {
        #pragma omp parallel for schedule(static)
        for (int o0 = 0; o0 < O; o0 += CHUNK) {
            int o1 = o0 + CHUNK < O ? o0 + CHUNK : O;
            float acc[CHUNK] = {0};
            for (int n = 0; n < N; n++) {
                const float *row = dout + (size_t)n * O;
                for (int o = o0; o < o1; o++) acc[o - o0] += row[o];
            }
            for (int o = o0; o < o1; o++) db[o] += acc[o - o0];
        }
    }
}

// A row's mean, and *rstd = 1 / sqrt(biased variance + eps). The sums are vector reductions
// (`omp simd`): a single running sum is a chain of dependent adds, several times slower than the
// rest of the normalisation.
static inline float ln_row_stats(const float *xr, int C, float *rstd) {
    float sum = 0.0f;
    #pragma omp simd reduction(+:sum)
    for (int c = 0; c < C; c++) sum += xr[c];
    const float mean = sum / C;
    float var = 0.0f;
    #pragma omp simd reduction(+:var)
    for (int c = 0; c < C; c++) {
        const float d = xr[c] - mean;
        var += d * d;
    }
    *rstd = 1.0f / sqrtf(var / C + MALA_LN_EPS);
    return mean;
}

void cpu_layernorm_fwd(float *out, float *rstd, const float *x, int N, int C) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;
        float *orow = out + (size_t)n * C;
        float r;
        const float mean = ln_row_stats(xr, C, &r);
        for (int c = 0; c < C; c++) orow[c] = (xr[c] - mean) * r;
        rstd[n] = r;
    }
}

// cpu_layernorm_fwd's row statistics and cpu_modulate_fwd's affine map, row by row.
void cpu_layernorm_modulate_fwd(float *out, float *xhat, float *rstd, const float *x, const float *shift,
                                const float *scale, int B, int L, int C, int ms) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L; l++) {
            const size_t n = (size_t)b * L + l;
            const float *xr = x + n * C, *sh = shift + (size_t)b * ms, *sc = scale + (size_t)b * ms;
            float *o = out + n * C;
            float r;
            const float mean = ln_row_stats(xr, C, &r);
            if (xhat) {
                float *h = xhat + n * C;
                for (int c = 0; c < C; c++) {
                    const float t = (xr[c] - mean) * r;
                    h[c] = t;
                    o[c] = t * (1.0f + sc[c]) + sh[c];
                }
            } else {
                for (int c = 0; c < C; c++) o[c] = (xr[c] - mean) * r * (1.0f + sc[c]) + sh[c];
            }
            rstd[n] = r;
        }
}

void cpu_layernorm_bwd(float *dx, const float *dout, const float *out, const float *rstd, int N, int C) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = dout + (size_t)n * C, *y = out + (size_t)n * C;
        float *d = dx + (size_t)n * C;
        float mg = 0.0f, mgy = 0.0f;
        #pragma omp simd reduction(+:mg, mgy)
        for (int c = 0; c < C; c++) { mg += g[c]; mgy += g[c] * y[c]; }
        mg /= C; mgy /= C;
        for (int c = 0; c < C; c++) d[c] += rstd[n] * (g[c] - mg - y[c] * mgy);
    }
}

// RMSNorm with swish gate, one (row, head) at a time: out = x r w silu(gate), r = rsqrt(mean x^2 + eps)
void cpu_rmsnorm_gate_fwd(float *out, float *rstd, const float *x, const float *gate, const float *w, int N,
                          int heads, int d, int ldg, float eps) {
    const int H = heads * d;
    const long rows = (long)N * heads;
    #pragma omp parallel for schedule(static) if (rows * d >= (1L << 15))
    for (long r = 0; r < rows; r++) {
        const long n = r / heads, h = r % heads;
        const float *xr = x + n * H + h * d, *gr = gate + n * ldg + h * d;
        float *o = out + n * H + h * d;
        float ss = 0.0f;
        #pragma omp simd reduction(+:ss)
        for (int c = 0; c < d; c++) ss += xr[c] * xr[c];
        const float rs = 1.0f / sqrtf(ss / d + eps);
        #pragma omp simd
        for (int c = 0; c < d; c++) o[c] = xr[c] * rs * w[c] * silu_f(gr[c]);
        rstd[r] = rs;
    }
}

// Backward, with y = x r and u = dout w silu(gate) (the gradient of y):
//   dx += r (u - y mean(u y));  dgate += dout y w silu'(gate);  dw += sum_rows dout y silu(gate).
// The rows are cut into RMS_PARTS fixed ranges whose dw partial sums are added in order, so dw does
// not depend on the thread count.
#define RMS_PARTS 16
void cpu_rmsnorm_gate_bwd(float *dx, float *dgate, float *dw, const float *dout, const float *x,
                          const float *gate, const float *w, const float *rstd, int N, int heads, int d, int ldg) {
    if (!dx && !dgate && !dw) return;
    const int H = heads * d;
    const long rows = (long)N * heads, per = (rows + RMS_PARTS - 1) / RMS_PARTS;
    float part[RMS_PARTS * d];
    #pragma omp parallel for schedule(static) if (rows * d >= (1L << 15))
    for (int p = 0; p < RMS_PARTS; p++) {
        float *acc = part + (size_t)p * d, sg[d];
        for (int c = 0; c < d; c++) acc[c] = 0.0f;
        const long r1 = (p + 1) * per < rows ? (p + 1) * per : rows;
        for (long r = p * per; r < r1; r++) {
            const long n = r / heads, h = r % heads;
            const float *xr = x + n * H + h * d, *gr = gate + n * ldg + h * d, *go = dout + n * H + h * d;
            const float rs = rstd[r];
            float m = 0.0f;
            #pragma omp simd reduction(+:m)
            for (int c = 0; c < d; c++) {
                sg[c] = silu_f(gr[c]);
                m += go[c] * w[c] * sg[c] * (xr[c] * rs);
            }
            m /= d;
            #pragma omp simd
            for (int c = 0; c < d; c++) acc[c] += go[c] * (xr[c] * rs) * sg[c];
            if (dx) {
                float *dxr = dx + n * H + h * d;
                #pragma omp simd
                for (int c = 0; c < d; c++) dxr[c] += rs * (go[c] * w[c] * sg[c] - (xr[c] * rs) * m);
            }
            if (dgate) {
                float *dgr = dgate + n * ldg + h * d;
                #pragma omp simd
                for (int c = 0; c < d; c++) dgr[c] += go[c] * (xr[c] * rs) * w[c] * silu_grad_f(gr[c]);
            }
        }
    }
    if (dw)
        for (int c = 0; c < d; c++) {
            float t = 0.0f;
            for (int p = 0; p < RMS_PARTS; p++) t += part[(size_t)p * d + c];
            dw[c] += t;
        }
}

void cpu_modulate_fwd(float *out, const float *x, const float *shift, const float *scale,
                      int B, int L, int C, int ms) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L; l++) {
            const float *sh = shift + (size_t)b * ms, *sc = scale + (size_t)b * ms;
            const float *xr = x + ((size_t)b * L + l) * C;
            float *o = out + ((size_t)b * L + l) * C;
            for (int c = 0; c < C; c++) o[c] = xr[c] * (1.0f + sc[c]) + sh[c];
        }
}

void cpu_modulate_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                      const float *scale, int B, int L, int C, int ms) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int c0 = 0; c0 < C; c0 += CHUNK) {
            int c1 = c0 + CHUNK < C ? c0 + CHUNK : C;
            const float *sc = scale + (size_t)b * ms;
            float ash[CHUNK] = {0}, asc[CHUNK] = {0};
            for (int l = 0; l < L; l++) {
                size_t r = ((size_t)b * L + l) * C;
                for (int c = c0; c < c1; c++) {
                    float g = dout[r + c];
                    if (dx) dx[r + c] = g * (1.0f + sc[c]);
                    ash[c - c0] += g;
                    asc[c - c0] += g * x[r + c];
                }
            }
            for (int c = c0; c < c1; c++) {
                if (dshift) dshift[(size_t)b * ms + c] += ash[c - c0];
                if (dscale) dscale[(size_t)b * ms + c] += asc[c - c0];
            }
        }
}

void cpu_gate_residual_fwd(float *x, const float *y, const float *gate, int B, int L, int C, int ms) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L; l++) {
            const float *g = gate + (size_t)b * ms;
            size_t r = ((size_t)b * L + l) * C;
            for (int c = 0; c < C; c++) x[r + c] += g[c] * y[r + c];
        }
}

void cpu_gate_residual_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate,
                           int B, int L, int C, int ms) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int c0 = 0; c0 < C; c0 += CHUNK) {
            int c1 = c0 + CHUNK < C ? c0 + CHUNK : C;
            const float *g = gate + (size_t)b * ms;
            float acc[CHUNK] = {0};
            for (int l = 0; l < L; l++) {
                size_t r = ((size_t)b * L + l) * C;
                for (int c = c0; c < c1; c++) {
                    if (dy) dy[r + c] = g[c] * dx[r + c];
                    acc[c - c0] += dx[r + c] * y[r + c];
                }
            }
            if (dgate)
                for (int c = c0; c < c1; c++) dgate[(size_t)b * ms + c] += acc[c - c0];
        }
}

MALA_ELEMENTWISE_CLONES void cpu_gelu_fwd(float *out, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = gelu_f(x[i]);
}

MALA_ELEMENTWISE_CLONES void cpu_gelu_bwd(float *dx, const float *dout, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = dout[i] * gelu_grad_f(x[i]);
}

MALA_ELEMENTWISE_CLONES void cpu_gelu_erf_fwd(float *out, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static) if (n >= ((size_t)1 << 14))
    for (size_t i = 0; i < n; i++) out[i] = gelu_erf_f(x[i]);
}

MALA_ELEMENTWISE_CLONES void cpu_gelu_erf_bwd(float *dx, const float *dout, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static) if (n >= ((size_t)1 << 14))
    for (size_t i = 0; i < n; i++) dx[i] = dout[i] * gelu_erf_grad_f(x[i]);
}

MALA_ELEMENTWISE_CLONES void cpu_silu_fwd(float *out, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = silu_f(x[i]);
}

MALA_ELEMENTWISE_CLONES void cpu_silu_bwd(float *dx, const float *dout, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dx[i] = dout[i] * silu_grad_f(x[i]);
}

// SwiGLU on the fused [N, 2F] projection: a = ab[n, :F], b = ab[n, F:]
MALA_ELEMENTWISE_CLONES void cpu_swiglu_fwd(float *out, const float *ab, int N, int F) {
    #pragma omp parallel for schedule(static) if ((size_t)N * F >= ((size_t)1 << 15))
    for (int n = 0; n < N; n++) {
        const float *a = ab + (size_t)n * 2 * F, *b = a + F;
        float *o = out + (size_t)n * F;
        #pragma omp simd
        for (int f = 0; f < F; f++) o[f] = silu_f(a[f]) * b[f];
    }
}

MALA_ELEMENTWISE_CLONES void cpu_swiglu_bwd(float *dab, const float *dout, const float *ab, int N, int F) {
    #pragma omp parallel for schedule(static) if ((size_t)N * F >= ((size_t)1 << 15))
    for (int n = 0; n < N; n++) {
        const float *a = ab + (size_t)n * 2 * F, *b = a + F, *g = dout + (size_t)n * F;
        float *da = dab + (size_t)n * 2 * F, *db = da + F;
        #pragma omp simd
        for (int f = 0; f < F; f++) {
            da[f] += g[f] * silu_grad_f(a[f]) * b[f];
            db[f] += g[f] * silu_f(a[f]);
        }
    }
}

void cpu_add(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_mul_fwd(float *out, const float *a, const float *b, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

void cpu_mul_bwd(float *da, float *db, const float *dout, const float *a, const float *b, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        if (da) da[i] += dout[i] * b[i];
        if (db) db[i] += dout[i] * a[i];
    }
}

// patches[b, gi*g + gj, (c*p + i)*p + j] <-> img[b, c, gi*p + i, gj*p + j], g = S/p
void cpu_patchify_fwd(float *patches, const float *img, int B, int C, int S, int p) {
    int g = S / p, K = C * p * p;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int gi = 0; gi < g; gi++)
            for (int gj = 0; gj < g; gj++) {
                float *row = patches + ((size_t)b * g * g + gi * g + gj) * K;
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < p; i++)
                        for (int j = 0; j < p; j++)
                            row[(c * p + i) * p + j] = img[(((size_t)b * C + c) * S + gi * p + i) * S + gj * p + j];
            }
}

void cpu_patchify_bwd(float *dimg, const float *dpatches, int B, int C, int S, int p) {
    int g = S / p, K = C * p * p;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int gi = 0; gi < g; gi++)
            for (int gj = 0; gj < g; gj++) {
                const float *row = dpatches + ((size_t)b * g * g + gi * g + gj) * K;
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < p; i++)
                        for (int j = 0; j < p; j++)
                            dimg[(((size_t)b * C + c) * S + gi * p + i) * S + gj * p + j] += row[(c * p + i) * p + j];
            }
}

// tokens[b, gi*g + gj, (i*p + j)*C + c] <-> img[b, c, gi*p + i, gj*p + j]
void cpu_unpatchify_fwd(float *img, const float *tokens, int B, int C, int S, int p) {
    int g = S / p, K = C * p * p;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int gi = 0; gi < g; gi++)
            for (int gj = 0; gj < g; gj++) {
                const float *row = tokens + ((size_t)b * g * g + gi * g + gj) * K;
                for (int i = 0; i < p; i++)
                    for (int j = 0; j < p; j++)
                        for (int c = 0; c < C; c++)
                            img[(((size_t)b * C + c) * S + gi * p + i) * S + gj * p + j] = row[(i * p + j) * C + c];
            }
}

void cpu_unpatchify_bwd(float *dtokens, const float *dimg, int B, int C, int S, int p) {
    int g = S / p, K = C * p * p;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int gi = 0; gi < g; gi++)
            for (int gj = 0; gj < g; gj++) {
                float *row = dtokens + ((size_t)b * g * g + gi * g + gj) * K;
                for (int i = 0; i < p; i++)
                    for (int j = 0; j < p; j++)
                        for (int c = 0; c < C; c++)
                            row[(i * p + j) * C + c] += dimg[(((size_t)b * C + c) * S + gi * p + i) * S + gj * p + j];
            }
}

// Token permutations (DiG's scan directions): the source token of output token l.
static inline int perm_src(int l, int L, int gh, int gw, int flip, int transpose) {
    const int m = transpose ? (l % gh) * gw + l / gh : l;
    return flip ? L - 1 - m : m;
}

void cpu_permute_tokens_fwd(float *out, const float *x, int B, int gh, int gw, int C, int flip, int transpose) {
    const int L = gh * gw;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * L * C >= ((size_t)1 << 16))
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L; l++)
            memcpy(out + ((size_t)b * L + l) * C, x + ((size_t)b * L + perm_src(l, L, gh, gw, flip, transpose)) * C,
                   sizeof(float) * C);
}

void cpu_permute_tokens_bwd(float *dx, const float *dout, int B, int gh, int gw, int C, int flip, int transpose) {
    const int L = gh * gw;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * L * C >= ((size_t)1 << 16))
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L; l++) {
            float *d = dx + ((size_t)b * L + perm_src(l, L, gh, gw, flip, transpose)) * C;
            const float *g = dout + ((size_t)b * L + l) * C;
            for (int c = 0; c < C; c++) d[c] += g[c];
        }
}

void cpu_add_pos(float *x, const float *pos, int B, int L, int C) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int l = 0; l < L; l++) {
            float *r = x + ((size_t)b * L + l) * C;
            const float *pr = pos + (size_t)l * C;
            for (int c = 0; c < C; c++) r[c] += pr[c];
        }
}

// DiT TimestepEmbedder.timestep_embedding in float32: f_i = exp(-ln(10000) * i / half).
void cpu_timestep_embed(float *out, const float *t, int B, int dim) {
    int half = dim / 2;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < half; i++) {
            float f = expf(-logf(10000.0f) * (float)i / (float)half);
            float a = t[b] * f;
            out[(size_t)b * dim + i] = cosf(a);
            out[(size_t)b * dim + half + i] = sinf(a);
        }
    if (dim % 2)
        for (int b = 0; b < B; b++) out[(size_t)b * dim + dim - 1] = 0.0f;
}

void cpu_embed_fwd(float *out, const float *table, const int32_t *y, int B, int C) {
    for (int b = 0; b < B; b++) memcpy(out + (size_t)b * C, table + (size_t)y[b] * C, sizeof(float) * C);
}

void cpu_embed_bwd(float *dtable, const float *dout, const int32_t *y, int B, int C) {
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) dtable[(size_t)y[b] * C + c] += dout[(size_t)b * C + c];
}

void cpu_scale(float *x, float a, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) x[i] *= a;
}

// defines: eval_ops_cpu
// CPU implementation of the FID Inception op table: im2col + OpenBLAS sgemm for convolutions,
// OpenMP loops for the rest.
//
// Threading: all parallelism is OpenMP; each OpenMP thread multiplies its own block of rows with
// a single-threaded sgemm. OpenBLAS's OpenMP build (the Makefile's default) runs single-threaded
// inside a parallel region by itself; with the pthread build, begin() turns its threads off for
// the forward (its pool and libgomp's workers otherwise fight over the cores).
#include "inception_ops.h"

#include <cblas.h>
#include <float.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "common.h"

static int g_blas_threads = -1;
static void cpu_begin(void) {
    if (openblas_get_parallel() != 1) return;  // 0 sequential, 1 pthreads, 2 OpenMP
    g_blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);  // (in the OpenMP build this would also set OpenMP's count)
}
static void cpu_end(void) {
    if (g_blas_threads > 0) openblas_set_num_threads(g_blas_threads);
    g_blas_threads = -1;
}
static int thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static int thread_count(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

static void *cpu_alloc(size_t bytes) { return xcalloc(1, bytes); }
static void cpu_release(void *p) { free(p); }
static void cpu_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

// ---- input: bilinear resize (align_corners = False) and 2x - 1 ----
// ATen's CPU upsample_bilinear2d for float input: ratio = in / out in float, the source index
// ratio * (o + 0.5) - 0.5 in double (acc_type), clamped at 0, lambda1 = float(src - floor(src)),
// lambda0 = 1 - lambda1; equal sizes copy.
typedef struct { int i0, i1; float l0, l1; } LinTap;

static void linear_taps(LinTap *t, int in, int out) {
    float ratio = (float)in / (float)out;
    for (int o = 0; o < out; o++) {
        if (in == out) { t[o] = (LinTap){o, o, 1.0f, 0.0f}; continue; }
        double real = (double)ratio * ((double)o + 0.5) - 0.5;
        if (real < 0) real = 0;
        int i0 = (int)real;
        float l1 = (float)(real - i0);
        t[o] = (LinTap){i0, i0 + (i0 < in - 1 ? 1 : 0), 1.0f - l1, l1};
    }
}

static void cpu_resize_input(float *out, const float *in, int N, int C, int H, int W, int S) {
    LinTap *ty = xmalloc((size_t)S * sizeof *ty), *tx = xmalloc((size_t)S * sizeof *tx);
    linear_taps(ty, H, S);
    linear_taps(tx, W, S);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int y = 0; y < S; y++) {
            const LinTap a = ty[y];
            float *o = out + ((size_t)n * S + y) * S * 3;
            for (int x = 0; x < S; x++) {
                const LinTap b = tx[x];
                for (int c = 0; c < 3; c++) {
                    const float *p = in + ((size_t)n * C + (C == 1 ? 0 : c)) * H * W;
                    float t0 = p[(size_t)a.i0 * W + b.i0] * b.l0 + p[(size_t)a.i0 * W + b.i1] * b.l1;
                    float t1 = p[(size_t)a.i1 * W + b.i0] * b.l0 + p[(size_t)a.i1 * W + b.i1] * b.l1;
                    float v = t0 * a.l0 + t1 * a.l1;
                    o[(size_t)x * 3 + c] = 2.0f * v - 1.0f;
                }
            }
        }
    free(ty);
    free(tx);
}

// ---- convolution ----
// Gathers output rows [r0, r0 + rows) of the implicit [N*Ho*Wo, kh*kw*cin] patch matrix.
static void im2col(float *col, const float *in, const ConvGeom *g, int H, int W, int Ho, int Wo, size_t r0,
                   size_t rows) {
    const int K = g->kh * g->kw * g->cin;
    const size_t cb = (size_t)g->cin * sizeof(float);
    for (size_t r = 0; r < rows; r++) {
        size_t gr = r0 + r;
        int ox = (int)(gr % (size_t)Wo);
        size_t t = gr / (size_t)Wo;
        int oy = (int)(t % (size_t)Ho), n = (int)(t / (size_t)Ho);
        float *dst = col + r * (size_t)K;
        for (int ky = 0; ky < g->kh; ky++) {
            int iy = oy * g->sh - g->ph + ky;
            for (int kx = 0; kx < g->kw; kx++, dst += g->cin) {
                int ix = ox * g->sw - g->pw + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) memset(dst, 0, cb);
                else memcpy(dst, in + (((size_t)n * H + iy) * W + ix) * g->cin, cb);
            }
        }
    }
}

static void bias_relu(float *out, int ldo, size_t rows, int cout, const float *b) {
    for (size_t r = 0; r < rows; r++) {
        float *o = out + r * (size_t)ldo;
        #pragma omp simd
        for (int c = 0; c < cout; c++) {
            float v = o[c] + b[c];
            o[c] = v > 0.0f ? v : 0.0f;
        }
    }
}

static void cpu_conv_relu(float *out, int ldo, const float *in, const float *w, const float *b, const ConvGeom *g,
                          int N, int H, int W, float *work, size_t work_floats) {
    const int Ho = (H + 2 * g->ph - g->kh) / g->sh + 1, Wo = (W + 2 * g->pw - g->kw) / g->sw + 1;
    const int K = g->kh * g->kw * g->cin;
    const size_t M = (size_t)N * Ho * Wo;
    const int direct = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
    // Each thread takes a contiguous block of output rows and walks it in chunks that keep its
    // slice of the patch matrix inside `work` and the bias/ReLU pass inside the cache.
    #pragma omp parallel
    {
        const int t = thread_id(), T = thread_count();
        const size_t lo = M * (size_t)t / (size_t)T, hi = M * (size_t)(t + 1) / (size_t)T;
        float *col = work + (work_floats / (size_t)T) * (size_t)t;
        size_t chunk = direct ? 1024 : (work_floats / (size_t)T) / (size_t)K;
        if (chunk < 1) chunk = 1;
        for (size_t r0 = lo; r0 < hi; r0 += chunk) {
            size_t rows = hi - r0 < chunk ? hi - r0 : chunk;
            const float *a = in + r0 * (size_t)g->cin;
            if (!direct) {
                im2col(col, in, g, H, W, Ho, Wo, r0, rows);
                a = col;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, g->cout, K, 1.0f, a, K, w, K, 0.0f,
                        out + r0 * (size_t)ldo, ldo);
            bias_relu(out + r0 * (size_t)ldo, ldo, rows, g->cout, b);
        }
    }
}

// ---- pooling ----
static void cpu_maxpool3(float *out, int ldo, const float *in, int N, int H, int W, int C, int s, int p) {
    const int Ho = (H + 2 * p - 3) / s + 1, Wo = (W + 2 * p - 3) / s + 1;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int oy = 0; oy < Ho; oy++)
            for (int ox = 0; ox < Wo; ox++) {
                float *o = out + (((size_t)n * Ho + oy) * Wo + ox) * ldo;
                for (int c = 0; c < C; c++) o[c] = -FLT_MAX;
                for (int ky = 0; ky < 3; ky++) {
                    int iy = oy * s - p + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (int kx = 0; kx < 3; kx++) {
                        int ix = ox * s - p + kx;
                        if (ix < 0 || ix >= W) continue;
                        const float *q = in + (((size_t)n * H + iy) * W + ix) * C;
                        #pragma omp simd
                        for (int c = 0; c < C; c++) o[c] = q[c] > o[c] ? q[c] : o[c];
                    }
                }
            }
}

static void cpu_avgpool3(float *out, const float *in, int N, int H, int W, int C) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                float *o = out + (((size_t)n * H + y) * W + x) * C;
                int y0 = y > 0 ? y - 1 : 0, y1 = y < H - 1 ? y + 1 : H - 1;
                int x0 = x > 0 ? x - 1 : 0, x1 = x < W - 1 ? x + 1 : W - 1;
                memset(o, 0, (size_t)C * sizeof *o);
                for (int iy = y0; iy <= y1; iy++)
                    for (int ix = x0; ix <= x1; ix++) {
                        const float *q = in + (((size_t)n * H + iy) * W + ix) * C;
                        #pragma omp simd
                        for (int c = 0; c < C; c++) o[c] += q[c];
                    }
                float inv = 1.0f / (float)((y1 - y0 + 1) * (x1 - x0 + 1));
                #pragma omp simd
                for (int c = 0; c < C; c++) o[c] *= inv;
            }
}

static void cpu_mean_hw(float *out, const float *in, int N, int HW, int C) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int k = 0; k < HW; k++) s += in[((size_t)n * HW + k) * C + c];
            out[(size_t)n * C + c] = (float)(s / HW);
        }
}

// Split over output columns (N is a handful of images).
static void cpu_linear_nt(float *out, const float *in, const float *w, int N, int K, int O) {
    #pragma omp parallel
    {
        const int t = thread_id(), T = thread_count();
        const int lo = (int)((long)O * t / T), hi = (int)((long)O * (t + 1) / T);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, hi - lo, K, 1.0f, in, K, w + (size_t)lo * K, K, 0.0f,
                        out + lo, O);
    }
}

static const EvalOps kCpuOps = {
    .name = "cpu",
    .host_memory = 1,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .begin = cpu_begin,
    .end = cpu_end,
    .resize_input = cpu_resize_input,
    .conv_relu = cpu_conv_relu,
    .maxpool3 = cpu_maxpool3,
    .avgpool3 = cpu_avgpool3,
    .mean_hw = cpu_mean_hw,
    .linear_nt = cpu_linear_nt,
};

const EvalOps *eval_ops_cpu(void) { return &kCpuOps; }

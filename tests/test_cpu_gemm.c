// The CPU backend's products and convolutions on each route (cpu/cpu_gemm.h): oneDNN's matmul
// and OpenBLAS's sgemm, oneDNN's convolutions (blocked and plain layouts) and im2col, against a
// double-precision reference, for every variant the backend uses (transposes, alpha, beta 0 and
// 1 and other, strided slices with ld > cols, odd shapes, calls inside OpenMP regions, conv
// strides and uneven padding, 1x1 direct, bias, dx / dw accumulation). Tolerance: each value
// within 4 (K + 2) 2^-24 of its sum of |terms| (the fp32 bound of a K-term sum, with room for
// oneDNN's and OpenBLAS's blocked orders). Without oneDNN in the build the oneDNN cases check
// that selecting it is refused and OpenBLAS keeps computing.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/backend.h"
#include "core/conv_plan.h"
#include "cpu/cpu_gemm.h"
#include "testutil.h"
#include "conv_ref.h"

static void *owned[64];
static int nowned;
static void *own(void *p) { ck_assert(nowned < 64); owned[nowned++] = p; return p; }
static void free_owned(void) { while (nowned) free(owned[--nowned]); }
static float *rnd(size_t n, uint64_t seed) {
    float *x = own(malloc((n ? n : 1) * sizeof(float)));
    tu_fill(x, n, -1, 1, seed);
    return x;
}

#define EPS24 5.9604645e-8  // 2^-24

static int have_dnnl(void) { return cpu_gemm_select(GEMM_DNNL, CONV_DNNL); }

// Whether got[i] is within the bound of ref[i] (sum of |terms| mag[i], K-term sums).
static void check_close(const char *what, const float *got, const double *ref, const double *mag, size_t n, int K) {
    for (size_t i = 0; i < n; i++) {
        const double tol = 4.0 * (K + 2) * EPS24 * mag[i] + 1e-30;
        ck_assert_msg(fabs(got[i] - ref[i]) <= tol, "%s [%zu]: %.9g, reference %.9g (tolerance %.3g)", what, i,
                      (double)got[i], ref[i], tol);
    }
}

// ---- products ----

typedef struct {
    int ta, tb, M, N, K, pad;  // pad: extra columns of every leading dimension
    float alpha, beta;
} Gemm;

static float at(const float *X, int trans, int ld, int r, int c) {
    return trans ? X[(size_t)c * ld + r] : X[(size_t)r * ld + c];
}

static void gemm_ref(const Gemm *g, const float *A, int lda, const float *B, int ldb, const float *C0, int ldc,
                     double *ref, double *mag) {
    for (int i = 0; i < g->M; i++)
        for (int j = 0; j < g->N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < g->K; k++) {
                const double t = (double)at(A, g->ta, lda, i, k) * at(B, g->tb, ldb, k, j);
                s += t, m += fabs(t);
            }
            const double c0 = g->beta != 0.0f ? C0[(size_t)i * ldc + j] : 0.0;
            ref[(size_t)i * g->N + j] = g->alpha * s + g->beta * c0;
            mag[(size_t)i * g->N + j] = fabs(g->alpha) * m + fabs(g->beta * c0);
        }
}

// One product on the current route: C (NaN where beta is 0) against the reference, and the
// columns past N of each row of C untouched.
static void check_gemm(const Gemm *g, const char *route) {
    const int ar = g->ta ? g->K : g->M, ac = g->ta ? g->M : g->K, br = g->tb ? g->N : g->K, bc = g->tb ? g->K : g->N;
    const int lda = ac + g->pad, ldb = bc + g->pad, ldc = g->N + g->pad;
    const float *A = rnd((size_t)ar * lda, 1), *B = rnd((size_t)br * ldb, 2);
    float *C = rnd((size_t)g->M * ldc, 3), *C0 = own(malloc((size_t)g->M * ldc * sizeof(float)));
    if (g->beta == 0.0f)
        for (int i = 0; i < g->M; i++)
            for (int j = 0; j < g->N; j++) C[(size_t)i * ldc + j] = NAN;
    memcpy(C0, C, (size_t)g->M * ldc * sizeof(float));
    double *ref = own(malloc((size_t)g->M * g->N * sizeof(double))), *mag = own(malloc((size_t)g->M * g->N * 8));
    gemm_ref(g, A, lda, B, ldb, C0, ldc, ref, mag);
    cpu_sgemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, lda, B, ldb, g->beta, C, ldc);
    char what[160];
    snprintf(what, sizeof what, "%s %dx%dx%d trans %d%d alpha %g beta %g pad %d", route, g->M, g->N, g->K, g->ta, g->tb,
             g->alpha, g->beta, g->pad);
    float *packed = own(malloc((size_t)g->M * g->N * sizeof(float)));
    for (int i = 0; i < g->M; i++) {
        memcpy(packed + (size_t)i * g->N, C + (size_t)i * ldc, g->N * sizeof(float));
        ck_assert_msg(!memcmp(C + (size_t)i * ldc + g->N, C0 + (size_t)i * ldc + g->N, g->pad * sizeof(float)),
                      "%s: wrote past N in row %d", what, i);
    }
    check_close(what, packed, ref, mag, (size_t)g->M * g->N, g->K);
}

// Every transpose pair, alpha 1 and not, beta 0, 1 and 0.5, packed and strided, on shapes from
// one element to the attention and linear layers' (d = 64 heads, L = 256 tokens).
static const int GEMM_SHAPES[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {100, 37, 300}, {256, 64, 64},
                                     {64, 64, 256}, {257, 129, 96}};
#define NGS ((int)(sizeof GEMM_SHAPES / sizeof GEMM_SHAPES[0]))

static void gemm_sweep(const char *route) {
    const float alphas[] = {1.0f, 0.125f}, betas[] = {0.0f, 1.0f, 0.5f};
    for (int s = 0; s < NGS; s++)
        for (int t = 0; t < 4; t++)
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 3; b++) {
                    const Gemm g = {t & 1, t >> 1, GEMM_SHAPES[s][0], GEMM_SHAPES[s][1], GEMM_SHAPES[s][2],
                                    (s + t + b) % 3 == 0 ? 0 : 5, alphas[a], betas[b]};
                    check_gemm(&g, route);
                    free_owned();
                }
}

START_TEST(test_gemm_openblas) {
    cpu_gemm_select(GEMM_OPENBLAS, -1);
    gemm_sweep("openblas");
}
END_TEST

START_TEST(test_gemm_dnnl) {
    if (!have_dnnl()) {
        ck_assert(cpu_gemm_impl() == GEMM_OPENBLAS);
        return;
    }
    ck_assert_str_eq(cpu_gemm_name(), "dnnl");
    gemm_sweep("dnnl");
}
END_TEST

// Products made inside an OpenMP region (linear attention's per-head calls, conv's per-image
// team) run on their thread with a primitive planned for one thread: the bits of the same call
// on one thread, and near the reference.
START_TEST(test_gemm_in_region) {
    have_dnnl();
    enum { S = 6, M = 96, N = 64, K = 80 };
    const float *A = rnd((size_t)S * M * K, 4), *B = rnd((size_t)S * K * N, 5);
    float *one = rnd((size_t)S * M * N, 6), *par = own(malloc((size_t)S * M * N * sizeof(float)));
    memcpy(par, one, (size_t)S * M * N * sizeof(float));
    omp_set_num_threads(1);
    for (int s = 0; s < S; s++)
        cpu_sgemm(1, 0, M, N, K, 0.5f, A + (size_t)s * M * K, M, B + (size_t)s * K * N, N, 1.0f,
                  one + (size_t)s * M * N, N);
    omp_set_num_threads(2);
    #pragma omp parallel for schedule(dynamic, 1)
    for (int s = 0; s < S; s++)
        cpu_sgemm(1, 0, M, N, K, 0.5f, A + (size_t)s * M * K, M, B + (size_t)s * K * N, N, 1.0f,
                  par + (size_t)s * M * N, N);
    ck_assert_msg(!memcmp(one, par, (size_t)S * M * N * sizeof(float)), "%s: in-region bits differ",
                  cpu_gemm_name());
    const Gemm g = {1, 0, M, N, K, 0, 0.5f, 1.0f};
    check_gemm(&g, "in region");  // (the region's own path, once more against the reference)
}
END_TEST

// ---- convolutions ----

// Strided with uneven padding, 3x3 "same", 1x1 direct, odd sizes, a DiC-like block, 5x5.
static const ConvShape CONV_SHAPES[] = {
    {2, 3, 7, 6, 4, 3, 3, 2, 0, 1, 0, 1}, {3, 8, 9, 11, 5, 3, 3, 1, 1, 1, 1, 1}, {2, 16, 6, 5, 12, 1, 1, 1, 0, 0, 0, 0},
    {9, 16, 12, 10, 12, 3, 3, 1, 1, 1, 1, 1}, {2, 32, 8, 8, 48, 3, 3, 1, 1, 1, 1, 1},
    {1, 5, 13, 9, 7, 5, 5, 2, 2, 2, 1, 2}};
#define NCS ((int)(sizeof CONV_SHAPES / sizeof CONV_SHAPES[0]))

static void conv_sweep(const char *route) {
    const Backend *be = backend_cpu();
    for (int k = 0; k < NCS; k++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const ConvShape s = CONV_SHAPES[k];
            const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * s.kh * s.kw;
            const size_t no = (size_t)s.B * s.Cout * conv_out_h(s) * conv_out_w(s);
            const float *x = rnd(nx, 10 + k), *w = rnd(nw, 20 + k), *G = rnd(no, 30 + k);
            const float *bias = with_bias ? rnd(s.Cout, 40 + k) : NULL;
            float *dx = rnd(nx, 50 + k), *dw = rnd(nw, 60 + k), *out = rnd(no, 70 + k);  // dx, dw added into
            double *ro = own(malloc(no * 8)), *mo = own(malloc(no * 8)), *rx = own(malloc(nx * 8));
            double *mx = own(malloc(nx * 8)), *rw = own(malloc(nw * 8)), *mw = own(malloc(nw * 8));
            conv_ref(s, x, w, bias, G, dx, dw, ro, mo, rx, mx, rw, mw);
            const size_t nwork = be->conv2d_workspace_floats(s);
            float *work = own(calloc(nwork ? nwork : 1, sizeof(float)));
            be->conv2d_fwd(out, x, w, bias, s, work, nwork);
            be->conv2d_bwd(dx, dw, NULL, G, x, w, s, work, nwork);
            char what[128];
            const int Kr = s.Cin * s.kh * s.kw, taps = s.B * conv_out_h(s) * conv_out_w(s);
            snprintf(what, sizeof what, "%s conv %d bias %d out", route, k, with_bias);
            check_close(what, out, ro, mo, no, Kr + 1);
            snprintf(what, sizeof what, "%s conv %d dx", route, k);
            check_close(what, dx, rx, mx, nx, s.Cout * s.kh * s.kw + 1);
            snprintf(what, sizeof what, "%s conv %d dw", route, k);
            check_close(what, dw, rw, mw, nw, taps + 1);
            free_owned();
        }
}

START_TEST(test_conv_im2col) {
    cpu_gemm_select(GEMM_OPENBLAS, CONV_IM2COL);
    conv_sweep("im2col+openblas");
    if (cpu_gemm_select(GEMM_DNNL, CONV_IM2COL)) conv_sweep("im2col+dnnl");
}
END_TEST

START_TEST(test_conv_dnnl) {
    if (!have_dnnl()) return;
    ck_assert_str_eq(cpu_conv_name(), "dnnl");
    cpu_dnnl_conv_blocked(1);
    conv_sweep("dnnl blocked");
    cpu_dnnl_conv_blocked(0);
    conv_sweep("dnnl nchw");
    cpu_dnnl_conv_blocked(1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cpu_gemm");
    TCase *tc = tcase_create("routes");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, free_owned);
    tcase_add_test(tc, test_gemm_openblas);
    tcase_add_test(tc, test_gemm_dnnl);
    tcase_add_test(tc, test_gemm_in_region);
    tcase_add_test(tc, test_conv_im2col);
    tcase_add_test(tc, test_conv_dnnl);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

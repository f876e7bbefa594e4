// Gated linear attention on the CPU backend (cpu/ops_cpu_gla.c): the chunked forward against the
// step-by-step recurrence written here in double (L = 1, L below, at and not a multiple of the
// chunk, strongly negative log-decays), all four gradients against central finite differences
// (also through the logsigmoid gate), the cache contract, NULL gradients, strided inputs (q, k,
// v, g as column slices of one fused projection) and thread-count independence.
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "testutil.h"

static const Backend *BE;

// One fused projection row per token: [q (heads*dk) | k | v (heads*dv) | g | pad], and o rows with
// their own padding, so every stride differs from the head widths.
typedef struct {
    GlaShape s;
    int W;                    // fused row width
    float *X, *o, *cache, *G;  // fused inputs, output, cache, dL/do
    float *q, *k, *v, *g;     // views into X
} Gla;

static float *fnew(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static size_t nrows(const Gla *c) { return (size_t)c->s.B * c->s.L; }
static size_t nX(const Gla *c) { return nrows(c) * c->W; }
static size_t nO(const Gla *c) { return nrows(c) * c->s.ldo; }

static Gla gla_new(int B, int L, int heads, int dk, int dv) {
    Gla c = {0};
    const int hk = heads * dk, hv = heads * dv;
    c.W = 3 * hk + hv + 3;
    c.s = (GlaShape){B, L, heads, dk, dv, c.W, c.W, c.W, c.W, hv + 2};
    c.X = fnew(nX(&c));
    c.o = fnew(nO(&c));
    c.G = fnew(nO(&c));
    c.cache = fnew(BE->gla_cache_floats(c.s));
    c.q = c.X;
    c.k = c.X + hk;
    c.v = c.X + 2 * hk;
    c.g = c.X + 2 * hk + hv;
    return c;
}
static void gla_free(Gla *c) { free(c->X); free(c->o); free(c->G); free(c->cache); }

// q, k, v uniform in [-1, 1); g uniform in [glo, ghi] (<= 0); G uniform in [-1, 1).
static void gla_fill(Gla *c, float glo, float ghi, uint64_t seed) {
    const GlaShape s = c->s;
    tu_fill(c->X, nX(c), -1.0f, 1.0f, seed);
    float *u = fnew(nX(c));
    tu_fill(u, nX(c), glo, ghi, seed + 1);
    for (size_t r = 0; r < nrows(c); r++)
        for (int e = 0; e < s.heads * s.dk; e++) c->g[r * c->W + e] = u[r * c->W + e];
    free(u);
    tu_fill(c->G, nO(c), -1.0f, 1.0f, seed + 2);
}

static void gla_forward(Gla *c) { BE->gla_fwd(c->o, c->cache, c->q, c->k, c->v, c->g, c->s); }

// sum(o * G) over the heads*dv leading channels of each o row
static double gla_loss_of(const Gla *c) {
    double l = 0;
    for (size_t r = 0; r < nrows(c); r++)
        l += tu_dot(c->o + r * c->s.ldo, c->G + r * c->s.ldo, (size_t)c->s.heads * c->s.dv);
    return l;
}
static double gla_loss(void *ctx) { gla_forward(ctx); return gla_loss_of(ctx); }

// The recurrence itself, per (batch, head), in double:
//   S_t = diag(exp(g_t)) S_{t-1} + k_t^T v_t,  o_t = dk^-1/2 q_t S_t.   ref: [B*L][heads*dv]
static void ref_gla(double *ref, const Gla *c) {
    const GlaShape s = c->s;
    const int dk = s.dk, dv = s.dv, hv = s.heads * dv;
    const double scale = 1.0 / sqrt((double)dk);
    double *S = calloc((size_t)dk * dv, sizeof(double));
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.heads; h++) {
            memset(S, 0, sizeof(double) * dk * dv);
            for (int t = 0; t < s.L; t++) {
                const size_t r = (size_t)b * s.L + t;
                const float *q = c->q + r * c->W + h * dk, *k = c->k + r * c->W + h * dk;
                const float *v = c->v + r * c->W + h * dv, *g = c->g + r * c->W + h * dk;
                for (int e = 0; e < dk; e++) {
                    const double a = exp((double)g[e]);
                    for (int f = 0; f < dv; f++) S[e * dv + f] = a * S[e * dv + f] + (double)k[e] * v[f];
                }
                for (int f = 0; f < dv; f++) {
                    double acc = 0;
                    for (int e = 0; e < dk; e++) acc += (double)q[e] * S[e * dv + f];
                    ref[r * hv + h * dv + f] = scale * acc;
                }
            }
        }
    free(S);
}

// max |o - ref| / max |ref| over the valid channels; also checks o is finite.
static double gla_vs_ref(const Gla *c) {
    const int hv = c->s.heads * c->s.dv;
    double *ref = calloc(nrows(c) * hv + 1, sizeof(double));
    ref_gla(ref, c);
    double md = 0, mr = 1e-30;
    for (size_t r = 0; r < nrows(c); r++)
        for (int f = 0; f < hv; f++) {
            const float x = c->o[r * c->s.ldo + f];
            ck_assert_msg(isfinite(x), "gla_fwd: o[%zu][%d] = %g is not finite", r, f, x);
            md = fmax(md, fabs(x - ref[r * hv + f]));
            mr = fmax(mr, fabs(ref[r * hv + f]));
        }
    free(ref);
    return md / mr;
}

static double worst_ref_err;  // printed by the suite: the chunked-vs-naive figure

static void check_fwd(int B, int L, int heads, int dk, int dv, float glo, float ghi, uint64_t seed) {
    Gla c = gla_new(B, L, heads, dk, dv);
    gla_fill(&c, glo, ghi, seed);
    const size_t nc = BE->gla_cache_floats(c.s);
    for (size_t i = 0; i < nc; i++) c.cache[i] = NAN;  // the forward must not read the cache
    for (size_t i = 0; i < nO(&c); i++) c.o[i] = NAN;  // and must overwrite o's head channels
    gla_forward(&c);
    double e = gla_vs_ref(&c);
    worst_ref_err = fmax(worst_ref_err, e);
    ck_assert_msg(e < 2e-6, "gla B%d L%d heads%d dk%d dv%d g in [%g, %g]: normalised error %.3g vs the recurrence",
                  B, L, heads, dk, dv, glo, ghi, e);
    // the padding after heads*dv in each o row is not written
    for (size_t r = 0; r < nrows(&c); r++)
        for (int f = heads * dv; f < c.s.ldo; f++) ck_assert_msg(isnan(c.o[r * c.s.ldo + f]), "o padding written");
    gla_free(&c);
}

START_TEST(test_gla_forward_vs_recurrence) {
    const int Ls[] = {1, 2, 5, 15, 16, 17, 32, 37, 64, 100};
    for (size_t i = 0; i < sizeof Ls / sizeof *Ls; i++) {
        check_fwd(2, Ls[i], 2, 8, 12, -0.6f, -0.01f, 10 + i);  // DiG's range: logsigmoid(~N(0,1)) / 16
        check_fwd(1, Ls[i], 3, 5, 7, -3.0f, 0.0f, 40 + i);     // odd widths, g up to exactly 0 allowed
    }
    // strongly negative log-decays: logsigmoid(-100)/16 = -6.25 per token, a chunk's decay far
    // past exp(-88) (where exp(-b) would overflow in the factored form)
    check_fwd(2, 37, 2, 8, 12, -12.5f, -6.0f, 70);
    check_fwd(1, 64, 1, 32, 64, -7.0f, -5.0f, 71);  // DiG's head widths
    // mixed: some channels forget almost everything, others nothing
    Gla c = gla_new(2, 40, 2, 6, 10);
    gla_fill(&c, -0.3f, 0.0f, 72);
    for (size_t r = 0; r < nrows(&c); r++)
        for (int e = 0; e < 12; e += 3) c.g[r * c.W + e] = -625.0f;  // logsigmoid(-1e4) / 16
    gla_forward(&c);
    double e = gla_vs_ref(&c);
    worst_ref_err = fmax(worst_ref_err, e);
    ck_assert_msg(e < 2e-6, "gla with g = -625 channels: normalised error %.3g", e);
    gla_free(&c);
    printf("  gla chunked forward vs step-by-step recurrence: worst normalised error %.2e\n", worst_ref_err);
}
END_TEST

// With every g = -inf-like (-1e4), only the diagonal survives: o_t = scale (q_t . k_t) v_t.
START_TEST(test_gla_no_memory) {
    Gla c = gla_new(1, 20, 1, 4, 3);
    gla_fill(&c, -1e4f, -1e4f, 80);
    gla_forward(&c);
    for (int t = 0; t < 20; t++) {
        const float *q = c.q + t * c.W, *k = c.k + t * c.W, *v = c.v + t * c.W;
        double qk = 0;
        for (int e = 0; e < 4; e++) qk += (double)q[e] * k[e];
        for (int f = 0; f < 3; f++)
            ck_assert_msg(fabs(c.o[t * c.s.ldo + f] - 0.5 * qk * v[f]) < 1e-6, "token %d: %g vs %g", t,
                          c.o[t * c.s.ldo + f], 0.5 * qk * v[f]);
    }
    gla_free(&c);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Gradients

// dq, dk, dv, dg into the matching column slices of dX
static void gla_backward(Gla *c, float *dX, int want) {  // want: bit 0 dq, 1 dk, 2 dv, 3 dg
    const int hk = c->s.heads * c->s.dk, hv = c->s.heads * c->s.dv;
    BE->gla_bwd(want & 1 ? dX : NULL, want & 2 ? dX + hk : NULL, want & 4 ? dX + 2 * hk : NULL,
                want & 8 ? dX + 2 * hk + hv : NULL, c->G, c->q, c->k, c->v, c->g, c->cache, c->s);
}

static double worst_fd;  // worst |fd - an| / (atol + rtol max(|fd|, |an|)) seen, printed

// Like tu_fd_check, but also records how close to its tolerance the worst index came.
static void fd_check(const char *what, float *x, size_t n, const float *an, tu_loss_fn loss, void *ctx, float h,
                     double atol, double rtol, size_t count, int only_col0, int col1, int W) {
    size_t step = n > count ? n / count : 1;
    for (size_t i = 0; i < n; i += step) {
        const int col = (int)(i % (size_t)W);
        if (col < only_col0 || col >= col1) continue;
        const float x0 = x[i];
        x[i] = x0 + h; double lp = loss(ctx);
        x[i] = x0 - h; double lm = loss(ctx);
        x[i] = x0;
        const double fd = (lp - lm) / (2.0 * h), tol = atol + rtol * fmax(fabs(fd), fabs(an[i]));
        worst_fd = fmax(worst_fd, fabs(fd - an[i]) / tol);
        ck_assert_msg(fabs(fd - an[i]) <= tol, "%s: grad[%zu] (col %d) analytic %.7g vs finite-difference %.7g", what,
                      i, col, an[i], fd);
    }
}

static void check_grads(int B, int L, int heads, int dk, int dv, float glo, float ghi, uint64_t seed) {
    Gla c = gla_new(B, L, heads, dk, dv);
    gla_fill(&c, glo, ghi, seed);
    const int hk = heads * dk, hv = heads * dv;
    float *dX = fnew(nX(&c)), *junk = fnew(nX(&c));
    tu_fill(junk, nX(&c), -3.0f, 3.0f, seed + 5);
    memcpy(dX, junk, sizeof(float) * nX(&c));
    gla_forward(&c);
    gla_backward(&c, dX, 15);
    for (size_t i = 0; i < nX(&c); i++) {
        if ((int)(i % c.W) >= 3 * hk + hv) ck_assert_msg(dX[i] == junk[i], "gla_bwd wrote into the row padding");
        dX[i] -= junk[i];  // the op adds
    }
    char what[96];
    const char *names[4] = {"dq", "dk", "dv", "dg"};
    const int col0[5] = {0, hk, 2 * hk, 2 * hk + hv, 3 * hk + hv};
    for (int p = 0; p < 4; p++) {
        snprintf(what, sizeof what, "gla %s B%d L%d heads%d dk%d dv%d g [%g,%g]", names[p], B, L, heads, dk, dv, glo,
                 ghi);
        fd_check(what, c.X, nX(&c), dX, gla_loss, &c, 1e-2f, 5e-4, 5e-3, 100000, col0[p], col0[p + 1], c.W);
    }
    free(dX); free(junk);
    gla_free(&c);
}

START_TEST(test_gla_grads) {
    check_grads(2, 19, 2, 4, 6, -0.8f, -0.02f, 100);   // two chunks, the second partial
    check_grads(1, 5, 1, 3, 5, -1.5f, -0.02f, 110);    // one partial chunk
    check_grads(1, 1, 2, 4, 4, -0.5f, -0.02f, 120);    // one token
    check_grads(1, 33, 1, 4, 4, -0.3f, -0.02f, 130);   // three chunks: 16 + 16 + 1
    check_grads(1, 24, 1, 4, 5, -9.0f, -4.0f, 140);    // strongly negative g
    printf("  gla gradients vs finite differences: worst |fd - an| / tol = %.3f\n", worst_fd);
}
END_TEST

// Through the gate: raw logits x -> g = logsigmoid(x) / 16 (in place in the fused buffer) -> gla.
typedef struct { Gla *c; float *raw; } ChainCtx;
static void chain_gate(ChainCtx *cc) {
    Gla *c = cc->c;
    const int hk = c->s.heads * c->s.dk;
    for (size_t r = 0; r < nrows(c); r++) memcpy(c->g + r * c->W, cc->raw + r * hk, sizeof(float) * hk);
    BE->logsigmoid_fwd(c->g, (int)nrows(c), hk, c->W, 16.0f);
}
static double chain_loss(void *ctx) {
    ChainCtx *cc = ctx;
    chain_gate(cc);
    return gla_loss(cc->c);
}

START_TEST(test_gla_grad_through_gate) {
    Gla c = gla_new(2, 21, 2, 4, 6);
    gla_fill(&c, -1.0f, 0.0f, 150);
    const int hk = 8, hv = 12;
    float *raw = fnew(nrows(&c) * hk);
    tu_fill(raw, nrows(&c) * hk, -6.0f, 6.0f, 151);
    ChainCtx cc = {&c, raw};
    chain_gate(&cc);
    gla_forward(&c);
    float *dX = fnew(nX(&c)), *draw = fnew(nrows(&c) * hk);
    gla_backward(&c, dX, 8);
    for (size_t r = 0; r < nrows(&c); r++)
        for (int e = 0; e < hk; e++) ck_assert(dX[r * c.W + e] == 0.0f && dX[r * c.W + hk + e] == 0.0f);
    BE->logsigmoid_bwd(dX + 2 * hk + hv, c.g, (int)nrows(&c), hk, c.W, 16.0f);
    for (size_t r = 0; r < nrows(&c); r++) memcpy(draw + r * hk, dX + r * c.W + 2 * hk + hv, sizeof(float) * hk);
    fd_check("gla d/d(gate logits)", raw, nrows(&c) * hk, draw, chain_loss, &cc, 1e-2f, 5e-4, 5e-3, 100000, 0, hk,
             hk);
    free(raw); free(dX); free(draw);
    gla_free(&c);
}
END_TEST

// The logsigmoid op: values against log(sigmoid(x)) in double over a wide range, in place on
// strided rows (the padding untouched), and its backward against finite differences.
typedef struct { float *x, *y, *G; int rows, cols, ld; } LsCtx;
static double ls_loss(void *ctx) {
    LsCtx *c = ctx;
    memcpy(c->y, c->x, sizeof(float) * c->rows * c->ld);
    BE->logsigmoid_fwd(c->y, c->rows, c->cols, c->ld, 16.0f);
    double l = 0;
    for (int r = 0; r < c->rows; r++) l += tu_dot(c->y + r * c->ld, c->G + r * c->ld, c->cols);
    return l;
}

START_TEST(test_logsigmoid) {
    const int rows = 9, cols = 11, ld = 14, n = rows * ld;
    LsCtx c = {fnew(n), fnew(n), fnew(n), rows, cols, ld};
    tu_fill(c.x, n, -8.0f, 8.0f, 160);
    c.x[0] = -100.0f; c.x[1] = 100.0f; c.x[2] = 0.0f; c.x[3] = -1e4f; c.x[4] = 30.0f;
    tu_fill(c.G, n, -1.0f, 1.0f, 161);
    ls_loss(&c);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            const double x = c.x[r * ld + j], y = c.y[r * ld + j];
            if (j >= cols) { ck_assert_msg(y == x, "logsigmoid_fwd wrote past cols"); continue; }
            const double want = (x < 0 ? x - log1p(exp(x)) : -log1p(exp(-x))) / 16.0;
            ck_assert_msg(fabs(y - want) <= 1e-6 * fmax(1.0, fabs(want)) + 1e-30, "logsigmoid(%g)/16 = %.9g, want %.9g",
                          x, y, want);
        }
    float *g = fnew(n);
    memcpy(g, c.G, sizeof(float) * n);
    BE->logsigmoid_bwd(g, c.y, rows, cols, ld, 16.0f);
    for (int r = 0; r < rows; r++)
        for (int j = cols; j < ld; j++) {
            ck_assert_msg(g[r * ld + j] == c.G[r * ld + j], "logsigmoid_bwd wrote past cols");
            g[r * ld + j] = 0.0f;  // not part of the loss
        }
    // d/dx at the extremes: sigmoid(-x)/16 -> 1/16 for x -> -inf, 0 for x -> +inf
    ck_assert_float_eq_tol(g[0] / c.G[0], 1.0f / 16, 1e-7);
    ck_assert(fabs(g[1]) < 1e-30);
    ck_assert_float_eq_tol(g[2] / c.G[2], 0.5f / 16, 1e-7);
    tu_fd_check("logsigmoid d/dx", c.x + 5, n - 5, g + 5, ls_loss, &c, 1e-2f, 1e-5, 1e-3, 100000);
    free(c.x); free(c.y); free(c.G); free(g);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Cache contract, NULL gradients, threads

// The cache holds exactly gla_cache_floats; the backward leaves the forward's part intact (the
// CPU keeps no scratch there), so a second backward gives bit-identical gradients; a gradient
// asked for alone equals the same gradient of the full call.
START_TEST(test_gla_cache_and_nulls) {
    Gla c = gla_new(2, 37, 2, 6, 10);
    gla_fill(&c, -2.0f, -0.01f, 200);
    const size_t ncache = BE->gla_cache_floats(c.s);
    ck_assert_uint_eq(ncache, (size_t)2 * 2 * 3 * 6 * 10);  // B * heads * ceil(37 / 16) * dk * dv
    float *guarded = fnew(ncache + 64);
    for (size_t i = 0; i < ncache + 64; i++) guarded[i] = -12345.0f;
    free(c.cache);
    c.cache = guarded;
    gla_forward(&c);
    for (size_t i = ncache; i < ncache + 64; i++) ck_assert_msg(guarded[i] == -12345.0f, "gla_fwd wrote past its cache");
    float *kept = fnew(ncache);
    memcpy(kept, c.cache, sizeof(float) * ncache);
    float *d1 = fnew(nX(&c)), *d2 = fnew(nX(&c)), *part = fnew(nX(&c));
    gla_backward(&c, d1, 15);
    ck_assert_msg(!memcmp(kept, c.cache, sizeof(float) * ncache), "gla_bwd changed the forward's cache");
    for (size_t i = ncache; i < ncache + 64; i++) ck_assert_msg(guarded[i] == -12345.0f, "gla_bwd wrote past its cache");
    gla_backward(&c, d2, 15);
    ck_assert_msg(!memcmp(d1, d2, sizeof(float) * nX(&c)), "a second backward gives other gradients");
    for (int want = 1; want <= 8; want <<= 1) {
        memset(part, 0, sizeof(float) * nX(&c));
        gla_backward(&c, part, want);
        for (size_t i = 0; i < nX(&c); i++) {
            const int col = (int)(i % c.W);
            const int which = col < 12 ? 1 : col < 24 ? 2 : col < 44 ? 4 : col < 56 ? 8 : 0;
            ck_assert_msg(part[i] == (which == want ? d1[i] : 0.0f), "want %d: [%zu] %g vs %g", want, i, part[i],
                          which == want ? d1[i] : 0.0f);
        }
    }
    gla_backward(&c, NULL, 0);  // nothing wanted: nothing done
    free(kept); free(d1); free(d2); free(part);
    gla_free(&c);
}
END_TEST

START_TEST(test_gla_threads) {
    Gla c = gla_new(3, 70, 3, 16, 32);  // big enough for the parallel path
    gla_fill(&c, -1.0f, -0.01f, 300);
    float *o1 = fnew(nO(&c)), *d1 = fnew(nX(&c)), *d3 = fnew(nX(&c));
    omp_set_num_threads(1);
    gla_forward(&c);
    memcpy(o1, c.o, sizeof(float) * nO(&c));
    gla_backward(&c, d1, 15);
    omp_set_num_threads(3);
    gla_forward(&c);
    gla_backward(&c, d3, 15);
    ck_assert_msg(!memcmp(o1, c.o, sizeof(float) * nO(&c)), "gla_fwd differs between 1 and 3 threads");
    ck_assert_msg(!memcmp(d1, d3, sizeof(float) * nX(&c)), "gla_bwd differs between 1 and 3 threads");
    double e = gla_vs_ref(&c);
    ck_assert_msg(e < 2e-6, "parallel path: normalised error %.3g vs the recurrence", e);
    free(o1); free(d1); free(d3);
    gla_free(&c);
}
END_TEST

#define ADD(fn) do { TCase *tc = tcase_create(#fn); tcase_set_timeout(tc, 120); tcase_add_test(tc, fn); \
    suite_add_tcase(s, tc); } while (0)

int main(void) {
    BE = backend_cpu();
    Suite *s = suite_create("ops_gla");
    ADD(test_logsigmoid);
    ADD(test_gla_forward_vs_recurrence);
    ADD(test_gla_no_memory);
    ADD(test_gla_grads);
    ADD(test_gla_grad_through_gate);
    ADD(test_gla_cache_and_nulls);
    ADD(test_gla_threads);
    return tu_run(s);
}

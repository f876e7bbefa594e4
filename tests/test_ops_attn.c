// Attention ops of the CPU backend (cpu/ops_cpu_attn.c): gradients against central finite
// differences, forward values against naive O(L^2) double-precision references, and the MALA
// properties of docs/design.md §1 (rows of scores sum to 1, scaling q' sharpens MALA but not
// linear attention), plus RoPE's relative-position and norm-preservation properties.
// Calls the cpu_* functions directly (no backend table needed).
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/ops_cpu.h"
#include "core/ops_math.h"
#include "testutil.h"

// ---------------------------------------------------------------------------------------------
// helpers

static AttnShape shp(int B, int gh, int gw, int H, int heads) {
    AttnShape s = {B, gh * gw, H, heads, gh, gw};
    return s;
}
static float *fnew(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *dnew(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static size_t nqkv(AttnShape s) { return (size_t)s.B * s.L * 3 * s.H; }
static size_t nqkr(AttnShape s) { return (size_t)s.B * s.L * 2 * s.H; }
static size_t nout(AttnShape s) { return (size_t)s.B * s.L * s.H; }

// qkv with q, k parts in [lo, hi) (post-phi values are positive for the linear attentions) and v
// in [-1, 1).
static void fill_qkv(float *qkv, AttnShape s, float lo, float hi, uint64_t seed) {
    const int H = s.H;
    size_t rows = (size_t)s.B * s.L;
    float *tmp = fnew(rows * 3 * H);
    tu_fill(tmp, rows * 3 * H, 0.0f, 1.0f, seed);
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < 3 * H; c++) {
            float u = tmp[r * 3 * H + c];
            qkv[r * 3 * H + c] = c < 2 * H ? lo + (hi - lo) * u : -1.0f + 2.0f * u;
        }
    free(tmp);
}

static double nerr_fd(const float *a, const double *b, size_t n) {
    double md = 0, mb = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double dd = fabs((double)a[i] - b[i]);
        if (dd > md) md = dd;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / mb;
}

// ---------------------------------------------------------------------------------------------
// naive double-precision references (explicit L x L scores)

static double ref_rope_freq(int m, int d) {
    int nf = d / 4;
    return nf > 1 ? pow(10000.0, -(double)m / (double)(nf - 1)) : 1.0;
}

// qkr[b,l] = [rot(q), rot(k)], written from docs/design.md §1: pair (2i, 2i+1) of the first d/2
// channels rotates by row * w_i, pair (d/2 + 2i, d/2 + 2i + 1) by col * w_i.
static void ref_rope(double *qkr, const float *qkv, AttnShape s) {
    const int H = s.H, d = H / s.heads;
    for (int b = 0; b < s.B; b++)
        for (int l = 0; l < s.L; l++) {
            int row = l / s.gw, col = l % s.gw;
            for (int part = 0; part < 2; part++)
                for (int h = 0; h < s.heads; h++)
                    for (int ch = 0; ch < d; ch += 2) {
                        int half = ch >= d / 2, i = (ch - half * d / 2) / 2;
                        double ang = (half ? col : row) * ref_rope_freq(i, d);
                        const float *x = qkv + ((size_t)b * s.L + l) * 3 * H + part * H + h * d + ch;
                        double *o = qkr + ((size_t)b * s.L + l) * 2 * H + part * H + h * d + ch;
                        o[0] = x[0] * cos(ang) - x[1] * sin(ang);
                        o[1] = x[1] * cos(ang) + x[0] * sin(ang);
                    }
        }
}

// Pointers to q', k', v and qr, kr rows of token l of batch b, head h.
#define QP(b, l, h) (qkv + ((size_t)(b) * s.L + (l)) * 3 * s.H + (size_t)(h) * d)
#define KP(b, l, h) (QP(b, l, h) + s.H)
#define VP(b, l, h) (QP(b, l, h) + 2 * s.H)
#define QR(b, l, h) (qkr ? qkr + ((size_t)(b) * s.L + (l)) * 2 * s.H + (size_t)(h) * d : QP(b, l, h))
#define KR(b, l, h) (qkr ? QR(b, l, h) + s.H : KP(b, l, h))

static double ddot(const float *a, const float *b, int n) {
    double r = 0;
    for (int i = 0; i < n; i++) r += (double)a[i] * b[i];
    return r;
}

// MALA: A_ij = beta_i (s/L) qr_i.kr_j - gamma_i, beta_i = 1 + 1/(z_i + eps), gamma_i = z_i / L,
// z_i = s q'_i . mean_j k'_j; out_i = sum_j A_ij v_j. scores (optional) gets A [B,heads,L,L].
static void ref_mala(double *out, double *scores, const float *qkv, const float *qkr, AttnShape s) {
    const int L = s.L, d = s.H / s.heads;
    const double sc = 1.0 / sqrt((double)d), eps = MALA_ATTN_EPS;
    double *A = dnew((size_t)L * L), *kbar = dnew(d);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.heads; h++) {
            for (int e = 0; e < d; e++) {
                kbar[e] = 0;
                for (int j = 0; j < L; j++) kbar[e] += KP(b, j, h)[e];
                kbar[e] /= L;
            }
            for (int i = 0; i < L; i++) {
                double z = 0;
                for (int e = 0; e < d; e++) z += QP(b, i, h)[e] * kbar[e];
                z *= sc;
                double beta = 1.0 + 1.0 / (z + eps), gamma = z / L;
                for (int j = 0; j < L; j++) A[(size_t)i * L + j] = beta * (sc / L) * ddot(QR(b, i, h), KR(b, j, h), d) - gamma;
                for (int c = 0; c < d; c++) {
                    double acc = 0;
                    for (int j = 0; j < L; j++) acc += A[(size_t)i * L + j] * VP(b, j, h)[c];
                    out[((size_t)b * L + i) * s.H + h * d + c] = acc;
                }
            }
            if (scores) memcpy(scores + ((size_t)b * s.heads + h) * L * L, A, sizeof(double) * L * L);
        }
    free(A);
    free(kbar);
}

// Linear: W_ij = qr_i.kr_j / (q'_i . sum_j k'_j + eps); out_i = sum_j W_ij v_j.
static void ref_lin(double *out, double *weights, const float *qkv, const float *qkr, AttnShape s) {
    const int L = s.L, d = s.H / s.heads;
    double *ks = dnew(d);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.heads; h++) {
            for (int e = 0; e < d; e++) {
                ks[e] = 0;
                for (int j = 0; j < L; j++) ks[e] += KP(b, j, h)[e];
            }
            for (int i = 0; i < L; i++) {
                double den = MALA_ATTN_EPS;
                for (int e = 0; e < d; e++) den += QP(b, i, h)[e] * ks[e];
                double *o = out + ((size_t)b * L + i) * s.H + h * d;
                for (int c = 0; c < d; c++) o[c] = 0;
                for (int j = 0; j < L; j++) {
                    double wij = ddot(QR(b, i, h), KR(b, j, h), d) / den;
                    if (weights) weights[(((size_t)b * s.heads + h) * L + i) * L + j] = wij;
                    for (int c = 0; c < d; c++) o[c] += wij * VP(b, j, h)[c];
                }
            }
        }
    free(ks);
}

// Softmax: P = softmax(s Q K^T), out = P V (Q, K from qkr when given, else raw q, k); probs
// (optional) gets P [B,heads,L,L].
static void ref_softmax(double *out, double *probs, const float *qkv, const float *qkr, AttnShape s) {
    const int L = s.L, d = s.H / s.heads;
    const double sc = 1.0 / sqrt((double)d);
    double *p = dnew(L);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.heads; h++)
            for (int i = 0; i < L; i++) {
                double mx = -1e300, sum = 0;
                for (int j = 0; j < L; j++) { p[j] = sc * ddot(QR(b, i, h), KR(b, j, h), d); mx = fmax(mx, p[j]); }
                for (int j = 0; j < L; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
                if (probs)
                    for (int j = 0; j < L; j++) probs[(((size_t)b * s.heads + h) * L + i) * L + j] = p[j] / sum;
                double *o = out + ((size_t)b * L + i) * s.H + h * d;
                for (int c = 0; c < d; c++) {
                    double acc = 0;
                    for (int j = 0; j < L; j++) acc += p[j] / sum * VP(b, j, h)[c];
                    o[c] = acc;
                }
            }
    free(p);
}

// PyTorch conv2d(groups=H, padding=k/2) on x (rows of stride ldx) viewed as [B, H, gh, gw], plus bias.
static void ref_dwconv(double *out, const float *src, int ldx, const float *w, const float *bias, int k, AttnShape s) {
    const int H = s.H, pad = k / 2;
    for (int b = 0; b < s.B; b++)
        for (int c = 0; c < H; c++)
            for (int y = 0; y < s.gh; y++)
                for (int x = 0; x < s.gw; x++) {
                    double acc = bias[c];
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int yy = y + i - pad, xx = x + j - pad;
                            if (yy < 0 || yy >= s.gh || xx < 0 || xx >= s.gw) continue;
                            acc += (double)w[(c * k + i) * k + j] * src[((size_t)b * s.L + yy * s.gw + xx) * ldx + c];
                        }
                    out[((size_t)b * s.L + y * s.gw + x) * H + c] = acc;
                }
}

// ---------------------------------------------------------------------------------------------
// finite-difference contexts

enum { K_MALA, K_LIN, K_SOFT };
enum { R_NONE, R_INPUT, R_CHAIN };  // no RoPE / qkr an independent input / qkr = rope(qkv)

typedef struct {
    int kind, rope;
    AttnShape s;
    float *qkv, *qkr, *out, *cache, *G;
} AttnCtx;

static size_t cache_floats(int kind, AttnShape s) {
    return kind == K_MALA ? cpu_mala_cache_floats(s) : kind == K_LIN ? cpu_linattn_cache_floats(s)
                                                                     : cpu_softmax_cache_floats(s);
}
static void attn_fwd(AttnCtx *c) {
    if (c->rope == R_CHAIN) cpu_rope_fwd(c->qkr, c->qkv, c->s);
    const float *qkr = c->rope == R_NONE ? NULL : c->qkr;
    if (c->kind == K_MALA) cpu_mala_fwd(c->out, c->cache, c->qkv, qkr, c->s);
    else if (c->kind == K_LIN) cpu_linattn_fwd(c->out, c->cache, c->qkv, qkr, c->s);
    else cpu_softmax_fwd(c->out, c->cache, c->qkv, qkr, c->s);
}
static double attn_loss(void *ctx) {
    AttnCtx *c = ctx;
    attn_fwd(c);
    return tu_dot(c->out, c->G, nout(c->s));
}

// Analytic gradients of sum(out * G) w.r.t. qkv (and qkr for R_INPUT), via the backward op on
// buffers pre-filled with junk (the op must ADD), then checked by finite differences.
static void check_attn_grad_n(const char *what, int kind, int rope, AttnShape s, uint64_t seed, size_t count, float h) {
    AttnCtx c = {kind, rope, s, fnew(nqkv(s)), fnew(nqkr(s)), fnew(nout(s)), fnew(cache_floats(kind, s)),
                 fnew(nout(s))};
    if (kind == K_SOFT) fill_qkv(c.qkv, s, -1.0f, 1.0f, seed);
    else fill_qkv(c.qkv, s, 0.2f, 1.5f, seed);
    tu_fill(c.qkr, nqkr(s), -1.0f, 1.5f, seed + 1);
    tu_fill(c.G, nout(s), -1.0f, 1.0f, seed + 2);
    float *dqkv = fnew(nqkv(s)), *dqkr = fnew(nqkr(s)), *j1 = fnew(nqkv(s)), *j2 = fnew(nqkr(s));
    tu_fill(j1, nqkv(s), -3.0f, 3.0f, seed + 3);
    tu_fill(j2, nqkr(s), -3.0f, 3.0f, seed + 4);
    memcpy(dqkv, j1, sizeof(float) * nqkv(s));
    memcpy(dqkr, j2, sizeof(float) * nqkr(s));
    attn_fwd(&c);
    const float *qkr = rope == R_NONE ? NULL : c.qkr;
    if (kind == K_MALA) cpu_mala_bwd(dqkv, dqkr, c.G, c.qkv, qkr, c.cache, s);
    else if (kind == K_LIN) cpu_linattn_bwd(dqkv, dqkr, c.G, c.qkv, qkr, c.cache, s);
    else cpu_softmax_bwd(dqkv, dqkr, c.G, c.qkv, qkr, c.cache, s);
    for (size_t i = 0; i < nqkv(s); i++) dqkv[i] -= j1[i];
    for (size_t i = 0; i < nqkr(s); i++) dqkr[i] -= j2[i];
    if (rope == R_NONE)
        for (size_t i = 0; i < nqkr(s); i++) ck_assert_msg(dqkr[i] == 0.0f, "%s: dqkr touched without RoPE", what);
    if (rope == R_CHAIN) cpu_rope_bwd(dqkv, dqkr, s);

    char name[128];
    snprintf(name, sizeof name, "%s d/dqkv", what);
    tu_fd_check(name, c.qkv, nqkv(s), dqkv, attn_loss, &c, h, 5e-4, 5e-3, count);
    if (rope == R_INPUT) {
        snprintf(name, sizeof name, "%s d/dqkr", what);
        tu_fd_check(name, c.qkr, nqkr(s), dqkr, attn_loss, &c, h, 5e-4, 5e-3, count);
    }
    free(c.qkv); free(c.qkr); free(c.out); free(c.cache); free(c.G);
    free(dqkv); free(dqkr); free(j1); free(j2);
}

static void check_attn_grad(const char *what, int kind, int rope, AttnShape s, uint64_t seed) {
    check_attn_grad_n(what, kind, rope, s, seed, 100000, 1e-2f);
}

START_TEST(test_mala_grad) {
    check_attn_grad("mala 2x3", K_MALA, R_NONE, shp(2, 2, 3, 16, 2), 11);
    check_attn_grad("mala 3x3", K_MALA, R_NONE, shp(2, 3, 3, 16, 2), 12);
    check_attn_grad("mala+qkr 2x3", K_MALA, R_INPUT, shp(2, 2, 3, 16, 2), 13);
    check_attn_grad("mala+qkr 3x3", K_MALA, R_INPUT, shp(2, 3, 3, 16, 2), 14);
    check_attn_grad("mala+rope chain 3x3", K_MALA, R_CHAIN, shp(2, 3, 3, 16, 2), 15);
    check_attn_grad("mala d=12 3x3", K_MALA, R_CHAIN, shp(1, 3, 3, 24, 2), 16);
    check_attn_grad_n("mala big", K_MALA, R_CHAIN, shp(2, 8, 8, 64, 2), 17, 64, 3e-2f);  // parallel path
}
END_TEST

START_TEST(test_linattn_grad) {
    check_attn_grad("linear 2x3", K_LIN, R_NONE, shp(2, 2, 3, 16, 2), 21);
    check_attn_grad("linear 3x3", K_LIN, R_NONE, shp(2, 3, 3, 16, 2), 22);
    check_attn_grad("linear+qkr 2x3", K_LIN, R_INPUT, shp(2, 2, 3, 16, 2), 23);
    check_attn_grad("linear+qkr 3x3", K_LIN, R_INPUT, shp(2, 3, 3, 16, 2), 24);
    check_attn_grad("linear+rope chain 3x3", K_LIN, R_CHAIN, shp(2, 3, 3, 16, 2), 25);
    check_attn_grad_n("linear big", K_LIN, R_CHAIN, shp(2, 8, 8, 64, 2), 26, 64, 3e-2f);
}
END_TEST

START_TEST(test_softmax_grad) {
    check_attn_grad("softmax 2x3", K_SOFT, R_NONE, shp(2, 2, 3, 16, 2), 31);
    check_attn_grad("softmax 3x3", K_SOFT, R_NONE, shp(2, 3, 3, 16, 2), 32);
    check_attn_grad("softmax+qkr 3x3", K_SOFT, R_INPUT, shp(2, 3, 3, 16, 2), 33);
    check_attn_grad("softmax+rope chain 2x3", K_SOFT, R_CHAIN, shp(2, 2, 3, 16, 2), 34);
    check_attn_grad_n("softmax big", K_SOFT, R_CHAIN, shp(2, 8, 8, 64, 2), 35, 64, 3e-2f);
}
END_TEST

// A NULL gradient pointer means "not needed": the rest must still be right.
START_TEST(test_null_grads) {
    AttnShape s = shp(2, 3, 3, 16, 2);
    for (int kind = K_MALA; kind <= K_SOFT; kind++) {
        float *qkv = fnew(nqkv(s)), *qkr = fnew(nqkr(s)), *out = fnew(nout(s)), *cache = fnew(cache_floats(kind, s));
        float *G = fnew(nout(s)), *d1 = fnew(nqkv(s)), *r1 = fnew(nqkr(s)), *d2 = fnew(nqkv(s));
        fill_qkv(qkv, s, 0.2f, 1.5f, 41);
        tu_fill(qkr, nqkr(s), -1.0f, 1.0f, 42);
        tu_fill(G, nout(s), -1.0f, 1.0f, 43);
        if (kind == K_MALA) { cpu_mala_fwd(out, cache, qkv, qkr, s); cpu_mala_bwd(d1, r1, G, qkv, qkr, cache, s);
            cpu_mala_bwd(d2, NULL, G, qkv, qkr, cache, s); cpu_mala_bwd(NULL, NULL, G, qkv, qkr, cache, s); }
        if (kind == K_LIN) { cpu_linattn_fwd(out, cache, qkv, qkr, s); cpu_linattn_bwd(d1, r1, G, qkv, qkr, cache, s);
            cpu_linattn_bwd(d2, NULL, G, qkv, qkr, cache, s); cpu_linattn_bwd(NULL, NULL, G, qkv, qkr, cache, s); }
        if (kind == K_SOFT) { cpu_softmax_fwd(out, cache, qkv, qkr, s); cpu_softmax_bwd(d1, r1, G, qkv, qkr, cache, s);
            cpu_softmax_bwd(d2, NULL, G, qkv, qkr, cache, s); cpu_softmax_bwd(NULL, NULL, G, qkv, qkr, cache, s); }
        // dqkv without dqkr: identical (q', k' get only their un-roped paths; v all of it)
        for (size_t i = 0; i < nqkv(s); i++) ck_assert_float_eq(d1[i], d2[i]);
        free(qkv); free(qkr); free(out); free(cache); free(G); free(d1); free(r1); free(d2);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// forward values against the naive references

static void check_attn_ref(int kind, int rope, AttnShape s, uint64_t seed) {
    float *qkv = fnew(nqkv(s)), *qkr = fnew(nqkr(s)), *out = fnew(nout(s)), *cache = fnew(cache_floats(kind, s));
    double *ref = dnew(nout(s));
    if (kind == K_SOFT) fill_qkv(qkv, s, -1.5f, 1.5f, seed);
    else fill_qkv(qkv, s, 0.1f, 2.0f, seed);
    for (size_t i = 0; i < nout(s); i++) out[i] = NAN;  // forward must overwrite
    if (rope) cpu_rope_fwd(qkr, qkv, s);
    const float *r = rope ? qkr : NULL;
    if (kind == K_MALA) { cpu_mala_fwd(out, cache, qkv, r, s); ref_mala(ref, NULL, qkv, r, s); }
    if (kind == K_LIN) { cpu_linattn_fwd(out, cache, qkv, r, s); ref_lin(ref, NULL, qkv, r, s); }
    if (kind == K_SOFT) { cpu_softmax_fwd(out, cache, qkv, r, s); ref_softmax(ref, NULL, qkv, r, s); }
    double e = nerr_fd(out, ref, nout(s));
    ck_assert_msg(e < 2e-5, "kind %d rope %d B%d L%d H%d heads%d: normalised error %.3g vs naive reference",
                  kind, rope, s.B, s.L, s.H, s.heads, e);
    free(qkv); free(qkr); free(out); free(cache); free(ref);
}

START_TEST(test_attn_reference) {
    AttnShape shapes[] = {shp(2, 2, 3, 16, 2), shp(2, 3, 3, 16, 2), shp(3, 8, 8, 64, 4), shp(2, 5, 7, 48, 4),
                          shp(1, 4, 4, 96, 1), shp(2, 12, 12, 64, 2)};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int kind = K_MALA; kind <= K_SOFT; kind++)
            for (int rope = 0; rope < 2; rope++) check_attn_ref(kind, rope, shapes[i], 100 + i);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// MALA properties

// Without RoPE, every row of MALA's explicit score matrix sums to 1: sum_j A_ij = beta_i z_i -
// z_i = z_i / (z_i + eps).
START_TEST(test_mala_rows_sum_to_one) {
    AttnShape s = shp(2, 3, 3, 16, 2);
    float *qkv = fnew(nqkv(s));
    double *out = dnew(nout(s)), *A = dnew((size_t)s.B * s.heads * s.L * s.L);
    fill_qkv(qkv, s, 0.05f, 2.0f, 7);
    ref_mala(out, A, qkv, NULL, s);
    for (size_t r = 0; r < (size_t)s.B * s.heads * s.L; r++) {
        double sum = 0;
        for (int j = 0; j < s.L; j++) sum += A[r * s.L + j];
        ck_assert_msg(fabs(sum - 1.0) < 1e-5, "row %zu sums to %.9f", r, sum);
    }
    // and the O(L d^2) kernel computes exactly A V
    float *kout = fnew(nout(s)), *cache = fnew(cpu_mala_cache_floats(s));
    cpu_mala_fwd(kout, cache, qkv, NULL, s);
    double e = nerr_fd(kout, out, nout(s));
    ck_assert_msg(e < 2e-5, "MALA kernel vs explicit scores x V: normalised error %.3g", e);
    free(qkv); free(out); free(A); free(kout); free(cache);
}
END_TEST

// Per-row spread statistics of a score matrix.
static void row_stats(const double *A, int L, double *spread, double *std) {
    double mx = -1e300, mn = 1e300, m = 0, v = 0;
    for (int j = 0; j < L; j++) { mx = fmax(mx, A[j]); mn = fmin(mn, A[j]); m += A[j]; }
    m /= L;
    for (int j = 0; j < L; j++) v += (A[j] - m) * (A[j] - m);
    *spread = mx - mn;
    *std = sqrt(v / L);
}

// Scaling q' by a > 1: MALA's scores get sharper (spread and std of each row grow, ratio max/min
// of positive rows grows), linear attention's normalised weights do not change at all.
START_TEST(test_scaling_property) {
    AttnShape s = shp(1, 3, 3, 16, 2);
    const int L = s.L, nrow = s.B * s.heads * L;
    float *qkv = fnew(nqkv(s)), *qa = fnew(nqkv(s)), *out1 = fnew(nout(s)), *outa = fnew(nout(s));
    float *cache = fnew(cpu_linattn_cache_floats(s)), *mcache = fnew(cpu_mala_cache_floats(s));
    float *mout1 = fnew(nout(s)), *mouta = fnew(nout(s));
    double *o = dnew(nout(s)), *A1 = dnew((size_t)nrow * L), *Aa = dnew((size_t)nrow * L);
    double *W1 = dnew((size_t)nrow * L), *Wa = dnew((size_t)nrow * L);
    fill_qkv(qkv, s, 0.1f, 1.5f, 77);
    ref_mala(o, A1, qkv, NULL, s);
    ref_lin(o, W1, qkv, NULL, s);
    cpu_linattn_fwd(out1, cache, qkv, NULL, s);
    cpu_mala_fwd(mout1, mcache, qkv, NULL, s);
    const float scales[] = {2.0f, 4.0f};
    double prev_spread[64], prev_std[64], prev_ratio[64];
    for (int r = 0; r < nrow; r++) {
        row_stats(A1 + (size_t)r * L, L, &prev_spread[r], &prev_std[r]);
        double mx = -1e300, mn = 1e300;
        for (int j = 0; j < L; j++) { mx = fmax(mx, A1[(size_t)r * L + j]); mn = fmin(mn, A1[(size_t)r * L + j]); }
        prev_ratio[r] = mn > 0 ? mx / mn : INFINITY;
    }
    for (int si = 0; si < 2; si++) {
        const float a = scales[si];
        memcpy(qa, qkv, sizeof(float) * nqkv(s));
        for (size_t t = 0; t < (size_t)s.B * L; t++)
            for (int c = 0; c < s.H; c++) qa[t * 3 * s.H + c] *= a;
        ref_mala(o, Aa, qa, NULL, s);
        ref_lin(o, Wa, qa, NULL, s);
        for (int r = 0; r < nrow; r++) {
            double sp, sd;
            row_stats(Aa + (size_t)r * L, L, &sp, &sd);
            ck_assert_msg(sp > 1.2 * prev_spread[r], "a=%g row %d: MALA spread %.6g not sharper than %.6g", a, r, sp, prev_spread[r]);
            ck_assert_msg(sd > 1.2 * prev_std[r], "a=%g row %d: MALA std %.6g not sharper than %.6g", a, r, sd, prev_std[r]);
            double mx = -1e300, mn = 1e300;
            for (int j = 0; j < L; j++) { mx = fmax(mx, Aa[(size_t)r * L + j]); mn = fmin(mn, Aa[(size_t)r * L + j]); }
            double ratio = mn > 0 ? mx / mn : INFINITY;
            ck_assert_msg(ratio > prev_ratio[r] || isinf(ratio), "a=%g row %d: MALA max/min ratio %.6g not above %.6g",
                          a, r, ratio, prev_ratio[r]);
            prev_spread[r] = sp; prev_std[r] = sd; prev_ratio[r] = ratio;
            for (int j = 0; j < L; j++) {
                double w1 = W1[(size_t)r * L + j], wa = Wa[(size_t)r * L + j];
                ck_assert_msg(fabs(wa - w1) <= 1e-6 * fabs(w1), "a=%g: linear weight %.9g changed to %.9g", a, w1, wa);
            }
        }
        // the kernels agree: linear attention's output is unchanged, MALA's is not
        cpu_linattn_fwd(outa, cache, qa, NULL, s);
        double e = tu_nerr(outa, out1, nout(s), 1e-6);
        ck_assert_msg(e < 1e-6, "a=%g: linear attention output changed by %.3g", a, e);
        cpu_mala_fwd(mouta, mcache, qa, NULL, s);
        e = tu_nerr(mouta, mout1, nout(s), 1e-6);
        ck_assert_msg(e > 1e-2, "a=%g: MALA output did not change (%.3g)", a, e);
    }
    free(qkv); free(qa); free(out1); free(outa); free(cache); free(mcache); free(mout1); free(mouta);
    free(o); free(A1); free(Aa); free(W1); free(Wa);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// The explicit attention row (attn_row, for the viewer)

// The explicit L x L scores [B,heads,L,L] of a kind (the references above) with the q part of qkv
// scaled by a (qkr, when roped, recomputed from the scaled q').
static double *explicit_scores(int kind, int rope, const float *qkv, AttnShape s, float a) {
    float *qa = fnew(nqkv(s)), *qr = rope ? fnew(nqkr(s)) : NULL;
    double *A = dnew((size_t)s.B * s.heads * s.L * s.L), *o = dnew(nout(s));
    memcpy(qa, qkv, sizeof(float) * nqkv(s));
    for (size_t t = 0; t < (size_t)s.B * s.L; t++)
        for (int c = 0; c < s.H; c++) qa[t * 3 * s.H + c] *= a;
    if (rope) cpu_rope_fwd(qr, qa, s);
    if (kind == K_MALA) ref_mala(o, A, qa, qr, s);
    if (kind == K_LIN) ref_lin(o, A, qa, qr, s);
    if (kind == K_SOFT) ref_softmax(o, A, qa, qr, s);
    free(qa); free(qr); free(o);
    return A;
}

static const int ROW_KIND[] = {ATTN_ROW_MALA, ATTN_ROW_LINEAR, ATTN_ROW_SOFTMAX};  // by K_*

// Every row of every head (and the mean over heads) equals the matching row of the explicit
// matrix, for each kind, with and without RoPE, at a = 1 and at scaled queries.
START_TEST(test_attn_row_explicit) {
    AttnShape shapes[] = {shp(2, 3, 3, 16, 2), shp(2, 4, 5, 32, 4)};
    const float scales[] = {1.0f, 0.25f, 3.0f};
    for (size_t si = 0; si < 2; si++) {
        AttnShape s = shapes[si];
        const int L = s.L;
        float *qkv = fnew(nqkv(s)), *qkr = fnew(nqkr(s)), *row = fnew(L);
        for (int kind = K_MALA; kind <= K_SOFT; kind++)
            for (int rope = 0; rope < 2; rope++) {
                if (kind == K_SOFT) fill_qkv(qkv, s, -1.5f, 1.5f, 300 + si);
                else fill_qkv(qkv, s, 0.1f, 2.0f, 300 + si);
                if (rope) cpu_rope_fwd(qkr, qkv, s);
                for (int ai = 0; ai < 3; ai++) {
                    const float a = scales[ai];
                    double *A = explicit_scores(kind, rope, qkv, s, a);
                    for (int b = 0; b < s.B; b++)
                        for (int i = 0; i < L; i += 3)
                            for (int h = -1; h < s.heads; h++) {
                                for (int j = 0; j < L; j++) row[j] = NAN;  // must be overwritten
                                cpu_attn_row(row, qkv, rope ? qkr : NULL, s, ROW_KIND[kind], b, h, i, a);
                                double worst = 0, scale = 1e-6;
                                for (int j = 0; j < L; j++) {
                                    double ref = 0;
                                    for (int hh = (h < 0 ? 0 : h); hh < (h < 0 ? s.heads : h + 1); hh++)
                                        ref += A[(((size_t)b * s.heads + hh) * L + i) * L + j];
                                    if (h < 0) ref /= s.heads;
                                    worst = fmax(worst, fabs(row[j] - ref));
                                    scale = fmax(scale, fabs(ref));
                                }
                                ck_assert_msg(worst / scale < 2e-5,
                                              "kind %d rope %d a %g b %d query %d head %d: row differs from the "
                                              "explicit matrix by %.3g (normalised)", kind, rope, a, b, i, h,
                                              worst / scale);
                            }
                    free(A);
                }
            }
        free(qkv); free(qkr); free(row);
    }
}
END_TEST

static double row_entropy(const float *p, int L) {
    double e = 0;
    for (int j = 0; j < L; j++)
        if (p[j] > 0) e -= p[j] * log(p[j]);
    return e;
}

// MALA rows (no RoPE) sum to 1 at every a; a larger a makes MALA's row sharper (larger spread,
// lower entropy where the row is a distribution) and leaves linear attention's row unchanged.
START_TEST(test_attn_row_properties) {
    AttnShape s = shp(1, 4, 4, 32, 2);
    const int L = s.L;
    float *qkv = fnew(nqkv(s)), *r1 = fnew(L), *ra = fnew(L);
    fill_qkv(qkv, s, 0.1f, 1.5f, 99);
    for (int i = 0; i < L; i++)
        for (int h = -1; h < s.heads; h++) {
            double prev_spread = 0;
            for (float a = 0.25f; a <= 8.0f; a *= 2.0f) {
                cpu_attn_row(ra, qkv, NULL, s, ATTN_ROW_MALA, 0, h, i, a);
                double sum = 0, mx = -1e300, mn = 1e300;
                for (int j = 0; j < L; j++) { sum += ra[j]; mx = fmax(mx, ra[j]); mn = fmin(mn, ra[j]); }
                ck_assert_msg(fabs(sum - 1.0) < 1e-5, "MALA row %d head %d a %g sums to %.9f", i, h, a, sum);
                ck_assert_msg(mx - mn > 1.2 * prev_spread, "MALA row %d head %d: a %g spread %.6g not above %.6g", i,
                              h, a, mx - mn, prev_spread);
                prev_spread = mx - mn;
            }
            cpu_attn_row(r1, qkv, NULL, s, ATTN_ROW_MALA, 0, h, i, 1.0f);
            cpu_attn_row(ra, qkv, NULL, s, ATTN_ROW_MALA, 0, h, i, 2.0f);
            int positive = 1;
            for (int j = 0; j < L; j++) positive &= r1[j] > 0 && ra[j] > 0;
            if (positive)
                ck_assert_msg(row_entropy(ra, L) < row_entropy(r1, L), "MALA row %d head %d: entropy did not drop", i, h);
            for (int rope = 0; rope < 2; rope++) {
                float *qkr = rope ? fnew(nqkr(s)) : NULL;
                if (rope) cpu_rope_fwd(qkr, qkv, s);
                cpu_attn_row(r1, qkv, qkr, s, ATTN_ROW_LINEAR, 0, h, i, 1.0f);
                for (float a = 0.25f; a <= 8.0f; a *= 2.0f) {
                    cpu_attn_row(ra, qkv, qkr, s, ATTN_ROW_LINEAR, 0, h, i, a);
                    for (int j = 0; j < L; j++)
                        ck_assert_msg(fabs(ra[j] - r1[j]) <= 1e-5 * fabs(r1[j]) + 1e-9,
                                      "linear row %d head %d rope %d: a %g changed [%d] %.9g -> %.9g", i, h, rope, a,
                                      j, r1[j], ra[j]);
                }
                free(qkr);
            }
        }
    free(qkv); free(r1); free(ra);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// RoPE

typedef struct { AttnShape s; float *qkv, *qkr, *G; } RopeCtx;
static double rope_loss(void *ctx) {
    RopeCtx *c = ctx;
    cpu_rope_fwd(c->qkr, c->qkv, c->s);
    return tu_dot(c->qkr, c->G, nqkr(c->s));
}

START_TEST(test_rope_grad_and_reference) {
    AttnShape shapes[] = {shp(2, 2, 3, 16, 2), shp(2, 3, 3, 16, 2), shp(1, 3, 4, 24, 2), shp(2, 5, 6, 32, 1),
                          shp(2, 16, 16, 128, 4)};
    const size_t nfd = 4;  // the last shape (parallel path) is checked against the reference only
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        AttnShape s = shapes[k];
        RopeCtx c = {s, fnew(nqkv(s)), fnew(nqkr(s)), fnew(nqkr(s))};
        float *dqkv = fnew(nqkv(s)), *junk = fnew(nqkv(s));
        double *ref = dnew(nqkr(s));
        tu_fill(c.qkv, nqkv(s), -1.0f, 1.0f, 50 + k);
        tu_fill(c.G, nqkr(s), -1.0f, 1.0f, 60 + k);
        tu_fill(junk, nqkv(s), -2.0f, 2.0f, 70 + k);
        cpu_rope_fwd(c.qkr, c.qkv, s);
        ref_rope(ref, c.qkv, s);
        double e = nerr_fd(c.qkr, ref, nqkr(s));
        ck_assert_msg(e < 1e-5, "rope shape %zu: normalised error %.3g vs reference", k, e);
        memcpy(dqkv, junk, sizeof(float) * nqkv(s));
        cpu_rope_bwd(dqkv, c.G, s);
        for (size_t i = 0; i < nqkv(s); i++) {
            if (i % (3 * s.H) >= (size_t)2 * s.H) ck_assert_msg(dqkv[i] == junk[i], "rope_bwd touched the v part");
            dqkv[i] -= junk[i];
        }
        if (k < nfd) tu_fd_check("rope d/dqkv", c.qkv, nqkv(s), dqkv, rope_loss, &c, 1e-2f, 2e-4, 2e-3, 1000);
        free(c.qkv); free(c.qkr); free(c.G); free(dqkv); free(junk); free(ref);
    }
}
END_TEST

// q.k after rotation depends only on the offset between the two tokens, and rotation keeps norms.
// The fused elu1 + RoPE pass gives the bits of the two ops in turn: qkv's q, k in place and qkr.
START_TEST(test_elu1_rope_fused) {
    AttnShape s = shp(2, 6, 7, 48, 3);
    const size_t nv = nqkv(s), nr = nqkr(s);
    float *a = fnew(nv), *b = fnew(nv), *ra = fnew(nr), *rb = fnew(nr);
    tu_fill(a, nv, -3.0f, 3.0f, 95);
    memcpy(b, a, nv * sizeof(float));
    cpu_elu1_fwd(a, s.B * s.L, 2 * s.H, 3 * s.H);
    cpu_rope_fwd(ra, a, s);
    cpu_elu1_rope_fwd(rb, b, s);
    ck_assert_msg(!memcmp(a, b, nv * sizeof(float)), "elu1_rope_fwd: qkv differs from elu1_fwd's");
    ck_assert_msg(!memcmp(ra, rb, nr * sizeof(float)), "elu1_rope_fwd: qkr differs from rope_fwd's");
    free(a); free(b); free(ra); free(rb);
}
END_TEST

START_TEST(test_rope_properties) {
    AttnShape s = shp(1, 6, 7, 32, 2);
    const int H = s.H, d = H / s.heads;
    float *qkv = fnew(nqkv(s)), *qkr = fnew(nqkr(s)), *a = fnew(H), *bb = fnew(H);
    tu_fill(a, H, -1.0f, 1.0f, 90);
    tu_fill(bb, H, -1.0f, 1.0f, 91);
    // q at (r1,c1) and (r1+dr, c1+dc); k at (r2,c2) and (r2+dr, c2+dc); plus k at an unrelated spot.
    const int r1 = 0, c1 = 1, r2 = 2, c2 = 4, dr = 3, dc = 2, r3 = 5, c3 = 0;
    const int tq1 = r1 * s.gw + c1, tq2 = (r1 + dr) * s.gw + c1 + dc;
    const int tk1 = r2 * s.gw + c2, tk2 = (r2 + dr) * s.gw + c2 + dc, tk3 = r3 * s.gw + c3;
    memcpy(qkv + (size_t)tq1 * 3 * H, a, sizeof(float) * H);
    memcpy(qkv + (size_t)tq2 * 3 * H, a, sizeof(float) * H);
    memcpy(qkv + (size_t)tk1 * 3 * H + H, bb, sizeof(float) * H);
    memcpy(qkv + (size_t)tk2 * 3 * H + H, bb, sizeof(float) * H);
    memcpy(qkv + (size_t)tk3 * 3 * H + H, bb, sizeof(float) * H);
    cpu_rope_fwd(qkr, qkv, s);
    for (int h = 0; h < s.heads; h++) {
        const float *q1 = qkr + (size_t)tq1 * 2 * H + h * d, *q2 = qkr + (size_t)tq2 * 2 * H + h * d;
        const float *k1 = qkr + (size_t)tk1 * 2 * H + H + h * d, *k2 = qkr + (size_t)tk2 * 2 * H + H + h * d;
        const float *k3 = qkr + (size_t)tk3 * 2 * H + H + h * d;
        double d1 = ddot(q1, k1, d), d2 = ddot(q2, k2, d), d3 = ddot(q1, k3, d), d0 = ddot(a + h * d, bb + h * d, d);
        ck_assert_msg(fabs(d1 - d2) < 1e-5, "head %d: q.k at same offset %.8f vs %.8f", h, d1, d2);
        ck_assert_msg(fabs(d1 - d3) > 1e-3, "head %d: different offsets give the same q.k (%.6f)", h, d1);
        ck_assert_msg(fabs(d1 - d0) > 1e-3, "head %d: rotation had no effect (%.6f)", h, d1);
    }
    // norm preservation, per head and per pair, on random data
    tu_fill(qkv, nqkv(s), -2.0f, 2.0f, 92);
    cpu_rope_fwd(qkr, qkv, s);
    for (int l = 0; l < s.L; l++)
        for (int part = 0; part < 2; part++)
            for (int c = 0; c < H; c += 2) {
                const float *x = qkv + (size_t)l * 3 * H + part * H + c, *y = qkr + (size_t)l * 2 * H + part * H + c;
                double n0 = x[0] * (double)x[0] + x[1] * (double)x[1], n1 = y[0] * (double)y[0] + y[1] * (double)y[1];
                ck_assert_msg(fabs(n0 - n1) <= 1e-5 * fmax(n0, 1e-3), "token %d ch %d: norm %.8f -> %.8f", l, c, n0, n1);
            }
    free(qkv); free(qkr); free(a); free(bb);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// The depthwise conv: LePE's (on the v part of qkv, ldx = 3H) and DiG's (on plain activations)

typedef struct { AttnShape s; int k, ldx, x0; float *qkv, *w, *b, *out, *base, *G; } LepeCtx;
static double lepe_loss(void *ctx) {
    LepeCtx *c = ctx;
    memcpy(c->out, c->base, sizeof(float) * nout(c->s));
    cpu_dwconv_fwd(c->out, c->qkv + c->x0, c->ldx, c->w, c->b, c->k, c->s.B, c->s.gh, c->s.gw, c->s.H);
    return tu_dot(c->out, c->G, nout(c->s));
}

// plain = 0: x is the v part of qkv (LePE); plain = 1: x is a [B, L, H + 3] buffer's first H
// channels (DiG's conv after a block, with a row stride above H to show it is honoured).
static void check_lepe(AttnShape s, int k, uint64_t seed, int do_fd, int plain) {
    const int H = s.H, kk = k * k;
    const int ldx = plain ? H + 3 : 3 * H, x0 = plain ? 0 : 2 * H;
    const size_t nx = (size_t)s.B * s.L * ldx;
    LepeCtx c = {s, k, ldx, x0, fnew(nx), fnew((size_t)H * kk), fnew(H), fnew(nout(s)), fnew(nout(s)), fnew(nout(s))};
    tu_fill(c.qkv, nx, -1.0f, 1.0f, seed);
    tu_fill(c.w, (size_t)H * kk, -0.5f, 0.5f, seed + 1);
    tu_fill(c.b, H, -0.5f, 0.5f, seed + 2);
    tu_fill(c.base, nout(s), -1.0f, 1.0f, seed + 3);
    tu_fill(c.G, nout(s), -1.0f, 1.0f, seed + 4);
    // forward adds onto out
    double *ref = dnew(nout(s));
    lepe_loss(&c);
    ref_dwconv(ref, c.qkv + x0, ldx, c.w, c.b, k, s);
    for (size_t i = 0; i < nout(s); i++) ref[i] += c.base[i];
    double e = nerr_fd(c.out, ref, nout(s));
    ck_assert_msg(e < 1e-5, "dwconv k=%d %dx%d H%d ldx %d: normalised error %.3g vs reference", k, s.gh, s.gw, H, ldx, e);
    // backward adds onto junk
    float *dqkv = fnew(nx), *dw = fnew((size_t)H * kk), *db = fnew(H);
    float *j1 = fnew(nx), *j2 = fnew((size_t)H * kk), *j3 = fnew(H);
    tu_fill(j1, nx, -2.0f, 2.0f, seed + 5);
    tu_fill(j2, (size_t)H * kk, -2.0f, 2.0f, seed + 6);
    tu_fill(j3, H, -2.0f, 2.0f, seed + 7);
    memcpy(dqkv, j1, sizeof(float) * nx);
    memcpy(dw, j2, sizeof(float) * H * kk);
    memcpy(db, j3, sizeof(float) * H);
    cpu_dwconv_bwd(dqkv + x0, dw, db, c.G, c.qkv + x0, ldx, c.w, k, s.B, s.gh, s.gw, H);
    for (size_t i = 0; i < nx; i++) {
        const size_t col = i % (size_t)ldx;
        if (col < (size_t)x0 || col >= (size_t)x0 + H)
            ck_assert_msg(dqkv[i] == j1[i], "dwconv_bwd touched channels outside x (column %zu)", col);
        dqkv[i] -= j1[i];
    }
    for (size_t i = 0; i < (size_t)H * kk; i++) dw[i] -= j2[i];
    for (int i = 0; i < H; i++) db[i] -= j3[i];
    if (do_fd) {
        tu_fd_check("dwconv d/dx", c.qkv, nx, dqkv, lepe_loss, &c, 1e-2f, 2e-4, 2e-3, 100000);
        tu_fd_check("dwconv d/dw", c.w, (size_t)H * kk, dw, lepe_loss, &c, 1e-2f, 2e-4, 2e-3, 100000);
        tu_fd_check("dwconv d/db", c.b, H, db, lepe_loss, &c, 1e-2f, 2e-4, 2e-3, 100000);
    } else {
        // larger shapes: adjoint identities against the double reference (the conv is bilinear
        // in v and w: <G, conv(v, w) + b> = <dv, v> + <db, b> = <dw, w> + <db, b>)
        double lhs = 0;
        ref_dwconv(ref, c.qkv + x0, ldx, c.w, c.b, k, s);
        for (size_t i = 0; i < nout(s); i++) lhs += ref[i] * c.G[i];
        double bias_part = tu_dot(db, c.b, H);
        double via_v = tu_dot(dqkv, c.qkv, nx) + bias_part, via_w = tu_dot(dw, c.w, (size_t)H * kk) + bias_part;
        ck_assert_msg(fabs(lhs - via_v) <= 1e-4 * fmax(1.0, fabs(lhs)), "dwconv adjoint (dx) %.8g vs %.8g", via_v, lhs);
        ck_assert_msg(fabs(lhs - via_w) <= 1e-4 * fmax(1.0, fabs(lhs)), "dwconv adjoint (dw) %.8g vs %.8g", via_w, lhs);
    }
    // NULL gradients are allowed
    cpu_dwconv_bwd(NULL, dw, NULL, c.G, c.qkv + x0, ldx, c.w, k, s.B, s.gh, s.gw, H);
    cpu_dwconv_bwd(dqkv + x0, NULL, NULL, c.G, c.qkv + x0, ldx, c.w, k, s.B, s.gh, s.gw, H);
    free(c.qkv); free(c.w); free(c.b); free(c.out); free(c.base); free(c.G); free(ref);
    free(dqkv); free(dw); free(db); free(j1); free(j2); free(j3);
}

START_TEST(test_dwconv) {
    for (int plain = 0; plain < 2; plain++) {
        check_lepe(shp(2, 2, 3, 16, 2), 3, 200, 1, plain);
        check_lepe(shp(2, 3, 3, 16, 2), 3, 210, 1, plain);
        check_lepe(shp(2, 2, 3, 16, 2), 5, 220, 1, plain);
        check_lepe(shp(2, 3, 3, 16, 2), 5, 230, 1, plain);
        check_lepe(shp(3, 7, 9, 80, 4), 5, 240, 0, plain);  // channel blocks 32 + 32 + 16, grid larger than k
        check_lepe(shp(2, 8, 8, 40, 4), 3, 250, 0, plain);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// phi = ELU + 1 on strided rows

typedef struct { float *x, *y, *G; int rows, cols, ld; } EluCtx;
static double elu_loss(void *ctx) {
    EluCtx *c = ctx;
    size_t n = (size_t)c->rows * c->ld;
    memcpy(c->y, c->x, sizeof(float) * n);
    cpu_elu1_fwd(c->y, c->rows, c->cols, c->ld);
    double l = 0;
    for (int r = 0; r < c->rows; r++)
        for (int j = 0; j < c->cols; j++) l += (double)c->y[r * c->ld + j] * c->G[r * c->ld + j];
    return l;
}

START_TEST(test_elu1) {
    const int rows = 7, cols = 9, ld = 13;
    const size_t n = (size_t)rows * ld;
    EluCtx c = {fnew(n), fnew(n), fnew(n), rows, cols, ld};
    tu_fill(c.x, n, 0.2f, 2.0f, 300);
    for (size_t i = 0; i < n; i += 2) c.x[i] = -c.x[i];  // |x| >= 0.2: away from the kink
    tu_fill(c.G, n, -1.0f, 1.0f, 301);
    elu_loss(&c);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++) {
            float x = c.x[r * ld + j], y = c.y[r * ld + j];
            if (j >= cols) ck_assert_msg(y == x, "elu1_fwd wrote past cols");
            else ck_assert_msg(fabs(y - (x > 0 ? x + 1.0 : exp((double)x))) < 1e-6, "elu1(%g) = %g", x, y);
        }
    float *g = fnew(n);
    memcpy(g, c.G, sizeof(float) * n);
    cpu_elu1_bwd(g, c.y, rows, cols, ld);
    for (int r = 0; r < rows; r++)
        for (int j = cols; j < ld; j++) ck_assert_msg(g[r * ld + j] == c.G[r * ld + j], "elu1_bwd wrote past cols");
    for (int r = 0; r < rows; r++)
        for (int j = cols; j < ld; j++) g[r * ld + j] = 0.0f;  // not part of the loss
    tu_fd_check("elu1 d/dx", c.x, n, g, elu_loss, &c, 1e-3f, 1e-4, 1e-3, 100000);
    free(c.x); free(c.y); free(c.G); free(g);
}
END_TEST

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Threading: shapes big enough for the parallel paths give the same results on 1 and 3 threads
// (the small FD shapes run on the calling thread).

typedef struct { float *out[8]; size_t n[8]; int count; } Outs;

static void run_all_ops(Outs *o, AttnShape s, int k) {
    const int H = s.H;
    float *qkv = fnew(nqkv(s)), *qkr = fnew(nqkr(s)), *G = fnew(nout(s)), *Gr = fnew(nqkr(s));
    float *w = fnew((size_t)H * k * k), *bias = fnew(H);
    fill_qkv(qkv, s, 0.1f, 1.5f, 500);
    tu_fill(G, nout(s), -1.0f, 1.0f, 501);
    tu_fill(Gr, nqkr(s), -1.0f, 1.0f, 502);
    tu_fill(w, (size_t)H * k * k, -0.3f, 0.3f, 503);
    tu_fill(bias, H, -0.3f, 0.3f, 504);
    int c = 0;
    // rope + each attention kind, forward and backward
    o->n[c] = nqkr(s); o->out[c] = fnew(o->n[c]); cpu_rope_fwd(o->out[c], qkv, s);
    memcpy(qkr, o->out[c], sizeof(float) * nqkr(s)); c++;
    o->n[c] = nqkv(s); o->out[c] = fnew(o->n[c]); cpu_rope_bwd(o->out[c], Gr, s); c++;
    for (int kind = K_MALA; kind <= K_SOFT; kind++) {
        float *cache = fnew(cache_floats(kind, s)), *dqkr = fnew(nqkr(s));
        float *out = o->out[c] = fnew(o->n[c] = nout(s)); c++;
        float *dqkv = o->out[c] = fnew(o->n[c] = nqkv(s)); c++;
        if (kind == K_MALA) { cpu_mala_fwd(out, cache, qkv, qkr, s); cpu_mala_bwd(dqkv, dqkr, G, qkv, qkr, cache, s); }
        if (kind == K_LIN) { cpu_linattn_fwd(out, cache, qkv, qkr, s); cpu_linattn_bwd(dqkv, dqkr, G, qkv, qkr, cache, s); }
        if (kind == K_SOFT) { cpu_softmax_fwd(out, cache, qkv, qkr, s); cpu_softmax_bwd(dqkv, dqkr, G, qkv, qkr, cache, s); }
        cpu_rope_bwd(dqkv, dqkr, s);
        free(cache); free(dqkr);
    }
    o->count = c;
    free(qkv); free(qkr); free(G); free(Gr); free(w); free(bias);
}

static void run_lepe_elu(Outs *o, AttnShape s, int k) {
    const int H = s.H, kk = k * k;
    float *qkv = fnew(nqkv(s)), *G = fnew(nout(s)), *w = fnew((size_t)H * kk), *bias = fnew(H);
    tu_fill(qkv, nqkv(s), -1.0f, 1.0f, 510);
    tu_fill(G, nout(s), -1.0f, 1.0f, 511);
    tu_fill(w, (size_t)H * kk, -0.3f, 0.3f, 512);
    tu_fill(bias, H, -0.3f, 0.3f, 513);
    int c = 0;
    float *out = o->out[c] = fnew(o->n[c] = nout(s)); c++;
    cpu_dwconv_fwd(out, qkv + 2 * H, 3 * H, w, bias, k, s.B, s.gh, s.gw, H);
    float *dq = o->out[c] = fnew(o->n[c] = nqkv(s)); c++;
    float *dw = o->out[c] = fnew(o->n[c] = (size_t)H * kk); c++;
    float *db = o->out[c] = fnew(o->n[c] = H); c++;
    cpu_dwconv_bwd(dq + 2 * H, dw, db, G, qkv + 2 * H, 3 * H, w, k, s.B, s.gh, s.gw, H);
    float *y = o->out[c] = fnew(o->n[c] = nqkv(s)); c++;
    memcpy(y, qkv, sizeof(float) * nqkv(s));
    cpu_elu1_fwd(y, s.B * s.L, 2 * H, 3 * H);
    float *g = o->out[c] = fnew(o->n[c] = nqkv(s)); c++;
    tu_fill(g, nqkv(s), -1.0f, 1.0f, 514);
    cpu_elu1_bwd(g, y, s.B * s.L, 2 * H, 3 * H);
    o->count = c;
    free(qkv); free(G); free(w); free(bias);
}

START_TEST(test_threads_consistent) {
    AttnShape s = shp(2, 12, 12, 64, 2);
    for (int which = 0; which < 2; which++) {
        Outs a = {0}, b = {0};
        omp_set_num_threads(1);
        if (which == 0) run_all_ops(&a, s, 5); else run_lepe_elu(&a, s, 5);
        omp_set_num_threads(3);
        if (which == 0) run_all_ops(&b, s, 5); else run_lepe_elu(&b, s, 5);
        ck_assert_int_eq(a.count, b.count);
        for (int i = 0; i < a.count; i++) {
            double e = tu_nerr(b.out[i], a.out[i], a.n[i], 1e-3);
            ck_assert_msg(e < 1e-5, "set %d output %d: 1 vs 3 threads differ by %.3g", which, i, e);
            free(a.out[i]); free(b.out[i]);
        }
    }
}
END_TEST

// One TCase per test, so a single one can be run with CK_RUN_CASE=<name>.
#define ADD(fn) do { TCase *tc = tcase_create(#fn); tcase_set_timeout(tc, 60); tcase_add_test(tc, fn); \
    suite_add_tcase(s, tc); } while (0)
static Suite *attn_suite(void) {
    Suite *s = suite_create("ops_attn");
    ADD(test_elu1);
    ADD(test_rope_grad_and_reference);
    ADD(test_rope_properties);
    ADD(test_elu1_rope_fused);
    ADD(test_mala_grad);
    ADD(test_linattn_grad);
    ADD(test_softmax_grad);
    ADD(test_null_grads);
    ADD(test_attn_reference);
    ADD(test_mala_rows_sum_to_one);
    ADD(test_scaling_property);
    ADD(test_attn_row_explicit);
    ADD(test_attn_row_properties);
    ADD(test_dwconv);
    ADD(test_threads_consistent);
    return s;
}

int main(void) { return tu_run(attn_suite()); }

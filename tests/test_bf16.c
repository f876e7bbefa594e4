// --precision bf16 on the CPU (cpu/cpu_bf16.h, cpu_gemm.h): the rounding, the
// products and convolutions against references, the weights' bf16 shadows, a tiny DiT and DiC
// forward and training steps against fp32, and the refusal where bf16 cannot run.
//
// Tolerances. bf16 keeps 8 significant bits: rounding to nearest makes a relative error of at
// most u = 2^-8 per input, so a product of two rounded inputs is within 2u + u^2 of the exact one.
// - Against a double reference on the bf16-ROUNDED inputs, only the fp32 accumulation is left:
//   each value within 4 (K + 2) 2^-24 of its sum of |terms| (test_cpu_gemm.c's fp32 bound). This
//   checks that the inputs are rounded to nearest even and the sums are fp32 (fp32 inputs fail it).
// - Against the double reference on the fp32 inputs: within (2u + u^2 + 4 (K + 2) 2^-24) of the
//   sum of |terms|, the worst case of the rounding.
// - Networks (many products in a row, errors compound): the bf16 output against the fp32 output
//   within 5% of the output's largest value (observed 0.2-0.4% on these tiny nets), and training
//   losses within 2% over three steps (observed 1e-5: the first step's output layer is zero).
// Without oneDNN in the build the bf16 cases print a note and check only the refusal.
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/backend.h"
#include "model/checkpoint.h"
#include "core/conv_plan.h"
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_gemm.h"
#include "model/net.h"
#include "testutil.h"
#include "conv_ref.h"
#include "train/trainer.h"

#define EPS24 5.9604645e-8  // 2^-24
#define U_BF16 (1.0 / 256)  // 2^-8
#define TOL_NET 5e-2
#define TOL_LOSS 2e-2

static void *owned[64];
static int nowned;
static void *own(void *p) { ck_assert(nowned < 64); owned[nowned++] = p; return p; }
static void free_owned(void) { while (nowned) free(owned[--nowned]); }
static float *rnd(size_t n, uint64_t seed) {
    float *x = own(malloc((n ? n : 1) * sizeof(float)));
    tu_fill(x, n, -1, 1, seed);
    return x;
}

static float bf(float f) {
    const uint32_t u = (uint32_t)cpu_bf16_round(f) << 16;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static float *rounded(const float *x, size_t n) {
    float *r = own(malloc((n ? n : 1) * sizeof(float)));
    for (size_t i = 0; i < n; i++) r[i] = bf(x[i]);
    return r;
}

// bf16 on (1), or a note and 0 where this build cannot (no oneDNN).
static int bf16_on(const char *what) {
    if (!cpu_gemm_select(GEMM_DNNL, CONV_DNNL) || !cpu_gemm_set_precision(GEMM_BF16)) {
        printf("  %s: skipped, this build has no oneDNN (bf16 is refused; see test_refused)\n", what);
        return 0;
    }
    return 1;
}

static void check_both(const char *what, const float *got, const double *ref_r, const double *mag_r,
                       const double *ref, const double *mag, size_t n, int K) {
    double worst_r = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        const double acc = 4.0 * (K + 2) * EPS24, tr = acc * mag_r[i] + 1e-30;
        const double t = (2 * U_BF16 + U_BF16 * U_BF16 + acc) * mag[i] + 1e-30;
        ck_assert_msg(fabs(got[i] - ref_r[i]) <= tr, "%s [%zu]: %.9g, reference on bf16 inputs %.9g (tolerance %.3g)",
                      what, i, (double)got[i], ref_r[i], tr);
        ck_assert_msg(fabs(got[i] - ref[i]) <= t, "%s [%zu]: %.9g, fp32 reference %.9g (tolerance %.3g)", what, i,
                      (double)got[i], ref[i], t);
        worst_r = fmax(worst_r, fabs(got[i] - ref_r[i]) / (mag_r[i] + 1e-30));
        worst = fmax(worst, fabs(got[i] - ref[i]) / (mag[i] + 1e-30));
    }
    printf("  %-40s err/sum|terms|: %.2e on bf16 inputs, %.2e against fp32 (bound %.2e)\n", what, worst_r, worst,
           2 * U_BF16 + U_BF16 * U_BF16);
}

START_TEST(test_round_nearest_even) {
    const struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80},  // 1 + 2^-8: a tie, to the even 1
        {0x3f818000u, 0x3f82}, {0x3f808001u, 0x3f81},  // a tie up to even; just above a tie
        {0x3f807fffu, 0x3f80}, {0xbf818000u, 0xbf82},  // just below a tie; negative tie
        {0x7f7fffffu, 0x7f80}, {0x7f800000u, 0x7f80},  // FLT_MAX rounds to inf; inf stays
        {0x00000001u, 0x0000}, {0x80000000u, 0x8000},  // the smallest denormal; -0
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        float f;
        memcpy(&f, &cases[i].in, sizeof f);
        ck_assert_msg(cpu_bf16_round(f) == cases[i].out, "bf16(0x%08x) = 0x%04x, expected 0x%04x", cases[i].in,
                      cpu_bf16_round(f), cases[i].out);
    }
    const float nan = NAN;
    const uint16_t q = cpu_bf16_round(nan);
    ck_assert((q & 0x7f80) == 0x7f80 && (q & 0x7f));  // a NaN stays a NaN
}
END_TEST

// ---- products ----

typedef struct {
    int ta, tb, M, N, K, pad, weight;
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
            const double c0 = C0[(size_t)i * ldc + j];
            ref[(size_t)i * g->N + j] = g->alpha * s + g->beta * c0;
            mag[(size_t)i * g->N + j] = fabs(g->alpha) * m + fabs(g->beta * c0);
        }
}

static void gemm_case(const Gemm *g, uint64_t seed) {
    const int ar = g->ta ? g->K : g->M, ac = g->ta ? g->M : g->K, br = g->tb ? g->N : g->K, bc = g->tb ? g->K : g->N;
    const int lda = ac + g->pad, ldb = bc + g->pad, ldc = g->N + g->pad;
    const size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)g->M * ldc, n = (size_t)g->M * g->N;
    float *A = rnd(na, seed), *B = rnd(nb, seed + 1), *C = rnd(nc, seed + 2), *C0 = own(malloc(nc * 4));
    memcpy(C0, C, nc * 4);
    double *ref = own(malloc(n * 8)), *mag = own(malloc(n * 8)), *rr = own(malloc(n * 8)), *mr = own(malloc(n * 8));
    gemm_ref(g, A, lda, B, ldb, C0, ldc, ref, mag);
    gemm_ref(g, rounded(A, na), lda, rounded(B, nb), ldb, C0, ldc, rr, mr);
    (g->weight ? cpu_sgemm_wt : cpu_sgemm)(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, lda, B, ldb, g->beta, C, ldc);
    float *got = own(malloc(n * 4));
    for (int i = 0; i < g->M; i++) memcpy(got + (size_t)i * g->N, C + (size_t)i * ldc, (size_t)g->N * 4);
    char what[96];
    snprintf(what, sizeof what, "gemm %c%c %dx%dx%d pad %d a %g b %g%s", g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->M,
             g->N, g->K, g->pad, g->alpha, g->beta, g->weight ? " wt" : "");
    check_both(what, got, rr, mr, ref, mag, n, g->K);
    cpu_bf16_forget(B, nb * 4);
    free_owned();
}

static const Gemm GEMMS[] = {
    {0, 1, 64, 48, 96, 0, 1, 1, 0},  {0, 0, 33, 40, 70, 0, 1, 1, 1},  {1, 0, 40, 24, 130, 0, 0, 1, 1},
    {0, 0, 17, 9, 300, 3, 0, 1, 0},  {1, 1, 20, 31, 45, 2, 0, 0.5f, 0.25f}, {0, 1, 128, 64, 256, 0, 1, 1, 1},
};

START_TEST(test_gemm) {
    if (!bf16_on("bf16 products")) return;
    for (size_t i = 0; i < sizeof GEMMS / sizeof *GEMMS; i++) gemm_case(&GEMMS[i], 100 + 10 * i);
    cpu_gemm_set_precision(GEMM_F32);
}
END_TEST

// The attention's products run inside OpenMP regions, one thread each, with per-thread buffers.
START_TEST(test_gemm_in_region) {
    if (!bf16_on("bf16 products in a parallel region")) return;
    const int T = 4, M = 24, N = 16, K = 80;
    float *A = rnd((size_t)T * M * K, 1), *B = rnd((size_t)T * K * N, 2), *C = own(calloc((size_t)T * M * N, 4));
    #pragma omp parallel for num_threads(2)
    for (int t = 0; t < T; t++)
        cpu_sgemm(0, 0, M, N, K, 1, A + (size_t)t * M * K, K, B + (size_t)t * K * N, N, 0, C + (size_t)t * M * N, N);
    for (int t = 0; t < T; t++) {
        double *ref = own(malloc((size_t)M * N * 8)), *mag = own(malloc((size_t)M * N * 8));
        const Gemm g = {0, 0, M, N, K, 0, 0, 1, 0};
        float *zero = own(calloc((size_t)M * N, 4));
        gemm_ref(&g, rounded(A + (size_t)t * M * K, (size_t)M * K), K, rounded(B + (size_t)t * K * N, (size_t)K * N),
                 N, zero, N, ref, mag);
        for (int i = 0; i < M * N; i++)
            ck_assert_msg(fabs(C[(size_t)t * M * N + i] - ref[i]) <= 4.0 * (K + 2) * EPS24 * mag[i] + 1e-30,
                          "region product %d [%d]: %g vs %g", t, i, C[(size_t)t * M * N + i], ref[i]);
    }
    cpu_gemm_set_precision(GEMM_F32);
}
END_TEST

// A linear layer's W is converted once and reused until the weights generation moves: an optimiser
// step (adamw), or weights_changed after a load. The output must follow the new weights (a stale
// shadow fails here), and a second product without a change must not convert again.
START_TEST(test_weights_shadow_refresh) {
    if (!bf16_on("bf16 weight shadows")) return;
    const Backend *be = backend_select("cpu", "bf16");
    ck_assert_str_eq(be->precision(), "bf16");
    const int N = 16, I = 64, O = 32;
    float *w = be->alloc((size_t)O * I * 4), *x = rnd((size_t)N * I, 7), *out = own(malloc((size_t)N * O * 4));
    float *g = rnd((size_t)O * I, 8), *m = own(calloc((size_t)O * I, 4)), *v = own(calloc((size_t)O * I, 4));
    tu_fill(w, (size_t)O * I, -1, 1, 9);
    be->weights_changed();
    for (int round = 0; round < 4; round++) {
        if (round == 1) be->adamw(w, g, m, v, (size_t)O * I, 0.05f, 0.9f, 0.999f, 1e-8f, 0.0f, 1);  // the optimiser
        if (round == 2) tu_fill(w, (size_t)O * I, -1, 1, 10), be->weights_changed();                 // a load
        if (round == 3) be->ema(w, g, (size_t)O * I, 0.5f);                                           // an EMA update
        const uint64_t f0 = cpu_bf16_shadow_fills();
        be->linear_fwd(out, x, w, NULL, N, I, O);
        ck_assert_msg(cpu_bf16_shadow_fills() == f0 + 1, "round %d: W converted %d times, not once", round,
                      (int)(cpu_bf16_shadow_fills() - f0));
        be->linear_fwd(out, x, w, NULL, N, I, O);
        ck_assert_msg(cpu_bf16_shadow_fills() == f0 + 1, "round %d: W converted again without a change", round);
        const float *wr = rounded(w, (size_t)O * I), *xr = rounded(x, (size_t)N * I);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++) {
                double s = 0, mg = 0;
                for (int i = 0; i < I; i++) {
                    const double t = (double)xr[(size_t)n * I + i] * wr[(size_t)o * I + i];
                    s += t, mg += fabs(t);
                }
                ck_assert_msg(fabs(out[(size_t)n * O + o] - s) <= 4.0 * (I + 2) * EPS24 * mg,
                              "round %d: out[%d,%d] = %.7g, expected %.7g from the current weights (stale bf16 copy?)",
                              round, n, o, out[(size_t)n * O + o], s);
            }
    }
    be->release(w);
    be->set_precision(1);
}
END_TEST

// ---- convolutions ----

static const ConvShape CONVS[] = {
    {2, 8, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1},   // 3x3, pad 1
    {3, 16, 7, 9, 8, 3, 3, 2, 1, 0, 1, 0},   // stride 2, uneven padding
    {2, 32, 6, 6, 16, 1, 1, 1, 0, 0, 0, 0},  // 1x1
};

static void conv_case(ConvShape s, int k) {
    const Backend *be = backend_cpu();
    const int Ho = conv_out_h(s), Wo = conv_out_w(s);
    const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * s.kh * s.kw;
    const size_t no = (size_t)s.B * s.Cout * Ho * Wo;
    float *x = rnd(nx, 10 + k), *w = be->alloc(nw * 4), *bias = rnd(s.Cout, 30 + k), *G = rnd(no, 40 + k);
    tu_fill(w, nw, -1, 1, 20 + k);
    be->weights_changed();
    float *dx = own(calloc(nx, 4)), *dw = own(calloc(nw, 4)), *out = own(malloc(no * 4));
    double *r[6], *q[6];
    const size_t len[3] = {no, nx, nw};
    for (int i = 0; i < 3; i++)
        r[i] = own(malloc(len[i] * 8)), r[i + 3] = own(malloc(len[i] * 8)), q[i] = own(malloc(len[i] * 8)),
        q[i + 3] = own(malloc(len[i] * 8));
    conv_ref(s, x, w, bias, G, NULL, NULL, r[0], r[3], r[1], r[4], r[2], r[5]);  // (value, |terms|) of out, dx, dw
    conv_ref(s, rounded(x, nx), rounded(w, nw), bias, rounded(G, no), NULL, NULL, q[0], q[3], q[1], q[4], q[2],
             q[5]);
    const size_t nwork = be->conv2d_workspace_floats(s);
    float *work = own(calloc(nwork ? nwork : 1, sizeof(float)));
    be->conv2d_fwd(out, x, w, bias, s, work, nwork);
    be->conv2d_bwd(dx, dw, NULL, G, x, w, s, work, nwork);
    char what[96];
    const int taps = s.B * Ho * Wo;
    snprintf(what, sizeof what, "conv %d out", k);
    check_both(what, out, q[0], q[3], r[0], r[3], no, s.Cin * s.kh * s.kw + 1);
    snprintf(what, sizeof what, "conv %d dx", k);
    check_both(what, dx, q[1], q[4], r[1], r[4], nx, s.Cout * s.kh * s.kw + 1);
    snprintf(what, sizeof what, "conv %d dw", k);
    check_both(what, dw, q[2], q[5], r[2], r[5], nw, taps + 1);
    // new weights (a load): the forward follows them
    tu_fill(w, nw, -1, 1, 25 + k);
    be->weights_changed();
    conv_ref(s, rounded(x, nx), rounded(w, nw), bias, rounded(G, no), NULL, NULL, q[0], q[3], q[1], q[4], q[2],
             q[5]);
    conv_ref(s, x, w, bias, G, NULL, NULL, r[0], r[3], r[1], r[4], r[2], r[5]);
    be->conv2d_fwd(out, x, w, bias, s, work, nwork);
    snprintf(what, sizeof what, "conv %d out, new weights", k);
    check_both(what, out, q[0], q[3], r[0], r[3], no, s.Cin * s.kh * s.kw + 1);
    be->release(w);
    free_owned();
}

START_TEST(test_conv) {
    if (!bf16_on("bf16 convolutions")) return;
    for (int blocked = 1; blocked >= 0; blocked--) {
        cpu_dnnl_conv_blocked(blocked);
        printf("  oneDNN %s layouts:\n", blocked ? "blocked" : "NCHW");
        for (size_t k = 0; k < sizeof CONVS / sizeof *CONVS; k++) conv_case(CONVS[k], (int)k);
    }
    cpu_dnnl_conv_blocked(1);
    cpu_gemm_select(-1, CONV_IM2COL);  // im2col: its products are bf16 too
    ck_assert_str_eq(cpu_conv_name(), "im2col");
    printf("  im2col + bf16 products:\n");
    for (size_t k = 0; k < sizeof CONVS / sizeof *CONVS; k++) conv_case(CONVS[k], (int)k);
    cpu_gemm_select(-1, CONV_DNNL);
    cpu_gemm_set_precision(GEMM_F32);
}
END_TEST

// ---- networks ----

static void net_config(NetConfig *c, int dic) {
    if (dic) {
        net_config_default(c, BACKBONE_DIC);
        c->dic.hidden = 16;
        for (int s = 0; s < 5; s++) c->dic.depths[s] = 1;
    } else {
        net_config_default(c, BACKBONE_DIT);
        c->dit.depth = 2; c->dit.hidden = 64; c->dit.heads = 2; c->dit.patch = 2;
        dit_config_attn_defaults(&c->dit, ATTN_MALA);
    }
    c->image_size = 16; c->in_channels = 2; c->num_classes = 5;
}

// The forward in bf16 against fp32, same weights, same process.
START_TEST(test_net_forward) {
    if (!bf16_on("bf16 network forward")) return;
    const int dic = _i, B = 3;
    NetConfig c;
    net_config(&c, dic);
    const Backend *be = backend_select("cpu", "fp32");
    Net *n = net_create(&c, be, B, NET_INFER);
    net_init_weights(n, 11);
    // (DiT's init zeroes the output layer and the adaLN gates: random weights exercise every product)
    tu_fill(n->w, n->n_floats, -0.1f, 0.1f, 12);
    be->weights_changed();
    const size_t img = (size_t)B * c.in_channels * c.image_size * c.image_size;
    const size_t outn = (size_t)B * n->out_channels * c.image_size * c.image_size;
    float *x = rnd(img, 13), *f32 = own(malloc(outn * 4)), *b16 = own(malloc(outn * 4));
    const float t[3] = {0.0f, 417.0f, 999.0f};
    const int32_t y[3] = {4, 0, 5};
    net_forward(n, f32, x, t, y, B);
    be->set_precision(0);
    ck_assert_str_eq(be->precision(), "bf16");
    net_forward(n, b16, x, t, y, B);
    be->set_precision(1);
    const double e = tu_nerr(b16, f32, outn, 1e-6), same = tu_max_abs_diff(b16, f32, outn);
    printf("  %-40s nerr %.2e (tolerance %.0e)\n", dic ? "DiC forward, bf16 vs fp32" : "DiT forward, bf16 vs fp32", e,
           TOL_NET);
    ck_assert_msg(e <= TOL_NET, "bf16 forward differs from fp32 by %.3g", e);
    ck_assert_msg(same > 0, "bf16 forward is bit-identical to fp32: bf16 did not run");
    net_free(n);
}
END_TEST

// Three training steps in bf16 against fp32 from the same weights: losses close, the master weights
// stay fp32 (not bf16 values), and the optimiser moves them as in fp32.
START_TEST(test_train_steps) {
    if (!bf16_on("bf16 training steps")) return;
    const int dic = _i, B = 4;
    NetConfig c;
    net_config(&c, dic);
    ClassNames cn;
    class_names_default(&cn, c.num_classes);
    TrainOpts o;
    train_opts_default(&o);
    o.lr = 1e-3f; o.seed = 5;
    const Backend *be = backend_select("cpu", "fp32");
    Trainer *tf = trainer_new(&c, &cn, &o, be, B), *tb = trainer_new(&c, &cn, &o, be, B);
    trainer_init_weights(tf);
    trainer_init_weights(tb);
    const size_t per = (size_t)c.in_channels * c.image_size * c.image_size, nw = tf->net->n_trainable;
    float *x0 = rnd(B * per, 21), *noise = own(malloc(B * per * 4));
    tu_fill(noise, B * per, -2, 2, 22);
    uint32_t bits[8] = {11u << 22, 500u << 22, 900u << 22, 3u << 22, 7, 1u << 31, 9, 1u << 30};
    const int32_t y[4] = {0, 1, 2, 3};
    for (int step = 0; step < 3; step++) {
        be->set_precision(1);
        const StepStats a = trainer_step_given(tf, x0, y, bits, noise);
        be->set_precision(0);
        const StepStats b = trainer_step_given(tb, x0, y, bits, noise);
        be->set_precision(1);
        const double e = fabs(a.loss - b.loss) / a.loss;
        printf("  %s step %d: loss fp32 %.6f bf16 %.6f (rel %.2e, tolerance %.0e)\n", dic ? "DiC" : "DiT", step + 1,
               a.loss, b.loss, e, TOL_LOSS);
        ck_assert_msg(e <= TOL_LOSS, "step %d: bf16 loss %.6g vs fp32 %.6g", step + 1, b.loss, a.loss);
    }
    size_t not_bf16 = 0;
    for (size_t i = 0; i < nw; i++) not_bf16 += bf(tb->net->w[i]) != tb->net->w[i];
    printf("  %zu of %zu bf16-trained weights are not bf16 values (fp32 masters)\n", not_bf16, nw);
    ck_assert_msg(not_bf16 > nw / 2, "the weights look rounded to bf16: %zu of %zu", not_bf16, nw);
    const double ew = tu_nerr(tb->net->w, tf->net->w, nw, 1e-6);
    printf("  weights after 3 steps, bf16 vs fp32: nerr %.2e (tolerance %.0e)\n", ew, TOL_NET);
    ck_assert_msg(ew <= TOL_NET, "weights differ by %.3g", ew);
    class_names_free(&cn);
    trainer_free(tf);
    trainer_free(tb);
}
END_TEST

// bf16 without oneDNN products (a build without it, or MALA_GEMM=openblas) is refused, not run in fp32.
// The advice line is a function of the two measured rates, so it is tested on given rates (the
// Xeon that prompted it: 156 against 288 GFLOP/s) whichever is faster on this CPU.
START_TEST(test_slow_bf16_advice) {
    char line[256] = "";
    ck_assert_int_eq(cpu_bf16_advice(288, 156, line, sizeof line), 1);
    ck_assert_msg(strstr(line, "0.54x") && strstr(line, "156 against 288") && strstr(line, "use --precision fp32"),
                  "%s", line);
    ck_assert_int_eq(cpu_bf16_advice(288, 600, line, sizeof line), 0);
    ck_assert_int_eq(cpu_bf16_advice(0, 156, line, sizeof line), 0);
}
END_TEST

START_TEST(test_refused) {
    cpu_gemm_select(GEMM_OPENBLAS, -1);
    backend_select("cpu", "bf16");
}
END_TEST

START_TEST(test_default_fp32) {
    ck_assert_str_eq(backend_select("cpu", NULL)->precision(), "fp32");
    ck_assert_str_eq(backend_select("cpu", "tf32")->precision(), "fp32");  // (no TF32 on the CPU: as before)
    ck_assert_int_eq(cpu_gemm_precision(), GEMM_F32);
}
END_TEST

int main(void) {
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("bf16");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, free_owned);
    tcase_add_test(tc, test_round_nearest_even);
    tcase_add_test(tc, test_default_fp32);
    tcase_add_test(tc, test_gemm);
    tcase_add_test(tc, test_gemm_in_region);
    tcase_add_test(tc, test_weights_shadow_refresh);
    tcase_add_test(tc, test_conv);
    tcase_add_test(tc, test_slow_bf16_advice);
    tcase_add_loop_test(tc, test_net_forward, 0, 2);
    tcase_add_loop_test(tc, test_train_steps, 0, 2);
    tcase_add_exit_test(tc, test_refused, 1);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

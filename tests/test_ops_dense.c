// Backward of every dense CPU op (ops_cpu_dense.c) against central finite differences, plus
// forward checks of the fixed-form ops (timestep embedding, pos embedding, patches, token
// permutations, RMSNorm with swish gate, SwiGLU, AdamW).
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend.h"
#include "model/dit.h"
#include "core/ops_math.h"
#include "testutil.h"

// Loss = sum(out * G) in double for a fixed random G; `fwd` recomputes out from the inputs.
typedef struct {
    void (*fwd)(void *self);
    float *out, *G;
    size_t nout;
} Probe;

static double probe_loss(void *ctx) {
    Probe *p = ctx;
    p->fwd(p);
    return tu_dot(p->out, p->G, p->nout);
}

// Buffers of a test, freed by the teardown.
static void *owned[64];
static int nowned;
static float *own(float *p) { owned[nowned++] = p; return p; }
static void free_owned(void) { while (nowned) free(owned[--nowned]); }

static float *rnd(size_t n, float lo, float hi, uint64_t seed) {
    float *x = own(malloc(n * sizeof(float)));
    tu_fill(x, n, lo, hi, seed);
    return x;
}

static float *zeros(size_t n) { return own(calloc(n, sizeof(float))); }

// The destination of an op that overwrites it: NaN wherever the op failed to write.
static float *nans(size_t n) {
    float *x = own(malloc(n * sizeof(float)));
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

#define FD(what, x, n, grad, probe) tu_fd_check(what, x, n, grad, probe_loss, &(probe).base, 1e-2f, 2e-3, 2e-2, 48)

// ---- linear ----
typedef struct { Probe base; float *in, *w, *b; int N, I, O; } LinearP;
static void linear_f(void *s) { LinearP *p = s; backend_cpu()->linear_fwd(p->base.out, p->in, p->w, p->b, p->N, p->I, p->O); }

START_TEST(test_linear) {
    const Backend *be = backend_cpu();
    LinearP p = {.N = 7, .I = 9, .O = 5};
    p.in = rnd(63, -1, 1, 1); p.w = rnd(45, -1, 1, 2); p.b = rnd(5, -1, 1, 3);
    p.base = (Probe){linear_f, zeros(35), rnd(35, -1, 1, 4), 35};
    float *din = nans(63), *dw = zeros(45), *db = zeros(5);
    be->linear_bwd(din, dw, db, p.base.G, p.in, p.w, p.N, p.I, p.O, 0.0f);  // din_beta 0: din overwritten
    FD("linear din", p.in, 63, din, p);
    FD("linear dw", p.w, 45, dw, p);
    FD("linear db", p.b, 5, db, p);
    // accumulation: a second backward with din_beta 1 doubles every gradient
    float first = dw[3], first_din = din[5], first_db = db[2];
    be->linear_bwd(din, dw, db, p.base.G, p.in, p.w, p.N, p.I, p.O, 1.0f);
    ck_assert_float_eq_tol(dw[3], 2 * first, 1e-5);
    ck_assert_float_eq_tol(din[5], 2 * first_din, 1e-5);
    ck_assert_float_eq_tol(db[2], 2 * first_db, 1e-5);
}
END_TEST

// ---- layernorm: the loss goes through out; rstd is a by-product ----
typedef struct { Probe base; float *x, *rstd; int N, C; } LnP;
static void ln_f(void *s) { LnP *p = s; backend_cpu()->layernorm_fwd(p->base.out, p->rstd, p->x, p->N, p->C); }

START_TEST(test_layernorm) {
    LnP p = {.N = 4, .C = 24};
    p.x = rnd(96, -2, 3, 5); p.rstd = zeros(4);
    p.base = (Probe){ln_f, zeros(96), rnd(96, -1, 1, 6), 96};
    ln_f(&p);
    double mean = 0, var = 0;  // the normalised row has mean 0 and variance ~1
    for (int c = 0; c < 24; c++) mean += p.base.out[c] / 24;
    for (int c = 0; c < 24; c++) var += (p.base.out[c] - mean) * (p.base.out[c] - mean) / 24;
    ck_assert(fabs(mean) < 1e-6 && fabs(var - 1) < 1e-4);
    float *dx = zeros(96);
    backend_cpu()->layernorm_bwd(dx, p.base.G, p.base.out, p.rstd, p.N, p.C);
    FD("layernorm dx", p.x, 96, dx, p);
}
END_TEST

// ---- modulate and gated residual, with shift/scale/gate read at a row stride ----
typedef struct { Probe base; float *x, *mod; int B, L, C, ms; } ModP;
static void mod_f(void *s) {
    ModP *p = s;
    backend_cpu()->modulate_fwd(p->base.out, p->x, p->mod + 1, p->mod + 1 + p->C, p->B, p->L, p->C, p->ms);
}
static void gate_f(void *s) {
    ModP *p = s;
    size_t n = (size_t)p->B * p->L * p->C;
    for (size_t i = 0; i < n; i++) p->base.out[i] = 0.5f;  // the residual stream it adds into
    backend_cpu()->gate_residual_fwd(p->base.out, p->x, p->mod + 2, p->B, p->L, p->C, p->ms);
}

START_TEST(test_modulate_and_gate) {
    const Backend *be = backend_cpu();
    ModP p = {.B = 2, .L = 5, .C = 6, .ms = 18};
    size_t n = 60, nm = 2 * 18;
    p.x = rnd(n, -1, 1, 7); p.mod = rnd(nm, -1, 1, 8);
    p.base = (Probe){mod_f, zeros(n), rnd(n, -1, 1, 9), n};
    float *dx = nans(n), *dmod = zeros(nm);  // dx overwritten, dshift/dscale added into
    be->modulate_bwd(dx, dmod + 1, dmod + 1 + p.C, p.base.G, p.x, p.mod + 1 + p.C, p.B, p.L, p.C, p.ms);
    FD("modulate dx", p.x, n, dx, p);
    FD("modulate dshift/dscale", p.mod, nm, dmod, p);
    // the fused LayerNorm + modulate pass: the bits of the two ops in turn, with and without xhat
    float *xh = zeros(n), *rs = zeros(p.B * p.L), *m1 = zeros(n), *xh2 = zeros(n), *rs2 = zeros(p.B * p.L),
          *m2 = zeros(n), *m3 = zeros(n);
    be->layernorm_fwd(xh, rs, p.x, p.B * p.L, p.C);
    be->modulate_fwd(m1, xh, p.mod + 1, p.mod + 1 + p.C, p.B, p.L, p.C, p.ms);
    be->layernorm_modulate_fwd(m2, xh2, rs2, p.x, p.mod + 1, p.mod + 1 + p.C, p.B, p.L, p.C, p.ms);
    be->layernorm_modulate_fwd(m3, NULL, rs2, p.x, p.mod + 1, p.mod + 1 + p.C, p.B, p.L, p.C, p.ms);
    ck_assert(!memcmp(m1, m2, n * sizeof(float)) && !memcmp(m1, m3, n * sizeof(float)));
    ck_assert(!memcmp(xh, xh2, n * sizeof(float)) && !memcmp(rs, rs2, p.B * p.L * sizeof(float)));
    p.base.fwd = gate_f;
    float *dy = nans(n), *dg = zeros(nm);  // dy overwritten
    be->gate_residual_bwd(dy, dg + 2, p.base.G, p.x, p.mod + 2, p.B, p.L, p.C, p.ms);
    FD("gate_residual dy", p.x, n, dy, p);
    FD("gate_residual dgate", p.mod, nm, dg, p);
}
END_TEST

// ---- elementwise ----
typedef struct { Probe base; float *a, *b; int op; } EwP;
static void ew_f(void *s) {
    EwP *p = s;
    const Backend *be = backend_cpu();
    if (p->op == 0) be->gelu_fwd(p->base.out, p->a, p->base.nout);
    else if (p->op == 1) be->silu_fwd(p->base.out, p->a, p->base.nout);
    else be->mul_fwd(p->base.out, p->a, p->b, p->base.nout);
}

START_TEST(test_elementwise) {
    const Backend *be = backend_cpu();
    size_t n = 50;
    EwP p = {.a = rnd(n, -4, 4, 10), .b = rnd(n, -2, 2, 11)};
    p.base = (Probe){ew_f, zeros(n), rnd(n, -1, 1, 12), n};
    for (p.op = 0; p.op < 3; p.op++) {
        float *da = p.op < 2 ? nans(n) : zeros(n), *db = zeros(n);  // gelu, silu overwrite; mul adds
        if (p.op == 0) be->gelu_bwd(da, p.base.G, p.a, n);
        else if (p.op == 1) be->silu_bwd(da, p.base.G, p.a, n);
        else be->mul_bwd(da, db, p.base.G, p.a, p.b, n);
        FD(p.op == 0 ? "gelu" : p.op == 1 ? "silu" : "mul da", p.a, n, da, p);
        if (p.op == 2) FD("mul db", p.b, n, db, p);
    }
    // GELU tanh approximation at known points (PyTorch values)
    ck_assert_float_eq_tol(gelu_f(1.0f), 0.8411920071f, 1e-6);
    ck_assert_float_eq_tol(gelu_f(-2.0f), -0.0454022884f, 1e-6);
    ck_assert_float_eq_tol(silu_f(1.0f), 0.7310585976f, 1e-6);
    double worst = 0;
    for (double x = -20; x <= 20; x += 1e-3) worst = fmax(worst, fabs(tanh_f((float)x) - tanh((float)x)));
    ck_assert_msg(worst < 4e-7, "tanh_f error %.3g", worst);
    ck_assert(isnan(tanh_f(NAN)) && isnan(gelu_f(NAN)) && isnan(gelu_grad_f(NAN)));
    // exp_f within 2 ulp (relative 2.4e-7) of exp on its range, 0 below it; erf_f within 5e-7
    // (1.5e-7 in exact arithmetic, plus float rounding near 0)
    double wexp = 0, werf = 0;
    for (double x = -87.3; x <= 88.3; x += 1e-3) {
        const double e = exp((float)x);
        wexp = fmax(wexp, fabs(exp_f((float)x) - e) / e);
    }
    for (double x = -6; x <= 6; x += 1e-4) werf = fmax(werf, fabs(erf_f((float)x) - erf((float)x)));
    ck_assert_msg(wexp < 2.4e-7, "exp_f relative error %.3g", wexp);
    ck_assert_msg(werf < 5e-7, "erf_f error %.3g", werf);
    ck_assert(exp_f(-90.0f) == 0.0f && exp_f(0.0f) == 1.0f && isnan(exp_f(NAN)) && isnan(erf_f(NAN)));
    ck_assert(erf_f(10.0f) == 1.0f && erf_f(-10.0f) == -1.0f && isnan(gelu_erf_f(NAN)));
}
END_TEST

// ---- RMSNorm with swish gate: x and out [N, heads*d], gate read at a row stride (a slice of a
// fused projection), weight shared by the heads ----
typedef struct { Probe base; float *x, *gate, *w, *rstd; int N, heads, d, ldg; } RmsP;
static void rms_f(void *s) {
    RmsP *p = s;
    backend_cpu()->rmsnorm_gate_fwd(p->base.out, p->rstd, p->x, p->gate + 1, p->w, p->N, p->heads, p->d, p->ldg,
                                    1e-5f);
}

START_TEST(test_rmsnorm_gate) {
    const Backend *be = backend_cpu();
    RmsP p = {.N = 5, .heads = 3, .d = 8, .ldg = 29};
    const size_t n = 5 * 24, ng = 5 * 29;
    p.x = rnd(n, -2, 2, 30); p.gate = rnd(ng, -3, 3, 31); p.w = rnd(8, 0.5f, 1.5f, 32); p.rstd = zeros(15);
    p.base = (Probe){rms_f, zeros(n), rnd(n, -1, 1, 33), n};
    rms_f(&p);
    // one element by hand: row 2, head 1, channel 3
    double ss = 0;
    for (int c = 0; c < 8; c++) ss += (double)p.x[2 * 24 + 8 + c] * p.x[2 * 24 + 8 + c];
    const double r = 1.0 / sqrt(ss / 8 + 1e-5), gv = p.gate[1 + 2 * 29 + 8 + 3];
    const double want = p.x[2 * 24 + 8 + 3] * r * p.w[3] * gv / (1 + exp(-gv));
    ck_assert_msg(fabs(p.base.out[2 * 24 + 8 + 3] - want) < 1e-5, "rmsnorm_gate %g vs %g", p.base.out[2 * 24 + 11], want);
    ck_assert_float_eq_tol(p.rstd[2 * 3 + 1], r, 1e-5 * r);
    float *dx = zeros(n), *dg = zeros(ng), *dw = zeros(8);
    be->rmsnorm_gate_bwd(dx, dg + 1, dw, p.base.G, p.x, p.gate + 1, p.w, p.rstd, p.N, p.heads, p.d, p.ldg);
    FD("rmsnorm_gate dx", p.x, n, dx, p);
    FD("rmsnorm_gate dgate", p.gate, ng, dg, p);
    FD("rmsnorm_gate dw", p.w, 8, dw, p);
    ck_assert(dg[0] == 0.0f);  // before the gate slice
    // NULLs: each gradient alone is the same
    float *dw2 = zeros(8), *dx2 = zeros(n);
    be->rmsnorm_gate_bwd(NULL, NULL, dw2, p.base.G, p.x, p.gate + 1, p.w, p.rstd, p.N, p.heads, p.d, p.ldg);
    be->rmsnorm_gate_bwd(dx2, NULL, NULL, p.base.G, p.x, p.gate + 1, p.w, p.rstd, p.N, p.heads, p.d, p.ldg);
    ck_assert(!memcmp(dw, dw2, sizeof(float) * 8) && !memcmp(dx, dx2, sizeof(float) * n));
}
END_TEST

// dw is summed in fixed row ranges: the same bits on 1 and 3 threads on a shape that runs parallel
START_TEST(test_rmsnorm_gate_threads) {
    const Backend *be = backend_cpu();
    const int N = 700, heads = 4, d = 32, ldg = 128;
    const size_t n = (size_t)N * heads * d;
    float *x = rnd(n, -2, 2, 34), *gate = rnd((size_t)N * ldg, -3, 3, 35), *w = rnd(d, 0.5f, 1.5f, 36);
    float *out = zeros(n), *rstd = zeros((size_t)N * heads), *G = rnd(n, -1, 1, 37);
    float *dw1 = zeros(d), *dw3 = zeros(d), *dx1 = zeros(n), *dx3 = zeros(n);
    be->rmsnorm_gate_fwd(out, rstd, x, gate, w, N, heads, d, ldg, 1e-6f);
    omp_set_num_threads(1);
    be->rmsnorm_gate_bwd(dx1, NULL, dw1, G, x, gate, w, rstd, N, heads, d, ldg);
    omp_set_num_threads(3);
    be->rmsnorm_gate_bwd(dx3, NULL, dw3, G, x, gate, w, rstd, N, heads, d, ldg);
    omp_set_num_threads(2);
    ck_assert(!memcmp(dw1, dw3, sizeof(float) * d) && !memcmp(dx1, dx3, sizeof(float) * n));
}
END_TEST

// ---- SwiGLU on one fused [N, 2F] buffer ----
typedef struct { Probe base; float *ab; int N, F; } SwP;
static void swiglu_f(void *s) { SwP *p = s; backend_cpu()->swiglu_fwd(p->base.out, p->ab, p->N, p->F); }

START_TEST(test_swiglu) {
    SwP p = {.N = 6, .F = 7};
    p.ab = rnd(84, -4, 4, 38);
    p.base = (Probe){swiglu_f, zeros(42), rnd(42, -1, 1, 39), 42};
    swiglu_f(&p);
    ck_assert_float_eq_tol(p.base.out[2 * 7 + 3], silu_f(p.ab[2 * 14 + 3]) * p.ab[2 * 14 + 7 + 3], 1e-7);
    float *dab = rnd(84, -1, 1, 40), *junk = own(malloc(84 * sizeof(float)));
    memcpy(junk, dab, 84 * sizeof(float));
    backend_cpu()->swiglu_bwd(dab, p.base.G, p.ab, p.N, p.F);
    for (int i = 0; i < 84; i++) dab[i] -= junk[i];  // the op adds
    FD("swiglu dab", p.ab, 84, dab, p);
}
END_TEST

// ---- token permutations: flips and grid transposes as DiG's forward applies them ----
typedef struct { Probe base; float *x; int B, gh, gw, C, flip, tr; } PermP;
static void perm_f(void *s) {
    PermP *p = s;
    backend_cpu()->permute_tokens_fwd(p->base.out, p->x, p->B, p->gh, p->gw, p->C, p->flip, p->tr);
}

START_TEST(test_permute_tokens) {
    const Backend *be = backend_cpu();
    const int B = 2, gh = 3, gw = 4, L = 12, C = 5;
    const size_t n = (size_t)B * L * C;
    PermP p = {.B = B, .gh = gh, .gw = gw, .C = C};
    p.x = rnd(n, -1, 1, 41);
    p.base = (Probe){perm_f, zeros(n), rnd(n, -1, 1, 42), n};
    float *back = zeros(n), *dx = zeros(n);
    for (p.flip = 0; p.flip < 2; p.flip++)
        for (p.tr = 0; p.tr < 2; p.tr++) {
            perm_f(&p);
            // against the PyTorch reading: y = x.flip(1) if flip; y.reshape(B, gh, gw, C).transpose(1, 2)
            for (int b = 0; b < B; b++)
                for (int l = 0; l < L; l++) {
                    int src = l;
                    if (p.tr) { int col = l / gh, row = l % gh; src = row * gw + col; }
                    if (p.flip) src = L - 1 - src;
                    for (int c = 0; c < C; c++)
                        ck_assert(p.base.out[((size_t)b * L + l) * C + c] == p.x[((size_t)b * L + src) * C + c]);
                }
            // the backward is the inverse permutation: applied to the output it gives x back
            memset(back, 0, n * sizeof(float));
            be->permute_tokens_bwd(back, p.base.out, B, gh, gw, C, p.flip, p.tr);
            ck_assert(!memcmp(back, p.x, n * sizeof(float)));
            memset(dx, 0, n * sizeof(float));
            be->permute_tokens_bwd(dx, p.base.G, B, gh, gw, C, p.flip, p.tr);
            FD("permute_tokens dx", p.x, n, dx, p);
        }
    // DiG's four directions: flip every block, transpose after every second (square grid): after
    // four blocks the order is back to the start
    const int g = 4, L2 = 16;
    float *a = rnd((size_t)L2 * 3, -1, 1, 43), *b2 = zeros((size_t)L2 * 3), *a0 = zeros((size_t)L2 * 3);
    memcpy(a0, a, sizeof(float) * L2 * 3);
    for (int i = 0; i < 4; i++) {
        be->permute_tokens_fwd(b2, a, 1, g, g, 3, 1, i % 2 == 1);
        memcpy(a, b2, sizeof(float) * L2 * 3);
    }
    ck_assert(!memcmp(a, a0, sizeof(float) * L2 * 3));
}
END_TEST

// ---- patches ----
typedef struct { Probe base; float *x; int B, C, S, p, un; } PatchP;
static void patch_f(void *s) {
    PatchP *q = s;
    if (q->un) backend_cpu()->unpatchify_fwd(q->base.out, q->x, q->B, q->C, q->S, q->p);
    else backend_cpu()->patchify_fwd(q->base.out, q->x, q->B, q->C, q->S, q->p);
}

START_TEST(test_patches) {
    const Backend *be = backend_cpu();
    PatchP q = {.B = 2, .C = 3, .S = 4, .p = 2};
    size_t n = 2 * 3 * 16;
    q.x = rnd(n, -1, 1, 13);
    q.base = (Probe){patch_f, zeros(n), rnd(n, -1, 1, 14), n};
    float *dx = zeros(n);
    be->patchify_bwd(dx, q.base.G, q.B, q.C, q.S, q.p);
    FD("patchify", q.x, n, dx, q);
    // layout: patch (gi=1, gj=0) of image 1, channel 2, pixel (i=1, j=1) -> row 2, col 2*4+... see backend.h
    patch_f(&q);
    int g = 2;
    size_t row = (size_t)1 * g * g + 1 * g + 0, col = (2 * 2 + 1) * 2 + 1;
    ck_assert(q.base.out[row * 12 + col] == q.x[((1 * 3 + 2) * 4 + 3) * 4 + 1]);
    q.un = 1;
    memset(dx, 0, n * sizeof(float));
    be->unpatchify_bwd(dx, q.base.G, q.B, q.C, q.S, q.p);
    FD("unpatchify", q.x, n, dx, q);
    // unpatchify inverts patchify up to the (c,i,j) vs (i,j,c) orders: check one element
    patch_f(&q);
    ck_assert(q.base.out[((1 * 3 + 2) * 4 + 3) * 4 + 1] == q.x[row * 12 + (1 * 2 + 1) * 3 + 2]);
}
END_TEST

// ---- label table ----
START_TEST(test_embed) {
    const Backend *be = backend_cpu();
    float table[4 * 3], out[3 * 3], dtab[12] = {0}, g[9];
    tu_fill(table, 12, -1, 1, 15);
    tu_fill(g, 9, -1, 1, 16);
    int32_t y[3] = {2, 0, 2};
    be->embed_fwd(out, table, y, 3, 3);
    ck_assert(out[3] == table[0] && out[6 + 2] == table[6 + 2]);
    be->embed_bwd(dtab, g, y, 3, 3);
    ck_assert_float_eq_tol(dtab[6 + 1], g[1] + g[7], 1e-7);
    ck_assert(dtab[3] == 0.0f);
}
END_TEST

// ---- the fixed embeddings ----
START_TEST(test_fixed_embeddings) {
    float out[2 * 8], t[2] = {0, 10};
    backend_cpu()->timestep_embed(out, t, 2, 8);
    for (int i = 0; i < 4; i++) { ck_assert(out[i] == 1.0f); ck_assert(out[4 + i] == 0.0f); }
    // f_1 = exp(-ln(10000)/4) = 0.1: cos(10 * 0.1), sin(10 * 0.1)
    ck_assert_float_eq_tol(out[8 + 1], cosf(1.0f), 1e-6);
    ck_assert_float_eq_tol(out[8 + 4 + 1], sinf(1.0f), 1e-6);
    float pos[4 * 8];
    dit_pos_embed(pos, 8, 2);  // H = 8, grid 2: token 1 is row 0, column 1
    ck_assert_float_eq_tol(pos[8 + 0], sinf(1.0f), 1e-6);          // column, omega_0 = 1
    ck_assert_float_eq_tol(pos[8 + 2], cosf(1.0f), 1e-6);
    ck_assert_float_eq_tol(pos[8 + 4], 0.0f, 1e-7);                // row 0
    ck_assert_float_eq_tol(pos[2 * 8 + 4 + 1], sinf(0.01f), 1e-6); // token 2: row 1, omega_1 = 1/100
}
END_TEST

// ---- AdamW: one hand-computed step, then torch's recursion over a few steps ----
START_TEST(test_adamw_ema) {
    const Backend *be = backend_cpu();
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, -1.0f}, m[2] = {0}, v[2] = {0};
    be->adamw(p, g, m, v, 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
    // step 1: p *= 1 - lr wd; update = lr * g / (|g| + eps) = 0.1 sign(g)
    ck_assert_float_eq_tol(p[0], 1.0f * (1 - 0.001f) - 0.1f, 1e-6);
    ck_assert_float_eq_tol(p[1], -2.0f * (1 - 0.001f) + 0.1f, 1e-6);
    float e[2] = {1.0f, 0.0f};
    be->ema(e, p, 2, 0.9f);
    ck_assert_float_eq_tol(e[0], 0.9f + 0.1f * p[0], 1e-6);
    double s = be->sumsq(g, 2);
    ck_assert(fabs(s - 1.25) < 1e-12);
}
END_TEST

// A table with an empty slot is refused at start-up (exit 1 naming the op), not called as NULL.
// backend_check in a child process (it exits on an empty slot): its exit status, and its stderr
// in msg.
static int check_in_child(const Backend *be, char *msg, size_t cap) {
    int fd[2];
    ck_assert(pipe(fd) == 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        backend_check(be);
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd[0], msg + n, cap - 1 - n)) > 0) n += (size_t)r;
    msg[n] = 0;
    close(fd[0]);
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The CPU table passes; the same table with one slot emptied is refused, naming that slot.
START_TEST(test_backend_check_refuses_empty_slot) {
    char msg[512];
    ck_assert_msg(check_in_child(backend_cpu(), msg, sizeof msg) == 0, "the CPU table was refused: %s", msg);
    Backend broken = *backend_cpu();
    broken.gla_fwd = NULL;
    ck_assert_int_eq(check_in_child(&broken, msg, sizeof msg), 1);
    ck_assert_msg(strstr(msg, "op gla_fwd is missing"), "the refusal does not name the slot: %s", msg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ops_dense");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, free_owned);
    tcase_add_test(tc, test_linear);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_modulate_and_gate);
    tcase_add_test(tc, test_elementwise);
    tcase_add_test(tc, test_rmsnorm_gate);
    tcase_add_test(tc, test_rmsnorm_gate_threads);
    tcase_add_test(tc, test_swiglu);
    tcase_add_test(tc, test_permute_tokens);
    tcase_add_test(tc, test_patches);
    tcase_add_test(tc, test_embed);
    tcase_add_test(tc, test_fixed_embeddings);
    tcase_add_test(tc, test_adamw_ema);
    tcase_add_test(tc, test_backend_check_refuses_empty_slot);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

// The NCHW-map ops of the CPU backend (ops_cpu_conv.c, ops_cpu_nchw.c, exact GELU): conv2d against
// a direct convolution written here (forward and every gradient, on many geometries and workspace
// sizes), its workspace query (bounded, exact: a guard region after it stays intact), and central
// finite differences for the backward of every op.
#include <omp.h>

#include "core/backend.h"
#include "core/conv_plan.h"
#include "cpu/cpu_gemm.h"
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
static void *owned[256];
static int nowned;
static void *own(void *p) { ck_assert(nowned < 256); owned[nowned++] = p; return p; }
static void free_owned(void) { while (nowned) free(owned[--nowned]); }

static float *rnd(size_t n, float lo, float hi, uint64_t seed) {
    float *x = own(malloc((n ? n : 1) * sizeof(float)));
    tu_fill(x, n, lo, hi, seed);
    return x;
}
static float *zeros(size_t n) { return own(calloc(n ? n : 1, sizeof(float))); }
static float *copy_of(const float *x, size_t n) {
    return memcpy(own(malloc((n ? n : 1) * sizeof(float))), x, n * sizeof(float));
}

#define FD(what, x, n, grad, probe) tu_fd_check(what, x, n, grad, probe_loss, &(probe).base, 1e-2f, 2e-3, 2e-2, 48)

// max |a - ref| / max(max |ref|, 1e-6)
static double nerr_d(const float *a, const double *ref, size_t n) {
    double md = 0, mb = 1e-6;
    for (size_t i = 0; i < n; i++) {
        md = fmax(md, fabs(a[i] - ref[i]));
        mb = fmax(mb, fabs(ref[i]));
    }
    return md / mb;
}

// ---------------------------------------------------------------------------------------------
// conv2d against the direct sum, in double

static double xat(const float *x, ConvShape s, int b, int ci, int iy, int ix) {
    if (iy < 0 || iy >= s.H || ix < 0 || ix >= s.W) return 0.0;
    return x[(((size_t)b * s.Cin + ci) * s.H + iy) * s.W + ix];
}

static void naive_conv_fwd(double *out, const float *x, const float *w, const float *bias, ConvShape s) {
    const int Ho = conv_out_h(s), Wo = conv_out_w(s);
    for (int b = 0; b < s.B; b++)
        for (int co = 0; co < s.Cout; co++)
            for (int oy = 0; oy < Ho; oy++)
                for (int ox = 0; ox < Wo; ox++) {
                    double acc = bias ? bias[co] : 0.0;
                    for (int ci = 0; ci < s.Cin; ci++)
                        for (int ky = 0; ky < s.kh; ky++)
                            for (int kx = 0; kx < s.kw; kx++)
                                acc += w[(((size_t)co * s.Cin + ci) * s.kh + ky) * s.kw + kx] *
                                       xat(x, s, b, ci, oy * s.stride - s.pt + ky, ox * s.stride - s.pl + kx);
                    out[(((size_t)b * s.Cout + co) * Ho + oy) * Wo + ox] = acc;
                }
}

// The gradients of sum(out * g), added to dx, dw, db (which start as given).
static void naive_conv_bwd(double *dx, double *dw, double *db, const float *g, const float *x, const float *w,
                           ConvShape s) {
    const int Ho = conv_out_h(s), Wo = conv_out_w(s);
    for (int b = 0; b < s.B; b++)
        for (int co = 0; co < s.Cout; co++)
            for (int oy = 0; oy < Ho; oy++)
                for (int ox = 0; ox < Wo; ox++) {
                    const double go = g[(((size_t)b * s.Cout + co) * Ho + oy) * Wo + ox];
                    db[co] += go;
                    for (int ci = 0; ci < s.Cin; ci++)
                        for (int ky = 0; ky < s.kh; ky++)
                            for (int kx = 0; kx < s.kw; kx++) {
                                const int iy = oy * s.stride - s.pt + ky, ix = ox * s.stride - s.pl + kx;
                                const size_t wi = (((size_t)co * s.Cin + ci) * s.kh + ky) * s.kw + kx;
                                dw[wi] += go * xat(x, s, b, ci, iy, ix);
                                if (iy >= 0 && iy < s.H && ix >= 0 && ix < s.W)
                                    dx[(((size_t)b * s.Cin + ci) * s.H + iy) * s.W + ix] += go * w[wi];
                            }
                }
}

static double *dvec(const float *init, size_t n) {
    double *d = own(malloc((n ? n : 1) * sizeof(double)));
    for (size_t i = 0; i < n; i++) d[i] = init ? init[i] : 0.0;
    return d;
}

// B, Cin, H, W, Cout, kh, kw, stride, pt, pb, pl, pr
static const ConvShape CONV_SHAPES[] = {
    {2, 3, 8, 8, 5, 3, 3, 1, 1, 1, 1, 1},     // 3x3 "same"
    {3, 4, 7, 9, 6, 3, 3, 2, 0, 1, 0, 1},     // the VAE's down conv: stride 2, (0,1,0,1), odd sizes
    {2, 5, 6, 5, 3, 1, 1, 1, 0, 0, 0, 0},     // 1x1 stride 1: direct, no im2col
    {1, 3, 9, 7, 4, 1, 1, 2, 0, 0, 0, 0},     // 1x1 stride 2
    {2, 2, 5, 6, 3, 3, 2, 1, 2, 0, 1, 3},     // rectangular kernel, uneven padding on every side
    {2, 6, 10, 11, 4, 3, 3, 2, 1, 1, 1, 1},   // stride 2, padding 1
    {1, 2, 4, 5, 3, 5, 5, 1, 2, 2, 2, 2},     // 5x5
    {2, 3, 5, 5, 2, 1, 1, 1, 1, 0, 0, 1},     // padded 1x1 (goes through im2col)
    {2, 4, 6, 6, 4, 3, 3, 3, 1, 1, 1, 1},     // stride 3
};
#define NCONV (int)(sizeof CONV_SHAPES / sizeof *CONV_SHAPES)

static void shape_str(char *buf, size_t len, ConvShape s) {
    snprintf(buf, len, "B%d Cin%d %dx%d Cout%d k%dx%d s%d pad(%d,%d,%d,%d)", s.B, s.Cin, s.H, s.W, s.Cout, s.kh, s.kw,
             s.stride, s.pt, s.pb, s.pl, s.pr);
}

// One geometry at one workspace size: forward with and without bias, then the backward from
// random starting gradients (so it must add), all gradients and each alone. Frees what the test
// owns when done.
static void check_conv(ConvShape s, size_t work_floats, uint64_t seed) {
    const Backend *be = backend_cpu();
    char sh[128];
    shape_str(sh, sizeof sh, s);
    const int Ho = conv_out_h(s), Wo = conv_out_w(s);
    const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * s.kh * s.kw;
    const size_t no = (size_t)s.B * s.Cout * Ho * Wo;
    float *x = rnd(nx, -1, 1, seed), *w = rnd(nw, -1, 1, seed + 1), *b = rnd(s.Cout, -1, 1, seed + 2);
    float *out = rnd(no, -9, 9, seed + 3), *work = work_floats ? zeros(work_floats) : NULL;
    double *want = dvec(NULL, no);
    for (int bias = 0; bias < 2; bias++) {
        naive_conv_fwd(want, x, w, bias ? b : NULL, s);
        be->conv2d_fwd(out, x, w, bias ? b : NULL, s, work, work_floats);
        const double e = nerr_d(out, want, no);
        ck_assert_msg(e < 1e-5, "conv2d_fwd %s work %zu bias %d: nerr %.3g", sh, work_floats, bias, e);
    }
    float *g = rnd(no, -1, 1, seed + 4);
    float *dx = rnd(nx, -1, 1, seed + 5), *dw = rnd(nw, -1, 1, seed + 6), *db = rnd(s.Cout, -1, 1, seed + 7);
    double *wdx = dvec(dx, nx), *wdw = dvec(dw, nw), *wdb = dvec(db, s.Cout);
    float *dx0 = copy_of(dx, nx), *dw0 = copy_of(dw, nw), *db0 = copy_of(db, s.Cout);
    naive_conv_bwd(wdx, wdw, wdb, g, x, w, s);
    be->conv2d_bwd(dx, dw, db, g, x, w, s, work, work_floats);
    double e[3] = {nerr_d(dx, wdx, nx), nerr_d(dw, wdw, nw), nerr_d(db, wdb, s.Cout)};
    ck_assert_msg(e[0] < 1e-5 && e[1] < 1e-5 && e[2] < 1e-5, "conv2d_bwd %s work %zu: nerr dx %.3g dw %.3g db %.3g",
                  sh, work_floats, e[0], e[1], e[2]);
    // each gradient alone gives the same bits as all together
    float *dx1 = copy_of(dx0, nx), *dw1 = copy_of(dw0, nw), *db1 = copy_of(db0, s.Cout);
    be->conv2d_bwd(dx1, NULL, NULL, g, x, w, s, work, work_floats);
    be->conv2d_bwd(NULL, dw1, NULL, g, x, w, s, work, work_floats);
    be->conv2d_bwd(NULL, NULL, db1, g, x, w, s, work, work_floats);
    ck_assert_msg(!memcmp(dx1, dx, nx * 4) && !memcmp(dw1, dw, nw * 4) && !memcmp(db1, db, s.Cout * 4),
                  "conv2d_bwd %s: a gradient alone differs from all together", sh);
    free_owned();
}

START_TEST(test_conv2d_vs_direct) {
    for (int k = 0; k < NCONV; k++) {
        const ConvShape s = CONV_SHAPES[k];
        const size_t q = backend_cpu()->conv2d_workspace_floats(s), row = conv_min_work(s);
        const size_t per_img = row * conv_out_h(s);
        // the query (all images in one chunk here), one output row, a row and a half (row blocks
        // with a short last one), two images and a bit (image chunks with a short last one)
        const size_t works[] = {q, row, row + row / 2, 2 * per_img + 1};
        for (int j = 0; j < 4; j++) check_conv(s, works[j], 100 + 10 * k + j);
    }
}
END_TEST

// The VAE's widest conv: bounded scratch whatever the batch (and one image's columns would be
// 1152 x 65536 floats); its chunks are row blocks. Run here at one image of 8 channels.
START_TEST(test_conv2d_workspace_bound) {
    const Backend *be = backend_cpu();
    ConvShape s = {8, 128, 256, 256, 128, 3, 3, 1, 1, 1, 1, 1};
    const size_t q8 = be->conv2d_workspace_floats(s);
    s.B = 1;
    const size_t q1 = be->conv2d_workspace_floats(s);
    s.B = 64;
    const size_t q64 = be->conv2d_workspace_floats(s);
    ck_assert_msg(q8 == q1 && q64 == q1, "workspace grows with the batch: %zu %zu %zu", q1, q8, q64);
    ck_assert_msg(q1 <= ((size_t)1 << 20) && q1 >= conv_min_work(s), "workspace %zu floats", q1);
    ConvPlan p;
    ck_assert(conv_plan(s, q1, &p) && p.imgs == 1 && p.rows >= 1 && p.rows < 256);
    // 1x1 stride 1 unpadded: none at all; a row wider than the target: exactly one row
    ConvShape d = {8, 512, 32, 32, 512, 1, 1, 1, 0, 0, 0, 0};
    ck_assert(be->conv2d_workspace_floats(d) == 0);
    ConvShape wide = {1, 512, 4, 1024, 8, 3, 3, 1, 1, 1, 1, 1};
    ck_assert(be->conv2d_workspace_floats(wide) == conv_min_work(wide));
    // a chunked run: 2 images of 24 channels at 40 x 56, stride 2, the down conv's padding
    ConvShape r = {2, 24, 40, 56, 5, 3, 3, 2, 0, 1, 0, 1};
    check_conv(r, conv_min_work(r) * 3, 900);
}
END_TEST

// One call uses exactly the scratch it was given: the last float of the query is written, and a
// guard region after it is untouched, in the forward and the backward, at several sizes. (The
// im2col route's contract: oneDNN's convolutions use no scratch.)
START_TEST(test_conv2d_workspace_guard) {
    const Backend *be = backend_cpu();
    cpu_gemm_select(-1, CONV_IM2COL);
    const size_t GUARD = 256;
    for (int k = 0; k < NCONV; k++) {
        const ConvShape s = CONV_SHAPES[k];
        const size_t q = be->conv2d_workspace_floats(s);
        if (!q) continue;  // direct
        const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * s.kh * s.kw;
        const size_t no = (size_t)s.B * s.Cout * conv_out_h(s) * conv_out_w(s);
        float *x = rnd(nx, -1, 1, 1), *w = rnd(nw, -1, 1, 2), *b = rnd(s.Cout, -1, 1, 3), *out = zeros(no);
        float *g = rnd(no, -1, 1, 4), *dx = zeros(nx), *dw = zeros(nw), *db = zeros(s.Cout);
        const size_t sizes[] = {q, conv_min_work(s), conv_min_work(s) + 7};
        for (int j = 0; j < 3; j++) {
            const size_t n = sizes[j];
            float *work = own(malloc((n + GUARD) * sizeof(float)));
            for (int pass = 0; pass < 2; pass++) {
                memset(work, 0xff, (n + GUARD) * sizeof(float));  // NaN bits
                if (pass == 0) be->conv2d_fwd(out, x, w, b, s, work, n);
                else be->conv2d_bwd(dx, dw, db, g, x, w, s, work, n);
                uint32_t bits;
                for (size_t i = n; i < n + GUARD; i++) {
                    memcpy(&bits, work + i, 4);
                    ck_assert_msg(bits == 0xffffffffu, "conv2d %s wrote past its %zu-float workspace (at %zu)",
                                  pass ? "bwd" : "fwd", n, i);
                }
                if (n == q) {  // the query is exact: on one thread (one slice) the first chunk fills it
                    omp_set_num_threads(1);
                    const size_t q1 = be->conv2d_workspace_floats(s);
                    memset(work, 0xff, (n + GUARD) * sizeof(float));
                    if (pass == 0) be->conv2d_fwd(out, x, w, b, s, work, q1);
                    else be->conv2d_bwd(dx, dw, db, g, x, w, s, work, q1);
                    omp_set_num_threads(2);
                    memcpy(&bits, work + q1 - 1, 4);
                    ck_assert_msg(q1 <= n && bits != 0xffffffffu, "conv2d %s left the last of its %zu floats unused",
                                  pass ? "bwd" : "fwd", q1);
                }
            }
        }
    }
}
END_TEST

// Less scratch than one output row is refused (exit 1 with a message).
START_TEST(test_conv2d_refuses_small_workspace) {
    const ConvShape s = CONV_SHAPES[0];
    const size_t n = conv_min_work(s) - 1;
    float *x = zeros(2 * 3 * 64), *w = zeros(5 * 3 * 9), *out = zeros(2 * 5 * 64), *work = zeros(n);
    backend_cpu()->conv2d_fwd(out, x, w, NULL, s, work, n);
}
END_TEST

// Central finite differences of conv2d: dx, dw, db on a strided, unevenly padded geometry and
// on a direct 1x1.
typedef struct { Probe base; float *x, *w, *b, *work; size_t nwork; ConvShape s; } ConvP;
static void conv_f(void *self) {
    ConvP *p = self;
    backend_cpu()->conv2d_fwd(p->base.out, p->x, p->w, p->b, p->s, p->work, p->nwork);
}

START_TEST(test_conv2d_fd) {
    const ConvShape shapes[] = {{2, 3, 7, 6, 4, 3, 3, 2, 0, 1, 0, 1}, {2, 4, 3, 5, 3, 1, 1, 1, 0, 0, 0, 0},
                                {1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1}};
    for (int k = 0; k < 3; k++) {
        ConvP p = {.s = shapes[k]};
        const ConvShape s = p.s;
        const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * s.kh * s.kw;
        const size_t no = (size_t)s.B * s.Cout * conv_out_h(s) * conv_out_w(s);
        p.nwork = conv_min_work(s);  // row chunks
        p.work = p.nwork ? zeros(p.nwork) : NULL;
        p.x = rnd(nx, -1, 1, 10 + k); p.w = rnd(nw, -1, 1, 20 + k); p.b = rnd(s.Cout, -1, 1, 30 + k);
        p.base = (Probe){conv_f, zeros(no), rnd(no, -1, 1, 40 + k), no};
        float *dx = zeros(nx), *dw = zeros(nw), *db = zeros(s.Cout);
        backend_cpu()->conv2d_bwd(dx, dw, db, p.base.G, p.x, p.w, s, p.work, p.nwork);
        FD("conv2d dx", p.x, nx, dx, p);
        FD("conv2d dw", p.w, nw, dw, p);
        FD("conv2d db", p.b, s.Cout, db, p);
    }
}
END_TEST

// The sums are fixed-order: the same bits on 1 and 3 threads, each with the scratch it asks for
// (one image's columns on one thread, three on three), 9 images so that the dw groups hold
// several each.
START_TEST(test_conv2d_threads) {
    const Backend *be = backend_cpu();
    const ConvShape s = {9, 16, 24, 20, 12, 3, 3, 1, 1, 1, 1, 1};
    const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * 9, no = (size_t)s.B * s.Cout * 480;
    float *x = rnd(nx, -1, 1, 50), *w = rnd(nw, -1, 1, 51), *g = rnd(no, -1, 1, 52), *b = rnd(s.Cout, -1, 1, 53);
    float *r[2][4];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t ? 3 : 1);
        const size_t nwk = be->conv2d_workspace_floats(s);
        float *work = zeros(nwk);
        r[t][0] = zeros(nx); r[t][1] = zeros(nw); r[t][2] = zeros(s.Cout); r[t][3] = zeros(no);
        be->conv2d_bwd(r[t][0], r[t][1], r[t][2], g, x, w, s, work, nwk);
        be->conv2d_fwd(r[t][3], x, w, b, s, work, nwk);
    }
    omp_set_num_threads(2);
    ck_assert(!memcmp(r[0][0], r[1][0], nx * 4) && !memcmp(r[0][1], r[1][1], nw * 4) &&
              !memcmp(r[0][2], r[1][2], s.Cout * 4) && !memcmp(r[0][3], r[1][3], no * 4));
}
END_TEST

// A caller's scratch larger than its query (a network's shared buffer, sized for its largest
// shape or for more threads) changes no bits: the same results on 1 and 2 threads with the query
// and with several images' worth more. Shapes: one image's columns over the 2^20-float target
// (row blocks) and one just under it (one image per thread). (At 3 threads the row blocks' bits
// differ: their products use OpenBLAS's threads, see ops_cpu_conv.c.)
START_TEST(test_conv2d_oversized_scratch) {
    const Backend *be = backend_cpu();
    const ConvShape shapes[] = {{3, 128, 32, 32, 8, 3, 3, 1, 1, 1, 1, 1}, {3, 96, 32, 32, 8, 3, 3, 1, 1, 1, 1, 1}};
    for (int k = 0; k < 2; k++) {
        const ConvShape s = shapes[k];
        const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * 9, no = (size_t)s.B * s.Cout * 1024;
        const size_t per_img = conv_image_floats(s);
        ck_assert(k == 0 ? per_img > ((size_t)1 << 20) : per_img <= ((size_t)1 << 20));
        float *x = rnd(nx, -1, 1, 60 + k), *w = rnd(nw, -1, 1, 62 + k), *g = rnd(no, -1, 1, 64 + k);
        float *r[4][3];
        for (int run = 0; run < 4; run++) {
            omp_set_num_threads(run & 1 ? 2 : 1);
            const size_t q = be->conv2d_workspace_floats(s), n = run & 2 ? 3 * q + 2 * per_img : q;
            float *work = zeros(n);
            r[run][0] = zeros(nx); r[run][1] = zeros(nw); r[run][2] = zeros(no);
            be->conv2d_bwd(r[run][0], r[run][1], NULL, g, x, w, s, work, n);
            be->conv2d_fwd(r[run][2], x, w, NULL, s, work, n);
        }
        omp_set_num_threads(2);
        for (int run = 1; run < 4; run++)
            ck_assert_msg(!memcmp(r[0][0], r[run][0], nx * 4) && !memcmp(r[0][1], r[run][1], nw * 4) &&
                              !memcmp(r[0][2], r[run][2], no * 4),
                          "conv2d Cin %d: run %d (threads %d, scratch %s) differs from 1 thread with the query",
                          s.Cin, run, run & 1 ? 2 : 1, run & 2 ? "oversized" : "the query");
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// GroupNorm and LayerNorm over channels

typedef struct { Probe base; float *x, *w, *b, *mean, *rstd; int B, C, HW, G; int affine; } NormP;
static void gn_f(void *self) {
    NormP *p = self;
    backend_cpu()->groupnorm_fwd(p->base.out, p->mean, p->rstd, p->x, p->affine ? p->w : NULL,
                                 p->affine ? p->b : NULL, p->B, p->C, p->HW, p->G, 1e-5f);
}
static void ln2_f(void *self) {
    NormP *p = self;
    backend_cpu()->layernorm2d_fwd(p->base.out, p->mean, p->rstd, p->x, p->affine ? p->w : NULL,
                                   p->affine ? p->b : NULL, p->B, p->C, p->HW, 1e-6f);
}

// The reference, in double: each set (a group of an image, or a pixel for LayerNorm2d) directly.
static void check_norm_fwd(const NormP *p, int ln) {
    const int Cg = ln ? 1 : p->C / p->G, nsets = ln ? p->B * p->HW : p->B * p->G;
    const double eps = ln ? 1e-6 : 1e-5;
    for (int st = 0; st < nsets; st++) {
        // the members of set st: (b, c, pix)
        const int b = ln ? st / p->HW : st / p->G, n = ln ? p->C : Cg * p->HW;
        double m = 0, v = 0;
        for (int i = 0; i < n; i++) {
            const int c = ln ? i : (st % p->G) * Cg + i / p->HW, pix = ln ? st % p->HW : i % p->HW;
            m += p->x[((size_t)b * p->C + c) * p->HW + pix] / n;
        }
        for (int i = 0; i < n; i++) {
            const int c = ln ? i : (st % p->G) * Cg + i / p->HW, pix = ln ? st % p->HW : i % p->HW;
            const double d = p->x[((size_t)b * p->C + c) * p->HW + pix] - m;
            v += d * d / n;
        }
        const double r = 1 / sqrt(v + eps);
        ck_assert_msg(fabs(p->mean[st] - m) < 1e-5 && fabs(p->rstd[st] - r) < 1e-5 * r, "norm stats of set %d", st);
        for (int i = 0; i < n; i++) {
            const int c = ln ? i : (st % p->G) * Cg + i / p->HW, pix = ln ? st % p->HW : i % p->HW;
            const size_t o = ((size_t)b * p->C + c) * p->HW + pix;
            const double want = (p->x[o] - m) * r * (p->affine ? p->w[c] : 1) + (p->affine ? p->b[c] : 0);
            ck_assert_msg(fabs(p->base.out[o] - want) < 1e-5 * (1 + fabs(want)), "%s out[%zu] %g vs %g",
                          ln ? "layernorm2d" : "groupnorm", o, p->base.out[o], want);
        }
    }
}

static void check_norm(int B, int C, int HW, int G, int affine, int ln, uint64_t seed) {
    const Backend *be = backend_cpu();
    NormP p = {.B = B, .C = C, .HW = HW, .G = G, .affine = affine};
    const size_t n = (size_t)B * C * HW, ns = ln ? (size_t)B * HW : (size_t)B * G;
    p.x = rnd(n, -2, 3, seed); p.w = rnd(C, 0.5f, 1.5f, seed + 1); p.b = rnd(C, -1, 1, seed + 2);
    p.mean = zeros(ns); p.rstd = zeros(ns);
    p.base = (Probe){ln ? ln2_f : gn_f, zeros(n), rnd(n, -1, 1, seed + 3), n};
    p.base.fwd(&p);
    check_norm_fwd(&p, ln);
    float *dx = zeros(n), *dw = zeros(C), *db = zeros(C);
    if (ln) be->layernorm2d_bwd(dx, affine ? dw : NULL, affine ? db : NULL, p.base.G, p.x, p.mean, p.rstd,
                                affine ? p.w : NULL, B, C, HW);
    else be->groupnorm_bwd(dx, affine ? dw : NULL, affine ? db : NULL, p.base.G, p.x, p.mean, p.rstd,
                           affine ? p.w : NULL, B, C, HW, G);
    char what[96];
    snprintf(what, sizeof what, "%s dx B%d C%d HW%d G%d affine%d", ln ? "layernorm2d" : "groupnorm", B, C, HW, G,
             affine);
    FD(what, p.x, n, dx, p);
    if (affine) {
        FD(ln ? "layernorm2d dw" : "groupnorm dw", p.w, C, dw, p);
        FD(ln ? "layernorm2d db" : "groupnorm db", p.b, C, db, p);
    }
}

START_TEST(test_groupnorm) {
    check_norm(2, 6, 15, 3, 1, 0, 200);  // 2 channels a group
    check_norm(2, 6, 15, 3, 0, 0, 210);  // no affine
    check_norm(1, 4, 9, 4, 1, 0, 220);   // a group per channel
    check_norm(3, 5, 4, 1, 1, 0, 230);   // one group
}
END_TEST

START_TEST(test_layernorm2d) {
    check_norm(2, 5, 7, 0, 1, 1, 300);
    check_norm(2, 6, 70, 0, 0, 1, 310);  // pixels past one 64-pixel block, no affine
    check_norm(1, 1, 3, 0, 1, 1, 320);   // one channel: out = bias
}
END_TEST

// GroupNorm's, LayerNorm2d's and modulate2d's reductions give the same bits on 1 and 3 threads.
START_TEST(test_norm_threads) {
    const Backend *be = backend_cpu();
    const int B = 3, C = 64, HW = 24 * 24, G = 16;
    const size_t n = (size_t)B * C * HW;
    float *x = rnd(n, -2, 2, 400), *w = rnd(C, 0.5f, 1.5f, 401), *b = rnd(C, -1, 1, 402), *g = rnd(n, -1, 1, 403);
    float *mod = rnd((size_t)B * 2 * C, -1, 1, 404);
    float *res[2][9];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t ? 3 : 1);
        float **r = res[t];
        r[0] = zeros(n); r[1] = zeros(B * G); r[2] = zeros(B * G); r[3] = zeros(n); r[4] = zeros(C); r[5] = zeros(C);
        be->groupnorm_fwd(r[0], r[1], r[2], x, w, b, B, C, HW, G, 1e-6f);
        be->groupnorm_bwd(r[3], r[4], r[5], g, x, r[1], r[2], w, B, C, HW, G);
        float *m = zeros((size_t)B * HW), *rs = zeros((size_t)B * HW);
        be->layernorm2d_fwd(r[0], m, rs, x, w, b, B, C, HW, 1e-6f);
        be->layernorm2d_bwd(r[3], r[4], r[5], g, x, m, rs, w, B, C, HW);
        r[6] = zeros((size_t)B * 2 * C); r[7] = zeros(n); r[8] = m;
        be->modulate2d_bwd(r[7], r[6], r[6] + C, g, x, mod + C, B, C, HW, 2 * C);
        be->gate_residual2d_bwd(r[7], r[6], g, x, mod, B, C, HW, 2 * C);
    }
    omp_set_num_threads(2);
    const size_t len[9] = {n, (size_t)B * G, (size_t)B * G, n, C, C, (size_t)B * 2 * C, n, (size_t)B * HW};
    for (int i = 0; i < 9; i++) ck_assert_msg(!memcmp(res[0][i], res[1][i], len[i] * 4), "result %d differs", i);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Exact GELU

typedef struct { Probe base; float *x; } EwP;
static void gelu_erf_f_(void *self) { EwP *p = self; backend_cpu()->gelu_erf_fwd(p->base.out, p->x, p->base.nout); }

START_TEST(test_gelu_erf) {
    // PyTorch's F.gelu (approximate="none") and its gradient, in float64
    const float xs[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    const double y[4] = {0.841344746068543, -0.04550026389635842, 0.34573123063700656, 2.99595030590511};
    const double dy[4] = {1.0833154705876864, -0.08523180107819692, 0.8674951246561629, 1.011945647204184};
    float out[4], d[4] = {NAN, NAN, NAN, NAN}, ones[4] = {1, 1, 1, 1};  // d overwritten
    backend_cpu()->gelu_erf_fwd(out, xs, 4);
    backend_cpu()->gelu_erf_bwd(d, ones, xs, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(fabs(out[i] - y[i]) < 1e-6, "gelu_erf(%g) = %.8g, want %.8g", xs[i], out[i], y[i]);
        ck_assert_msg(fabs(d[i] - dy[i]) < 1e-6, "gelu_erf'(%g) = %.8g, want %.8g", xs[i], d[i], dy[i]);
    }
    ck_assert(fabsf(gelu_erf_f(1.0f) - gelu_f(1.0f)) > 1e-4);  // not the tanh form
    const size_t n = 60;
    EwP p = {.x = rnd(n, -4, 4, 500)};
    p.base = (Probe){gelu_erf_f_, zeros(n), rnd(n, -1, 1, 501), n};
    float *dx = zeros(n);
    backend_cpu()->gelu_erf_bwd(dx, p.base.G, p.x, n);
    FD("gelu_erf", p.x, n, dx, p);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Pixel shuffle / unshuffle, nearest upsampling, channel copies, transposes: forward against
// the index formulas, backward by finite differences.

typedef struct { Probe base; float *x; int B, C, H, W, r, op; } MapP;
static void map_f(void *self) {
    MapP *p = self;
    const Backend *be = backend_cpu();
    switch (p->op) {
    case 0: be->pixel_shuffle_fwd(p->base.out, p->x, p->B, p->C, p->H, p->W, p->r); break;
    case 1: be->pixel_unshuffle_fwd(p->base.out, p->x, p->B, p->C, p->H, p->W, p->r); break;
    case 2: be->upsample2x_fwd(p->base.out, p->x, p->B, p->C, p->H, p->W); break;
    case 3: be->nchw_to_tokens_fwd(p->base.out, p->x, p->B, p->C, p->H * p->W); break;
    default: be->tokens_to_nchw_fwd(p->base.out, p->x, p->B, p->C, p->H * p->W); break;
    }
}
static void map_bwd(const MapP *p, float *dx, const float *g) {
    const Backend *be = backend_cpu();
    switch (p->op) {
    case 0: be->pixel_shuffle_bwd(dx, g, p->B, p->C, p->H, p->W, p->r); break;
    case 1: be->pixel_unshuffle_bwd(dx, g, p->B, p->C, p->H, p->W, p->r); break;
    case 2: be->upsample2x_bwd(dx, g, p->B, p->C, p->H, p->W); break;
    case 3: be->nchw_to_tokens_bwd(dx, g, p->B, p->C, p->H * p->W); break;
    default: be->tokens_to_nchw_bwd(dx, g, p->B, p->C, p->H * p->W); break;
    }
}
static void map_fd(MapP *p, size_t nin, size_t nout, const char *what, uint64_t seed) {
    p->base = (Probe){map_f, zeros(nout), rnd(nout, -1, 1, seed), nout};
    float *dx = rnd(nin, -1, 1, seed + 1), *dx0 = copy_of(dx, nin);
    map_bwd(p, dx, p->base.G);
    for (size_t i = 0; i < nin; i++) dx[i] -= dx0[i];  // what the backward added
    FD(what, p->x, nin, dx, *p);
}

START_TEST(test_pixel_shuffle) {
    const Backend *be = backend_cpu();
    const int B = 2, C = 3, H = 2, W = 3, r = 2;
    const size_t n = (size_t)B * C * r * r * H * W;
    float *lo = rnd(n, -1, 1, 600), *hi = zeros(n), *back = zeros(n);
    be->pixel_shuffle_fwd(hi, lo, B, C, H, W, r);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int h = 0; h < H; h++)
                for (int w = 0; w < W; w++)
                    for (int i = 0; i < r; i++)
                        for (int j = 0; j < r; j++)
                            ck_assert(hi[(((size_t)b * C + c) * H * r + h * r + i) * W * r + w * r + j] ==
                                      lo[(((size_t)b * C * r * r + (c * r + i) * r + j) * H + h) * W + w]);
    be->pixel_unshuffle_fwd(back, hi, B, C, H, W, r);
    ck_assert(!memcmp(back, lo, n * 4));  // the inverse
    MapP p = {.x = lo, .B = B, .C = C, .H = H, .W = W, .r = r, .op = 0};
    map_fd(&p, n, n, "pixel_shuffle", 601);
    MapP q = {.x = hi, .B = 1, .C = 2, .H = 3, .W = 2, .r = 3, .op = 1};  // r = 3, hi [1, 2, 9, 6]
    q.x = rnd(108, -1, 1, 602);
    map_fd(&q, 108, 108, "pixel_unshuffle r3", 603);
}
END_TEST

START_TEST(test_upsample2x) {
    const int B = 2, C = 3, H = 3, W = 5;
    const size_t n = (size_t)B * C * H * W;
    MapP p = {.x = rnd(n, -1, 1, 700), .B = B, .C = C, .H = H, .W = W, .op = 2};
    float *out = zeros(4 * n);
    backend_cpu()->upsample2x_fwd(out, p.x, B, C, H, W);
    for (int bc = 0; bc < B * C; bc++)
        for (int y = 0; y < 2 * H; y++)
            for (int x = 0; x < 2 * W; x++)
                ck_assert(out[((size_t)bc * 2 * H + y) * 2 * W + x] == p.x[((size_t)bc * H + y / 2) * W + x / 2]);
    map_fd(&p, n, 4 * n, "upsample2x", 701);
}
END_TEST

START_TEST(test_transposes) {
    const int B = 2, C = 37, H = 5, W = 9, HW = H * W;  // neither side a multiple of the 32 tile
    const size_t n = (size_t)B * C * HW;
    float *x = rnd(n, -1, 1, 800), *tok = zeros(n), *back = zeros(n);
    backend_cpu()->nchw_to_tokens_fwd(tok, x, B, C, HW);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int q = 0; q < HW; q++)
                ck_assert(tok[((size_t)b * HW + q) * C + c] == x[((size_t)b * C + c) * HW + q]);
    backend_cpu()->tokens_to_nchw_fwd(back, tok, B, C, HW);
    ck_assert(!memcmp(back, x, n * 4));
    MapP p = {.x = x, .B = B, .C = C, .H = H, .W = W, .op = 3};
    map_fd(&p, n, n, "nchw_to_tokens", 801);
    p.op = 4;
    p.x = tok;
    map_fd(&p, n, n, "tokens_to_nchw", 802);
}
END_TEST

// Concatenation of a [B, 3, HW] and a [B, 5, HW] map into [B, 8, HW] and the split back; the
// backward by finite differences through a copy into the middle of a wider map.
typedef struct { Probe base; float *x; } CopyP;
static void copy_f(void *self) {
    CopyP *p = self;
    memset(p->base.out, 0, p->base.nout * 4);
    backend_cpu()->channel_copy_fwd(p->base.out, 9, 4, p->x, 6, 1, 3, 2, 7);  // dst[:, 4..6] = src[:, 1..3]
}

START_TEST(test_channel_copy) {
    const Backend *be = backend_cpu();
    const int B = 2, HW = 7;
    float *a = rnd(B * 3 * HW, -1, 1, 900), *b = rnd(B * 5 * HW, -1, 1, 901), *cat = zeros(B * 8 * HW);
    be->channel_copy_fwd(cat, 8, 0, a, 3, 0, 3, B, HW);
    be->channel_copy_fwd(cat, 8, 3, b, 5, 0, 5, B, HW);
    for (int i = 0; i < B; i++)
        for (int c = 0; c < 8; c++)
            for (int q = 0; q < HW; q++)
                ck_assert(cat[((size_t)i * 8 + c) * HW + q] ==
                          (c < 3 ? a[((size_t)i * 3 + c) * HW + q] : b[((size_t)i * 5 + c - 3) * HW + q]));
    float *a2 = zeros(B * 3 * HW), *b2 = zeros(B * 5 * HW);
    be->channel_copy_fwd(a2, 3, 0, cat, 8, 0, 3, B, HW);  // split
    be->channel_copy_fwd(b2, 5, 0, cat, 8, 3, 5, B, HW);
    ck_assert(!memcmp(a2, a, B * 3 * HW * 4) && !memcmp(b2, b, B * 5 * HW * 4));
    CopyP p = {.x = rnd(2 * 6 * 7, -1, 1, 902)};
    p.base = (Probe){copy_f, zeros(2 * 9 * 7), rnd(2 * 9 * 7, -1, 1, 903), 2 * 9 * 7};
    float *dx = zeros(2 * 6 * 7);
    be->channel_copy_bwd(dx, 6, 1, p.base.G, 9, 4, 3, 2, 7);
    FD("channel_copy", p.x, 2 * 6 * 7, dx, p);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Per-channel modulation and gated residual, with shift/scale/gate at a row stride

typedef struct { Probe base; float *x, *mod; int B, C, HW, ms; } ModP;
static void mod2_f(void *self) {
    ModP *p = self;
    backend_cpu()->modulate2d_fwd(p->base.out, p->x, p->mod + 1, p->mod + 1 + p->C, p->B, p->C, p->HW, p->ms);
}
static void gate2_f(void *self) {
    ModP *p = self;
    for (size_t i = 0; i < p->base.nout; i++) p->base.out[i] = 0.5f;  // the residual stream it adds into
    backend_cpu()->gate_residual2d_fwd(p->base.out, p->x, p->mod + 2, p->B, p->C, p->HW, p->ms);
}

START_TEST(test_modulate2d_and_gate) {
    const Backend *be = backend_cpu();
    ModP p = {.B = 2, .C = 5, .HW = 6, .ms = 17};
    const size_t n = 60, nm = 2 * 17;
    p.x = rnd(n, -1, 1, 1000); p.mod = rnd(nm, -1, 1, 1001);
    p.base = (Probe){mod2_f, zeros(n), rnd(n, -1, 1, 1002), n};
    mod2_f(&p);
    ck_assert_float_eq_tol(p.base.out[(1 * 5 + 3) * 6 + 4],
                           p.x[(1 * 5 + 3) * 6 + 4] * (1 + p.mod[17 + 1 + 5 + 3]) + p.mod[17 + 1 + 3], 1e-6);
    float *dx = zeros(n), *dmod = zeros(nm);
    be->modulate2d_bwd(dx, dmod + 1, dmod + 1 + p.C, p.base.G, p.x, p.mod + 1 + p.C, p.B, p.C, p.HW, p.ms);
    FD("modulate2d dx", p.x, n, dx, p);
    FD("modulate2d dshift/dscale", p.mod, nm, dmod, p);
    p.base.fwd = gate2_f;
    float *dy = zeros(n), *dg = zeros(nm);
    be->gate_residual2d_bwd(dy, dg + 2, p.base.G, p.x, p.mod + 2, p.B, p.C, p.HW, p.ms);
    FD("gate_residual2d dy", p.x, n, dy, p);
    FD("gate_residual2d dgate", p.mod, nm, dg, p);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// ReLU (with its backward), pooling, the global mean and bilinear resize: forward against direct
// formulas in double (and PyTorch's values for the resize), ReLU's backward by finite differences.

static void relu_f_(void *self) { EwP *p = self; backend_cpu()->relu_fwd(p->base.out, p->x, p->base.nout); }

START_TEST(test_relu) {
    const size_t n = 61;
    EwP p = {.x = rnd(n, -1, 1, 600)};
    for (size_t i = 0; i < n; i++)  // keep the probes 10x the FD step away from the kink
        if (fabsf(p.x[i]) < 0.1f) p.x[i] += p.x[i] < 0 ? -0.1f : 0.1f;
    p.base = (Probe){relu_f_, zeros(n), rnd(n, -1, 1, 601), n};
    relu_f_(&p);
    for (size_t i = 0; i < n; i++) ck_assert(p.base.out[i] == (p.x[i] > 0 ? p.x[i] : 0.0f));
    float *in_place = copy_of(p.x, n);
    backend_cpu()->relu_fwd(in_place, in_place, n);
    ck_assert(!memcmp(in_place, p.base.out, n * sizeof(float)));
    float *dx = rnd(n, -1, 1, 602), *dx0 = copy_of(dx, n);
    backend_cpu()->relu_bwd(dx, p.base.G, p.base.out, n);
    for (size_t i = 0; i < n; i++) dx[i] -= dx0[i];  // it adds
    FD("relu", p.x, n, dx, p);
}
END_TEST

// Pooling of every (k, stride, pad) the contract allows on odd and even sizes, max and average
// (count_include_pad = False), against the window sums written out here.
START_TEST(test_pool2d) {
    const Backend *be = backend_cpu();
    const int B = 2, C = 3;
    const int sizes[3][2] = {{7, 9}, {8, 8}, {35, 17}};
    for (int z = 0; z < 3; z++)
        for (int k = 1; k <= 3; k++)
            for (int st = 1; st <= 2; st++)
                for (int pd = 0; 2 * pd <= k; pd++) {
                    const int H = sizes[z][0], W = sizes[z][1];
                    const int Ho = (H + 2 * pd - k) / st + 1, Wo = (W + 2 * pd - k) / st + 1;
                    const size_t nx = (size_t)B * C * H * W, no = (size_t)B * C * Ho * Wo;
                    float *x = rnd(nx, -2, 2, 610 + z), *mx = zeros(no), *av = zeros(no);
                    be->maxpool2d_fwd(mx, x, B, C, H, W, k, st, pd);
                    be->avgpool2d_fwd(av, x, B, C, H, W, k, st, pd);
                    for (int pl = 0; pl < B * C; pl++)
                        for (int oy = 0; oy < Ho; oy++)
                            for (int ox = 0; ox < Wo; ox++) {
                                double m = -INFINITY, sum = 0;
                                int cnt = 0;
                                for (int ky = 0; ky < k; ky++)
                                    for (int kx = 0; kx < k; kx++) {
                                        const int iy = oy * st - pd + ky, ix = ox * st - pd + kx;
                                        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                        const double v = x[((size_t)pl * H + iy) * W + ix];
                                        m = fmax(m, v);
                                        sum += v;
                                        cnt++;
                                    }
                                const size_t o = ((size_t)pl * Ho + oy) * Wo + ox;
                                ck_assert_msg(mx[o] == (float)m, "max k%d s%d p%d %dx%d at %zu: %g, want %g", k, st,
                                              pd, H, W, o, mx[o], m);
                                ck_assert_msg(fabs(av[o] - sum / cnt) < 1e-6, "avg k%d s%d p%d %dx%d at %zu: %g, want %g",
                                              k, st, pd, H, W, o, av[o], sum / cnt);
                            }
                }
    // the global mean (adaptive average pool to 1x1)
    const int HW = 50;
    float *x = rnd((size_t)B * C * HW, -1, 1, 620), out[6];
    be->mean_hw_fwd(out, x, B, C, HW);
    for (int pl = 0; pl < B * C; pl++) {
        double t = 0;
        for (int i = 0; i < HW; i++) t += x[pl * HW + i];
        ck_assert(fabs(out[pl] - t / HW) < 1e-7);
    }
}
END_TEST

START_TEST(test_resize_bilinear) {
    const Backend *be = backend_cpu();
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = powf((float)i, 1.5f);
    // F.interpolate(x.reshape(1, 1, 3, 4), size, mode="bilinear", align_corners=False) in PyTorch 2
    // (CPU, float32), x_i = i^1.5: upsampling to 5x7 and downsampling to 2x3.
    const float up[35] = {0, 0.357142895f, 0.928571463f, 1.91421378f, 2.99755073f, 4.35053635f, 5.19615221f,
                          3.20000029f, 3.86862016f, 4.93841219f, 6.32398462f, 7.78654432f, 9.47223759f, 10.5257959f,
                          8.00000095f, 9.1358366f, 10.9531736f, 12.9386406f, 14.9700346f, 17.154789f, 18.5202618f,
                          16.7764511f, 18.1677666f, 20.3938751f, 22.762291f, 25.1699696f, 27.7101917f, 29.2978287f,
                          22.6274166f, 24.1890526f, 26.6876736f, 29.311388f, 31.9699268f, 34.7471237f, 36.482872f};
    const float down[6] = {2.25751424f, 4.67032003f, 8.07190895f, 19.6496506f, 25.2182007f, 31.2254009f};
    float o1[35], o2[6], same[12];
    be->resize_bilinear_fwd(o1, x, 1, 1, 3, 4, 5, 7);
    be->resize_bilinear_fwd(o2, x, 1, 1, 3, 4, 2, 3);
    be->resize_bilinear_fwd(same, x, 1, 1, 3, 4, 3, 4);
    for (int i = 0; i < 35; i++) ck_assert_msg(fabsf(o1[i] - up[i]) <= 2e-6f * fmaxf(1, up[i]), "up[%d] %.9g, want %.9g", i, o1[i], up[i]);
    for (int i = 0; i < 6; i++) ck_assert_msg(fabsf(o2[i] - down[i]) <= 2e-6f * down[i], "down[%d] %.9g, want %.9g", i, o2[i], down[i]);
    ck_assert(!memcmp(same, x, sizeof x));
    // planes are independent: two images of two channels each resize like the single plane
    float xx[48], oo[140];
    for (int pl = 0; pl < 4; pl++)
        for (int i = 0; i < 12; i++) xx[pl * 12 + i] = x[i] * (float)(pl + 1);
    be->resize_bilinear_fwd(oo, xx, 2, 2, 3, 4, 5, 7);
    for (int pl = 0; pl < 4; pl++)
        for (int i = 0; i < 35; i++) ck_assert(fabsf(oo[pl * 35 + i] - o1[i] * (pl + 1)) <= 1e-5f * fmaxf(1, up[i] * (pl + 1)));
}
END_TEST

int main(void) {
    Suite *s = suite_create("ops_conv");
    TCase *tc = tcase_create("ops");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, NULL, free_owned);
    tcase_add_test(tc, test_conv2d_vs_direct);
    tcase_add_test(tc, test_conv2d_workspace_bound);
    tcase_add_test(tc, test_conv2d_workspace_guard);
    tcase_add_exit_test(tc, test_conv2d_refuses_small_workspace, 1);
    tcase_add_test(tc, test_conv2d_fd);
    tcase_add_test(tc, test_conv2d_threads);
    tcase_add_test(tc, test_conv2d_oversized_scratch);
    tcase_add_test(tc, test_groupnorm);
    tcase_add_test(tc, test_layernorm2d);
    tcase_add_test(tc, test_norm_threads);
    tcase_add_test(tc, test_gelu_erf);
    tcase_add_test(tc, test_pixel_shuffle);
    tcase_add_test(tc, test_upsample2x);
    tcase_add_test(tc, test_transposes);
    tcase_add_test(tc, test_channel_copy);
    tcase_add_test(tc, test_modulate2d_and_gate);
    tcase_add_test(tc, test_relu);
    tcase_add_test(tc, test_pool2d);
    tcase_add_test(tc, test_resize_bilinear);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

// defines: inception_build, inception_load, inception_random, inception_free, inception_forward,
//          inception_forward_all, inception_max_batch, inception_tensors, eval_rand_seed, eval_rand_u,
//          eval_rand_fill, inception_random_tensor
#include "eval/inception.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/conv_plan.h"       // defines: conv_out_h, conv_out_w
#include "formats/safetensors.h"     // defines: st_open, st_load_f32, st_close
#include "formats/torch_legacy.h"    // defines: torch_legacy_open, torch_legacy_find, torch_legacy_read_f32

#define BN_EPS 0.001
#define NCONV 94
// Per-image activation sizes (floats), from the shapes along the network:
#define ACT_FLOATS ((size_t)147 * 147 * 64)   // largest: Conv2d_2b_3x3's output
#define TMP_FLOATS ((size_t)35 * 35 * 96)     // largest branch output or intermediate (Mixed_5x)
#define POOL_FLOATS ((size_t)35 * 35 * 288)   // largest pooled block input (Mixed_5d / 6a)
#define SPATIAL_C 7                           // channels of the sFID features
#define SPATIAL_HW (17 * 17)

// One BasicConv2d with its BatchNorm folded in: y = relu(conv(x, w) + b). g holds the geometry
// (B, H, W are filled in per call).
typedef struct {
    char name[48];   // "Mixed_6b.branch7x7_2"
    ConvShape g;
    size_t w_off, b_off;  // into params: w [cout, cin, kh, kw] (BN folded), b [cout]
} IncConv;

struct Inception {
    const Backend *be;
    IncConv conv[NCONV];
    float *params;       // all folded conv weights and biases, then fc.weight [1008, 2048]
    size_t nparams, fc_off;
    int max_batch;
    float *act[2], *t1, *t2, *br, *pool, *work, *feat, *logit, *sp7, *spatial;
    size_t work_floats;
    float *stage;        // device copy of the input (non-CPU backends), stage_floats long
    size_t stage_floats;
    double flops;        // multiply-adds x 2 of all convolutions and fc products run so far
};

// ---------------------------------------------------------------------------------------------
// The architecture table: torchvision's module registration order, which is also the forward order
// within each block and the state-dict order.
// ---------------------------------------------------------------------------------------------
// dst = "a.b" (a NULL: "b"); names are short compile-time strings, so truncation is a bug.
static void join_name(char *dst, size_t cap, const char *a, const char *b) {
    int n = a ? snprintf(dst, cap, "%s.%s", a, b) : snprintf(dst, cap, "%s", b);
    if (n < 0 || (size_t)n >= cap) FATAL("inception: name %s.%s too long", a ? a : "", b);
}

typedef struct { IncConv *c; int n; } Table;

static void add(Table *t, const char *block, const char *name, int cin, int cout, int kh, int kw, int s, int ph, int pw) {
    IncConv *c = &t->c[t->n++];
    join_name(c->name, sizeof c->name, block, name);
    c->g = (ConvShape){.Cin = cin, .Cout = cout, .kh = kh, .kw = kw, .stride = s, .pt = ph, .pb = ph, .pl = pw, .pr = pw};
}

static void table_a(Table *t, const char *b, int cin, int pool_features) {
    add(t, b, "branch1x1", cin, 64, 1, 1, 1, 0, 0);
    add(t, b, "branch5x5_1", cin, 48, 1, 1, 1, 0, 0);
    add(t, b, "branch5x5_2", 48, 64, 5, 5, 1, 2, 2);
    add(t, b, "branch3x3dbl_1", cin, 64, 1, 1, 1, 0, 0);
    add(t, b, "branch3x3dbl_2", 64, 96, 3, 3, 1, 1, 1);
    add(t, b, "branch3x3dbl_3", 96, 96, 3, 3, 1, 1, 1);
    add(t, b, "branch_pool", cin, pool_features, 1, 1, 1, 0, 0);
}
static void table_b(Table *t, const char *b, int cin) {
    add(t, b, "branch3x3", cin, 384, 3, 3, 2, 0, 0);
    add(t, b, "branch3x3dbl_1", cin, 64, 1, 1, 1, 0, 0);
    add(t, b, "branch3x3dbl_2", 64, 96, 3, 3, 1, 1, 1);
    add(t, b, "branch3x3dbl_3", 96, 96, 3, 3, 2, 0, 0);
}
static void table_c(Table *t, const char *b, int c7) {
    add(t, b, "branch1x1", 768, 192, 1, 1, 1, 0, 0);
    add(t, b, "branch7x7_1", 768, c7, 1, 1, 1, 0, 0);
    add(t, b, "branch7x7_2", c7, c7, 1, 7, 1, 0, 3);
    add(t, b, "branch7x7_3", c7, 192, 7, 1, 1, 3, 0);
    add(t, b, "branch7x7dbl_1", 768, c7, 1, 1, 1, 0, 0);
    add(t, b, "branch7x7dbl_2", c7, c7, 7, 1, 1, 3, 0);
    add(t, b, "branch7x7dbl_3", c7, c7, 1, 7, 1, 0, 3);
    add(t, b, "branch7x7dbl_4", c7, c7, 7, 1, 1, 3, 0);
    add(t, b, "branch7x7dbl_5", c7, 192, 1, 7, 1, 0, 3);
    add(t, b, "branch_pool", 768, 192, 1, 1, 1, 0, 0);
}
static void table_d(Table *t, const char *b) {
    add(t, b, "branch3x3_1", 768, 192, 1, 1, 1, 0, 0);
    add(t, b, "branch3x3_2", 192, 320, 3, 3, 2, 0, 0);
    add(t, b, "branch7x7x3_1", 768, 192, 1, 1, 1, 0, 0);
    add(t, b, "branch7x7x3_2", 192, 192, 1, 7, 1, 0, 3);
    add(t, b, "branch7x7x3_3", 192, 192, 7, 1, 1, 3, 0);
    add(t, b, "branch7x7x3_4", 192, 192, 3, 3, 2, 0, 0);
}
static void table_e(Table *t, const char *b, int cin) {
    add(t, b, "branch1x1", cin, 320, 1, 1, 1, 0, 0);
    add(t, b, "branch3x3_1", cin, 384, 1, 1, 1, 0, 0);
    add(t, b, "branch3x3_2a", 384, 384, 1, 3, 1, 0, 1);
    add(t, b, "branch3x3_2b", 384, 384, 3, 1, 1, 1, 0);
    add(t, b, "branch3x3dbl_1", cin, 448, 1, 1, 1, 0, 0);
    add(t, b, "branch3x3dbl_2", 448, 384, 3, 3, 1, 1, 1);
    add(t, b, "branch3x3dbl_3a", 384, 384, 1, 3, 1, 0, 1);
    add(t, b, "branch3x3dbl_3b", 384, 384, 3, 1, 1, 1, 0);
    add(t, b, "branch_pool", cin, 192, 1, 1, 1, 0, 0);
}

static int build_table(IncConv *conv) {
    Table t = {conv, 0};
    add(&t, NULL, "Conv2d_1a_3x3", 3, 32, 3, 3, 2, 0, 0);
    add(&t, NULL, "Conv2d_2a_3x3", 32, 32, 3, 3, 1, 0, 0);
    add(&t, NULL, "Conv2d_2b_3x3", 32, 64, 3, 3, 1, 1, 1);
    add(&t, NULL, "Conv2d_3b_1x1", 64, 80, 1, 1, 1, 0, 0);
    add(&t, NULL, "Conv2d_4a_3x3", 80, 192, 3, 3, 1, 0, 0);
    table_a(&t, "Mixed_5b", 192, 32);
    table_a(&t, "Mixed_5c", 256, 64);
    table_a(&t, "Mixed_5d", 288, 64);
    table_b(&t, "Mixed_6a", 288);
    table_c(&t, "Mixed_6b", 128);
    table_c(&t, "Mixed_6c", 160);
    table_c(&t, "Mixed_6d", 160);
    table_c(&t, "Mixed_6e", 192);
    table_d(&t, "Mixed_7a");
    table_e(&t, "Mixed_7b", 1280);
    table_e(&t, "Mixed_7c", 2048);
    return t.n;
}

static const char *kBnParts[4] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"};

int inception_tensors(InceptionTensor *out) {
    IncConv conv[NCONV];
    int nc = build_table(conv), k = 0;
    for (int i = 0; i < nc; i++) {
        const ConvShape *g = &conv[i].g;
        InceptionTensor *x = &out[k++];
        join_name(x->name, sizeof x->name, conv[i].name, "conv.weight");
        x->ndim = 4;
        x->shape[0] = g->Cout; x->shape[1] = g->Cin; x->shape[2] = g->kh; x->shape[3] = g->kw;
        for (int j = 0; j < 4; j++) {
            x = &out[k++];
            join_name(x->name, sizeof x->name, conv[i].name, kBnParts[j]);
            x->ndim = 1;
            x->shape[0] = g->Cout;
        }
    }
    out[k] = (InceptionTensor){"fc.weight", 2, {INCEPTION_CLASSES, INCEPTION_DIM, 0, 0}};
    out[k + 1] = (InceptionTensor){"fc.bias", 1, {INCEPTION_CLASSES, 0, 0, 0}};
    return k + 2;
}

// ---------------------------------------------------------------------------------------------
// The shared generator
// ---------------------------------------------------------------------------------------------
uint64_t eval_rand_seed(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) { h ^= *p; h *= 0x100000001b3ull; }
    return h;
}

double eval_rand_u(uint64_t seed, uint64_t i) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 40) * (1.0 / 16777216.0);
}

void eval_rand_fill(float *out, size_t n, const char *name, double lo, double hi) {
    uint64_t seed = eval_rand_seed(name);
    for (size_t i = 0; i < n; i++) out[i] = (float)(lo + (hi - lo) * eval_rand_u(seed, i));
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void inception_random_tensor(const char *name, int ndim, const int64_t *shape, float *out) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (size_t)shape[d];
    double lo = -0.1, hi = 0.1;  // bn.bias, bn.running_mean, fc.bias
    if (ends_with(name, "conv.weight")) {
        double a = sqrt(6.0 / (double)(shape[1] * shape[2] * shape[3]));
        lo = -a; hi = a;
    } else if (ends_with(name, "bn.weight")) { lo = 0.9; hi = 1.3; }
    else if (ends_with(name, "bn.running_var")) { lo = 0.8; hi = 1.25; }
    else if (strcmp(name, "fc.weight") == 0) {
        double a = sqrt(3.0 / (double)shape[1]);
        lo = -a; hi = a;
    }
    eval_rand_fill(out, n, name, lo, hi);
}

static int random_source(void *ctx, const char *name, int ndim, const int64_t *shape, float *out, MalaErr *err) {
    inception_random_tensor(name, ndim, shape, out);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Building: read every BasicConv2d, fold BatchNorm into the conv (weights stay OIHW)
// ---------------------------------------------------------------------------------------------
static void *dev_alloc(const Backend *be, size_t floats) { return be->alloc(floats * sizeof(float)); }

// The scratch one conv of the network at batch n asks for: the largest over the 94 convs.
static size_t work_floats_for(const Inception *m, int n) {
    size_t most = 0;
    static const int sizes[] = {299, 149, 147, 73, 71, 35, 17, 8};  // the map sizes along the network
    for (int i = 0; i < NCONV; i++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            ConvShape g = m->conv[i].g;
            g.B = n;
            g.H = g.W = sizes[k];
            if (!conv_shape_ok(g)) continue;
            size_t w = m->be->conv2d_workspace_floats(g);
            if (w > most) most = w;
        }
    return most;
}

Inception *inception_build(InceptionTensorFn fn, void *ctx, const Backend *be, int max_batch, MalaErr *err) {
    if (!be) be = backend_host();
    if (max_batch <= 0) max_batch = INCEPTION_DEFAULT_BATCH;
    Inception *m = xcalloc(1, sizeof *m);
    m->be = be;
    m->max_batch = max_batch;
    int nc = build_table(m->conv);
    size_t off = 0, maxw = 0, maxc = 0;
    for (int i = 0; i < nc; i++) {
        const ConvShape *g = &m->conv[i].g;
        size_t nw = (size_t)g->Cout * g->Cin * g->kh * g->kw;
        m->conv[i].w_off = off;
        m->conv[i].b_off = off + nw;
        off += nw + (size_t)g->Cout;
        if (nw > maxw) maxw = nw;
        if ((size_t)g->Cout > maxc) maxc = (size_t)g->Cout;
    }
    m->fc_off = off;
    m->nparams = off + (size_t)INCEPTION_CLASSES * INCEPTION_DIM;

    // Host staging: the folded parameters, then one upload.
    float *host = xmalloc(m->nparams * sizeof *host);
    float *w = xmalloc(maxw * sizeof *w), *bn = xmalloc(4 * maxc * sizeof *bn);
    char name[96];
    int rc = 0;
    for (int i = 0; i < nc && !rc; i++) {
        const IncConv *c = &m->conv[i];
        const ConvShape *g = &c->g;
        int64_t wshape[4] = {g->Cout, g->Cin, g->kh, g->kw}, bshape[1] = {g->Cout};
        join_name(name, sizeof name, c->name, "conv.weight");
        rc = fn(ctx, name, 4, wshape, w, err);
        for (int j = 0; j < 4 && !rc; j++) {
            join_name(name, sizeof name, c->name, kBnParts[j]);
            rc = fn(ctx, name, 1, bshape, bn + (size_t)j * g->Cout, err);
        }
        if (rc) break;
        // y = (conv(x) - mean) / sqrt(var + eps) * gamma + beta  ==  conv(x) * s + (beta - mean * s).
        // The first conv also takes pytorch-fid's input scaling x -> 2x - 1: it is unpadded, so
        // conv(2x - 1) = conv'(x) exactly with w' = 2 w, b' = b - sum(w).
        const int first = i == 0;
        const float *gamma = bn, *beta = bn + g->Cout, *mean = bn + 2 * g->Cout, *var = bn + 3 * g->Cout;
        float *wo = host + c->w_off, *bo = host + c->b_off;
        const size_t per = (size_t)g->Cin * g->kh * g->kw;
        for (int o = 0; o < g->Cout; o++) {
            double s = (double)gamma[o] / sqrt((double)var[o] + BN_EPS), b = (double)beta[o] - (double)mean[o] * s;
            for (size_t k = 0; k < per; k++) {
                double v = w[(size_t)o * per + k] * s;
                if (first) b -= v;
                wo[(size_t)o * per + k] = (float)(first ? 2.0 * v : v);
            }
            bo[o] = (float)b;
        }
    }
    if (!rc) {
        int64_t fshape[2] = {INCEPTION_CLASSES, INCEPTION_DIM};
        rc = fn(ctx, "fc.weight", 2, fshape, host + m->fc_off, err);
    }
    free(w);
    free(bn);
    if (rc) {
        free(host);
        free(m);
        return NULL;
    }
    m->params = dev_alloc(be, m->nparams);
    be->to_device(m->params, host, m->nparams * sizeof *host);
    free(host);

    size_t B = (size_t)max_batch;
    m->act[0] = dev_alloc(be, B * ACT_FLOATS);
    m->act[1] = dev_alloc(be, B * ACT_FLOATS);
    m->t1 = dev_alloc(be, B * TMP_FLOATS);
    m->t2 = dev_alloc(be, B * TMP_FLOATS);
    m->br = dev_alloc(be, B * TMP_FLOATS);
    m->pool = dev_alloc(be, B * POOL_FLOATS);
    m->work_floats = work_floats_for(m, max_batch);
    m->work = dev_alloc(be, m->work_floats ? m->work_floats : 1);
    m->feat = dev_alloc(be, B * INCEPTION_DIM);
    m->logit = dev_alloc(be, B * INCEPTION_CLASSES);
    m->sp7 = dev_alloc(be, B * INCEPTION_SPATIAL_DIM);
    m->spatial = dev_alloc(be, B * INCEPTION_SPATIAL_DIM);
    return m;
}

// Legacy torch source: shape-checked copies out of the mapped file.
typedef struct { TorchLegacy *tl; const char *path; } LegacyCtx;

static int shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int d = 0; d < ndim && k < cap; d++) k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return 0;
}

static int legacy_source(void *vctx, const char *name, int ndim, const int64_t *shape, float *out, MalaErr *err) {
    LegacyCtx *ctx = vctx;
    const TorchTensor *x = torch_legacy_find(ctx->tl, name);
    if (!x)
        return mala_errf(err, "%s: no tensor '%s' (the file holds %d tensors): not the FID Inception-v3 weights",
                         ctx->path, name, torch_legacy_count(ctx->tl));
    int same = x->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = x->shape[d] == shape[d];
    if (!same) {
        char have[96], want[96];
        shape_str(have, sizeof have, x->ndim, x->shape);
        shape_str(want, sizeof want, ndim, shape);
        return mala_errf(err, "%s: tensor '%s' has shape %s, the FID Inception-v3 expects %s", ctx->path, name, have, want);
    }
    return torch_legacy_read_f32(ctx->tl, x, out, err);
}

static int st_source(void *ctx, const char *name, int ndim, const int64_t *shape, float *out, MalaErr *err) {
    return st_load_f32(ctx, name, shape, ndim, out, err);
}

// Appends where the standard weights come from to a loader error.
static void add_hint(MalaErr *err) {
    if (!err) return;
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, " (the FID weights are %s from the pytorch-fid releases: %s)",
             INCEPTION_WEIGHTS_FILE, INCEPTION_WEIGHTS_URL);
}

Inception *inception_load(const char *path, const Backend *be, int max_batch, MalaErr *err) {
    Inception *m = NULL;
    if (ends_with(path, ".safetensors")) {
        StFile f = {0};
        if (st_open(&f, path, err) == 0) {
            m = inception_build(st_source, &f, be, max_batch, err);
            st_close(&f);
        }
    } else {
        TorchLegacy *tl = torch_legacy_open(path, err);
        if (tl) {
            LegacyCtx ctx = {tl, path};
            m = inception_build(legacy_source, &ctx, be, max_batch, err);
            torch_legacy_close(tl);
        }
    }
    if (!m) add_hint(err);
    return m;
}

Inception *inception_random(const Backend *be, int max_batch) {
    MalaErr err;
    Inception *m = inception_build(random_source, NULL, be, max_batch, &err);
    if (!m) FATAL("%s", err.msg);
    return m;
}

void inception_free(Inception *m) {
    if (!m) return;
    const Backend *be = m->be;
    float *bufs[] = {m->params, m->act[0], m->act[1], m->t1, m->t2, m->br, m->pool, m->work, m->feat, m->logit,
                     m->sp7, m->spatial, m->stage};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) be->release(bufs[i]);
    free(m);
}

int inception_max_batch(const Inception *m) { return m->max_batch; }
double inception_flops(const Inception *m) { return m->flops; }

// ---------------------------------------------------------------------------------------------
// Forward (NCHW). A T is a buffer with its shape; conv_into() writes a branch into a channel
// slice of the block's output (the concatenation).
// ---------------------------------------------------------------------------------------------
typedef struct { float *p; int n, c, h, w; } T;

static const IncConv *find_conv(const Inception *m, const char *block, const char *name) {
    char full[64];
    join_name(full, sizeof full, block, name);
    for (int i = 0; i < NCONV; i++)
        if (strcmp(m->conv[i].name, full) == 0) return &m->conv[i];
    FATAL("inception: no layer %s", full);
}

// dst [n, cout, ho, wo] = BasicConv2d(x) = relu(conv(x) + b)
static T conv_to(Inception *m, const char *block, const char *name, T x, float *dst) {
    const IncConv *c = find_conv(m, block, name);
    ConvShape g = c->g;
    if (g.Cin != x.c) FATAL("inception: %s expects %d channels, got %d", c->name, g.Cin, x.c);
    g.B = x.n;
    g.H = x.h;
    g.W = x.w;
    T y = {dst, x.n, g.Cout, conv_out_h(g), conv_out_w(g)};
    m->flops += 2.0 * y.n * y.h * y.w * g.Cout * g.kh * g.kw * g.Cin;
    m->be->conv2d_fwd(dst, x.p, m->params + c->w_off, m->params + c->b_off, g, m->work, m->work_floats);
    m->be->relu_fwd(dst, dst, (size_t)y.n * y.c * y.h * y.w);
    return y;
}

// channels c0 .. c0 + y.c - 1 of out = y
static void copy_into(Inception *m, T *out, int c0, T y) {
    m->be->channel_copy_fwd(out->p, out->c, c0, y.p, y.c, 0, y.c, y.n, y.h * y.w);
}
static void conv_into(Inception *m, const char *block, const char *name, T x, T *out, int c0) {
    copy_into(m, out, c0, conv_to(m, block, name, x, m->br));
}

static T avgpool(Inception *m, T x) {  // 3x3, stride 1, pad 1, count_include_pad = False
    m->be->avgpool2d_fwd(m->pool, x.p, x.n, x.c, x.h, x.w, 3, 1, 1);
    return (T){m->pool, x.n, x.c, x.h, x.w};
}
static T maxpool(Inception *m, T x, float *dst, int s, int p) {  // 3x3
    m->be->maxpool2d_fwd(dst, x.p, x.n, x.c, x.h, x.w, 3, s, p);
    return (T){dst, x.n, x.c, (x.h + 2 * p - 3) / s + 1, (x.w + 2 * p - 3) / s + 1};
}

// InceptionA (Mixed_5b..5d): [1x1 64 | 5x5 64 | 3x3dbl 96 | avgpool->1x1 pf]
static T block_a(Inception *m, const char *b, T x, float *out, int pf) {
    T y = {out, x.n, 64 + 64 + 96 + pf, x.h, x.w};
    conv_into(m, b, "branch1x1", x, &y, 0);
    T t = conv_to(m, b, "branch5x5_1", x, m->t1);
    conv_into(m, b, "branch5x5_2", t, &y, 64);
    t = conv_to(m, b, "branch3x3dbl_1", x, m->t1);
    t = conv_to(m, b, "branch3x3dbl_2", t, m->t2);
    conv_into(m, b, "branch3x3dbl_3", t, &y, 128);
    conv_into(m, b, "branch_pool", avgpool(m, x), &y, 224);
    return y;
}

// InceptionB (Mixed_6a): [3x3 s2 384 | 3x3dbl s2 96 | maxpool s2 (input channels)]
static T block_b(Inception *m, const char *b, T x, float *out) {
    T y = {out, x.n, 384 + 96 + x.c, (x.h - 3) / 2 + 1, (x.w - 3) / 2 + 1};
    conv_into(m, b, "branch3x3", x, &y, 0);
    T t = conv_to(m, b, "branch3x3dbl_1", x, m->t1);
    t = conv_to(m, b, "branch3x3dbl_2", t, m->t2);
    conv_into(m, b, "branch3x3dbl_3", t, &y, 384);
    copy_into(m, &y, 480, maxpool(m, x, m->br, 2, 0));
    return y;
}

// InceptionC (Mixed_6b..6e): [1x1 192 | 1x7,7x1 192 | 7x1,1x7,7x1,1x7 192 | avgpool->1x1 192]
static T block_c(Inception *m, const char *b, T x, float *out) {
    T y = {out, x.n, 768, x.h, x.w};
    conv_into(m, b, "branch1x1", x, &y, 0);
    T t = conv_to(m, b, "branch7x7_1", x, m->t1);
    t = conv_to(m, b, "branch7x7_2", t, m->t2);
    conv_into(m, b, "branch7x7_3", t, &y, 192);
    t = conv_to(m, b, "branch7x7dbl_1", x, m->t1);
    t = conv_to(m, b, "branch7x7dbl_2", t, m->t2);
    t = conv_to(m, b, "branch7x7dbl_3", t, m->t1);
    t = conv_to(m, b, "branch7x7dbl_4", t, m->t2);
    conv_into(m, b, "branch7x7dbl_5", t, &y, 384);
    conv_into(m, b, "branch_pool", avgpool(m, x), &y, 576);
    return y;
}

// InceptionD (Mixed_7a): [1x1, 3x3 s2 320 | 1x1, 1x7, 7x1, 3x3 s2 192 | maxpool s2 768]
static T block_d(Inception *m, const char *b, T x, float *out) {
    T y = {out, x.n, 320 + 192 + x.c, (x.h - 3) / 2 + 1, (x.w - 3) / 2 + 1};
    T t = conv_to(m, b, "branch3x3_1", x, m->t1);
    conv_into(m, b, "branch3x3_2", t, &y, 0);
    t = conv_to(m, b, "branch7x7x3_1", x, m->t1);
    t = conv_to(m, b, "branch7x7x3_2", t, m->t2);
    t = conv_to(m, b, "branch7x7x3_3", t, m->t1);
    conv_into(m, b, "branch7x7x3_4", t, &y, 320);
    copy_into(m, &y, 512, maxpool(m, x, m->br, 2, 0));
    return y;
}

// InceptionE (Mixed_7b, 7c): [1x1 320 | 1x1 -> (1x3 | 3x1) 768 | 1x1, 3x3 -> (1x3 | 3x1) 768 |
// pool->1x1 192]; the FID network's pool is avg (count_include_pad=False) in 7b and max in 7c.
static T block_e(Inception *m, const char *b, T x, float *out, int max_pool) {
    T y = {out, x.n, 2048, x.h, x.w};
    conv_into(m, b, "branch1x1", x, &y, 0);
    T t = conv_to(m, b, "branch3x3_1", x, m->t1);
    conv_into(m, b, "branch3x3_2a", t, &y, 320);
    conv_into(m, b, "branch3x3_2b", t, &y, 704);
    t = conv_to(m, b, "branch3x3dbl_1", x, m->t1);
    t = conv_to(m, b, "branch3x3dbl_2", t, m->t2);
    conv_into(m, b, "branch3x3dbl_3a", t, &y, 1088);
    conv_into(m, b, "branch3x3dbl_3b", t, &y, 1472);
    conv_into(m, b, "branch_pool", max_pool ? maxpool(m, x, m->pool, 1, 1) : avgpool(m, x), &y, 1856);
    return y;
}

// One internal batch of n <= max_batch images (backend memory) -> m->feat, m->logit, m->spatial.
static void forward_batch(Inception *m, const float *imgs, int n, int C, int H, int W, int want_logits,
                          int want_spatial) {
    const Backend *be = m->be;
    float *a = m->act[0], *b = m->act[1];
    const int S = INCEPTION_SIZE;
    if (C == 3) be->resize_bilinear_fwd(a, imgs, n, 3, H, W, S, S);
    else {  // grayscale: resized once, then replicated to RGB
        be->resize_bilinear_fwd(b, imgs, n, 1, H, W, S, S);
        for (int c = 0; c < 3; c++) be->channel_copy_fwd(a, 3, c, b, 1, 0, 1, n, S * S);
    }
    T x = {a, n, 3, S, S};                          // (2x - 1 is folded into the first conv)
    x = conv_to(m, NULL, "Conv2d_1a_3x3", x, b);   // 32 x 149 x 149
    x = conv_to(m, NULL, "Conv2d_2a_3x3", x, a);   // 32 x 147 x 147
    x = conv_to(m, NULL, "Conv2d_2b_3x3", x, b);   // 64 x 147 x 147
    x = maxpool(m, x, a, 2, 0);                    // 64 x 73 x 73
    x = conv_to(m, NULL, "Conv2d_3b_1x1", x, b);   // 80 x 73 x 73
    x = conv_to(m, NULL, "Conv2d_4a_3x3", x, a);   // 192 x 71 x 71
    x = maxpool(m, x, b, 2, 0);                    // 192 x 35 x 35
    x = block_a(m, "Mixed_5b", x, a, 32);          // 256 x 35 x 35
    x = block_a(m, "Mixed_5c", x, b, 64);          // 288 x 35 x 35
    x = block_a(m, "Mixed_5d", x, a, 64);          // 288 x 35 x 35
    x = block_b(m, "Mixed_6a", x, b);              // 768 x 17 x 17
    x = block_c(m, "Mixed_6b", x, a);
    x = block_c(m, "Mixed_6c", x, b);
    x = block_c(m, "Mixed_6d", x, a);
    if (want_spatial) {
        // sFID: TF's mixed_6/conv is Mixed_6d.branch1x1 (after BN and ReLU), channels 0..191 of
        // the block's output; the first 7, flattened in TF's NHWC order [17, 17, 7].
        be->channel_copy_fwd(m->sp7, SPATIAL_C, 0, x.p, x.c, 0, SPATIAL_C, n, SPATIAL_HW);
        be->nchw_to_tokens_fwd(m->spatial, m->sp7, n, SPATIAL_C, SPATIAL_HW);
    }
    x = block_c(m, "Mixed_6e", x, b);
    x = block_d(m, "Mixed_7a", x, a);              // 1280 x 8 x 8
    x = block_e(m, "Mixed_7b", x, b, 0);           // 2048 x 8 x 8
    x = block_e(m, "Mixed_7c", x, a, 1);
    be->mean_hw_fwd(m->feat, x.p, n, x.c, x.h * x.w);  // pool3
    if (want_logits) {
        be->linear_fwd(m->logit, m->feat, m->params + m->fc_off, NULL, n, INCEPTION_DIM, INCEPTION_CLASSES);
        m->flops += 2.0 * n * INCEPTION_DIM * INCEPTION_CLASSES;
    }
}

int inception_forward_all(Inception *m, const float *imgs, int N, int C, int H, int W, float *pool3, float *logits,
                          float *spatial, MalaErr *err) {
    if (N < 0 || (C != 1 && C != 3) || H < 1 || W < 1 || (N > 0 && (!imgs || !pool3)))
        return mala_errf(err, "inception_forward: bad input [N=%d, C=%d, H=%d, W=%d] (C must be 1 or 3)", N, C, H, W);
    const Backend *be = m->be;
    const int host = backend_on_host(be);  // the CPU backend reads the caller's array as it is
    // Full fp32 products for the forward whatever the backend's setting (pytorch-fid's parity);
    // the setting is restored after.
    // (int8 is the DiT blocks' linears only: this network's products are fp32 under it)
    const int reduced = strcmp(be->precision(), "fp32") && strcmp(be->precision(), "int8");  // TF32, bf16
    if (reduced) be->set_precision(1);
    const size_t per = (size_t)C * H * W;
    for (int i = 0; i < N; i += m->max_batch) {
        int n = N - i < m->max_batch ? N - i : m->max_batch;
        const float *src = imgs + (size_t)i * per;
        if (!host) {
            if (m->stage_floats < (size_t)n * per) {  // grows only when a larger input arrives
                if (m->stage) be->release(m->stage);
                m->stage_floats = (size_t)m->max_batch * per;
                m->stage = dev_alloc(be, m->stage_floats);
            }
            be->to_device(m->stage, src, (size_t)n * per * sizeof(float));
            src = m->stage;
        }
        forward_batch(m, src, n, C, H, W, logits != NULL, spatial != NULL);
        be->to_host(pool3 + (size_t)i * INCEPTION_DIM, m->feat, (size_t)n * INCEPTION_DIM * sizeof(float));
        if (logits)
            be->to_host(logits + (size_t)i * INCEPTION_CLASSES, m->logit, (size_t)n * INCEPTION_CLASSES * sizeof(float));
        if (spatial)
            be->to_host(spatial + (size_t)i * INCEPTION_SPATIAL_DIM, m->spatial,
                        (size_t)n * INCEPTION_SPATIAL_DIM * sizeof(float));
    }
    if (reduced) be->set_precision(0);
    return 0;
}

int inception_forward(Inception *m, const float *imgs, int N, int C, int H, int W, float *pool3, float *logits,
                      MalaErr *err) {
    return inception_forward_all(m, imgs, N, C, H, W, pool3, logits, NULL, err);
}

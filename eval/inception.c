// defines: inception_build, inception_load, inception_random, inception_free, inception_forward,
//          inception_max_batch, inception_tensors, eval_rand_seed, eval_rand_u, eval_rand_fill,
//          inception_random_tensor
#include "inception.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "safetensors.h"     // defines: st_open, st_load_f32, st_close
#include "torch_legacy.h"    // defines: torch_legacy_open, torch_legacy_find, torch_legacy_read_f32

#define BN_EPS 0.001
#define NCONV 94
#define WORK_FLOATS ((size_t)4032 * 1024)  // im2col scratch: 1024 rows of the widest patch (448*3*3)
// Per-image activation sizes (floats), from the shapes along the network:
#define ACT_FLOATS ((size_t)147 * 147 * 64)   // largest: Conv2d_2b_3x3's output
#define TMP_FLOATS ((size_t)35 * 35 * 96)     // largest branch intermediate (Mixed_5x)
#define POOL_FLOATS ((size_t)35 * 35 * 288)   // largest pooled block input (Mixed_5d / 6a)

typedef struct {
    char name[48];   // "Mixed_6b.branch7x7_2"
    ConvGeom g;
    size_t w_off, b_off;  // into params: w [cout, kh, kw, cin] (BN folded), b [cout]
} IncConv;

struct Inception {
    const EvalOps *ops;
    IncConv conv[NCONV];
    float *params;       // all folded conv weights and biases, then fc.weight [1008, 2048]
    size_t nparams, fc_off;
    int max_batch;
    float *act[2], *t1, *t2, *pool, *work, *feat, *logit;
    float *stage;        // device copy of the input (non-host backends), stage_floats long
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
    c->g = (ConvGeom){cin, cout, kh, kw, s, s, ph, pw};
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
        const ConvGeom *g = &conv[i].g;
        InceptionTensor *x = &out[k++];
        join_name(x->name, sizeof x->name, conv[i].name, "conv.weight");
        x->ndim = 4;
        x->shape[0] = g->cout; x->shape[1] = g->cin; x->shape[2] = g->kh; x->shape[3] = g->kw;
        for (int j = 0; j < 4; j++) {
            x = &out[k++];
            join_name(x->name, sizeof x->name, conv[i].name, kBnParts[j]);
            x->ndim = 1;
            x->shape[0] = g->cout;
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
// Building: read every BasicConv2d, fold BatchNorm, lay the weights out as [cout, kh, kw, cin]
// ---------------------------------------------------------------------------------------------
static void *dev_alloc(const EvalOps *ops, size_t floats) { return ops->alloc(floats * sizeof(float)); }

Inception *inception_build(InceptionTensorFn fn, void *ctx, const EvalOps *ops, int max_batch, MalaErr *err) {
    if (!ops) ops = eval_ops_cpu();
    if (max_batch <= 0) max_batch = INCEPTION_DEFAULT_BATCH;
    Inception *m = xcalloc(1, sizeof *m);
    m->ops = ops;
    m->max_batch = max_batch;
    int nc = build_table(m->conv);
    size_t off = 0, maxw = 0, maxc = 0;
    for (int i = 0; i < nc; i++) {
        const ConvGeom *g = &m->conv[i].g;
        size_t nw = (size_t)g->cout * g->kh * g->kw * g->cin;
        m->conv[i].w_off = off;
        m->conv[i].b_off = off + nw;
        off += nw + (size_t)g->cout;
        if (nw > maxw) maxw = nw;
        if ((size_t)g->cout > maxc) maxc = (size_t)g->cout;
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
        const ConvGeom *g = &c->g;
        int64_t wshape[4] = {g->cout, g->cin, g->kh, g->kw}, bshape[1] = {g->cout};
        join_name(name, sizeof name, c->name, "conv.weight");
        rc = fn(ctx, name, 4, wshape, w, err);
        for (int j = 0; j < 4 && !rc; j++) {
            join_name(name, sizeof name, c->name, kBnParts[j]);
            rc = fn(ctx, name, 1, bshape, bn + (size_t)j * g->cout, err);
        }
        if (rc) break;
        // y = (conv(x) - mean) / sqrt(var + eps) * gamma + beta  ==  conv(x) * s + (beta - mean * s)
        const float *gamma = bn, *beta = bn + g->cout, *mean = bn + 2 * g->cout, *var = bn + 3 * g->cout;
        float *wo = host + c->w_off, *bo = host + c->b_off;
        const int kk = g->kh * g->kw;
        for (int o = 0; o < g->cout; o++) {
            double s = (double)gamma[o] / sqrt((double)var[o] + BN_EPS);
            bo[o] = (float)((double)beta[o] - (double)mean[o] * s);
            for (int ci = 0; ci < g->cin; ci++)
                for (int k = 0; k < kk; k++)  // OIHW -> O(HW)I
                    wo[((size_t)o * kk + k) * g->cin + ci] = (float)(w[((size_t)o * g->cin + ci) * kk + k] * s);
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
    m->params = dev_alloc(ops, m->nparams);
    ops->to_device(m->params, host, m->nparams * sizeof *host);
    free(host);

    size_t B = (size_t)max_batch;
    m->act[0] = dev_alloc(ops, B * ACT_FLOATS);
    m->act[1] = dev_alloc(ops, B * ACT_FLOATS);
    m->t1 = dev_alloc(ops, B * TMP_FLOATS);
    m->t2 = dev_alloc(ops, B * TMP_FLOATS);
    m->pool = dev_alloc(ops, B * POOL_FLOATS);
    m->work = dev_alloc(ops, WORK_FLOATS);
    m->feat = dev_alloc(ops, B * INCEPTION_DIM);
    m->logit = dev_alloc(ops, B * INCEPTION_CLASSES);
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

Inception *inception_load(const char *path, const EvalOps *ops, int max_batch, MalaErr *err) {
    Inception *m = NULL;
    if (ends_with(path, ".safetensors")) {
        StFile f = {0};
        if (st_open(&f, path, err) == 0) {
            m = inception_build(st_source, &f, ops, max_batch, err);
            st_close(&f);
        }
    } else {
        TorchLegacy *tl = torch_legacy_open(path, err);
        if (tl) {
            LegacyCtx ctx = {tl, path};
            m = inception_build(legacy_source, &ctx, ops, max_batch, err);
            torch_legacy_close(tl);
        }
    }
    if (!m) add_hint(err);
    return m;
}

Inception *inception_random(const EvalOps *ops, int max_batch) {
    MalaErr err;
    Inception *m = inception_build(random_source, NULL, ops, max_batch, &err);
    if (!m) FATAL("%s", err.msg);
    return m;
}

void inception_free(Inception *m) {
    if (!m) return;
    const EvalOps *o = m->ops;
    o->release(m->params);
    o->release(m->act[0]);
    o->release(m->act[1]);
    o->release(m->t1);
    o->release(m->t2);
    o->release(m->pool);
    o->release(m->work);
    o->release(m->feat);
    o->release(m->logit);
    if (m->stage) o->release(m->stage);
    free(m);
}

int inception_max_batch(const Inception *m) { return m->max_batch; }
double inception_flops(const Inception *m) { return m->flops; }

// ---------------------------------------------------------------------------------------------
// Forward (NHWC). A Tensor is a buffer with its shape; conv() writes into a channel slice.
// ---------------------------------------------------------------------------------------------
typedef struct { float *p; int n, h, w, c; } T;

static const IncConv *find_conv(const Inception *m, const char *block, const char *name) {
    char full[64];
    join_name(full, sizeof full, block, name);
    for (int i = 0; i < NCONV; i++)
        if (strcmp(m->conv[i].name, full) == 0) return &m->conv[i];
    FATAL("inception: no layer %s", full);
}

// out channels [c0, c0 + cout) of dst (dst->c channels per pixel) = BasicConv2d(x)
static T conv(Inception *m, const char *block, const char *name, T x, float *dst, int dst_c, int c0) {
    const IncConv *c = find_conv(m, block, name);
    const ConvGeom *g = &c->g;
    if (g->cin != x.c) FATAL("inception: %s expects %d channels, got %d", c->name, g->cin, x.c);
    T y = {dst, x.n, (x.h + 2 * g->ph - g->kh) / g->sh + 1, (x.w + 2 * g->pw - g->kw) / g->sw + 1, dst_c};
    m->flops += 2.0 * y.n * y.h * y.w * g->cout * g->kh * g->kw * g->cin;
    m->ops->conv_relu(dst + c0, dst_c, x.p, m->params + c->w_off, m->params + c->b_off, g, x.n, x.h, x.w, m->work,
                      WORK_FLOATS);
    return y;
}
// A whole-tensor conv into its own buffer.
static T conv_to(Inception *m, const char *block, const char *name, T x, float *dst) {
    return conv(m, block, name, x, dst, find_conv(m, block, name)->g.cout, 0);
}

// InceptionA (Mixed_5b..5d): [1x1 64 | 5x5 64 | 3x3dbl 96 | avgpool->1x1 pf]
static T block_a(Inception *m, const char *b, T x, float *out, int pf) {
    const int C = 64 + 64 + 96 + pf;
    T y = {out, x.n, x.h, x.w, C};
    conv(m, b, "branch1x1", x, out, C, 0);
    T t = conv_to(m, b, "branch5x5_1", x, m->t1);
    conv(m, b, "branch5x5_2", t, out, C, 64);
    t = conv_to(m, b, "branch3x3dbl_1", x, m->t1);
    t = conv_to(m, b, "branch3x3dbl_2", t, m->t2);
    conv(m, b, "branch3x3dbl_3", t, out, C, 128);
    m->ops->avgpool3(m->pool, x.p, x.n, x.h, x.w, x.c);
    T p = {m->pool, x.n, x.h, x.w, x.c};
    conv(m, b, "branch_pool", p, out, C, 224);
    return y;
}

// InceptionB (Mixed_6a): [3x3 s2 384 | 3x3dbl s2 96 | maxpool s2 (input channels)]
static T block_b(Inception *m, const char *b, T x, float *out) {
    const int C = 384 + 96 + x.c;
    T y = {out, x.n, (x.h - 3) / 2 + 1, (x.w - 3) / 2 + 1, C};
    conv(m, b, "branch3x3", x, out, C, 0);
    T t = conv_to(m, b, "branch3x3dbl_1", x, m->t1);
    t = conv_to(m, b, "branch3x3dbl_2", t, m->t2);
    conv(m, b, "branch3x3dbl_3", t, out, C, 384);
    m->ops->maxpool3(out + 480, C, x.p, x.n, x.h, x.w, x.c, 2, 0);
    return y;
}

// InceptionC (Mixed_6b..6e): [1x1 192 | 1x7,7x1 192 | 7x1,1x7,7x1,1x7 192 | avgpool->1x1 192]
static T block_c(Inception *m, const char *b, T x, float *out) {
    const int C = 768;
    T y = {out, x.n, x.h, x.w, C};
    conv(m, b, "branch1x1", x, out, C, 0);
    T t = conv_to(m, b, "branch7x7_1", x, m->t1);
    t = conv_to(m, b, "branch7x7_2", t, m->t2);
    conv(m, b, "branch7x7_3", t, out, C, 192);
    t = conv_to(m, b, "branch7x7dbl_1", x, m->t1);
    t = conv_to(m, b, "branch7x7dbl_2", t, m->t2);
    t = conv_to(m, b, "branch7x7dbl_3", t, m->t1);
    t = conv_to(m, b, "branch7x7dbl_4", t, m->t2);
    conv(m, b, "branch7x7dbl_5", t, out, C, 384);
    m->ops->avgpool3(m->pool, x.p, x.n, x.h, x.w, x.c);
    T p = {m->pool, x.n, x.h, x.w, x.c};
    conv(m, b, "branch_pool", p, out, C, 576);
    return y;
}

// InceptionD (Mixed_7a): [1x1, 3x3 s2 320 | 1x1, 1x7, 7x1, 3x3 s2 192 | maxpool s2 768]
static T block_d(Inception *m, const char *b, T x, float *out) {
    const int C = 320 + 192 + x.c;
    T y = {out, x.n, (x.h - 3) / 2 + 1, (x.w - 3) / 2 + 1, C};
    T t = conv_to(m, b, "branch3x3_1", x, m->t1);
    conv(m, b, "branch3x3_2", t, out, C, 0);
    t = conv_to(m, b, "branch7x7x3_1", x, m->t1);
    t = conv_to(m, b, "branch7x7x3_2", t, m->t2);
    t = conv_to(m, b, "branch7x7x3_3", t, m->t1);
    conv(m, b, "branch7x7x3_4", t, out, C, 320);
    m->ops->maxpool3(out + 512, C, x.p, x.n, x.h, x.w, x.c, 2, 0);
    return y;
}

// InceptionE (Mixed_7b, 7c): [1x1 320 | 1x1 -> (1x3 | 3x1) 768 | 1x1, 3x3 -> (1x3 | 3x1) 768 |
// pool->1x1 192]; the FID network's pool is avg (count_include_pad=False) in 7b and max in 7c.
static T block_e(Inception *m, const char *b, T x, float *out, int max_pool) {
    const int C = 2048;
    T y = {out, x.n, x.h, x.w, C};
    conv(m, b, "branch1x1", x, out, C, 0);
    T t = conv_to(m, b, "branch3x3_1", x, m->t1);
    conv(m, b, "branch3x3_2a", t, out, C, 320);
    conv(m, b, "branch3x3_2b", t, out, C, 704);
    t = conv_to(m, b, "branch3x3dbl_1", x, m->t1);
    t = conv_to(m, b, "branch3x3dbl_2", t, m->t2);
    conv(m, b, "branch3x3dbl_3a", t, out, C, 1088);
    conv(m, b, "branch3x3dbl_3b", t, out, C, 1472);
    if (max_pool) m->ops->maxpool3(m->pool, x.c, x.p, x.n, x.h, x.w, x.c, 1, 1);
    else m->ops->avgpool3(m->pool, x.p, x.n, x.h, x.w, x.c);
    T p = {m->pool, x.n, x.h, x.w, x.c};
    conv(m, b, "branch_pool", p, out, C, 1856);
    return y;
}

static T maxpool_s2(Inception *m, T x, float *out) {
    T y = {out, x.n, (x.h - 3) / 2 + 1, (x.w - 3) / 2 + 1, x.c};
    m->ops->maxpool3(out, x.c, x.p, x.n, x.h, x.w, x.c, 2, 0);
    return y;
}

// One internal batch of n <= max_batch images (device pointers) -> m->feat, m->logit.
static void forward_batch(Inception *m, const float *imgs, int n, int C, int H, int W, int want_logits) {
    float *a = m->act[0], *b = m->act[1];
    m->ops->resize_input(a, imgs, n, C, H, W, INCEPTION_SIZE);
    T x = {a, n, INCEPTION_SIZE, INCEPTION_SIZE, 3};
    x = conv_to(m, NULL, "Conv2d_1a_3x3", x, b);   // 149 x 149 x 32
    x = conv_to(m, NULL, "Conv2d_2a_3x3", x, a);   // 147 x 147 x 32
    x = conv_to(m, NULL, "Conv2d_2b_3x3", x, b);   // 147 x 147 x 64
    x = maxpool_s2(m, x, a);                      // 73 x 73 x 64
    x = conv_to(m, NULL, "Conv2d_3b_1x1", x, b);   // 73 x 73 x 80
    x = conv_to(m, NULL, "Conv2d_4a_3x3", x, a);   // 71 x 71 x 192
    x = maxpool_s2(m, x, b);                      // 35 x 35 x 192
    x = block_a(m, "Mixed_5b", x, a, 32);         // 35 x 35 x 256
    x = block_a(m, "Mixed_5c", x, b, 64);         // 35 x 35 x 288
    x = block_a(m, "Mixed_5d", x, a, 64);         // 35 x 35 x 288
    x = block_b(m, "Mixed_6a", x, b);             // 17 x 17 x 768
    x = block_c(m, "Mixed_6b", x, a);
    x = block_c(m, "Mixed_6c", x, b);
    x = block_c(m, "Mixed_6d", x, a);
    x = block_c(m, "Mixed_6e", x, b);
    x = block_d(m, "Mixed_7a", x, a);             // 8 x 8 x 1280
    x = block_e(m, "Mixed_7b", x, b, 0);          // 8 x 8 x 2048
    x = block_e(m, "Mixed_7c", x, a, 1);
    m->ops->mean_hw(m->feat, x.p, n, x.h * x.w, x.c);  // pool3
    if (want_logits) {
        m->ops->linear_nt(m->logit, m->feat, m->params + m->fc_off, n, INCEPTION_DIM, INCEPTION_CLASSES);
        m->flops += 2.0 * n * INCEPTION_DIM * INCEPTION_CLASSES;
    }
}

int inception_forward(Inception *m, const float *imgs, int N, int C, int H, int W, float *pool3, float *logits,
                      MalaErr *err) {
    if (N < 0 || (C != 1 && C != 3) || H < 1 || W < 1 || (N > 0 && (!imgs || !pool3)))
        return mala_errf(err, "inception_forward: bad input [N=%d, C=%d, H=%d, W=%d] (C must be 1 or 3)", N, C, H, W);
    const EvalOps *o = m->ops;
    const size_t per = (size_t)C * H * W;
    if (o->begin) o->begin();
    for (int i = 0; i < N; i += m->max_batch) {
        int n = N - i < m->max_batch ? N - i : m->max_batch;
        const float *src = imgs + (size_t)i * per;
        if (!o->host_memory) {
            if (m->stage_floats < (size_t)n * per) {  // grows only when a larger input arrives
                if (m->stage) o->release(m->stage);
                m->stage_floats = (size_t)m->max_batch * per;
                m->stage = dev_alloc(o, m->stage_floats);
            }
            o->to_device(m->stage, src, (size_t)n * per * sizeof(float));
            src = m->stage;
        }
        forward_batch(m, src, n, C, H, W, logits != NULL);
        o->to_host(pool3 + (size_t)i * INCEPTION_DIM, m->feat, (size_t)n * INCEPTION_DIM * sizeof(float));
        if (logits)
            o->to_host(logits + (size_t)i * INCEPTION_CLASSES, m->logit, (size_t)n * INCEPTION_CLASSES * sizeof(float));
    }
    if (o->end) o->end();
    return 0;
}

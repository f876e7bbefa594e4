// AutoencoderKL forward through the op table (docs/math/vae.md "Primitives", "Encoder",
// "Decoder"), loading, and the start-up memory plan. Every layer helper runs in one of two modes:
// planning (v->dry: only the sizes of its outputs, its conv workspace and its attention scratch
// are recorded) and computing. The plan is a dry run of the encoder and the decoder at the largest
// (batch, h, w), so the buffers cover exactly what the computing run touches.
// defines: vae_load, vae_random, vae_free, vae_config, vae_max_batch, vae_activation_bytes,
//          vae_weight_bytes, vae_batch_for, vae_encode, vae_decode, vae_encode_macs, vae_decode_macs
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "core/conv_plan.h"
#include "model/net.h"  // defines: Arena, arena_take
#include "core/rng.h"
#include "model/vae.h"
#include "model/vae_file.h"

#define GN_EPS 1e-6f

typedef struct {
    size_t map, work, qkv, scores, stats;  // floats: one map buffer, conv scratch, qkv rows, T x T, GN stats
} VaePlan;

struct Vae {
    const Backend *be;
    VaeTable t;
    float *w;                // weights (backend)
    int max_batch, max_h, max_w;
    int dry;                 // planning pass: record sizes only
    VaePlan plan;            // the sizes recorded (dry) or allocated
    double macs;             // multiply-accumulates counted by the pass (per batch)
    void *act;               // the activation block
    float *buf[3], *work, *qkv, *scores, *mean, *rstd;
    float *host;             // max_batch images of moments for the posterior split
};

// ---------------------------------------------------------------------------------------------
// Weights by name

static const float *W(const Vae *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const float *W(const Vae *v, const char *fmt, ...) {
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const VaeParam *p = vae_table_find(&v->t, name);
    CHECK(p != NULL, "AutoencoderKL: no tensor '%s' in the table", name);
    return v->dry ? NULL : v->w + p->offset;
}

static void grow(size_t *m, size_t n) { if (n > *m) *m = n; }

// ---------------------------------------------------------------------------------------------
// Layers. Maps are [B, C, H, W] in the three map buffers; each layer names its output and scratch.

typedef struct { int B, C, H, W; } Map;

static size_t map_floats(Map m) { return (size_t)m.B * m.C * m.H * m.W; }

// out = conv_{prefix}(x): k x k (k = 3 pad 1, or 1 unpadded), or the stride-2 down conv with
// F.pad(x, (0, 1, 0, 1)).
typedef enum { CONV3 = 0, CONV1 = 1, CONV_DOWN = 2 } ConvKind;

static Map conv(Vae *v, float *out, const float *x, Map m, int cout, ConvKind kind, const char *prefix) {
    ConvShape s = {m.B, m.C, m.H, m.W, cout, 3, 3, 1, 1, 1, 1, 1};
    if (kind == CONV1) s.kh = s.kw = 1, s.pt = s.pb = s.pl = s.pr = 0;
    if (kind == CONV_DOWN) s.stride = 2, s.pt = s.pl = 0;
    Map o = {m.B, cout, conv_out_h(s), conv_out_w(s)};
    const float *w = W(v, "%s.weight", prefix), *b = W(v, "%s.bias", prefix);
    if (v->dry) {
        grow(&v->plan.map, map_floats(m));
        grow(&v->plan.map, map_floats(o));
        grow(&v->plan.work, v->be->conv2d_workspace_floats(s));
    } else {
        v->be->conv2d_fwd(out, x, w, b, s, v->work, v->plan.work);
    }
    v->macs += (double)map_floats(o) * m.C * s.kh * s.kw;
    return o;
}

// out = GroupNorm_{prefix}(x), followed by SiLU when silu.
static void gnorm(Vae *v, float *out, const float *x, Map m, int silu, const char *prefix) {
    const float *w = W(v, "%s.weight", prefix), *b = W(v, "%s.bias", prefix);
    const int G = v->t.c.groups;
    if (v->dry) {
        grow(&v->plan.map, map_floats(m));
        grow(&v->plan.stats, (size_t)m.B * G);
        return;
    }
    v->be->groupnorm_fwd(out, v->mean, v->rstd, x, w, b, m.B, m.C, m.H * m.W, G, GN_EPS);
    if (silu) v->be->silu_fwd(out, out, map_floats(m));
}

// ResnetBlock2D: out = sc(x) + conv2(silu(GN2(conv1(silu(GN1(x)))))); s is scratch.
static Map resnet(Vae *v, float *out, const float *x, float *s, Map m, int cout, const char *prefix) {
    char p[96];
    snprintf(p, sizeof p, "%s.norm1", prefix); gnorm(v, s, x, m, 1, p);
    snprintf(p, sizeof p, "%s.conv1", prefix); Map o = conv(v, out, s, m, cout, CONV3, p);
    snprintf(p, sizeof p, "%s.norm2", prefix); gnorm(v, s, out, o, 1, p);
    snprintf(p, sizeof p, "%s.conv2", prefix); conv(v, out, s, o, cout, CONV3, p);
    const float *sc = x;
    if (m.C != cout) {
        snprintf(p, sizeof p, "%s.conv_shortcut", prefix);
        conv(v, s, x, m, cout, CONV1, p);
        sc = s;
    }
    if (!v->dry) v->be->add(out, out, sc, map_floats(o));
    return o;
}

// Single-head attention over the H*W pixels: out = x + proj(softmax(q k^T / sqrt(C)) v),
// q, k, v = one fused [3C, C] projection of GN(x) as token rows.
static void attention(Vae *v, float *out, const float *x, float *s, Map m, const char *prefix) {
    const int T = m.H * m.W, C = m.C, B = m.B;
    const int old = v->t.c.naming == VAE_NAMES_OLD;
    char p[96];
    snprintf(p, sizeof p, "%s.group_norm", prefix);
    gnorm(v, s, x, m, 0, p);
    const float *wqkv = W(v, "%s.%s.weight", prefix, old ? "query" : "to_q");
    const float *bqkv = W(v, "%s.%s.bias", prefix, old ? "query" : "to_q");
    const float *wo = W(v, "%s.%s.weight", prefix, old ? "proj_attn" : "to_out.0");
    const float *bo = W(v, "%s.%s.bias", prefix, old ? "proj_attn" : "to_out.0");
    v->macs += (double)B * (4.0 * T * C * C + 2.0 * T * T * C);
    AttnShape a = {1, T, C, 1, m.H, m.W};
    if (v->dry) {
        grow(&v->plan.qkv, (size_t)B * T * 3 * C);
        grow(&v->plan.scores, v->be->softmax_cache_floats(a));
        return;
    }
    const Backend *be = v->be;
    be->nchw_to_tokens_fwd(out, s, B, C, T);
    be->linear_fwd(v->qkv, out, wqkv, bqkv, B * T, C, 3 * C);
    for (int b = 0; b < B; b++)  // one image at a time: the T x T scores stay one block
        be->softmax_fwd(s + (size_t)b * T * C, v->scores, v->qkv + (size_t)b * T * 3 * C, NULL, a);
    be->linear_fwd(out, s, wo, bo, B * T, C, C);
    be->tokens_to_nchw_fwd(s, out, B, C, T);
    be->add(out, s, x, map_floats(m));
}

// UNetMidBlock2D: resnets.0, attentions.0, resnets.1. Input in buf[*cur]; the result too.
static void mid_block(Vae *v, int *cur, Map m, const char *part) {
    char p[48];
    float **b = v->buf;
    const int x = *cur, y = (x + 1) % 3, s = (x + 2) % 3;
    snprintf(p, sizeof p, "%s.mid_block.resnets.0", part); resnet(v, b[y], b[x], b[s], m, m.C, p);
    snprintf(p, sizeof p, "%s.mid_block.attentions.0", part); attention(v, b[x], b[y], b[s], m, p);
    snprintf(p, sizeof p, "%s.mid_block.resnets.1", part); resnet(v, b[y], b[x], b[s], m, m.C, p);
    *cur = y;
}

// moments [B, 2*latent, H/f, W/f] = quant_conv(encoder(x)) with x in buf[0]; returns the buffer.
static float *encoder(Vae *v, Map m) {
    const VaeConfig *c = &v->t.c;
    float **b = v->buf;
    char p[96];
    int x = 0;
#define ROT(expr) do { const int y_ = (x + 1) % 3, s_ = (x + 2) % 3; (void)s_; expr; x = y_; } while (0)
    ROT(m = conv(v, b[y_], b[x], m, c->ch[0], CONV3, "encoder.conv_in"));
    for (int i = 0; i < c->levels; i++) {
        for (int j = 0; j < c->layers; j++) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.resnets.%d", i, j);
            ROT(m = resnet(v, b[y_], b[x], b[s_], m, c->ch[i], p));
        }
        if (i < c->levels - 1) {
            snprintf(p, sizeof p, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            ROT(m = conv(v, b[y_], b[x], m, c->ch[i], CONV_DOWN, p));
        }
    }
    mid_block(v, &x, m, "encoder");
    ROT(gnorm(v, b[y_], b[x], m, 1, "encoder.conv_norm_out"));
    ROT(m = conv(v, b[y_], b[x], m, 2 * c->latent, CONV3, "encoder.conv_out"));
    ROT(m = conv(v, b[y_], b[x], m, 2 * c->latent, CONV1, "quant_conv"));
    return b[x];
}

// x [B, out_channels, h*f, w*f] = decoder(post_quant_conv(z)) with unscaled z in buf[0].
static float *decoder(Vae *v, Map m) {
    const VaeConfig *c = &v->t.c;
    float **b = v->buf;
    char p[96];
    int x = 0;
    const int L = c->levels;
    ROT(m = conv(v, b[y_], b[x], m, c->latent, CONV1, "post_quant_conv"));
    ROT(m = conv(v, b[y_], b[x], m, c->ch[L - 1], CONV3, "decoder.conv_in"));
    mid_block(v, &x, m, "decoder");
    for (int i = 0; i < L; i++) {
        const int co = c->ch[L - 1 - i];
        for (int j = 0; j < c->layers + 1; j++) {
            snprintf(p, sizeof p, "decoder.up_blocks.%d.resnets.%d", i, j);
            ROT(m = resnet(v, b[y_], b[x], b[s_], m, co, p));
        }
        if (i < L - 1) {
            const Map up = {m.B, m.C, 2 * m.H, 2 * m.W};
            if (v->dry) grow(&v->plan.map, map_floats(up));
            else v->be->upsample2x_fwd(b[(x + 1) % 3], b[x], m.B, m.C, m.H, m.W);
            x = (x + 1) % 3;
            snprintf(p, sizeof p, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            ROT(m = conv(v, b[y_], b[x], up, co, CONV3, p));
        }
    }
    ROT(gnorm(v, b[y_], b[x], m, 1, "decoder.conv_norm_out"));
    ROT(m = conv(v, b[y_], b[x], m, c->out_channels, CONV3, "decoder.conv_out"));
#undef ROT
    return b[x];
}

// ---------------------------------------------------------------------------------------------
// Planning and building

// The sizes a pass over (B, h, w) pixels needs (both directions).
static VaePlan plan_for(Vae *v, int B, int h, int w) {
    const int f = vae_factor(&v->t.c);
    memset(&v->plan, 0, sizeof v->plan);
    v->dry = 1;
    encoder(v, (Map){B, v->t.c.in_channels, h, w});
    decoder(v, (Map){B, v->t.c.latent, h / f, w / f});
    v->dry = 0;
    v->macs = 0;
    return v->plan;
}

static size_t plan_bytes(VaePlan p) {
    Arena a = {NULL, 0};
    for (int i = 0; i < 3; i++) arena_take(&a, p.map);
    arena_take(&a, p.work);
    arena_take(&a, p.qkv);
    arena_take(&a, p.scores);
    arena_take(&a, p.stats);
    arena_take(&a, p.stats);
    return a.used;
}

static int shape_ok(const Vae *v, int h, int w, MalaErr *err) {
    const int f = vae_factor(&v->t.c);
    if (h < f || w < f || h % f || w % f)
        return mala_errf(err, "AutoencoderKL: image size %dx%d is not a positive multiple of %d", h, w, f);
    return 0;
}

static Vae *vae_new(const VaeConfig *c, const Backend *be, int max_batch, int max_h, int max_w, MalaErr *err) {
    Vae *v = xcalloc(1, sizeof *v);
    v->be = be;
    if (vae_table_build(&v->t, c, err) || shape_ok(v, max_h, max_w, err) ||
        (max_batch < 1 && mala_errf(err, "AutoencoderKL: batch %d", max_batch))) {
        vae_table_free(&v->t);
        free(v);
        return NULL;
    }
    v->max_batch = max_batch;
    v->max_h = max_h;
    v->max_w = max_w;
    VaePlan p = plan_for(v, max_batch, max_h, max_w);
    v->plan = p;
    Arena a = {NULL, 0};
    v->act = be->alloc(plan_bytes(p));
    a.base = v->act;
    for (int i = 0; i < 3; i++) v->buf[i] = arena_take(&a, p.map);
    v->work = arena_take(&a, p.work);
    v->qkv = arena_take(&a, p.qkv);
    v->scores = arena_take(&a, p.scores);
    v->mean = arena_take(&a, p.stats);
    v->rstd = arena_take(&a, p.stats);
    v->w = be->alloc(sizeof(float) * v->t.floats);
    const int f = vae_factor(c);
    v->host = xmalloc(sizeof(float) * (size_t)max_batch * 2 * c->latent * (max_h / f) * (max_w / f));
    return v;
}

void vae_free(Vae *v) {
    if (!v) return;
    v->be->release(v->w);
    v->be->release(v->act);
    vae_table_free(&v->t);
    free(v->host);
    free(v);
}

Vae *vae_load(const char *path, const Backend *be, int max_batch, int max_h, int max_w, MalaErr *err) {
    VaeFile f;
    if (vae_file_open(&f, path, err)) return NULL;
    Vae *v = vae_new(&f.c, be, max_batch, max_h, max_w, err);
    if (v) {
        float *h = xmalloc(sizeof(float) * v->t.floats);
        int rc = 0;
        for (int i = 0; i < v->t.n && !rc; i++) {
            const VaeParam *p = &v->t.p[i];
            rc = vae_file_read(&f, p->name, h + p->offset, err);
            for (size_t k = 0; k < p->numel && !rc; k++)
                if (!isfinite(h[p->offset + k]))
                    rc = mala_errf(err, "%s: tensor '%s' holds a non-finite value at [%zu]", f.path, p->name, k);
        }
        if (!rc) be->to_device(v->w, h, sizeof(float) * v->t.floats);
        free(h);
        if (rc) { vae_free(v); v = NULL; }
    }
    vae_file_close(&f);
    return v;
}

Vae *vae_random(const VaeConfig *c, const Backend *be, int max_batch, int max_h, int max_w, uint64_t seed,
                MalaErr *err) {
    Vae *v = vae_new(c, be, max_batch, max_h, max_w, err);
    if (!v) return NULL;
    float *h = xcalloc(v->t.floats, sizeof(float));
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < v->t.n; i++) {
        const VaeParam *p = &v->t.p[i];
        float *d = h + p->offset;
        if (p->ndim >= 2) {  // weights: N(0, 1 / fan_in)
            const double fan = (double)p->numel / (double)p->shape[0];
            rng_normal_fill(&r, d, p->numel);
            for (size_t k = 0; k < p->numel; k++) d[k] *= (float)(1.0 / sqrt(fan));
        } else if (strstr(p->name, "norm") && strstr(p->name, ".weight")) {
            for (size_t k = 0; k < p->numel; k++) d[k] = 1.0f;
        }
    }
    be->to_device(v->w, h, sizeof(float) * v->t.floats);
    free(h);
    return v;
}

const VaeConfig *vae_config(const Vae *v) { return &v->t.c; }
int vae_max_batch(const Vae *v) { return v->max_batch; }

size_t vae_weight_bytes(const VaeConfig *c) {
    VaeTable t;
    MalaErr err;
    if (vae_table_build(&t, c, &err)) return 0;
    const size_t n = t.floats * sizeof(float);
    vae_table_free(&t);
    return n;
}

size_t vae_activation_bytes(const VaeConfig *c, const Backend *be, int batch, int h, int w) {
    Vae v = {.be = be};
    MalaErr err;
    if (vae_table_build(&v.t, c, &err)) return 0;
    const size_t n = plan_bytes(plan_for(&v, batch, h, w));
    vae_table_free(&v.t);
    return n;
}

int vae_batch_for(const VaeConfig *c, const Backend *be, int h, int w, size_t bytes, int cap) {
    int b = 1;
    while (b < cap && vae_activation_bytes(c, be, b + 1, h, w) <= bytes) b++;
    return b;
}

static double macs_of(const VaeConfig *c, int H, int W, int enc) {
    Vae v = {.be = backend_host()};
    MalaErr err;
    if (vae_table_build(&v.t, c, &err)) return 0;
    const int f = vae_factor(c);
    v.dry = 1;
    if (enc) encoder(&v, (Map){1, c->in_channels, H, W});
    else decoder(&v, (Map){1, c->latent, H / f, W / f});
    vae_table_free(&v.t);
    return v.macs;
}
double vae_encode_macs(const VaeConfig *c, int H, int W) { return macs_of(c, H, W, 1); }
double vae_decode_macs(const VaeConfig *c, int H, int W) { return macs_of(c, H, W, 0); }

// ---------------------------------------------------------------------------------------------
// Running

static int size_ok(const Vae *v, int N, int H, int W, MalaErr *err) {
    if (N < 0) return mala_errf(err, "AutoencoderKL: %d images", N);
    if (shape_ok(v, H, W, err)) return -1;
    if (H > v->max_h || W > v->max_w)
        return mala_errf(err, "AutoencoderKL: images of %dx%d pixels, planned for at most %dx%d", H, W, v->max_h,
                         v->max_w);
    return 0;
}

int vae_encode(Vae *v, const float *x, int N, int H, int W, float *mean, float *logvar, MalaErr *err) {
    if (size_ok(v, N, H, W, err)) return -1;
    const VaeConfig *c = &v->t.c;
    const int f = vae_factor(c), Lc = c->latent;
    const size_t in_per = (size_t)c->in_channels * H * W, hw = (size_t)(H / f) * (W / f);
    for (int n0 = 0; n0 < N; n0 += v->max_batch) {
        const int B = N - n0 < v->max_batch ? N - n0 : v->max_batch;
        v->be->to_device(v->buf[0], x + n0 * in_per, sizeof(float) * B * in_per);
        const float *mom = encoder(v, (Map){B, c->in_channels, H, W});
        v->be->to_host(v->host, mom, sizeof(float) * B * 2 * Lc * hw);
        for (int b = 0; b < B; b++) {
            const float *m = v->host + (size_t)b * 2 * Lc * hw;
            const size_t o = (size_t)(n0 + b) * Lc * hw;
            if (mean) memcpy(mean + o, m, sizeof(float) * Lc * hw);
            if (logvar)
                for (size_t k = 0; k < Lc * hw; k++) {
                    const float lv = m[Lc * hw + k];
                    logvar[o + k] = lv < VAE_LOGVAR_MIN ? VAE_LOGVAR_MIN : lv > VAE_LOGVAR_MAX ? VAE_LOGVAR_MAX : lv;
                }
        }
    }
    return 0;
}

int vae_decode(Vae *v, const float *z, int N, int h, int w, float *x, MalaErr *err) {
    const VaeConfig *c = &v->t.c;
    const int f = vae_factor(c);
    if (size_ok(v, N, h * f, w * f, err)) return -1;
    const size_t in_per = (size_t)c->latent * h * w, out_per = (size_t)c->out_channels * h * f * w * f;
    for (int n0 = 0; n0 < N; n0 += v->max_batch) {
        const int B = N - n0 < v->max_batch ? N - n0 : v->max_batch;
        v->be->to_device(v->buf[0], z + n0 * in_per, sizeof(float) * B * in_per);
        v->be->scale(v->buf[0], 1.0f / c->scale, B * in_per);  // diffusers: decode(z / scaling_factor)
        const float *out = decoder(v, (Map){B, c->latent, h, w});
        v->be->to_host(x + n0 * out_per, out, sizeof(float) * B * out_per);
    }
    return 0;
}

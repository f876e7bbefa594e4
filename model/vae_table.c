// The AutoencoderKL's configuration and parameter table: diffusers' state_dict names and shapes
// in registration order (docs/math/vae.md "Config and tensors"), read back off a file's shapes.
// defines: vae_config_sd, vae_factor, vae_describe, vae_table_build, vae_table_free, vae_table_find,
//          vae_config_derive, vae_config_from_file
#include <stdarg.h>
#include <string.h>

#include "formats/st_meta.h"
#include "model/vae.h"

void vae_config_sd(VaeConfig *c) {
    memset(c, 0, sizeof *c);
    c->levels = 4;
    const int ch[4] = {128, 256, 512, 512};
    memcpy(c->ch, ch, sizeof ch);
    c->layers = 2;
    c->in_channels = c->out_channels = 3;
    c->latent = 4;
    c->groups = VAE_DEFAULT_GROUPS;
    c->scale = VAE_SCALE;
}

int vae_factor(const VaeConfig *c) { return 1 << (c->levels - 1); }

void vae_describe(const VaeConfig *c, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "AutoencoderKL block_out_channels");
    for (int i = 0; i < c->levels && k < n; i++) k += (size_t)snprintf(buf + k, n - k, " %d", c->ch[i]);
    if (k < n)
        snprintf(buf + k, n - k, ", layers_per_block %d, latent %d, %d groups, in %d out %d, %s attention names%s",
                 c->layers, c->latent, c->groups, c->in_channels, c->out_channels,
                 c->naming == VAE_NAMES_NEW ? "to_q/to_k/to_v/to_out.0" : "query/key/value/proj_attn",
                 c->attn_conv ? " (1x1-conv shaped)" : "");
}

// ---------------------------------------------------------------------------------------------
// Table construction: one emit per tensor, in state_dict order.

typedef struct {
    VaeTable *t;
    int cap;
    size_t next;  // the next free float of the weight buffer
} Builder;

static VaeParam *emit_at(Builder *b, size_t offset, int ndim, const int64_t *shape, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static VaeParam *emit_at(Builder *b, size_t offset, int ndim, const int64_t *shape, const char *fmt, ...) {
    if (b->t->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 256;
        b->t->p = realloc(b->t->p, sizeof(VaeParam) * (size_t)b->cap);
        CHECK(b->t->p != NULL, "out of memory");
    }
    VaeParam *p = &b->t->p[b->t->n++];
    memset(p, 0, sizeof *p);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->name, sizeof p->name, fmt, ap);
    va_end(ap);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    p->offset = offset;
    return p;
}

// A tensor placed at the next free floats.
static void emit(Builder *b, int ndim, const int64_t *shape, const char *prefix, const char *what) {
    VaeParam *p = emit_at(b, b->next, ndim, shape, "%s.%s", prefix, what);
    b->next += p->numel;
}

static void conv(Builder *b, const char *prefix, int cin, int cout, int k) {
    emit(b, 4, (int64_t[]){cout, cin, k, k}, prefix, "weight");
    emit(b, 1, (int64_t[]){cout}, prefix, "bias");
}

static void norm(Builder *b, const char *prefix, int c) {
    emit(b, 1, (int64_t[]){c}, prefix, "weight");
    emit(b, 1, (int64_t[]){c}, prefix, "bias");
}

static void resnet(Builder *b, const char *prefix, int cin, int cout) {
    char s[80];
    snprintf(s, sizeof s, "%s.norm1", prefix); norm(b, s, cin);
    snprintf(s, sizeof s, "%s.conv1", prefix); conv(b, s, cin, cout, 3);
    snprintf(s, sizeof s, "%s.norm2", prefix); norm(b, s, cout);
    snprintf(s, sizeof s, "%s.conv2", prefix); conv(b, s, cout, cout, 3);
    if (cin != cout) { snprintf(s, sizeof s, "%s.conv_shortcut", prefix); conv(b, s, cin, cout, 1); }
}

// The attention's names: q, k, v, out.
static const char *const ATTN_NEW[4] = {"to_q", "to_k", "to_v", "to_out.0"};
static const char *const ATTN_OLD[4] = {"query", "key", "value", "proj_attn"};

// group_norm, then q, k, v (laid out as one [3C, C] weight followed by one [3C] bias) and out.
static void attention(Builder *b, const char *prefix, int C, const VaeConfig *c) {
    char s[80];
    snprintf(s, sizeof s, "%s.group_norm", prefix); norm(b, s, C);
    const char *const *nm = c->naming == VAE_NAMES_NEW ? ATTN_NEW : ATTN_OLD;
    const int64_t w4[4] = {C, C, 1, 1}, bias[1] = {C};
    const int wn = c->attn_conv ? 4 : 2;
    const size_t wq = b->next, bq = wq + 3 * (size_t)C * C;
    for (int i = 0; i < 3; i++) {
        emit_at(b, wq + (size_t)i * C * C, wn, w4, "%s.%s.weight", prefix, nm[i]);
        emit_at(b, bq + (size_t)i * C, 1, bias, "%s.%s.bias", prefix, nm[i]);
    }
    b->next = bq + 3 * (size_t)C;
    snprintf(s, sizeof s, "%s.%s", prefix, nm[3]);
    emit(b, wn, w4, s, "weight");
    emit(b, 1, bias, s, "bias");
}

static void mid_block(Builder *b, const char *part, int C, const VaeConfig *c) {
    char s[48];
    snprintf(s, sizeof s, "%s.mid_block.attentions.0", part); attention(b, s, C, c);
    snprintf(s, sizeof s, "%s.mid_block.resnets.0", part); resnet(b, s, C, C);
    snprintf(s, sizeof s, "%s.mid_block.resnets.1", part); resnet(b, s, C, C);
}

static int config_ok(const VaeConfig *c, MalaErr *err) {
    if (c->levels < 1 || c->levels > VAE_MAX_LEVELS)
        return mala_errf(err, "AutoencoderKL: %d levels (1 to %d supported)", c->levels, VAE_MAX_LEVELS);
    if (c->layers < 1 || c->layers > 16) return mala_errf(err, "AutoencoderKL: layers_per_block %d", c->layers);
    if (c->in_channels < 1 || c->out_channels < 1 || c->latent < 1)
        return mala_errf(err, "AutoencoderKL: bad channel counts");
    if (c->groups < 1) return mala_errf(err, "AutoencoderKL: norm_num_groups %d", c->groups);
    for (int i = 0; i < c->levels; i++)
        if (c->ch[i] < 1 || c->ch[i] % c->groups)
            return mala_errf(err, "AutoencoderKL: block_out_channels[%d] = %d is not a multiple of norm_num_groups %d",
                             i, c->ch[i], c->groups);
    return 0;
}

int vae_table_build(VaeTable *t, const VaeConfig *c, MalaErr *err) {
    memset(t, 0, sizeof *t);
    if (config_ok(c, err)) return -1;
    t->c = *c;
    Builder b = {t, 0, 0};
    char s[80];
    const int L = c->levels, top = c->ch[L - 1];
    // encoder
    conv(&b, "encoder.conv_in", c->in_channels, c->ch[0], 3);
    for (int i = 0; i < L; i++) {
        for (int j = 0; j < c->layers; j++) {
            snprintf(s, sizeof s, "encoder.down_blocks.%d.resnets.%d", i, j);
            resnet(&b, s, j == 0 ? (i ? c->ch[i - 1] : c->ch[0]) : c->ch[i], c->ch[i]);
        }
        if (i < L - 1) {
            snprintf(s, sizeof s, "encoder.down_blocks.%d.downsamplers.0.conv", i);
            conv(&b, s, c->ch[i], c->ch[i], 3);
        }
    }
    mid_block(&b, "encoder", top, c);
    norm(&b, "encoder.conv_norm_out", top);
    conv(&b, "encoder.conv_out", top, 2 * c->latent, 3);
    // decoder: up_blocks before mid_block in registration order
    conv(&b, "decoder.conv_in", c->latent, top, 3);
    int prev = top;
    for (int i = 0; i < L; i++) {
        const int co = c->ch[L - 1 - i];
        for (int j = 0; j < c->layers + 1; j++) {
            snprintf(s, sizeof s, "decoder.up_blocks.%d.resnets.%d", i, j);
            resnet(&b, s, j == 0 ? prev : co, co);
        }
        if (i < L - 1) {
            snprintf(s, sizeof s, "decoder.up_blocks.%d.upsamplers.0.conv", i);
            conv(&b, s, co, co, 3);
        }
        prev = co;
    }
    mid_block(&b, "decoder", top, c);
    norm(&b, "decoder.conv_norm_out", c->ch[0]);
    conv(&b, "decoder.conv_out", c->ch[0], c->out_channels, 3);
    conv(&b, "quant_conv", 2 * c->latent, 2 * c->latent, 1);
    conv(&b, "post_quant_conv", c->latent, c->latent, 1);
    t->floats = b.next;
    return 0;
}

void vae_table_free(VaeTable *t) {
    free(t->p);
    memset(t, 0, sizeof *t);
}

const VaeParam *vae_table_find(const VaeTable *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->p[i].name, name)) return &t->p[i];
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// The config read off the shapes.

// ndim of tensor `name` with shape filled; a message naming it when absent or of another rank.
static int need(VaeShapeFn fn, void *ctx, const char *file, const char *name, int ndim, int64_t shape[4],
                MalaErr *err) {
    const int got = fn(ctx, name, shape);
    if (got < 0) return mala_errf(err, "%s: tensor '%s' is missing (not a diffusers AutoencoderKL file?)", file, name);
    if (ndim && got != ndim)
        return mala_errf(err, "%s: tensor '%s' has %d dimensions, an AutoencoderKL has %d", file, name, got, ndim);
    return 0;
}

int vae_config_derive(VaeConfig *c, VaeShapeFn fn, void *ctx, const char *file, int groups, MalaErr *err) {
    memset(c, 0, sizeof *c);
    c->scale = VAE_SCALE;
    int64_t sh[4];
    char s[96];
    for (c->levels = 0;; c->levels++) {
        snprintf(s, sizeof s, "encoder.down_blocks.%d.resnets.0.conv1.weight", c->levels);
        const int nd = fn(ctx, s, sh);
        if (nd < 0) break;
        if (nd != 4) return need(fn, ctx, file, s, 4, sh, err);
        if (c->levels == VAE_MAX_LEVELS)
            return mala_errf(err, "%s: more than %d encoder.down_blocks", file, VAE_MAX_LEVELS);
        c->ch[c->levels] = (int)sh[0];
    }
    if (c->levels == 0) return need(fn, ctx, file, "encoder.down_blocks.0.resnets.0.conv1.weight", 4, sh, err);
    for (c->layers = 0;; c->layers++) {
        snprintf(s, sizeof s, "encoder.down_blocks.0.resnets.%d.conv1.weight", c->layers);
        if (fn(ctx, s, sh) < 0) break;
    }
    if (need(fn, ctx, file, "encoder.conv_in.weight", 4, sh, err)) return -1;
    c->in_channels = (int)sh[1];
    if (need(fn, ctx, file, "encoder.conv_out.weight", 4, sh, err)) return -1;
    c->latent = (int)(sh[0] / 2);
    if (need(fn, ctx, file, "decoder.conv_out.weight", 4, sh, err)) return -1;
    c->out_channels = (int)sh[0];
    c->groups = groups;
    if (fn(ctx, "encoder.mid_block.attentions.0.to_q.weight", sh) >= 0) c->naming = VAE_NAMES_NEW;
    else if (fn(ctx, "encoder.mid_block.attentions.0.query.weight", sh) >= 0) c->naming = VAE_NAMES_OLD;
    else return need(fn, ctx, file, "encoder.mid_block.attentions.0.to_q.weight", 2, sh, err);
    c->attn_conv = fn(ctx, c->naming == VAE_NAMES_NEW ? "encoder.mid_block.attentions.0.to_q.weight"
                                                     : "encoder.mid_block.attentions.0.query.weight", sh) == 4;
    MalaErr e2;
    if (config_ok(c, &e2)) return mala_errf(err, "%s: %s", file, e2.msg);
    return 0;
}

static int st_shape(void *ctx, const char *name, int64_t shape[4]) {
    const StTensor *t = st_find((const StFile *)ctx, name);
    if (!t) return -1;
    for (int i = 0; i < t->ndim && i < 4; i++) shape[i] = t->shape[i];
    return t->ndim;
}

int vae_config_from_file(VaeConfig *c, const StFile *f, MalaErr *err) {
    int groups = VAE_DEFAULT_GROUPS;
    if (st_meta_int(f, "norm_num_groups", &groups, err) < 0) return -1;
    if (vae_config_derive(c, st_shape, (void *)f, f->path, groups, err)) return -1;
    VaeTable t;
    if (vae_table_build(&t, c, err)) return -1;
    int rc = 0;
    for (int i = 0; i < t.n && !rc; i++) rc = st_expect(f, t.p[i].name, t.p[i].shape, t.p[i].ndim, err);
    for (int i = 0; i < f->n && !rc; i++)
        if (!vae_table_find(&t, f->tensors[i].name))
            rc = mala_errf(err, "%s: tensor '%s' is not part of this AutoencoderKL (%d levels, %s names)", f->path,
                           f->tensors[i].name, c->levels, c->naming == VAE_NAMES_NEW ? "current" : "old");
    vae_table_free(&t);
    return rc ? -1 : 0;
}

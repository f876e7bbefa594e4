// The backbone registry and what every network shares: configuration metadata, the parameter
// table, the arena, and the calls that dispatch to a backbone.
// defines: net_backbone, backbone_parse, backbone_name, net_preset_canonical, net_config_*, net_arena_bytes,
//          net_param_floats, net_plan, net_plan_free,
//          net_create, net_holds_q8, net_free, net_find_param, net_init_weights, net_put_param, net_put_param_q8,
//          net_get_param_q8, net_q8_weights, net_forward, net_backward, net_add_param, net_add_param_quant8,
//          arena_take, init_xavier_uniform, init_normal, init_uniform
#include "model/net.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "core/quant8.h"
#include "formats/st_meta.h"

extern const NetOps DIT_NET_OPS, DIG_NET_OPS, DIC_NET_OPS;

static const NetOps *const BACKBONES[] = {
    [BACKBONE_DIT] = &DIT_NET_OPS, [BACKBONE_DIG] = &DIG_NET_OPS, [BACKBONE_DIC] = &DIC_NET_OPS};
enum { N_BACKBONES = sizeof BACKBONES / sizeof BACKBONES[0] };

const NetOps *net_backbone(BackboneKind k) {
    return (int)k >= 0 && (int)k < N_BACKBONES ? BACKBONES[k] : NULL;
}

int backbone_parse(const char *s, BackboneKind *k) {
    for (int i = 0; i < N_BACKBONES; i++)
        if (!strcasecmp(s, BACKBONES[i]->name)) { *k = (BackboneKind)i; return 0; }
    return -1;
}

const char *backbone_name(BackboneKind k) { return net_backbone(k) ? net_backbone(k)->name : "?"; }

static const char *join_backbones(char *buf, size_t n, int presets) {
    if (buf[0]) return buf;
    for (int i = 0; i < N_BACKBONES; i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? (presets ? ", " : "|") : "",
                 presets ? BACKBONES[i]->presets : BACKBONES[i]->name);
    return buf;
}

const char *backbone_names(void) {
    static char buf[128];
    return join_backbones(buf, sizeof buf, 0);
}

const char *backbone_presets(void) {
    static char buf[256];
    return join_backbones(buf, sizeof buf, 1);
}

// ---- configuration ----

void net_config_default(NetConfig *c, BackboneKind k) {
    memset(c, 0, sizeof *c);
    c->backbone = k;
    c->image_size = 32;
    c->in_channels = 1;
    c->num_classes = 10;
    c->learn_sigma = 1;
    net_backbone(k)->config_default(c);
}

const char *net_preset_canonical(const char *name, char *buf, size_t n) {
    size_t o = 0;
    const char *rest = name;
    for (int i = 0; i < N_BACKBONES && n > 8; i++) {
        const char *fam = BACKBONES[i]->family;
        size_t k = strlen(fam);
        if (strncasecmp(name, fam, k) || name[k] != '-') continue;
        o = (size_t)snprintf(buf, n, "%s-", fam);
        rest = name + k + 1;
        break;
    }
    for (; *rest && o + 1 < n; rest++) buf[o++] = (char)toupper((unsigned char)*rest);
    if (n) buf[o] = 0;
    return buf;
}

int net_config_preset(NetConfig *c, const char *given, MalaErr *err) {
    char name[64];
    if (strlen(given) >= sizeof name) return mala_errf(err, "--model %.40s...: unknown preset (expected %s)", given,
                                                       backbone_presets());
    net_preset_canonical(given, name, sizeof name);
    for (int i = 0; i < N_BACKBONES; i++) {
        NetConfig t = *c;
        if (t.backbone != (BackboneKind)i) {
            t.backbone = (BackboneKind)i;
            BACKBONES[i]->config_default(&t);
        }
        int rc = BACKBONES[i]->preset(&t, name, err);
        if (rc < 0) return -1;
        if (rc == 0) { *c = t; return 0; }
    }
    return mala_errf(err, "--model %s: unknown preset (expected %s)", given, backbone_presets());
}

int net_config_validate(const NetConfig *c, MalaErr *err) {
    const NetOps *ops = net_backbone(c->backbone);
    if (!ops) return mala_errf(err, "model: unknown backbone %d", (int)c->backbone);
    if (c->image_size < 1) return mala_errf(err, "model: image size must be positive");
    if (c->in_channels < 1) return mala_errf(err, "model: in_channels must be positive");
    if (c->num_classes < 0) return mala_errf(err, "model: num_classes must be 0 (unconditional) or more");
    return ops->validate(c, err);
}

void net_config_describe(const NetConfig *c, char *buf, size_t n) {
    char own[224];
    net_backbone(c->backbone)->describe(c, own, sizeof own);
    char classes[32] = "unconditional";  // num_classes 0: the label table's one row for every image
    if (c->num_classes > 0) snprintf(classes, sizeof classes, "%d classes", c->num_classes);
    snprintf(buf, n, "%s %s, %dx%dx%d%s, %s%s", backbone_name(c->backbone), own, c->image_size, c->image_size,
             c->in_channels, c->latent_scale > 0 ? " latents" : "", classes, c->learn_sigma ? ", learned sigma" : "");
}

double net_flops_per_image(const NetConfig *c) { return net_backbone(c->backbone)->flops_per_image(c); }

const char *net_mixer_name(const NetConfig *c) { return net_backbone(c->backbone)->mixer(c); }

int net_check_learnable(const NetConfig *c, MalaErr *err) {
    const NetOps *ops = net_backbone(c->backbone);
    return ops->learnable ? ops->learnable(c, err) : 0;
}

int net_config_read(const StFile *f, NetConfig *c, MalaErr *err) {
    BackboneKind k = BACKBONE_DIT;
    const char *bb = st_meta(f, "backbone");
    if (bb && backbone_parse(bb, &k)) return mala_errf(err, "%s: metadata 'backbone' = '%s' is unknown", f->path, bb);
    net_config_default(c, k);
    if (st_meta_need_int(f, "image_size", &c->image_size, err) ||
        st_meta_need_int(f, "in_channels", &c->in_channels, err) ||
        st_meta_need_int(f, "num_classes", &c->num_classes, err))
        return -1;
    if (st_meta_bool(f, "learn_sigma", &c->learn_sigma, err) < 0) return -1;
    int latent = 0;
    if (st_meta_bool(f, "latent", &latent, err) < 0) return -1;
    if (latent) {
        if (st_meta_float(f, "latent_scale", &c->latent_scale, err) < 0) return -1;
        if (!(c->latent_scale > 0))
            return mala_errf(err, "%s: metadata 'latent' is true but 'latent_scale' is missing or not positive", f->path);
    }
    if (net_backbone(k)->read_meta(f, c, err)) return -1;
    MalaErr verr;
    if (net_config_validate(c, &verr)) return mala_errf(err, "%s: %s", f->path, verr.msg);
    return 0;
}

void net_config_write(StWriter *w, const NetConfig *c) {
    st_writer_meta(w, "backbone", backbone_name(c->backbone));
    st_writer_meta_int(w, "image_size", c->image_size);
    st_writer_meta_int(w, "in_channels", c->in_channels);
    st_writer_meta_int(w, "num_classes", c->num_classes);
    st_writer_meta(w, "learn_sigma", c->learn_sigma ? "true" : "false");
    if (c->latent_scale > 0) {
        st_writer_meta(w, "latent", "true");
        st_writer_meta_float(w, "latent_scale", c->latent_scale);
    }
    net_backbone(c->backbone)->write_meta(w, c);
}

// ---- the network ----

float *arena_take(Arena *a, size_t floats) {
    size_t bytes = (floats * sizeof(float) + 255) & ~(size_t)255;
    float *p = a->base ? (float *)(a->base + a->used) : NULL;
    a->used += bytes;
    return p;
}

void init_xavier_uniform(Rng *r, float *w, size_t fan_out, size_t fan_in, double gain) {
    double a = gain * sqrt(6.0 / (double)(fan_in + fan_out));
    for (size_t i = 0; i < fan_out * fan_in; i++) w[i] = (float)((2.0 * rng_uniform(r) - 1.0) * a);
}

void init_normal(Rng *r, float *w, size_t n, float std) {
    for (size_t i = 0; i < n; i++) w[i] = std * rng_normal(r);
}

void init_uniform(Rng *r, float *w, size_t n, double bound) {
    for (size_t i = 0; i < n; i++) w[i] = (float)((2.0 * rng_uniform(r) - 1.0) * bound);
}

size_t net_add_param(Net *n, const char *name, int ndim, const int64_t *shape) {
    if (n->nparams == n->params_cap) {
        n->params_cap = n->params_cap ? 2 * n->params_cap : 64;
        ParamInfo *np = xcalloc((size_t)n->params_cap, sizeof *np);
        if (n->params) memcpy(np, n->params, sizeof *np * n->nparams);
        free(n->params);
        n->params = np;
    }
    ParamInfo *p = &n->params[n->nparams++];
    CHECK(strlen(name) < sizeof p->name, "parameter name %s is too long", name);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) { p->shape[i] = shape[i]; p->numel *= (size_t)shape[i]; }
    p->offset = n->n_floats;
    n->n_floats += p->numel;
    return p->offset;
}

// A quant8 tensor's block in a q8 network's q8w: its row scales (floats), then its int8 rows, each
// part padded to 64 bytes.
static size_t pad64(size_t bytes) { return (bytes + 63) & ~(size_t)63; }
static size_t q8_scales_bytes(int64_t rows) { return pad64((size_t)rows * sizeof(float)); }
static size_t q8_block_bytes(const ParamInfo *p) { return q8_scales_bytes(p->shape[0]) + pad64(p->numel); }

size_t net_add_param_quant8(Net *n, const char *name, int ndim, const int64_t *shape) {
    CHECK(ndim == 2, "quant8 parameter %s: a linear weight [out, in], not %d-D", name, ndim);
    const size_t floats = n->n_floats, offset = net_add_param(n, name, ndim, shape);
    ParamInfo *p = &n->params[n->nparams - 1];
    p->quant8 = 1;
    if (!n->q8) return offset;
    n->n_floats = floats;  // (no floats of its own)
    p->offset = SIZE_MAX;
    p->q8_offset = n->q8_bytes;
    n->q8_bytes += q8_block_bytes(p);
    return p->q8_offset;
}

void net_q8_weights(const Net *n, size_t off, int rows, const int8_t **q, const float **scale) {
    *scale = (const float *)(const void *)(n->q8w + off);
    *q = (const int8_t *)(n->q8w + off + q8_scales_bytes(rows));
}

static void net_layout(Net *n, Arena *a) {
    n->w = arena_take(a, n->n_floats);
    n->q8w = n->q8_bytes ? (char *)arena_take(a, (n->q8_bytes + sizeof(float) - 1) / sizeof(float)) : NULL;
    n->ops->layout(n, a);
    n->label_mix_floats = n->mode == NET_TRAIN ? 0 : net_label_mix_size(n);
    n->label_mix = n->label_mix_floats ? arena_take(a, n->label_mix_floats) : NULL;
}

// The table and the backbone state, without the backend allocation.
static Net *net_build(const NetConfig *c, const Backend *be, int max_batch, int mode, int q8) {
    MalaErr err;
    if (net_config_validate(c, &err)) FATAL("%s", err.msg);
    CHECK(max_batch >= 1, "network batch %d must be positive", max_batch);
    Net *n = xcalloc(1, sizeof *n);
    n->ops = net_backbone(c->backbone);
    n->cfg = *c;
    n->be = be;
    n->mode = mode;
    n->max_batch = max_batch;
    n->q8 = q8;
    n->out_channels = c->in_channels * (c->learn_sigma ? 2 : 1);
    n->ops->build(n);
    Arena count = {NULL, 0};
    net_layout(n, &count);
    n->arena_bytes = count.used;
    return n;
}

static void net_release_host(Net *n) {
    n->ops->destroy(n);
    free(n->params);
    free(n);
}

int net_holds_q8(const Backend *be, int mode) { return mode != NET_TRAIN && !strcmp(be->precision(), "int8"); }

size_t net_arena_bytes(const NetConfig *c, const Backend *be, int max_batch, int mode) {
    Net *n = net_build(c, be, max_batch, mode, net_holds_q8(be, mode));
    size_t bytes = n->arena_bytes;
    net_release_host(n);
    return bytes;
}

size_t net_param_floats(const NetConfig *c, size_t *trainable) {
    Net *n = net_build(c, backend_host(), 1, NET_INFER, 0);
    size_t floats = n->n_floats;
    if (trainable) *trainable = n->n_trainable;
    net_release_host(n);
    return floats;
}

Net *net_plan(const NetConfig *c) { return net_build(c, backend_host(), 1, NET_INFER, 0); }

void net_plan_free(Net *n) { net_release_host(n); }

Net *net_create(const NetConfig *c, const Backend *be, int max_batch, int mode) {
    Net *n = net_build(c, be, max_batch, mode, net_holds_q8(be, mode));
    n->arena = be->alloc(n->arena_bytes);
    Arena real = {n->arena, 0};
    net_layout(n, &real);
    return n;
}

void net_free(Net *n) {
    if (!n) return;
    n->be->release(n->arena);
    net_release_host(n);
}

const ParamInfo *net_find_param(const Net *n, const char *name) {
    for (int i = 0; i < n->nparams; i++)
        if (!strcmp(n->params[i].name, name)) return &n->params[i];
    return NULL;
}

void net_init_weights(Net *n, uint64_t seed) {
    if (!n->q8 && backend_on_host(n->be)) {  // in place: no second copy of the weights (2.7 GB for DiT-XL/2)
        memset(n->w, 0, n->n_floats * sizeof(float));
        n->ops->init_weights(n, n->w, seed);
        n->be->weights_changed();
        return;
    }
    // (a q8 network: the initialisation in the fp32 layout, then every tensor put, the quant8 ones quantised;
    // a device's: made on the host and sent)
    Net *full = n->q8 ? net_plan(&n->cfg) : n;
    float *w = xcalloc(full->n_floats, sizeof(float));
    n->ops->init_weights(full, w, seed);
    if (n->q8)
        for (int i = 0; i < n->nparams; i++) net_put_param(n, &n->params[i], w + full->params[i].offset);
    else
        n->be->to_device(n->w, w, n->n_floats * sizeof(float));
    n->be->weights_changed();
    free(w);
    if (full != n) net_plan_free(full);
}

// The q8 block of p: on a host backend its own memory, else a host copy (*staged) to send after.
static char *q8_block_host(const Net *n, const ParamInfo *p, int *staged) {
    *staged = !backend_on_host(n->be);
    return *staged ? xmalloc(q8_block_bytes(p)) : n->q8w + p->q8_offset;
}

static void q8_block_done(Net *n, const ParamInfo *p, char *blk, int staged) {
    if (!staged) return;
    n->be->to_device(n->q8w + p->q8_offset, blk, q8_block_bytes(p));
    free(blk);
}

void net_put_param(Net *n, const ParamInfo *p, const float *host) {
    if (!(n->q8 && p->quant8)) {
        n->be->to_device(n->w + p->offset, host, p->numel * sizeof(float));
        return;
    }
    const int64_t rows = p->shape[0], cols = p->shape[1];
    int staged;
    char *blk = q8_block_host(n, p, &staged);
    float *scale = (float *)(void *)blk;
    int8_t *q = (int8_t *)(blk + q8_scales_bytes(rows));
    for (int64_t r = 0; r < rows; r++) scale[r] = quant8_row(q + r * cols, host + r * cols, (int)cols);
    q8_block_done(n, p, blk, staged);
}

void net_put_param_q8(Net *n, const ParamInfo *p, const int8_t *q_in, const float *scale_in) {
    CHECK(n->q8 && p->quant8, "net_put_param_q8: %s is not held in int8", p->name);
    const int64_t rows = p->shape[0], cols = p->shape[1];
    int staged;
    char *blk = q8_block_host(n, p, &staged);
    float *scale = (float *)(void *)blk, *row = xmalloc((size_t)cols * sizeof(float));
    int8_t *q = (int8_t *)(blk + q8_scales_bytes(rows));
    for (int64_t r = 0; r < rows; r++) {
        // (q * scale in fp32, the values the file stands for, as an fp32 network loads them)
        for (int64_t c = 0; c < cols; c++) row[c] = (float)q_in[r * cols + c] * scale_in[r];
        scale[r] = quant8_row(q + r * cols, row, (int)cols);
    }
    free(row);
    q8_block_done(n, p, blk, staged);
}

void net_get_param_q8(const Net *n, const ParamInfo *p, int8_t *q, float *scale) {
    CHECK(n->q8 && p->quant8, "net_get_param_q8: %s is not held in int8", p->name);
    const int64_t rows = p->shape[0];
    const char *blk = n->q8w + p->q8_offset;
    n->be->to_host(scale, blk, (size_t)rows * sizeof(float));
    n->be->to_host(q, blk + q8_scales_bytes(rows), p->numel);
}

void net_forward(Net *n, float *out, const float *x, const float *t, const int32_t *y, int B) {
    CHECK(B >= 1 && B <= n->max_batch, "batch %d exceeds the network's capacity %d", B, n->max_batch);
    n->ops->forward(n, out, x, t, y, B);
    n->last_batch = B;
}

int net_attn_info(const Net *n, AttnRowInfo *info, MalaErr *err) {
    if (!n->ops->attn_info || !n->ops->attn_row)
        return mala_errf(err, "backbone %s (%s) has no attention rows", n->ops->name, net_mixer_name(&n->cfg));
    n->ops->attn_info(n, info);
    return 0;
}

int net_attn_row(Net *n, float *row, int block, int head, int image, int query, float a, MalaErr *err) {
    AttnRowInfo in;
    if (net_attn_info(n, &in, err)) return -1;
    if (n->mode != NET_INFER_ATTN) return mala_errf(err, "attention rows need a network created with NET_INFER_ATTN");
    if (n->last_batch < 1) return mala_errf(err, "attention rows: no forward pass yet");
    if (block < 0 || block >= in.blocks) return mala_errf(err, "attention rows: block %d out of 0..%d", block, in.blocks - 1);
    if (head >= in.heads) return mala_errf(err, "attention rows: head %d out of 0..%d", head, in.heads - 1);
    if (image < 0 || image >= n->last_batch)
        return mala_errf(err, "attention rows: image %d out of the last batch of %d", image, n->last_batch);
    if (query < 0 || query >= in.gh * in.gw)
        return mala_errf(err, "attention rows: query token %d out of 0..%d", query, in.gh * in.gw - 1);
    if (!(a > 0.0f) || !isfinite(a)) return mala_errf(err, "attention rows: scale %g must be positive", (double)a);
    n->ops->attn_row(n, row, block, head, image, query, a);
    return 0;
}

void net_backward(Net *n, float *grad, const float *dout, int B) {
    CHECK(n->mode == NET_TRAIN, "net_backward needs a network created with NET_TRAIN");
    n->ops->backward(n, grad, dout, B);
}

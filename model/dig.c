// DiG forward and backward through the op table (docs/math/dig.md, block i):
//   (sa, ca, ga, sm, cm, gm) = adaLN(SiLU c)
//   u = LN(x)(1+ca)+sa;  [q|k|v|z] = u [Wq;Wk;Wv;Wg]^T;  gamma = logsigmoid((u Wa^T) Wb^T + bb) / 16
//   x += ga * o_proj(RMSNorm(GLA(q, k, v, gamma)) * w * silu(z))
//   u = LN(x)(1+cm)+sm;  x += gm * down(silu(a) * b),  [a|b] = u W12^T
//   x = dwconv3x3(x);  x = flip(x), and on odd blocks transpose the grid
// q, k, v and the output gate come from one product: their weights are adjacent in the parameter
// buffer. Activations are allocated once (net.c); the modulated inputs, the normalised GLA output
// and the SwiGLU product are recomputed in backward instead of kept per block.
// defines: DIG_NET_OPS
#include "model/dig.h"

#include <string.h>

typedef struct {
    size_t qkvg_w;           // q_proj, k_proj, v_proj, g_proj weights, adjacent: [2K + 2V, H]
    size_t gk0_w, gk1_w, gk1_b, o_w, norm_w;
    size_t mlp_w12, mlp_down;
    size_t ada_w, ada_b, conv_w, conv_b;
} DigBlockOffsets;

// Kept per block for backward (in inference one set is shared).
typedef struct {
    float *ada;               // [B, 6H]
    float *xhat1, *rstd1;     // LayerNorm before the GLA
    float *qkvg;              // [BL, 2K + 2V]: q | k | v | z (the output gate)
    float *gk0;               // [BL, 16] low-rank forget-gate projection
    float *g;                 // [BL, K] log-decay logsigmoid(.)/16
    float *cache;             // GLA chunk states
    float *o;                 // [BL, V] GLA output
    float *nrstd;             // [BL * heads] RMSNorm's 1/rms
    float *ao;                // [BL, H] o_proj output
    float *xhat2, *rstd2;     // LayerNorm before the MLP
    float *ab;                // [BL, 2I] SwiGLU input
    float *mo;                // [BL, H] down_proj output
    float *xr;                // [BL, H] the block's residual stream; after both branches the conv input
} DigBlockActs;

typedef struct {
    DigDims d;
    DitEmbed e;
    DigBlockOffsets *blk;
    DigBlockActs *acts;       // depth entries (training) or 1 (inference)
    float *x;                 // [BL, H] the stream after the last block (the final layer's input)
    float *xm, *on, *hm, *xc; // scratch: modulated input, gated RMSNorm output, SwiGLU product, conv output
    // backward (training only); dxm, dxhat are the embedder's scratch
    float *dx, *dxc, *dmo, *dhm, *dab, *dao, *don, *do_, *dqkvg, *dgk, *dgk0, *dada;
} Dig;

static int qkvg_ld(const DigDims *d) { return 2 * d->K + 2 * d->V; }

static GlaShape gla_shape(const Net *n, const Dig *m, int B) {
    const DigDims *d = &m->d;
    int ld = qkvg_ld(d);
    GlaShape s = {B, m->e.T, n->cfg.dig.heads, d->dk, d->dv, ld, ld, ld, d->K, d->V};
    return s;
}

// ---- the parameter table ----

static void dig_build(Net *n) {
    const DigConfig *c = &n->cfg.dig;
    Dig *m = xcalloc(1, sizeof *m);
    n->impl = m;
    m->d = dig_dims(c);
    const DigDims *d = &m->d;
    int64_t H = d->H, K = d->K, V = d->V, r = DIG_GATE_RANK, I = d->I;
    m->acts = xcalloc((size_t)(n->mode == NET_TRAIN ? c->depth : 1), sizeof *m->acts);
    dit_embed_params_in(n, &m->e, c->hidden, c->patch);
    m->blk = xcalloc((size_t)c->depth, sizeof *m->blk);
    char name[72];
    for (int i = 0; i < c->depth; i++) {
        DigBlockOffsets *b = &m->blk[i];
#define BLK(suffix, ...) (snprintf(name, sizeof name, "blocks.%d.%s", i, suffix), \
                          net_add_param(n, name, NET_NDIM(__VA_ARGS__), NET_SHAPE(__VA_ARGS__)))
        b->qkvg_w = BLK("attn.q_proj.weight", K, H);
        BLK("attn.k_proj.weight", K, H);
        BLK("attn.v_proj.weight", V, H);
        BLK("attn.g_proj.weight", V, H);
        b->gk0_w = BLK("attn.gk_proj.0.weight", r, H);
        b->gk1_w = BLK("attn.gk_proj.1.weight", K, r);
        b->gk1_b = BLK("attn.gk_proj.1.bias", K);
        b->o_w = BLK("attn.o_proj.weight", H, V);
        b->norm_w = BLK("attn.g_norm_swish_gate.weight", d->dv);
        b->mlp_w12 = BLK("mlp.gate_proj.weight", 2 * I, H);
        b->mlp_down = BLK("mlp.down_proj.weight", H, I);
        b->ada_w = BLK("adaLN_modulation.1.weight", 6 * H, H);
        b->ada_b = BLK("adaLN_modulation.1.bias", 6 * H);
        b->conv_w = BLK("dw_conv.weight", H, 1, 3, 3);
        b->conv_b = BLK("dw_conv.bias", H);
#undef BLK
    }
    dit_embed_params_out(n, &m->e);
    n->n_trainable = n->n_floats;
    dit_embed_params_fixed(n, &m->e);
}

static void dig_destroy(Net *n) {
    Dig *m = n->impl;
    if (!m) return;
    free(m->acts);
    free(m->blk);
    free(m);
}

// ---- activations ----

static void dig_layout(Net *n, Arena *a) {
    const DigConfig *c = &n->cfg.dig;
    Dig *m = n->impl;
    const DigDims *d = &m->d;
    size_t B = n->max_batch, BL = B * m->e.T, H = d->H, K = d->K, V = d->V, I = d->I, r = DIG_GATE_RANK;
    size_t cache = n->be->gla_cache_floats(gla_shape(n, m, (int)B));
    int train = n->mode == NET_TRAIN;
    dit_embed_layout(n, &m->e, a);
    for (int i = 0; i < (train ? c->depth : 1); i++) {
        DigBlockActs *b = &m->acts[i];
        b->ada = arena_take(a, B * 6 * H);
        b->xhat1 = arena_take(a, BL * H); b->rstd1 = arena_take(a, BL);
        b->qkvg = arena_take(a, BL * qkvg_ld(d));
        b->gk0 = arena_take(a, BL * r);
        b->g = arena_take(a, BL * K);
        b->cache = arena_take(a, cache);
        b->o = arena_take(a, BL * V);
        b->nrstd = arena_take(a, BL * c->heads);
        b->ao = arena_take(a, BL * H);
        b->xhat2 = arena_take(a, BL * H); b->rstd2 = arena_take(a, BL);
        b->ab = arena_take(a, BL * 2 * I);
        b->mo = arena_take(a, BL * H);
        b->xr = arena_take(a, BL * H);
    }
    m->x = arena_take(a, BL * H);
    m->xm = arena_take(a, BL * H);
    m->on = arena_take(a, BL * V);
    m->hm = arena_take(a, BL * I);
    m->xc = arena_take(a, BL * H);
    if (train) {
        m->dx = arena_take(a, BL * H); m->dxc = arena_take(a, BL * H);
        m->dmo = arena_take(a, BL * H); m->dhm = arena_take(a, BL * I); m->dab = arena_take(a, BL * 2 * I);
        m->dao = arena_take(a, BL * H); m->don = arena_take(a, BL * V); m->do_ = arena_take(a, BL * V);
        m->dqkvg = arena_take(a, BL * qkvg_ld(d));
        m->dgk = arena_take(a, BL * K); m->dgk0 = arena_take(a, BL * r);
        m->dada = arena_take(a, B * 6 * H);
    }
}

// ---- initialisation (docs/math/dig.md's table) ----

static void dig_init_weights(const Net *n, float *w, uint64_t seed) {
    const DigConfig *c = &n->cfg.dig;
    const Dig *m = n->impl;
    const DigDims *d = &m->d;
    size_t H = d->H, K = d->K, V = d->V, r = DIG_GATE_RANK, I = d->I;
    const double gla_gain = 0.17677669529663687;  // 2^-2.5, the GLA layer's own xavier gain
    Rng rg;
    rng_seed(&rg, seed);
    dit_embed_init(n, &m->e, w, &rg);
    for (int i = 0; i < c->depth; i++) {
        const DigBlockOffsets *b = &m->blk[i];
        size_t q = b->qkvg_w;
        init_xavier_uniform(&rg, w + q, K, H, gla_gain);
        init_xavier_uniform(&rg, w + q + K * H, K, H, gla_gain);
        init_xavier_uniform(&rg, w + q + 2 * K * H, V, H, gla_gain);
        init_xavier_uniform(&rg, w + q + 2 * K * H + V * H, V, H, gla_gain);
        init_xavier_uniform(&rg, w + b->gk0_w, r, H, gla_gain);
        init_xavier_uniform(&rg, w + b->gk1_w, K, r, gla_gain);
        init_xavier_uniform(&rg, w + b->o_w, H, V, gla_gain);
        for (int j = 0; j < d->dv; j++) w[b->norm_w + j] = 1.0f;
        init_xavier_uniform(&rg, w + b->mlp_w12, 2 * I, H, 1.0);
        init_xavier_uniform(&rg, w + b->mlp_down, H, I, 1.0);
        for (size_t ch = 0; ch < H; ch++) w[b->conv_w + ch * 9 + 4] = 1.0f;  // identity: the centre tap
        // gk_proj.1.bias, adaLN_modulation and dw_conv.bias stay zero
    }
}

// ---- forward ----

static DigBlockActs *block_acts(Net *n, int i) {
    Dig *m = n->impl;
    return &m->acts[n->mode == NET_TRAIN ? i : 0];
}

// The stream block i starts from: its own buffer (the previous block's permutation writes there).
static float *block_input(Net *n, int i) {
    Dig *m = n->impl;
    return i < n->cfg.dig.depth ? block_acts(n, i)->xr : m->x;
}

static void gla_forward(Net *n, DigBlockActs *b, const DigBlockOffsets *o, int B) {
    const Backend *be = n->be;
    Dig *m = n->impl;
    const DigDims *d = &m->d;
    const float *W = n->w;
    int BL = B * m->e.T, H = d->H, K = d->K, V = d->V, ld = qkvg_ld(d);
    GlaShape s = gla_shape(n, m, B);
    be->linear_fwd(b->qkvg, m->xm, W + o->qkvg_w, NULL, BL, H, ld);
    be->linear_fwd(b->gk0, m->xm, W + o->gk0_w, NULL, BL, H, DIG_GATE_RANK);
    be->linear_fwd(b->g, b->gk0, W + o->gk1_w, W + o->gk1_b, BL, DIG_GATE_RANK, K);
    be->logsigmoid_fwd(b->g, BL, K, K, DIG_GATE_NORMALIZER);
    be->gla_fwd(b->o, b->cache, b->qkvg, b->qkvg + K, b->qkvg + 2 * K, b->g, s);
    be->rmsnorm_gate_fwd(m->on, b->nrstd, b->o, b->qkvg + 2 * K + V, W + o->norm_w, BL, s.heads, d->dv, ld,
                         DIG_NORM_EPS);
    be->linear_fwd(b->ao, m->on, W + o->o_w, NULL, BL, V, H);
}

static void block_forward(Net *n, int i, int B) {
    const Backend *be = n->be;
    Dig *m = n->impl;
    const DigDims *d = &m->d;
    const DigBlockOffsets *o = &m->blk[i];
    DigBlockActs *b = block_acts(n, i);
    const float *W = n->w;
    int H = d->H, I = d->I, L = m->e.T, BL = B * L, g = m->e.gh;
    float *x = b->xr, *ada = b->ada;  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp

    be->linear_fwd(ada, m->e.sc, W + o->ada_w, W + o->ada_b, B, H, 6 * H);
    const int train = n->mode == NET_TRAIN;  // LN(x) is kept for the backward
    be->layernorm_modulate_fwd(m->xm, train ? b->xhat1 : NULL, b->rstd1, x, ada, ada + H, B, L, H, 6 * H);
    gla_forward(n, b, o, B);
    be->gate_residual_fwd(x, b->ao, ada + 2 * H, B, L, H, 6 * H);
    be->layernorm_modulate_fwd(m->xm, train ? b->xhat2 : NULL, b->rstd2, x, ada + 3 * H, ada + 4 * H, B, L, H, 6 * H);
    be->linear_fwd(b->ab, m->xm, W + o->mlp_w12, NULL, BL, H, 2 * I);
    be->swiglu_fwd(m->hm, b->ab, BL, I);
    be->linear_fwd(b->mo, m->hm, W + o->mlp_down, NULL, BL, I, H);
    be->gate_residual_fwd(x, b->mo, ada + 5 * H, B, L, H, 6 * H);
    // the conv reads the sequence in its current order, row-major on the g x g grid; no residual
    be->zero(m->xc, (size_t)BL * H * sizeof(float));
    be->dwconv_fwd(m->xc, x, H, W + o->conv_w, W + o->conv_b, 3, B, g, g, H);
    be->permute_tokens_fwd(block_input(n, i + 1), m->xc, B, g, g, H, 1, i % 2);
}

static void dig_forward(Net *n, float *out, const float *x, const float *t, const int32_t *y, int B) {
    Dig *m = n->impl;
    dit_embed_fwd(n, &m->e, block_input(n, 0), x, t, y, B);
    for (int i = 0; i < n->cfg.dig.depth; i++) block_forward(n, i, B);
    dit_final_fwd(n, &m->e, out, m->x, B);
}

// ---- backward ----

static void gla_backward(Net *n, float *G, DigBlockActs *b, const DigBlockOffsets *o, int B) {
    const Backend *be = n->be;
    Dig *m = n->impl;
    const DigDims *d = &m->d;
    const float *W = n->w;
    int BL = B * m->e.T, H = d->H, K = d->K, V = d->V, ld = qkvg_ld(d), r = DIG_GATE_RANK;
    GlaShape s = gla_shape(n, m, B);
    float *dxm = m->e.dxm;
    const float *gate = b->qkvg + 2 * K + V;
    be->rmsnorm_gate_fwd(m->on, b->nrstd, b->o, gate, W + o->norm_w, BL, s.heads, d->dv, ld, DIG_NORM_EPS);
    be->linear_bwd(m->don, G + o->o_w, NULL, m->dao, m->on, W + o->o_w, BL, V, H, 0.0f);
    be->zero(m->do_, (size_t)BL * V * sizeof(float));
    be->zero(m->dqkvg, (size_t)BL * ld * sizeof(float));
    be->rmsnorm_gate_bwd(m->do_, m->dqkvg + 2 * K + V, G + o->norm_w, m->don, b->o, gate, W + o->norm_w, b->nrstd,
                         BL, s.heads, d->dv, ld);
    be->zero(m->dgk, (size_t)BL * K * sizeof(float));
    be->gla_bwd(m->dqkvg, m->dqkvg + K, m->dqkvg + 2 * K, m->dgk, m->do_, b->qkvg, b->qkvg + K, b->qkvg + 2 * K,
                b->g, b->cache, s);
    be->logsigmoid_bwd(m->dgk, b->g, BL, K, K, DIG_GATE_NORMALIZER);
    be->linear_bwd(m->dgk0, G + o->gk1_w, G + o->gk1_b, m->dgk, b->gk0, W + o->gk1_w, BL, r, K, 0.0f);
    be->linear_bwd(dxm, G + o->gk0_w, NULL, m->dgk0, m->xm, W + o->gk0_w, BL, H, r, 0.0f);
    be->linear_bwd(dxm, G + o->qkvg_w, NULL, m->dqkvg, m->xm, W + o->qkvg_w, BL, H, ld, 1.0f);
}

// On entry m->dx holds d(loss)/d(block output); on exit d(loss)/d(block input).
static void block_backward(Net *n, float *G, int i, int B) {
    const Backend *be = n->be;
    Dig *m = n->impl;
    const DigDims *d = &m->d;
    const DigBlockOffsets *o = &m->blk[i];
    DigBlockActs *b = block_acts(n, i);
    const float *W = n->w;
    int H = d->H, I = d->I, L = m->e.T, BL = B * L, g = m->e.gh;
    size_t nBLH = (size_t)BL * H * sizeof(float);
    float *ada = b->ada, *dada = m->dada, *dx = m->dx, *dxm = m->e.dxm, *dxhat = m->e.dxhat;

    // scan permutation and the conv
    be->zero(m->dxc, nBLH);
    be->permute_tokens_bwd(m->dxc, dx, B, g, g, H, 1, i % 2);
    be->zero(dx, nBLH);
    be->dwconv_bwd(dx, G + o->conv_w, G + o->conv_b, m->dxc, b->xr, H, W + o->conv_w, 3, B, g, g, H);
    be->zero(dada, (size_t)B * 6 * H * sizeof(float));
    // MLP branch
    be->gate_residual_bwd(m->dmo, dada + 5 * H, dx, b->mo, ada + 5 * H, B, L, H, 6 * H);
    be->swiglu_fwd(m->hm, b->ab, BL, I);
    be->linear_bwd(m->dhm, G + o->mlp_down, NULL, m->dmo, m->hm, W + o->mlp_down, BL, I, H, 0.0f);
    be->zero(m->dab, (size_t)BL * 2 * I * sizeof(float));
    be->swiglu_bwd(m->dab, m->dhm, b->ab, BL, I);
    be->modulate_fwd(m->xm, b->xhat2, ada + 3 * H, ada + 4 * H, B, L, H, 6 * H);
    be->linear_bwd(dxm, G + o->mlp_w12, NULL, m->dab, m->xm, W + o->mlp_w12, BL, H, 2 * I, 0.0f);
    be->modulate_bwd(dxhat, dada + 3 * H, dada + 4 * H, dxm, b->xhat2, ada + 4 * H, B, L, H, 6 * H);
    be->layernorm_bwd(dx, dxhat, b->xhat2, b->rstd2, BL, H);
    // GLA branch
    be->gate_residual_bwd(m->dao, dada + 2 * H, dx, b->ao, ada + 2 * H, B, L, H, 6 * H);
    be->modulate_fwd(m->xm, b->xhat1, ada, ada + H, B, L, H, 6 * H);
    gla_backward(n, G, b, o, B);
    be->modulate_bwd(dxhat, dada, dada + H, dxm, b->xhat1, ada + H, B, L, H, 6 * H);
    be->layernorm_bwd(dx, dxhat, b->xhat1, b->rstd1, BL, H);
    // adaLN: ada = Linear(SiLU(c))
    be->linear_bwd(m->e.dsc, G + o->ada_w, G + o->ada_b, dada, m->e.sc, W + o->ada_w, B, H, 6 * H, 1.0f);
}

static void dig_backward(Net *n, float *G, const float *dout, int B) {
    Dig *m = n->impl;
    dit_final_bwd(n, &m->e, G, m->dx, dout, B);
    for (int i = n->cfg.dig.depth - 1; i >= 0; i--) block_backward(n, G, i, B);
    dit_embed_bwd(n, &m->e, G, m->dx, B);
}

static const char *dig_mixer(const NetConfig *c) { return "gla"; }

static int dig_learnable(const NetConfig *c, MalaErr *err) {
    return dit_family_learnable(c, c->dig.hidden, c->dig.patch, err);
}

const NetOps DIG_NET_OPS = {
    .name = "dig",
    .family = "DiG",
    .presets = "DiG-{T,T13,XS,S,B,L,XL}/{2,4,8}",
    .config_default = dig_config_default,
    .preset = dig_config_preset,
    .validate = dig_config_validate,
    .describe = dig_config_describe,
    .mixer = dig_mixer,
    .read_meta = dig_read_meta,
    .write_meta = dig_write_meta,
    .flops_per_image = dig_flops_per_image,
    .learnable = dig_learnable,
    .build = dig_build,
    .layout = dig_layout,
    .destroy = dig_destroy,
    .init_weights = dig_init_weights,
    .forward = dig_forward,
    .backward = dig_backward,
};

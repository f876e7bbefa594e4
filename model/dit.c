// DiT forward and backward through the op table (facebookresearch/DiT models.py, docs/design.md §1-2).
// Every activation lives in one backend allocation sized at creation; nothing is allocated per
// step. Backward mirrors forward block by block; recomputable values (the modulated LayerNorm
// output, GELU output, gated attention product) are recomputed into shared scratch instead of
// being kept per block.
// defines: DIT_NET_OPS (with dit_config.c and dit_init.c)
#include "model/dit.h"

#include <stdint.h>
#include <string.h>

#define ABSENT SIZE_MAX

// Per-block activations kept for backward (in inference mode all blocks share one set).
struct BlockActs {
    float *ada;           // [B, 6H] shift/scale/gate for attention and MLP
    float *xc;            // [BL, H] the block's input, before the CPE (cpe only)
    float *xhat1, *rstd1; // LayerNorm before attention
    float *qkv;           // [BL, 3H]; q, k hold phi(q), phi(k) for mala/linear
    float *qkr;           // [BL, 2H] roped q', k' (rope only)
    float *cache;         // attention scratch
    float *o;             // [BL, H] attention + LePE
    float *g;             // [BL, H] gate(x) (gate only)
    float *ao;            // [BL, H] proj output
    float *xhat2, *rstd2; // LayerNorm before the MLP
    float *h1;            // [BL, 4H] fc1 output (pre-GELU)
    float *mo;            // [BL, H] fc2 output
};

// The backend's ops of an attention kind: the one place a kind is dispatched.
static DitAttnOps attn_ops(const Backend *be, AttnKind k) {
    switch (k) {
    case ATTN_MALA: return (DitAttnOps){1, be->mala_cache_floats, be->mala_fwd, be->mala_bwd};
    case ATTN_LINEAR: return (DitAttnOps){1, be->linattn_cache_floats, be->linattn_fwd, be->linattn_bwd};
    case ATTN_SOFTMAX: break;
    }
    return (DitAttnOps){0, be->softmax_cache_floats, be->softmax_fwd, be->softmax_bwd};
}

// ---- the parameter table ----

static void dit_build(Net *n) {
    const DitConfig *c = &n->cfg.dit;
    Dit *m = xcalloc(1, sizeof *m);
    n->impl = m;
    m->gh = n->cfg.image_size / c->patch;
    m->T = m->gh * m->gh;
    m->attn = attn_ops(n->be, c->attn);
    m->acts.blk = xcalloc((size_t)(n->mode == NET_TRAIN ? c->depth : 1), sizeof(BlockActs));
    int64_t H = c->hidden;
    char name[72];
    dit_embed_params_in(n, &m->e, c->hidden, c->patch);
    m->blk = xcalloc((size_t)c->depth, sizeof *m->blk);
    for (int i = 0; i < c->depth; i++) {
        BlockOffsets *b = &m->blk[i];
#define BLK(field, suffix, ...) do { snprintf(name, sizeof name, "blocks.%d.%s", i, suffix); \
        b->field = net_add_param(n, name, NET_NDIM(__VA_ARGS__), NET_SHAPE(__VA_ARGS__)); } while (0)
// (a weight run and stored in int8: in a q8 network, its offset is into the int8 weights)
#define BLK_QUANT8(field, suffix, ...) do { snprintf(name, sizeof name, "blocks.%d.%s", i, suffix); \
        b->field = net_add_param_quant8(n, name, NET_NDIM(__VA_ARGS__), NET_SHAPE(__VA_ARGS__)); } while (0)
        BLK_QUANT8(qkv_w, "attn.qkv.weight", 3 * H, H);
        BLK(qkv_b, "attn.qkv.bias", 3 * H);
        BLK_QUANT8(proj_w, "attn.proj.weight", H, H);
        BLK(proj_b, "attn.proj.bias", H);
        b->lepe_w = b->lepe_b = b->gate_w = b->gate_b = ABSENT;
        if (c->lepe) {
            BLK(lepe_w, "attn.lepe.weight", H, 1, c->lepe, c->lepe);
            BLK(lepe_b, "attn.lepe.bias", H);
        }
        if (c->gate) {
            BLK_QUANT8(gate_w, "attn.gate.weight", H, H);
            BLK(gate_b, "attn.gate.bias", H);
        }
        BLK_QUANT8(fc1_w, "mlp.fc1.weight", 4 * H, H);
        BLK(fc1_b, "mlp.fc1.bias", 4 * H);
        BLK_QUANT8(fc2_w, "mlp.fc2.weight", H, 4 * H);
        BLK(fc2_b, "mlp.fc2.bias", H);
        // the authors' parts in PyTorch's registration order: the MLP's dwconv last in the MLP, the
        // block's pos last in the block
        b->dw_w = b->dw_b = b->pos_w = b->pos_b = ABSENT;
        if (c->ffn_dwconv) {
            BLK(dw_w, "mlp.dwconv.weight", 4 * H, 1, c->ffn_dwconv, c->ffn_dwconv);
            BLK(dw_b, "mlp.dwconv.bias", 4 * H);
        }
        BLK(ada_w, "adaLN_modulation.1.weight", 6 * H, H);
        BLK(ada_b, "adaLN_modulation.1.bias", 6 * H);
        if (c->cpe) {
            BLK(pos_w, "pos.weight", H, 1, c->cpe, c->cpe);
            BLK(pos_b, "pos.bias", H);
        }
#undef BLK
#undef BLK_QUANT8
    }
    dit_embed_params_out(n, &m->e);
    n->n_trainable = n->n_floats;
    dit_embed_params_fixed(n, &m->e);
}

static void dit_destroy(Net *n) {
    Dit *m = n->impl;
    if (!m) return;
    free(m->acts.blk);
    free(m->blk);
    free(m);
}

// ---- activations ----

static void dit_layout(Net *n, Arena *a) {
    const DitConfig *c = &n->cfg.dit;
    Dit *m = n->impl;
    DitActs *A = &m->acts;
    size_t B = n->max_batch, L = m->T, H = c->hidden, BL = B * L;
    AttnShape s = {(int)B, (int)L, (int)H, c->heads, m->gh, m->gh};
    size_t cache = m->attn.cache_floats(s);
    int train = n->mode == NET_TRAIN;

    int nb = train ? c->depth : 1;
    for (int i = 0; i < nb; i++) {
        BlockActs *b = &A->blk[i];
        b->ada = arena_take(a, B * 6 * H);
        b->xc = c->cpe ? arena_take(a, BL * H) : NULL;
        // (LN(x) and fc1's pre-activation are kept for the backward only)
        b->xhat1 = train ? arena_take(a, BL * H) : NULL;
        b->rstd1 = arena_take(a, BL);
        b->qkv = arena_take(a, BL * 3 * H);
        b->qkr = c->rope ? arena_take(a, BL * 2 * H) : NULL;
        b->cache = arena_take(a, cache);
        b->o = arena_take(a, BL * H);
        b->g = c->gate ? arena_take(a, BL * H) : NULL;
        b->ao = arena_take(a, BL * H);
        b->xhat2 = train ? arena_take(a, BL * H) : NULL;
        b->rstd2 = arena_take(a, BL);
        b->h1 = train ? arena_take(a, BL * 4 * H) : NULL;
        b->mo = arena_take(a, BL * H);
    }
    if (n->mode == NET_INFER_ATTN) {
        m->keep_qkv = arena_take(a, (size_t)c->depth * BL * 3 * H);
        m->keep_qkr = c->rope ? arena_take(a, (size_t)c->depth * BL * 2 * H) : NULL;
        m->row = arena_take(a, L);
    }
    dit_embed_layout(n, &m->e, a);
    A->x = arena_take(a, BL * H);
    A->xm = arena_take(a, BL * H);
    A->y = c->gate ? arena_take(a, BL * H) : NULL;
    A->h2 = arena_take(a, BL * 4 * H);
    A->h3 = c->ffn_dwconv ? arena_take(a, BL * 4 * H) : NULL;
    if (train) {
        A->dx = arena_take(a, BL * H);
        A->dxm = m->e.dxm;
        A->dxhat = m->e.dxhat;
        A->dmo = arena_take(a, BL * H); A->dh2 = arena_take(a, BL * 4 * H); A->dao = arena_take(a, BL * H);
        A->dy = c->gate ? arena_take(a, BL * H) : NULL;
        A->do_ = arena_take(a, BL * H);
        A->dg = c->gate ? arena_take(a, BL * H) : NULL;
        A->dqkv = arena_take(a, BL * 3 * H);
        A->dqkr = c->rope ? arena_take(a, BL * 2 * H) : NULL;
        A->dada = arena_take(a, B * 6 * H);
    }
}

// ---- forward ----

static AttnShape attn_shape(const Net *n, int B) {
    const Dit *m = n->impl;
    AttnShape s = {B, m->T, n->cfg.dit.hidden, n->cfg.dit.heads, m->gh, m->gh};
    return s;
}

static BlockActs *block_acts(Net *n, int i) {
    Dit *m = n->impl;
    return &m->acts.blk[n->mode == NET_TRAIN ? i : 0];
}

static void attention_forward(Net *n, BlockActs *b, const BlockOffsets *o, int B) {
    const Backend *be = n->be;
    const DitConfig *c = &n->cfg.dit;
    const Dit *m = n->impl;
    AttnShape s = attn_shape(n, B);
    int BL = B * m->T, H = c->hidden;
    const float *qkr = c->rope ? b->qkr : NULL;
    if (m->attn.kernel && c->rope) be->elu1_rope_fwd(b->qkr, b->qkv, s);
    else if (m->attn.kernel) be->elu1_fwd(b->qkv, BL, 2 * H, 3 * H);
    else if (c->rope) be->rope_fwd(b->qkr, b->qkv, s);
    m->attn.fwd(b->o, b->cache, b->qkv, qkr, s);
    if (c->lepe)  // LePE: the depthwise conv of v, the last third of each qkv row
        be->dwconv_fwd(b->o, b->qkv + 2 * s.H, 3 * s.H, n->w + o->lepe_w, n->w + o->lepe_b, c->lepe, s.B, s.gh,
                       s.gw, s.H);
}

// fc2's input: h2, or h3 = h2 + dwconv(h2) (the authors' FeedForwardNetwork with subconv).
static const float *ffn_dwconv_forward(Net *n, const BlockOffsets *o, int B) {
    const DitConfig *c = &n->cfg.dit;
    Dit *m = n->impl;
    DitActs *A = &m->acts;
    if (!c->ffn_dwconv) return A->h2;
    int C = 4 * c->hidden;
    n->be->copy(A->h3, A->h2, (size_t)B * m->T * C * sizeof(float));
    n->be->dwconv_fwd(A->h3, A->h2, C, n->w + o->dw_w, n->w + o->dw_b, c->ffn_dwconv, B, m->gh, m->gh, C);
    return A->h3;
}

// A block's large linear (weight offset w, bias offset bias): from its int8 weights in a q8 network,
// else linear_fwd_quant on the fp32 ones.
static void quant_linear(const Net *n, float *out, const float *in, size_t w, size_t bias, int N, int I, int O) {
    if (n->q8) {
        const int8_t *q;
        const float *scale;
        net_q8_weights(n, w, O, &q, &scale);
        n->be->linear_fwd_q8(out, in, q, scale, n->w + bias, N, I, O);
    } else {
        n->be->linear_fwd_quant(out, in, n->w + w, n->w + bias, N, I, O);
    }
}

static void block_forward(Net *n, int i, int B) {
    const Backend *be = n->be;
    const DitConfig *c = &n->cfg.dit;
    Dit *m = n->impl;
    const BlockOffsets *o = &m->blk[i];
    BlockActs *b = block_acts(n, i);
    DitActs *A = &m->acts;
    const float *W = n->w;
    int H = c->hidden, L = m->T, BL = B * L;
    float *ada = b->ada;  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
    const int train = n->mode == NET_TRAIN;  // LN(x) is kept for the backward

    be->linear_fwd(ada, m->e.sc, W + o->ada_w, W + o->ada_b, B, H, 6 * H);
    if (c->cpe) {  // x = x + pos(x): the authors' conditional position encoding, a depthwise conv
        be->copy(b->xc, A->x, (size_t)BL * H * sizeof(float));
        be->dwconv_fwd(A->x, b->xc, H, W + o->pos_w, W + o->pos_b, c->cpe, B, m->gh, m->gh, H);
    }
    // x = x + gate_msa * attn(modulate(LN(x), shift_msa, scale_msa))
    be->layernorm_modulate_fwd(A->xm, train ? b->xhat1 : NULL, b->rstd1, A->x, ada, ada + H, B, L, H, 6 * H);
    quant_linear(n, b->qkv, A->xm, o->qkv_w, o->qkv_b, BL, H, 3 * H);
    attention_forward(n, b, o, B);
    if (m->keep_qkv) {  // NET_INFER_ATTN: what attn_row needs of this block (n->max_batch rows per block)
        size_t rows = (size_t)n->max_batch * L;
        be->copy(m->keep_qkv + (size_t)i * rows * 3 * H, b->qkv, (size_t)BL * 3 * H * sizeof(float));
        if (c->rope) be->copy(m->keep_qkr + (size_t)i * rows * 2 * H, b->qkr, (size_t)BL * 2 * H * sizeof(float));
    }
    const float *proj_in = b->o;
    if (c->gate) {
        quant_linear(n, b->g, A->xm, o->gate_w, o->gate_b, BL, H, H);
        be->mul_fwd(A->y, b->o, b->g, (size_t)BL * H);
        proj_in = A->y;
    }
    quant_linear(n, b->ao, proj_in, o->proj_w, o->proj_b, BL, H, H);
    be->gate_residual_fwd(A->x, b->ao, ada + 2 * H, B, L, H, 6 * H);
    // x = x + gate_mlp * mlp(modulate(LN(x), shift_mlp, scale_mlp))
    be->layernorm_modulate_fwd(A->xm, train ? b->xhat2 : NULL, b->rstd2, A->x, ada + 3 * H, ada + 4 * H, B, L, H,
                               6 * H);
    float *h1 = train ? b->h1 : A->h2;  // (sampling keeps no pre-activation: the GELU runs in place)
    quant_linear(n, h1, A->xm, o->fc1_w, o->fc1_b, BL, H, 4 * H);
    be->gelu_fwd(A->h2, h1, (size_t)BL * 4 * H);
    quant_linear(n, b->mo, ffn_dwconv_forward(n, o, B), o->fc2_w, o->fc2_b, BL, 4 * H, H);
    be->gate_residual_fwd(A->x, b->mo, ada + 5 * H, B, L, H, 6 * H);
}

static void dit_forward(Net *n, float *out, const float *x, const float *t, const int32_t *y, int B) {
    Dit *m = n->impl;
    dit_embed_fwd(n, &m->e, m->acts.x, x, t, y, B);
    for (int i = 0; i < n->cfg.dit.depth; i++) block_forward(n, i, B);
    dit_final_fwd(n, &m->e, out, m->acts.x, B);
}

// ---- backward ----

static void attention_backward(Net *n, float *G, BlockActs *b, const BlockOffsets *o, int B) {
    const Backend *be = n->be;
    const DitConfig *c = &n->cfg.dit;
    Dit *m = n->impl;
    DitActs *A = &m->acts;
    AttnShape s = attn_shape(n, B);
    size_t BL = (size_t)B * m->T, H = c->hidden;
    const float *qkr = c->rope ? b->qkr : NULL;
    float *dqkr = c->rope ? A->dqkr : NULL;
    be->zero(A->dqkv, BL * 3 * H * sizeof(float));
    if (dqkr) be->zero(dqkr, BL * 2 * H * sizeof(float));
    if (c->lepe)
        be->dwconv_bwd(A->dqkv + 2 * s.H, G + o->lepe_w, G + o->lepe_b, A->do_, b->qkv + 2 * s.H,
                       3 * s.H, n->w + o->lepe_w, c->lepe, s.B, s.gh, s.gw, s.H);
    m->attn.bwd(A->dqkv, dqkr, A->do_, b->qkv, qkr, b->cache, s);
    if (c->rope) be->rope_bwd(A->dqkv, dqkr, s);
    if (m->attn.kernel) be->elu1_bwd(A->dqkv, b->qkv, (int)BL, 2 * (int)H, 3 * (int)H);
}

// On entry A->dx holds d(loss)/d(block output); on exit d(loss)/d(block input).
static void block_backward(Net *n, float *G, int i, int B) {
    const Backend *be = n->be;
    const DitConfig *c = &n->cfg.dit;
    Dit *m = n->impl;
    const BlockOffsets *o = &m->blk[i];
    BlockActs *b = block_acts(n, i);
    DitActs *A = &m->acts;
    const float *W = n->w;
    int H = c->hidden, L = m->T, BL = B * L;
    size_t nBLH = (size_t)BL * H * sizeof(float);
    float *ada = b->ada, *dada = A->dada;

    be->zero(dada, (size_t)B * 6 * H * sizeof(float));
    // MLP branch
    be->gate_residual_bwd(A->dmo, dada + 5 * H, A->dx, b->mo, ada + 5 * H, B, L, H, 6 * H);
    be->modulate_fwd(A->xm, b->xhat2, ada + 3 * H, ada + 4 * H, B, L, H, 6 * H);
    be->gelu_fwd(A->h2, b->h1, (size_t)BL * 4 * H);
    be->linear_bwd(A->dh2, G + o->fc2_w, G + o->fc2_b, A->dmo, ffn_dwconv_forward(n, o, B), W + o->fc2_w, BL,
                   4 * H, H, 0.0f);
    if (c->ffn_dwconv) {  // d h2 = d h3 + dwconv^T(d h3); h3's buffer holds d h3, free after fc2's backward
        size_t n4 = (size_t)BL * 4 * H;
        be->copy(A->h3, A->dh2, n4 * sizeof(float));
        be->dwconv_bwd(A->dh2, G + o->dw_w, G + o->dw_b, A->h3, A->h2, 4 * H, W + o->dw_w, c->ffn_dwconv, B, m->gh,
                       m->gh, 4 * H);
    }
    be->gelu_bwd(A->h2, A->dh2, b->h1, (size_t)BL * 4 * H);  // h2 reused as d(fc1 output)
    be->linear_bwd(A->dxm, G + o->fc1_w, G + o->fc1_b, A->h2, A->xm, W + o->fc1_w, BL, H, 4 * H, 0.0f);
    be->modulate_bwd(A->dxhat, dada + 3 * H, dada + 4 * H, A->dxm, b->xhat2, ada + 4 * H, B, L, H, 6 * H);
    be->layernorm_bwd(A->dx, A->dxhat, b->xhat2, b->rstd2, BL, H);
    // attention branch
    be->gate_residual_bwd(A->dao, dada + 2 * H, A->dx, b->ao, ada + 2 * H, B, L, H, 6 * H);
    be->modulate_fwd(A->xm, b->xhat1, ada, ada + H, B, L, H, 6 * H);
    if (c->gate) {
        be->mul_fwd(A->y, b->o, b->g, (size_t)BL * H);
        be->linear_bwd(A->dy, G + o->proj_w, G + o->proj_b, A->dao, A->y, W + o->proj_w, BL, H, H, 0.0f);
        be->zero(A->do_, nBLH);
        be->zero(A->dg, nBLH);
        be->mul_bwd(A->do_, A->dg, A->dy, b->o, b->g, (size_t)BL * H);
        be->linear_bwd(A->dxm, G + o->gate_w, G + o->gate_b, A->dg, A->xm, W + o->gate_w, BL, H, H, 0.0f);
    } else {
        be->linear_bwd(A->do_, G + o->proj_w, G + o->proj_b, A->dao, b->o, W + o->proj_w, BL, H, H, 0.0f);
    }
    attention_backward(n, G, b, o, B);
    be->linear_bwd(A->dxm, G + o->qkv_w, G + o->qkv_b, A->dqkv, A->xm, W + o->qkv_w, BL, H, 3 * H,
                   c->gate ? 1.0f : 0.0f);  // the gate's projection wrote dxm first
    be->modulate_bwd(A->dxhat, dada, dada + H, A->dxm, b->xhat1, ada + H, B, L, H, 6 * H);
    be->layernorm_bwd(A->dx, A->dxhat, b->xhat1, b->rstd1, BL, H);
    if (c->cpe) {  // d xc = dx + pos^T(dx); dmo is free scratch by now
        be->copy(A->dmo, A->dx, nBLH);
        be->dwconv_bwd(A->dx, G + o->pos_w, G + o->pos_b, A->dmo, b->xc, H, W + o->pos_w, c->cpe, B, m->gh, m->gh, H);
    }
    // adaLN: ada = Linear(SiLU(c))
    be->linear_bwd(m->e.dsc, G + o->ada_w, G + o->ada_b, dada, m->e.sc, W + o->ada_w, B, H, 6 * H, 1.0f);
}

static void dit_backward(Net *n, float *G, const float *dout, int B) {
    Dit *m = n->impl;
    dit_final_bwd(n, &m->e, G, m->acts.dx, dout, B);
    for (int i = n->cfg.dit.depth - 1; i >= 0; i--) block_backward(n, G, i, B);
    dit_embed_bwd(n, &m->e, G, m->acts.dx, B);
}

static int dit_learnable(const NetConfig *c, MalaErr *err) {
    return dit_family_learnable(c, c->dit.hidden, c->dit.patch, err);
}

const NetOps DIT_NET_OPS = {
    .name = "dit",
    .family = "DiT",
    .presets = "DiT-{T,XS,S,B,L,XL}/{2,4,8}",
    .config_default = dit_config_default,
    .preset = dit_config_preset,
    .validate = dit_config_validate,
    .describe = dit_config_describe,
    .mixer = dit_mixer,
    .read_meta = dit_read_meta,
    .write_meta = dit_write_meta,
    .flops_per_image = dit_flops_per_image,
    .learnable = dit_learnable,
    .build = dit_build,
    .layout = dit_layout,
    .destroy = dit_destroy,
    .init_weights = dit_init_weights,
    .forward = dit_forward,
    .backward = dit_backward,
    .attn_info = dit_attn_info,
    .attn_row = dit_attn_row,
};

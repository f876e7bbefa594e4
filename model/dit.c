// DiT forward and backward through the op table (facebookresearch/DiT models.py, DESIGN 1-2).
// Every activation lives in one backend allocation sized at creation; nothing is allocated per
// step. Backward mirrors forward block by block; recomputable values (the modulated LayerNorm
// output, GELU output, gated attention product) are recomputed into shared scratch instead of
// being kept per block.
// defines: dit_create, dit_free, dit_find_param, dit_forward, dit_backward
#include "dit.h"

#include <stdint.h>
#include <string.h>

#define ABSENT SIZE_MAX

// Per-block activations kept for backward (in inference mode all blocks share one set).
struct BlockActs {
    float *ada;           // [B, 6H] shift/scale/gate for attention and MLP
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

struct DitActs {
    BlockActs *blk;       // depth entries (training) or 1 (inference)
    const int32_t *labels; // y of the last forward (backend memory), for the label-table gradient
    float *patches;       // [BL, C p p]
    float *x;             // [BL, H] residual stream
    float *tfreq, *th, *ths, *temb, *yemb, *c, *sc;  // conditioning [B, *]
    float *fada, *fxhat, *frstd, *fxm, *ftok;       // final layer
    // shared scratch
    float *xm, *y, *h2;
    // backward (training only)
    float *dx, *dxm, *dxhat, *dmo, *dh2, *dao, *dy, *do_, *dg, *dqkv, *dqkr, *dada, *dsc, *dc, *dths, *dth,
        *dtok;
};

// ---- the parameter table ----

static size_t add_param(Dit *m, int *cap, const char *name, int ndim, const int64_t *shape) {
    if (m->nparams == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        ParamInfo *np = xcalloc((size_t)*cap, sizeof *np);
        if (m->params) memcpy(np, m->params, sizeof *np * m->nparams);
        free(m->params);
        m->params = np;
    }
    ParamInfo *p = &m->params[m->nparams++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) { p->shape[i] = shape[i]; p->numel *= (size_t)shape[i]; }
    p->offset = m->n_floats;
    m->n_floats += p->numel;
    return p->offset;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define ADD(name, ...) add_param(m, &cap, name, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__))

static void build_param_table(Dit *m) {
    const DitConfig *c = &m->cfg;
    int cap = 0;
    int64_t H = c->hidden, C = c->in_channels, p = c->patch, K = c->num_classes;
    char name[72];
    m->x_w = ADD("x_embedder.proj.weight", H, C, p, p);
    m->x_b = ADD("x_embedder.proj.bias", H);
    m->t0_w = ADD("t_embedder.mlp.0.weight", H, DIT_FREQ_DIM);
    m->t0_b = ADD("t_embedder.mlp.0.bias", H);
    m->t2_w = ADD("t_embedder.mlp.2.weight", H, H);
    m->t2_b = ADD("t_embedder.mlp.2.bias", H);
    m->y_tab = ADD("y_embedder.embedding_table.weight", K + 1, H);
    m->blk = xcalloc((size_t)c->depth, sizeof *m->blk);
    for (int i = 0; i < c->depth; i++) {
        BlockOffsets *b = &m->blk[i];
#define BLK(field, suffix, ...) do { snprintf(name, sizeof name, "blocks.%d.%s", i, suffix); \
        b->field = add_param(m, &cap, name, NDIM(__VA_ARGS__), SHAPE(__VA_ARGS__)); } while (0)
        BLK(qkv_w, "attn.qkv.weight", 3 * H, H);
        BLK(qkv_b, "attn.qkv.bias", 3 * H);
        BLK(proj_w, "attn.proj.weight", H, H);
        BLK(proj_b, "attn.proj.bias", H);
        b->lepe_w = b->lepe_b = b->gate_w = b->gate_b = ABSENT;
        if (c->lepe) {
            BLK(lepe_w, "attn.lepe.weight", H, 1, c->lepe, c->lepe);
            BLK(lepe_b, "attn.lepe.bias", H);
        }
        if (c->gate) {
            BLK(gate_w, "attn.gate.weight", H, H);
            BLK(gate_b, "attn.gate.bias", H);
        }
        BLK(fc1_w, "mlp.fc1.weight", 4 * H, H);
        BLK(fc1_b, "mlp.fc1.bias", 4 * H);
        BLK(fc2_w, "mlp.fc2.weight", H, 4 * H);
        BLK(fc2_b, "mlp.fc2.bias", H);
        BLK(ada_w, "adaLN_modulation.1.weight", 6 * H, H);
        BLK(ada_b, "adaLN_modulation.1.bias", 6 * H);
#undef BLK
    }
    m->f_lin_w = ADD("final_layer.linear.weight", p * p * m->out_channels, H);
    m->f_lin_b = ADD("final_layer.linear.bias", p * p * m->out_channels);
    m->f_ada_w = ADD("final_layer.adaLN_modulation.1.weight", 2 * H, H);
    m->f_ada_b = ADD("final_layer.adaLN_modulation.1.bias", 2 * H);
    m->n_trainable = m->n_floats;
    m->pos = ADD("pos_embed", 1, m->T, H);
}

// ---- the arena: a first pass with base NULL counts, the second assigns ----

typedef struct { char *base; size_t used; } Bump;

static float *take(Bump *a, size_t floats) {
    size_t bytes = (floats * sizeof(float) + 255) & ~(size_t)255;
    float *p = a->base ? (float *)(a->base + a->used) : NULL;
    a->used += bytes;
    return p;
}

static void layout(Dit *m, Bump *a) {
    const DitConfig *c = &m->cfg;
    DitActs *A = m->acts;
    size_t B = m->max_batch, L = m->T, H = c->hidden, BL = B * L;
    AttnShape s = {(int)B, (int)L, (int)H, c->heads, m->gh, m->gh};
    size_t cache = c->attn == ATTN_MALA ? m->be->mala_cache_floats(s)
                 : c->attn == ATTN_LINEAR ? m->be->linattn_cache_floats(s) : m->be->softmax_cache_floats(s);
    int train = m->mode == DIT_TRAIN;

    m->w = take(a, m->n_floats);
    if (train) {
        m->grad = take(a, m->n_floats);
        m->m = take(a, m->n_floats);
        m->v = take(a, m->n_floats);
        m->ema = take(a, m->n_floats);
    }
    int nb = train ? c->depth : 1;
    for (int i = 0; i < nb; i++) {
        BlockActs *b = &A->blk[i];
        b->ada = take(a, B * 6 * H);
        b->xhat1 = take(a, BL * H); b->rstd1 = take(a, BL);
        b->qkv = take(a, BL * 3 * H);
        b->qkr = c->rope ? take(a, BL * 2 * H) : NULL;
        b->cache = take(a, cache);
        b->o = take(a, BL * H);
        b->g = c->gate ? take(a, BL * H) : NULL;
        b->ao = take(a, BL * H);
        b->xhat2 = take(a, BL * H); b->rstd2 = take(a, BL);
        b->h1 = take(a, BL * 4 * H);
        b->mo = take(a, BL * H);
    }
    size_t K = (size_t)c->in_channels * c->patch * c->patch, KO = (size_t)m->out_channels * c->patch * c->patch;
    A->patches = take(a, BL * K);
    A->x = take(a, BL * H);
    A->tfreq = take(a, B * DIT_FREQ_DIM);
    A->th = take(a, B * H); A->ths = take(a, B * H); A->temb = take(a, B * H);
    A->yemb = take(a, B * H); A->c = take(a, B * H); A->sc = take(a, B * H);
    A->fada = take(a, B * 2 * H);
    A->fxhat = take(a, BL * H); A->frstd = take(a, BL); A->fxm = take(a, BL * H);
    A->ftok = take(a, BL * KO);
    A->xm = take(a, BL * H);
    A->y = c->gate ? take(a, BL * H) : NULL;
    A->h2 = take(a, BL * 4 * H);
    if (train) {
        A->dx = take(a, BL * H); A->dxm = take(a, BL * H); A->dxhat = take(a, BL * H);
        A->dmo = take(a, BL * H); A->dh2 = take(a, BL * 4 * H); A->dao = take(a, BL * H);
        A->dy = c->gate ? take(a, BL * H) : NULL;
        A->do_ = take(a, BL * H);
        A->dg = c->gate ? take(a, BL * H) : NULL;
        A->dqkv = take(a, BL * 3 * H);
        A->dqkr = c->rope ? take(a, BL * 2 * H) : NULL;
        A->dada = take(a, B * 6 * H);
        A->dsc = take(a, B * H); A->dc = take(a, B * H); A->dths = take(a, B * H); A->dth = take(a, B * H);
        A->dtok = take(a, BL * KO);
    }
}

Dit *dit_create(const DitConfig *c, const Backend *be, int max_batch, int mode) {
    MalaErr err;
    if (dit_config_validate(c, &err)) FATAL("%s", err.msg);
    Dit *m = xcalloc(1, sizeof *m);
    m->cfg = *c;
    m->be = be;
    m->mode = mode;
    m->max_batch = max_batch;
    m->gh = c->image_size / c->patch;
    m->T = m->gh * m->gh;
    m->out_channels = c->in_channels * (c->learn_sigma ? 2 : 1);
    build_param_table(m);
    m->acts = xcalloc(1, sizeof *m->acts);
    m->acts->blk = xcalloc((size_t)(mode == DIT_TRAIN ? c->depth : 1), sizeof(BlockActs));
    Bump count = {NULL, 0};
    layout(m, &count);
    m->arena_bytes = count.used;
    m->arena = be->alloc(m->arena_bytes);
    Bump real = {m->arena, 0};
    layout(m, &real);
    return m;
}

void dit_free(Dit *m) {
    if (!m) return;
    m->be->release(m->arena);
    free(m->acts->blk);
    free(m->acts);
    free(m->blk);
    free(m->params);
    free(m);
}

const ParamInfo *dit_find_param(const Dit *m, const char *name) {
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name)) return &m->params[i];
    return NULL;
}

// ---- forward ----

static AttnShape attn_shape(const Dit *m, int B) {
    AttnShape s = {B, m->T, m->cfg.hidden, m->cfg.heads, m->gh, m->gh};
    return s;
}

static BlockActs *block_acts(Dit *m, int i) { return &m->acts->blk[m->mode == DIT_TRAIN ? i : 0]; }

static void attention_forward(Dit *m, BlockActs *b, const BlockOffsets *o, int B) {
    const Backend *be = m->be;
    const DitConfig *c = &m->cfg;
    AttnShape s = attn_shape(m, B);
    int BL = B * m->T, H = c->hidden;
    const float *qkr = c->rope ? b->qkr : NULL;
    if (c->attn != ATTN_SOFTMAX) be->elu1_fwd(b->qkv, BL, 2 * H, 3 * H);
    if (c->rope) be->rope_fwd(b->qkr, b->qkv, s);
    if (c->attn == ATTN_MALA) be->mala_fwd(b->o, b->cache, b->qkv, qkr, s);
    else if (c->attn == ATTN_LINEAR) be->linattn_fwd(b->o, b->cache, b->qkv, qkr, s);
    else be->softmax_fwd(b->o, b->cache, b->qkv, qkr, s);
    if (c->lepe)  // LePE: the depthwise conv of v, the last third of each qkv row
        be->dwconv_fwd(b->o, b->qkv + 2 * s.H, 3 * s.H, m->w + o->lepe_w, m->w + o->lepe_b, c->lepe, s.B, s.gh,
                       s.gw, s.H);
}

static void block_forward(Dit *m, int i, int B) {
    const Backend *be = m->be;
    const DitConfig *c = &m->cfg;
    const BlockOffsets *o = &m->blk[i];
    BlockActs *b = block_acts(m, i);
    DitActs *A = m->acts;
    const float *W = m->w;
    int H = c->hidden, L = m->T, BL = B * L;
    float *ada = b->ada;  // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp

    be->linear_fwd(ada, A->sc, W + o->ada_w, W + o->ada_b, B, H, 6 * H);
    // x = x + gate_msa * attn(modulate(LN(x), shift_msa, scale_msa))
    be->layernorm_fwd(b->xhat1, b->rstd1, A->x, BL, H);
    be->modulate_fwd(A->xm, b->xhat1, ada, ada + H, B, L, H, 6 * H);
    be->linear_fwd(b->qkv, A->xm, W + o->qkv_w, W + o->qkv_b, BL, H, 3 * H);
    attention_forward(m, b, o, B);
    const float *proj_in = b->o;
    if (c->gate) {
        be->linear_fwd(b->g, A->xm, W + o->gate_w, W + o->gate_b, BL, H, H);
        be->mul_fwd(A->y, b->o, b->g, (size_t)BL * H);
        proj_in = A->y;
    }
    be->linear_fwd(b->ao, proj_in, W + o->proj_w, W + o->proj_b, BL, H, H);
    be->gate_residual_fwd(A->x, b->ao, ada + 2 * H, B, L, H, 6 * H);
    // x = x + gate_mlp * mlp(modulate(LN(x), shift_mlp, scale_mlp))
    be->layernorm_fwd(b->xhat2, b->rstd2, A->x, BL, H);
    be->modulate_fwd(A->xm, b->xhat2, ada + 3 * H, ada + 4 * H, B, L, H, 6 * H);
    be->linear_fwd(b->h1, A->xm, W + o->fc1_w, W + o->fc1_b, BL, H, 4 * H);
    be->gelu_fwd(A->h2, b->h1, (size_t)BL * 4 * H);
    be->linear_fwd(b->mo, A->h2, W + o->fc2_w, W + o->fc2_b, BL, 4 * H, H);
    be->gate_residual_fwd(A->x, b->mo, ada + 5 * H, B, L, H, 6 * H);
}

void dit_forward(Dit *m, float *out, const float *x, const float *t, const int32_t *y, int B) {
    CHECK(B >= 1 && B <= m->max_batch, "batch %d exceeds the model's capacity %d", B, m->max_batch);
    const Backend *be = m->be;
    const DitConfig *c = &m->cfg;
    DitActs *A = m->acts;
    const float *W = m->w;
    int H = c->hidden, L = m->T, BL = B * L, p = c->patch, S = c->image_size;
    int K = c->in_channels * p * p, KO = m->out_channels * p * p;

    be->patchify_fwd(A->patches, x, B, c->in_channels, S, p);
    be->linear_fwd(A->x, A->patches, W + m->x_w, W + m->x_b, BL, K, H);
    be->add_pos(A->x, W + m->pos, B, L, H);
    // c = t_embedder(t) + y_embedder(y); every adaLN layer sees SiLU(c)
    be->timestep_embed(A->tfreq, t, B, DIT_FREQ_DIM);
    be->linear_fwd(A->th, A->tfreq, W + m->t0_w, W + m->t0_b, B, DIT_FREQ_DIM, H);
    be->silu_fwd(A->ths, A->th, (size_t)B * H);
    be->linear_fwd(A->temb, A->ths, W + m->t2_w, W + m->t2_b, B, H, H);
    be->embed_fwd(A->yemb, W + m->y_tab, y, B, H);
    A->labels = y;
    be->add(A->c, A->temb, A->yemb, (size_t)B * H);
    be->silu_fwd(A->sc, A->c, (size_t)B * H);

    for (int i = 0; i < c->depth; i++) block_forward(m, i, B);

    be->linear_fwd(A->fada, A->sc, W + m->f_ada_w, W + m->f_ada_b, B, H, 2 * H);
    be->layernorm_fwd(A->fxhat, A->frstd, A->x, BL, H);
    be->modulate_fwd(A->fxm, A->fxhat, A->fada, A->fada + H, B, L, H, 2 * H);
    be->linear_fwd(A->ftok, A->fxm, W + m->f_lin_w, W + m->f_lin_b, BL, H, KO);
    be->unpatchify_fwd(out, A->ftok, B, m->out_channels, S, p);
}

// ---- backward ----

static void attention_backward(Dit *m, BlockActs *b, const BlockOffsets *o, int B) {
    const Backend *be = m->be;
    const DitConfig *c = &m->cfg;
    DitActs *A = m->acts;
    AttnShape s = attn_shape(m, B);
    size_t BL = (size_t)B * m->T, H = c->hidden;
    const float *qkr = c->rope ? b->qkr : NULL;
    float *dqkr = c->rope ? A->dqkr : NULL;
    be->zero(A->dqkv, BL * 3 * H * sizeof(float));
    if (dqkr) be->zero(dqkr, BL * 2 * H * sizeof(float));
    if (c->lepe)
        be->dwconv_bwd(A->dqkv + 2 * s.H, m->grad + o->lepe_w, m->grad + o->lepe_b, A->do_, b->qkv + 2 * s.H,
                       3 * s.H, m->w + o->lepe_w, c->lepe, s.B, s.gh, s.gw, s.H);
    if (c->attn == ATTN_MALA) be->mala_bwd(A->dqkv, dqkr, A->do_, b->qkv, qkr, b->cache, s);
    else if (c->attn == ATTN_LINEAR) be->linattn_bwd(A->dqkv, dqkr, A->do_, b->qkv, qkr, b->cache, s);
    else be->softmax_bwd(A->dqkv, dqkr, A->do_, b->qkv, qkr, b->cache, s);
    if (c->rope) be->rope_bwd(A->dqkv, dqkr, s);
    if (c->attn != ATTN_SOFTMAX) be->elu1_bwd(A->dqkv, b->qkv, (int)BL, 2 * (int)H, 3 * (int)H);
}

// On entry A->dx holds d(loss)/d(block output); on exit d(loss)/d(block input).
static void block_backward(Dit *m, int i, int B) {
    const Backend *be = m->be;
    const DitConfig *c = &m->cfg;
    const BlockOffsets *o = &m->blk[i];
    BlockActs *b = block_acts(m, i);
    DitActs *A = m->acts;
    const float *W = m->w;
    float *G = m->grad;
    int H = c->hidden, L = m->T, BL = B * L;
    size_t nBLH = (size_t)BL * H * sizeof(float);
    float *ada = b->ada, *dada = A->dada;

    be->zero(dada, (size_t)B * 6 * H * sizeof(float));
    // MLP branch
    be->zero(A->dmo, nBLH);
    be->gate_residual_bwd(A->dmo, dada + 5 * H, A->dx, b->mo, ada + 5 * H, B, L, H, 6 * H);
    be->modulate_fwd(A->xm, b->xhat2, ada + 3 * H, ada + 4 * H, B, L, H, 6 * H);
    be->gelu_fwd(A->h2, b->h1, (size_t)BL * 4 * H);
    be->zero(A->dh2, 4 * nBLH);
    be->linear_bwd(A->dh2, G + o->fc2_w, G + o->fc2_b, A->dmo, A->h2, W + o->fc2_w, BL, 4 * H, H);
    be->zero(A->h2, 4 * nBLH);  // reused as d(fc1 output)
    be->gelu_bwd(A->h2, A->dh2, b->h1, (size_t)BL * 4 * H);
    be->zero(A->dxm, nBLH);
    be->linear_bwd(A->dxm, G + o->fc1_w, G + o->fc1_b, A->h2, A->xm, W + o->fc1_w, BL, H, 4 * H);
    be->zero(A->dxhat, nBLH);
    be->modulate_bwd(A->dxhat, dada + 3 * H, dada + 4 * H, A->dxm, b->xhat2, ada + 4 * H, B, L, H, 6 * H);
    be->layernorm_bwd(A->dx, A->dxhat, b->xhat2, b->rstd2, BL, H);
    // attention branch
    be->zero(A->dao, nBLH);
    be->gate_residual_bwd(A->dao, dada + 2 * H, A->dx, b->ao, ada + 2 * H, B, L, H, 6 * H);
    be->modulate_fwd(A->xm, b->xhat1, ada, ada + H, B, L, H, 6 * H);
    be->zero(A->do_, nBLH);
    be->zero(A->dxm, nBLH);
    if (c->gate) {
        be->mul_fwd(A->y, b->o, b->g, (size_t)BL * H);
        be->zero(A->dy, nBLH);
        be->linear_bwd(A->dy, G + o->proj_w, G + o->proj_b, A->dao, A->y, W + o->proj_w, BL, H, H);
        be->zero(A->dg, nBLH);
        be->mul_bwd(A->do_, A->dg, A->dy, b->o, b->g, (size_t)BL * H);
        be->linear_bwd(A->dxm, G + o->gate_w, G + o->gate_b, A->dg, A->xm, W + o->gate_w, BL, H, H);
    } else {
        be->linear_bwd(A->do_, G + o->proj_w, G + o->proj_b, A->dao, b->o, W + o->proj_w, BL, H, H);
    }
    attention_backward(m, b, o, B);
    be->linear_bwd(A->dxm, G + o->qkv_w, G + o->qkv_b, A->dqkv, A->xm, W + o->qkv_w, BL, H, 3 * H);
    be->zero(A->dxhat, nBLH);
    be->modulate_bwd(A->dxhat, dada, dada + H, A->dxm, b->xhat1, ada + H, B, L, H, 6 * H);
    be->layernorm_bwd(A->dx, A->dxhat, b->xhat1, b->rstd1, BL, H);
    // adaLN: ada = Linear(SiLU(c))
    be->linear_bwd(A->dsc, G + o->ada_w, G + o->ada_b, dada, A->sc, W + o->ada_w, B, H, 6 * H);
}

void dit_backward(Dit *m, const float *dout, int B) {
    CHECK(m->mode == DIT_TRAIN, "dit_backward needs a model created with DIT_TRAIN");
    const Backend *be = m->be;
    const DitConfig *c = &m->cfg;
    DitActs *A = m->acts;
    const float *W = m->w;
    float *G = m->grad;
    int H = c->hidden, L = m->T, BL = B * L, p = c->patch, S = c->image_size;
    int K = c->in_channels * p * p, KO = m->out_channels * p * p;
    size_t nBLH = (size_t)BL * H * sizeof(float), nBH = (size_t)B * H * sizeof(float);

    // final layer
    be->zero(A->dtok, (size_t)BL * KO * sizeof(float));
    be->unpatchify_bwd(A->dtok, dout, B, m->out_channels, S, p);
    be->zero(A->dxm, nBLH);
    be->linear_bwd(A->dxm, G + m->f_lin_w, G + m->f_lin_b, A->dtok, A->fxm, W + m->f_lin_w, BL, H, KO);
    be->zero(A->dada, (size_t)B * 2 * H * sizeof(float));
    be->zero(A->dxhat, nBLH);
    be->modulate_bwd(A->dxhat, A->dada, A->dada + H, A->dxm, A->fxhat, A->fada + H, B, L, H, 2 * H);
    be->zero(A->dx, nBLH);
    be->layernorm_bwd(A->dx, A->dxhat, A->fxhat, A->frstd, BL, H);
    be->zero(A->dsc, nBH);
    be->linear_bwd(A->dsc, G + m->f_ada_w, G + m->f_ada_b, A->dada, A->sc, W + m->f_ada_w, B, H, 2 * H);

    for (int i = c->depth - 1; i >= 0; i--) block_backward(m, i, B);

    // conditioning: c = mlp(freq(t)) + table[y]
    be->zero(A->dc, nBH);
    be->silu_bwd(A->dc, A->dsc, A->c, (size_t)B * H);
    be->embed_bwd(G + m->y_tab, A->dc, A->labels, B, H);
    be->zero(A->dths, nBH);
    be->linear_bwd(A->dths, G + m->t2_w, G + m->t2_b, A->dc, A->ths, W + m->t2_w, B, H, H);
    be->zero(A->dth, nBH);
    be->silu_bwd(A->dth, A->dths, A->th, (size_t)B * H);
    be->linear_bwd(NULL, G + m->t0_w, G + m->t0_b, A->dth, A->tfreq, W + m->t0_w, B, DIT_FREQ_DIM, H);
    // patch embedding (pos_embed is fixed)
    be->linear_bwd(NULL, G + m->x_w, G + m->x_b, A->dx, A->patches, W + m->x_w, BL, K, H);
}

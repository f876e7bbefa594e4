// DiC forward and backward through the op table (docs/math/dic.md), NCHW throughout:
//   x = stem3x3(x); c_i = t_mlp_i(freq(t)) + table_i[y] per level i (every stage sees SiLU(c_cond[s]))
//   encoder stages: blocks, saving some outputs; x = unshuffle2(conv3x3(x))
//   latent blocks; decoder stages: x = shuffle2(conv3x3(x)); blocks, concatenating [x, saved]
//   x = output3x3(x); out = out_proj3x3(LN2d(x)(1 + scale) + shift), (shift, scale) = Linear(SiLU c)
// Block (ci -> co):
//   h = conv0(GELU(GN(x)));  (gate, scale, shift) = affine(SiLU c)
//   h = conv1(GELU(GN(h)(1 + scale) + shift));  out = gate h + (skip1x1(x) or x)
// Every block output is kept (the skips read them; in training the next block's backward does);
// in training each block also keeps its conv outputs and statistics, and the backward recomputes
// the normalised / activated maps into shared scratch.
// defines: DIC_NET_OPS
#include "model/dic.h"

#include <math.h>
#include <string.h>

#include "model/dit_embed.h"

typedef struct {
    int s, b, ci, co, R, cat;  // stage, index, widths, grid side, concatenates a saved map
    int src;                   // cat: the encoder block whose output it concatenates
    size_t n0_w, n0_b, c0_w, c0_b, aff_w, aff_b, n1_w, n1_b, c1_w, c1_b, sk_w, sk_b;  // sk_*: SIZE_MAX = none
    // activations
    float *xin;            // [B, ci, R^2]: the block's input (the previous output, or the concatenation)
    float *xprev;          // the previous layer's output (cat: the first ci - src width channels of xin)
    float *out;            // [B, co, R^2]
    float *h0, *h1;        // conv0 / conv1 outputs (training; shared scratch in inference)
    float *ada;            // [B, 3co] gate | scale | shift
    float *mean0, *rstd0, *mean1, *rstd1;  // GroupNorm statistics [B * groups]
    float *dsaved;         // pushed encoder blocks: d(loss)/d(out) from the decoder's concatenation
} DicBlock;

typedef struct {
    size_t t0_w, t0_b, t2_w, t2_b, y_tab;
    float *th, *ths, *temb, *yemb, *c, *sc;    // [B, W_i]
    float *dsc, *dc, *dths, *dth;              // training
} DicEmbed;

typedef struct {
    DicPlan p;
    int nblocks, skip_stride;
    int first[DIC_MAX_STAGES + 1];         // stage s holds blocks first[s] .. first[s+1]-1
    DicBlock *blk;
    DicEmbed emb[DIC_MAX_STAGES];
    size_t stem_w, stem_b, down_w[DIC_MAX_STAGES], up_w[DIC_MAX_STAGES], out_w, out_b;
    size_t f_proj_w, f_proj_b, f_ada_w, f_ada_b;
    const int32_t *labels;
    const float *stem_in;                  // the image of the last forward (backend memory)
    float *tfreq;                          // [B, 256]
    float *x0;                             // stem output [B, W0, R0^2]
    float *dconv[DIC_MAX_STAGES];          // down / up conv outputs, before the (un)shuffle
    float *dmap[DIC_MAX_STAGES];           // down / up outputs (the next stage's input)
    float *xo, *lmean, *lrstd, *ln, *fada; // output conv, LayerNorm2d, final adaLN
    float *s1, *s2, *s3;                   // map-sized scratch
    float *work;                           // conv workspace
    size_t work_floats;
    float *d1, *d2, *d3, *d4, *dfada, *dada;  // backward scratch (map-sized; dfada [B, 2W], dada [B, 3co])
} Dic;

#define ABSENT SIZE_MAX

static DicEmbed *stage_emb(Dic *m, int s) { return &m->emb[m->p.cond[s]]; }

static ConvShape conv_shape(int B, int ci, int R, int co, int k) {
    int pad = k / 2;
    return (ConvShape){B, ci, R, R, co, k, k, 1, pad, pad, pad, pad};
}

// ---- the parameter table ----

#define ADD(...) net_add_param(n, name, NET_NDIM(__VA_ARGS__), NET_SHAPE(__VA_ARGS__))
#define NAME(...) snprintf(name, sizeof name, __VA_ARGS__)

static void block_params(Net *n, DicBlock *k, const char *prefix) {
    char name[96];
    int64_t ci = k->ci, co = k->co;
    NAME("%s.conv.norm0.weight", prefix); k->n0_w = ADD(ci);
    NAME("%s.conv.norm0.bias", prefix); k->n0_b = ADD(ci);
    NAME("%s.conv.conv0.weight", prefix); k->c0_w = ADD(co, ci, 3, 3);
    NAME("%s.conv.conv0.bias", prefix); k->c0_b = ADD(co);
    NAME("%s.conv.affine.1.weight", prefix); k->aff_w = ADD(3 * co, co);
    NAME("%s.conv.affine.1.bias", prefix); k->aff_b = ADD(3 * co);
    NAME("%s.conv.norm1.weight", prefix); k->n1_w = ADD(co);
    NAME("%s.conv.norm1.bias", prefix); k->n1_b = ADD(co);
    NAME("%s.conv.conv1.weight", prefix); k->c1_w = ADD(co, co, 3, 3);
    NAME("%s.conv.conv1.bias", prefix); k->c1_b = ADD(co);
    k->sk_w = k->sk_b = ABSENT;
    if (ci != co) {
        NAME("%s.conv.skip.weight", prefix); k->sk_w = ADD(co, ci, 1, 1);
        NAME("%s.conv.skip.bias", prefix); k->sk_b = ADD(co);
    }
}

static void dic_build(Net *n) {
    const DicConfig *c = &n->cfg.dic;
    Dic *m = xcalloc(1, sizeof *m);
    n->impl = m;
    MalaErr err;
    if (dic_plan(&n->cfg, &m->p, &err)) FATAL("%s", err.msg);
    const DicPlan *p = &m->p;
    m->skip_stride = c->skip_stride;
    for (int s = 0; s < p->n; s++) m->nblocks += c->depths[s];
    m->blk = xcalloc((size_t)m->nblocks, sizeof *m->blk);
    char name[96];
    int64_t C = n->cfg.in_channels, K = n->cfg.num_classes;
    NAME("x_embedder.proj.weight"); m->stem_w = ADD(p->W[0], C, 3, 3);
    NAME("x_embedder.proj.bias"); m->stem_b = ADD(p->W[0]);
    for (int i = 0; i < p->L; i++) {
        int64_t Wi = p->W[i];
        NAME("t_embedder_ls.%d.mlp.0.weight", i); m->emb[i].t0_w = ADD(Wi, DIT_FREQ_DIM);
        NAME("t_embedder_ls.%d.mlp.0.bias", i); m->emb[i].t0_b = ADD(Wi);
        NAME("t_embedder_ls.%d.mlp.2.weight", i); m->emb[i].t2_w = ADD(Wi, Wi);
        NAME("t_embedder_ls.%d.mlp.2.bias", i); m->emb[i].t2_b = ADD(Wi);
    }
    for (int i = 0; i < p->L; i++) {
        NAME("y_embedder_ls.%d.embedding_table.weight", i);
        m->emb[i].y_tab = ADD(K + 1, p->W[i]);
    }
    int j = 0, stack[256], top = 0;
    for (int s = 0; s < p->n; s++) {
        m->first[s] = j;
        for (int b = 0; b < c->depths[s]; b++, j++) {
            DicBlock *k = &m->blk[j];
            k->s = s;
            k->b = b;
            k->ci = dic_block_cin(c, p, s, b);
            k->co = p->W[s];
            k->R = p->R[s];
            k->cat = s >= p->L && dic_pops(c, b);
            if (s < p->L - 1 && dic_pushes(c, s, b)) {
                CHECK(top < 256, "DiC: more than 256 saved maps");
                stack[top++] = j;
            }
            k->src = -1;
            if (k->cat) {
                CHECK(top > 0, "DiC: a decoder concatenation without a saved map");
                k->src = stack[--top];
            }
            char prefix[64];
            if (s < p->L - 1) snprintf(prefix, sizeof prefix, "enc_blocks.%d.%d", s, b);
            else if (s == p->L - 1) snprintf(prefix, sizeof prefix, "lat_blocks.0.%d", b);
            else snprintf(prefix, sizeof prefix, "dec_blocks.%d.%d", s - p->L, b);
            block_params(n, k, prefix);
        }
    }
    m->first[p->n] = j;
    CHECK(top == 0, "DiC: %d saved maps are never concatenated", top);
    for (int s = 0; s < p->L - 1; s++) {
        NAME("downs.%d.body.0.weight", s);
        m->down_w[s] = ADD(p->W[s + 1] / 4, p->W[s], 3, 3);
    }
    for (int s = p->L; s < p->n; s++) {
        NAME("ups.%d.body.0.weight", s - p->L);
        m->up_w[s] = ADD(4 * p->W[s], p->W[s - 1], 3, 3);
    }
    int64_t W = p->W[p->n - 1];
    NAME("output.weight"); m->out_w = ADD(W, W, 3, 3);
    NAME("output.bias"); m->out_b = ADD(W);
    NAME("final_layer.out_proj.weight"); m->f_proj_w = ADD(n->out_channels, W, 3, 3);
    NAME("final_layer.out_proj.bias"); m->f_proj_b = ADD(n->out_channels);
    NAME("final_layer.adaLN_modulation.1.weight"); m->f_ada_w = ADD(2 * W, W);
    NAME("final_layer.adaLN_modulation.1.bias"); m->f_ada_b = ADD(2 * W);
    n->n_trainable = n->n_floats;  // no fixed tensors
}

static void dic_destroy(Net *n) {
    Dic *m = n->impl;
    if (!m) return;
    free(m->blk);
    free(m);
}

// ---- activations ----

// The map stage s starts from: the stem's output, the down map before it, or its up map.
static float *stage_input(Dic *m, int s) {
    if (s == 0) return m->x0;
    return s < m->p.L ? m->dmap[s - 1] : m->dmap[s];
}

static float *stage_output(Dic *m, int s) { return m->blk[m->first[s + 1] - 1].out; }

static void dic_layout(Net *n, Arena *a) {
    Dic *m = n->impl;
    const DicPlan *p = &m->p;
    const DicConfig *c = &n->cfg.dic;
    const size_t B = n->max_batch;
    const int train = n->mode == NET_TRAIN;
    size_t map = 0, work = 0;  // the largest map [B, C, R^2] and conv workspace any layer needs
    int maxco = 0;
#define MAP(ch, R) ((size_t)B * (size_t)(ch) * (size_t)(R) * (size_t)(R))
#define WORK(ci, R, co, k) do { size_t w_ = n->be->conv2d_workspace_floats(conv_shape((int)B, ci, R, co, k)); \
        if (w_ > work) work = w_; } while (0)
    m->tfreq = arena_take(a, B * DIT_FREQ_DIM);
    for (int i = 0; i < p->L; i++) {
        DicEmbed *e = &m->emb[i];
        size_t Wi = p->W[i];
        e->th = arena_take(a, B * Wi); e->ths = arena_take(a, B * Wi); e->temb = arena_take(a, B * Wi);
        e->yemb = arena_take(a, B * Wi); e->c = arena_take(a, B * Wi); e->sc = arena_take(a, B * Wi);
        if (train) {
            e->dsc = arena_take(a, B * Wi); e->dc = arena_take(a, B * Wi);
            e->dths = arena_take(a, B * Wi); e->dth = arena_take(a, B * Wi);
        }
    }
    m->x0 = arena_take(a, MAP(p->W[0], p->R[0]));
    WORK(n->cfg.in_channels, p->R[0], p->W[0], 3);
    for (int s = 0; s < p->L - 1; s++) {
        m->dconv[s] = arena_take(a, MAP(p->W[s + 1] / 4, p->R[s]));
        m->dmap[s] = arena_take(a, MAP(p->W[s + 1], p->R[s + 1]));
        WORK(p->W[s], p->R[s], p->W[s + 1] / 4, 3);
    }
    for (int s = p->L; s < p->n; s++) {
        m->dconv[s] = arena_take(a, MAP(4 * p->W[s], p->R[s - 1]));
        m->dmap[s] = arena_take(a, MAP(p->W[s], p->R[s]));
        WORK(p->W[s - 1], p->R[s - 1], 4 * p->W[s], 3);
    }
    float *h0 = NULL, *h1 = NULL;
    for (int j = 0; j < m->nblocks; j++) {
        DicBlock *k = &m->blk[j];
        size_t ci = k->ci, co = k->co, R = k->R;
        if (k->co > maxco) maxco = k->co;
        if (MAP(ci, R) > map) map = MAP(ci, R);
        if (MAP(co, R) > map) map = MAP(co, R);
        WORK((int)ci, (int)R, (int)co, 3);
        WORK((int)co, (int)R, (int)co, 3);
        WORK((int)ci, (int)R, (int)co, 1);
        k->xin = k->cat ? arena_take(a, MAP(ci, R)) : NULL;  // else the previous output (set below)
        k->out = arena_take(a, MAP(co, R));
        k->ada = arena_take(a, B * 3 * co);
        size_t g0 = B * dic_groups((int)ci), g1 = B * dic_groups((int)co);
        k->mean0 = arena_take(a, g0); k->rstd0 = arena_take(a, g0);
        k->mean1 = arena_take(a, g1); k->rstd1 = arena_take(a, g1);
        if (train) {
            k->h0 = arena_take(a, MAP(co, R));
            k->h1 = arena_take(a, MAP(co, R));
        } else {  // one pair shared by every block, sized for the widest
            k->h0 = k->h1 = NULL;
        }
        k->dsaved = train && k->s < p->L - 1 && dic_pushes(c, k->s, k->b) ? arena_take(a, MAP(co, R)) : NULL;
    }
    int W = p->W[p->n - 1], R = p->R[p->n - 1];
    m->xo = arena_take(a, MAP(W, R));
    m->lmean = arena_take(a, B * R * R); m->lrstd = arena_take(a, B * R * R);
    m->ln = arena_take(a, MAP(W, R));
    m->fada = arena_take(a, B * 2 * W);
    WORK(W, R, W, 3);
    WORK(W, R, n->out_channels, 3);
    if (MAP(W, R) > map) map = MAP(W, R);
    if (!train) {
        h0 = arena_take(a, map);
        h1 = arena_take(a, map);
        for (int j = 0; j < m->nblocks; j++) { m->blk[j].h0 = h0; m->blk[j].h1 = h1; }
    }
    m->s1 = arena_take(a, map); m->s2 = arena_take(a, map); m->s3 = arena_take(a, map);
    if (train) {
        m->d1 = arena_take(a, map); m->d2 = arena_take(a, map); m->d3 = arena_take(a, map); m->d4 = arena_take(a, map);
        m->dfada = arena_take(a, B * 2 * W);
        m->dada = arena_take(a, B * 3 * (size_t)maxco);
    }
    m->work_floats = work;
    m->work = arena_take(a, work ? work : 1);
    // the previous layer's output: the stem, a down / up map at a stage's start, else the last block
    for (int j = 0; j < m->nblocks; j++) {
        DicBlock *k = &m->blk[j];
        k->xprev = j > 0 && m->blk[j - 1].s == k->s ? m->blk[j - 1].out : stage_input(m, k->s);
        if (!k->cat) k->xin = k->xprev;
    }
#undef MAP
#undef WORK
}

// ---- initialisation (docs/math/dic.md's table) ----

// xavier_uniform_ on a conv weight [O, I, k, k] with PyTorch's fans (I k^2, O k^2).
static void init_conv(Rng *r, float *w, int O, int I, int k) {
    double fan_in = (double)I * k * k, fan_out = (double)O * k * k;
    init_uniform(r, w, (size_t)O * I * k * k, sqrt(6.0 / (fan_in + fan_out)));
}

static void dic_init_weights(const Net *n, float *w, uint64_t seed) {
    const Dic *m = n->impl;
    const DicPlan *p = &m->p;
    Rng r;
    rng_seed(&r, seed);
    init_xavier_uniform(&r, w + m->stem_w, p->W[0], (size_t)9 * n->cfg.in_channels, 1.0);  // the [O, I*9] view
    for (int i = 0; i < p->L; i++) {
        const DicEmbed *e = &m->emb[i];
        size_t Wi = p->W[i];
        init_normal(&r, w + e->t0_w, Wi * DIT_FREQ_DIM, 0.02f);
        init_normal(&r, w + e->t2_w, Wi * Wi, 0.02f);
        init_normal(&r, w + e->y_tab, (n->cfg.num_classes + 1) * Wi, 0.02f);
    }
    for (int j = 0; j < m->nblocks; j++) {
        const DicBlock *k = &m->blk[j];
        for (int c = 0; c < k->ci; c++) w[k->n0_w + c] = 1.0f;
        for (int c = 0; c < k->co; c++) w[k->n1_w + c] = 1.0f;
        init_conv(&r, w + k->c0_w, k->co, k->ci, 3);
        init_xavier_uniform(&r, w + k->aff_w, 3 * (size_t)k->co, k->co, 1.0);  // not zeroed (the official code)
        init_conv(&r, w + k->c1_w, k->co, k->co, 3);
        if (k->sk_w != ABSENT) init_conv(&r, w + k->sk_w, k->co, k->ci, 1);
    }
    for (int s = 0; s < p->L - 1; s++) init_conv(&r, w + m->down_w[s], p->W[s + 1] / 4, p->W[s], 3);
    for (int s = p->L; s < p->n; s++) init_conv(&r, w + m->up_w[s], 4 * p->W[s], p->W[s - 1], 3);
    int W = p->W[p->n - 1];
    init_conv(&r, w + m->out_w, W, W, 3);
    // biases, the final adaLN Linear and out_proj stay zero
}

// ---- forward ----

static void conv(Net *n, float *out, const float *x, size_t w, size_t b, int B, int ci, int R, int co, int k) {
    Dic *m = n->impl;
    n->be->conv2d_fwd(out, x, n->w + w, b == ABSENT ? NULL : n->w + b, conv_shape(B, ci, R, co, k), m->work,
                      m->work_floats);
}

static void conv_bwd(Net *n, float *G, float *dx, const float *dout, const float *x, size_t w, size_t b, int B, int ci,
                     int R, int co, int k) {
    Dic *m = n->impl;
    n->be->conv2d_bwd(dx, G + w, b == ABSENT ? NULL : G + b, dout, x, n->w + w, conv_shape(B, ci, R, co, k), m->work,
                      m->work_floats);
}

static void embed_forward(Net *n, const float *t, const int32_t *y, int B) {
    const Backend *be = n->be;
    Dic *m = n->impl;
    const float *W = n->w;
    be->timestep_embed(m->tfreq, t, B, DIT_FREQ_DIM);
    m->labels = y;
    for (int i = 0; i < m->p.L; i++) {
        DicEmbed *e = &m->emb[i];
        int Wi = m->p.W[i];
        be->linear_fwd(e->th, m->tfreq, W + e->t0_w, W + e->t0_b, B, DIT_FREQ_DIM, Wi);
        be->silu_fwd(e->ths, e->th, (size_t)B * Wi);
        be->linear_fwd(e->temb, e->ths, W + e->t2_w, W + e->t2_b, B, Wi, Wi);
        net_embed_labels(n, e->yemb, W + e->y_tab, y, B, Wi);
        be->add(e->c, e->temb, e->yemb, (size_t)B * Wi);
        be->silu_fwd(e->sc, e->c, (size_t)B * Wi);
    }
}

static void block_forward(Net *n, DicBlock *k, int B) {
    const Backend *be = n->be;
    Dic *m = n->impl;
    const float *W = n->w;
    int ci = k->ci, co = k->co, HW = k->R * k->R;
    size_t nin = (size_t)B * ci * HW, nout = (size_t)B * co * HW;
    const float *sc = stage_emb(m, k->s)->sc;
    // h0 = conv0(GELU(GN(x)))
    be->groupnorm_fwd(m->s1, k->mean0, k->rstd0, k->xin, W + k->n0_w, W + k->n0_b, B, ci, HW, dic_groups(ci),
                      DIC_GN_EPS);
    be->gelu_erf_fwd(m->s2, m->s1, nin);
    conv(n, k->h0, m->s2, k->c0_w, k->c0_b, B, ci, k->R, co, 3);
    // h1 = conv1(GELU(GN(h0)(1 + scale) + shift)), (gate, scale, shift) = affine(SiLU c)
    be->linear_fwd(k->ada, sc, W + k->aff_w, W + k->aff_b, B, co, 3 * co);
    be->groupnorm_fwd(m->s1, k->mean1, k->rstd1, k->h0, W + k->n1_w, W + k->n1_b, B, co, HW, dic_groups(co),
                      DIC_GN_EPS);
    be->modulate2d_fwd(m->s2, m->s1, k->ada + 2 * co, k->ada + co, B, co, HW, 3 * co);
    be->gelu_erf_fwd(m->s1, m->s2, nout);
    conv(n, k->h1, m->s1, k->c1_w, k->c1_b, B, co, k->R, co, 3);
    // out = gate h1 + shortcut(x)
    if (k->sk_w != ABSENT) conv(n, k->out, k->xin, k->sk_w, k->sk_b, B, ci, k->R, co, 1);
    else be->copy(k->out, k->xin, nout * sizeof(float));
    be->gate_residual2d_fwd(k->out, k->h1, k->ada, B, co, HW, 3 * co);
}

static void dic_forward(Net *n, float *out, const float *x, const float *t, const int32_t *y, int B) {
    const Backend *be = n->be;
    Dic *m = n->impl;
    const DicPlan *p = &m->p;
    m->stem_in = x;
    conv(n, m->x0, x, m->stem_w, m->stem_b, B, n->cfg.in_channels, p->R[0], p->W[0], 3);
    embed_forward(n, t, y, B);
    for (int s = 0; s < p->n; s++) {
        if (s >= p->L) {  // up: conv to 4W, then pixel-shuffle to W at twice the side
            conv(n, m->dconv[s], stage_output(m, s - 1), m->up_w[s], ABSENT, B, p->W[s - 1], p->R[s - 1], 4 * p->W[s], 3);
            be->pixel_shuffle_fwd(m->dmap[s], m->dconv[s], B, p->W[s], p->R[s - 1], p->R[s - 1], 2);
        }
        for (int j = m->first[s]; j < m->first[s + 1]; j++) {
            DicBlock *k = &m->blk[j];
            if (k->cat) {  // [x, saved]: x first
                const DicBlock *src = &m->blk[k->src];
                int HW = k->R * k->R, cx = k->ci - src->co;
                be->channel_copy_fwd(k->xin, k->ci, 0, k->xprev, cx, 0, cx, B, HW);
                be->channel_copy_fwd(k->xin, k->ci, cx, src->out, src->co, 0, src->co, B, HW);
            }
            block_forward(n, k, B);
        }
        if (s < p->L - 1) {  // down: conv to W/4, then pixel-unshuffle to W at half the side
            conv(n, m->dconv[s], stage_output(m, s), m->down_w[s], ABSENT, B, p->W[s], p->R[s], p->W[s + 1] / 4, 3);
            be->pixel_unshuffle_fwd(m->dmap[s], m->dconv[s], B, p->W[s + 1] / 4, p->R[s + 1], p->R[s + 1], 2);
        }
    }
    // output conv and the final layer: out_proj(LN2d(x)(1 + scale) + shift)
    int W = p->W[p->n - 1], R = p->R[p->n - 1], HW = R * R;
    conv(n, m->xo, stage_output(m, p->n - 1), m->out_w, m->out_b, B, W, R, W, 3);
    be->linear_fwd(m->fada, stage_emb(m, p->n - 1)->sc, n->w + m->f_ada_w, n->w + m->f_ada_b, B, W, 2 * W);
    be->layernorm2d_fwd(m->ln, m->lmean, m->lrstd, m->xo, NULL, NULL, B, W, HW, DIC_LN_EPS);
    be->modulate2d_fwd(m->s1, m->ln, m->fada, m->fada + W, B, W, HW, 2 * W);
    conv(n, out, m->s1, m->f_proj_w, m->f_proj_b, B, W, R, n->out_channels, 3);
}

// ---- backward ----

static void zero(const Backend *be, float *x, size_t floats) { be->zero(x, floats * sizeof(float)); }

// dxin (overwritten) = d(loss)/d(block input) from dcur = d(loss)/d(block output); parameter and
// conditioning gradients added. Uses m->d3, m->d4 and the forward scratch.
static void block_backward(Net *n, float *G, DicBlock *k, const float *dcur, float *dxin, int B) {
    const Backend *be = n->be;
    Dic *m = n->impl;
    const float *W = n->w;
    int ci = k->ci, co = k->co, HW = k->R * k->R;
    size_t nin = (size_t)B * ci * HW, nout = (size_t)B * co * HW;
    float *da = m->d3, *dc = m->d4, *dada = m->dada;
    DicEmbed *e = stage_emb(m, k->s);
    zero(be, dada, (size_t)B * 3 * co);
    // out = gate h1 + shortcut(x)
    zero(be, da, nout);
    be->gate_residual2d_bwd(da, dada, dcur, k->h1, k->ada, B, co, HW, 3 * co);
    zero(be, dxin, nin);
    if (k->sk_w != ABSENT) conv_bwd(n, G, dxin, dcur, k->xin, k->sk_w, k->sk_b, B, ci, k->R, co, 1);
    else be->add(dxin, dxin, dcur, nout);
    // h1 = conv1(GELU(GN(h0)(1 + scale) + shift)): recompute the three maps
    be->groupnorm_fwd(m->s1, k->mean1, k->rstd1, k->h0, W + k->n1_w, W + k->n1_b, B, co, HW, dic_groups(co),
                      DIC_GN_EPS);
    be->modulate2d_fwd(m->s2, m->s1, k->ada + 2 * co, k->ada + co, B, co, HW, 3 * co);
    be->gelu_erf_fwd(m->s3, m->s2, nout);
    zero(be, dc, nout);
    conv_bwd(n, G, dc, da, m->s3, k->c1_w, k->c1_b, B, co, k->R, co, 3);
    be->gelu_erf_bwd(da, dc, m->s2, nout);
    zero(be, dc, nout);
    be->modulate2d_bwd(dc, dada + 2 * co, dada + co, da, m->s1, k->ada + co, B, co, HW, 3 * co);
    zero(be, da, nout);
    be->groupnorm_bwd(da, G + k->n1_w, G + k->n1_b, dc, k->h0, k->mean1, k->rstd1, W + k->n1_w, B, co, HW,
                      dic_groups(co));
    // h0 = conv0(GELU(GN(x)))
    be->groupnorm_fwd(m->s1, k->mean0, k->rstd0, k->xin, W + k->n0_w, W + k->n0_b, B, ci, HW, dic_groups(ci),
                      DIC_GN_EPS);
    be->gelu_erf_fwd(m->s2, m->s1, nin);
    zero(be, dc, nin);
    conv_bwd(n, G, dc, da, m->s2, k->c0_w, k->c0_b, B, ci, k->R, co, 3);
    be->gelu_erf_bwd(da, dc, m->s1, nin);
    be->groupnorm_bwd(dxin, G + k->n0_w, G + k->n0_b, da, k->xin, k->mean0, k->rstd0, W + k->n0_w, B, ci, HW,
                      dic_groups(ci));
    // (gate, scale, shift) = affine(SiLU c)
    be->linear_bwd(e->dsc, G + k->aff_w, G + k->aff_b, dada, e->sc, W + k->aff_w, B, co, 3 * co, 1.0f);
}

static void embed_backward(Net *n, float *G, int B) {
    const Backend *be = n->be;
    Dic *m = n->impl;
    const float *W = n->w;
    for (int i = 0; i < m->p.L; i++) {
        DicEmbed *e = &m->emb[i];
        int Wi = m->p.W[i];
        size_t nb = (size_t)B * Wi;
        be->silu_bwd(e->dc, e->dsc, e->c, nb);
        be->embed_bwd(G + e->y_tab, e->dc, m->labels, B, Wi);
        be->linear_bwd(e->dths, G + e->t2_w, G + e->t2_b, e->dc, e->ths, W + e->t2_w, B, Wi, Wi, 0.0f);
        be->silu_bwd(e->dth, e->dths, e->th, nb);
        be->linear_bwd(NULL, G + e->t0_w, G + e->t0_b, e->dth, m->tfreq, W + e->t0_w, B, DIT_FREQ_DIM, Wi, 0.0f);
    }
}

static void dic_backward(Net *n, float *G, const float *dout, int B) {
    const Backend *be = n->be;
    Dic *m = n->impl;
    const DicPlan *p = &m->p;
    int W = p->W[p->n - 1], R = p->R[p->n - 1], HW = R * R;
    size_t nmap = (size_t)B * W * HW;
    for (int i = 0; i < p->L; i++) zero(be, m->emb[i].dsc, (size_t)B * p->W[i]);
    for (int j = 0; j < m->nblocks; j++)
        if (m->blk[j].dsaved) zero(be, m->blk[j].dsaved, (size_t)B * m->blk[j].co * m->blk[j].R * m->blk[j].R);
    // final layer and the output conv; the running gradient ends in cur
    float *cur = m->d1, *next = m->d2;
    be->modulate2d_fwd(m->s1, m->ln, m->fada, m->fada + W, B, W, HW, 2 * W);
    zero(be, m->d3, nmap);
    conv_bwd(n, G, m->d3, dout, m->s1, m->f_proj_w, m->f_proj_b, B, W, R, n->out_channels, 3);
    zero(be, m->dfada, (size_t)B * 2 * W);
    zero(be, m->d4, nmap);
    be->modulate2d_bwd(m->d4, m->dfada, m->dfada + W, m->d3, m->ln, m->fada + W, B, W, HW, 2 * W);
    zero(be, m->d3, nmap);
    be->layernorm2d_bwd(m->d3, NULL, NULL, m->d4, m->xo, m->lmean, m->lrstd, NULL, B, W, HW);
    DicEmbed *ef = stage_emb(m, p->n - 1);
    be->linear_bwd(ef->dsc, G + m->f_ada_w, G + m->f_ada_b, m->dfada, ef->sc, n->w + m->f_ada_w, B, W, 2 * W, 1.0f);
    zero(be, cur, nmap);
    conv_bwd(n, G, cur, m->d3, stage_output(m, p->n - 1), m->out_w, m->out_b, B, W, R, W, 3);
    for (int s = p->n - 1; s >= 0; s--) {
        if (s < p->L - 1) {  // down of stage s: cur = d(dmap[s]) on entry
            int q = p->W[s + 1] / 4;
            size_t nconv = (size_t)B * q * p->R[s] * p->R[s];
            zero(be, m->d3, nconv);
            be->pixel_unshuffle_bwd(m->d3, cur, B, q, p->R[s + 1], p->R[s + 1], 2);
            zero(be, next, (size_t)B * p->W[s] * p->R[s] * p->R[s]);
            conv_bwd(n, G, next, m->d3, stage_output(m, s), m->down_w[s], ABSENT, B, p->W[s], p->R[s], q, 3);
            float *t = cur; cur = next; next = t;
        }
        for (int j = m->first[s + 1] - 1; j >= m->first[s]; j--) {
            DicBlock *k = &m->blk[j];
            int HW = k->R * k->R;
            if (k->dsaved) be->add(cur, cur, k->dsaved, (size_t)B * k->co * HW);
            block_backward(n, G, k, cur, next, B);
            if (k->cat) {  // split d[x, saved]: x's part runs on, the saved map's waits for its block
                DicBlock *src = &m->blk[k->src];
                int cx = k->ci - src->co;
                be->channel_copy_bwd(src->dsaved, src->co, 0, next, k->ci, cx, src->co, B, HW);
                zero(be, cur, (size_t)B * cx * HW);
                be->channel_copy_bwd(cur, cx, 0, next, k->ci, 0, cx, B, HW);
            } else {
                float *t = cur; cur = next; next = t;
            }
        }
        if (s >= p->L) {  // up of stage s: cur = d(dmap[s])
            size_t nconv = (size_t)B * 4 * p->W[s] * p->R[s - 1] * p->R[s - 1];
            zero(be, m->d3, nconv);
            be->pixel_shuffle_bwd(m->d3, cur, B, p->W[s], p->R[s - 1], p->R[s - 1], 2);
            zero(be, next, (size_t)B * p->W[s - 1] * p->R[s - 1] * p->R[s - 1]);
            conv_bwd(n, G, next, m->d3, stage_output(m, s - 1), m->up_w[s], ABSENT, B, p->W[s - 1], p->R[s - 1],
                     4 * p->W[s], 3);
            float *t = cur; cur = next; next = t;
        }
    }
    // the stem (its input is the image: no dx)
    conv_bwd(n, G, NULL, cur, m->stem_in, m->stem_w, m->stem_b, B, n->cfg.in_channels, p->R[0], p->W[0], 3);
    embed_backward(n, G, B);
}

static const char *dic_mixer(const NetConfig *c) { return "conv"; }

const NetOps DIC_NET_OPS = {
    .name = "dic",
    .family = "DiC",
    .presets = "DiC-{T,T13,S,B,XL,H}",
    .config_default = dic_config_default,
    .preset = dic_config_preset,
    .validate = dic_config_validate,
    .describe = dic_config_describe,
    .mixer = dic_mixer,
    .read_meta = dic_read_meta,
    .write_meta = dic_write_meta,
    .flops_per_image = dic_flops_per_image,
    .build = dic_build,
    .layout = dic_layout,
    .destroy = dic_destroy,
    .init_weights = dic_init_weights,
    .forward = dic_forward,
    .backward = dic_backward,
};

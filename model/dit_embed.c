// defines: dit_embed_params_in, dit_embed_params_out, dit_embed_params_fixed, dit_embed_layout,
//          dit_family_learnable, dit_embed_init, dit_pos_embed, dit_embed_fwd, dit_final_fwd, dit_final_bwd, dit_embed_bwd
#include "model/dit_embed.h"

#include <math.h>

#define ADD(name, ...) net_add_param(n, name, NET_NDIM(__VA_ARGS__), NET_SHAPE(__VA_ARGS__))

void dit_embed_params_in(Net *n, DitEmbed *e, int H, int patch) {
    e->H = H;
    e->p = patch;
    e->gh = n->cfg.image_size / patch;
    e->T = e->gh * e->gh;
    int64_t C = n->cfg.in_channels, K = n->cfg.num_classes;
    e->x_w = ADD("x_embedder.proj.weight", H, C, patch, patch);
    e->x_b = ADD("x_embedder.proj.bias", H);
    e->t0_w = ADD("t_embedder.mlp.0.weight", H, DIT_FREQ_DIM);
    e->t0_b = ADD("t_embedder.mlp.0.bias", H);
    e->t2_w = ADD("t_embedder.mlp.2.weight", H, H);
    e->t2_b = ADD("t_embedder.mlp.2.bias", H);
    e->y_tab = ADD("y_embedder.embedding_table.weight", K + 1, H);
}

void dit_embed_params_out(Net *n, DitEmbed *e) {
    int64_t H = e->H, po = (int64_t)e->p * e->p * n->out_channels;
    e->f_lin_w = ADD("final_layer.linear.weight", po, H);
    e->f_lin_b = ADD("final_layer.linear.bias", po);
    e->f_ada_w = ADD("final_layer.adaLN_modulation.1.weight", 2 * H, H);
    e->f_ada_b = ADD("final_layer.adaLN_modulation.1.bias", 2 * H);
}

void dit_embed_params_fixed(Net *n, DitEmbed *e) { e->pos = ADD("pos_embed", 1, e->T, e->H); }

void dit_embed_layout(Net *n, DitEmbed *e, Arena *a) {
    size_t B = n->max_batch, H = e->H, BL = B * e->T;
    size_t K = (size_t)n->cfg.in_channels * e->p * e->p, KO = (size_t)n->out_channels * e->p * e->p;
    e->patches = arena_take(a, BL * K);
    e->tfreq = arena_take(a, B * DIT_FREQ_DIM);
    e->th = arena_take(a, B * H); e->ths = arena_take(a, B * H); e->temb = arena_take(a, B * H);
    e->yemb = arena_take(a, B * H); e->c = arena_take(a, B * H); e->sc = arena_take(a, B * H);
    e->fada = arena_take(a, B * 2 * H);
    e->fxhat = arena_take(a, BL * H); e->frstd = arena_take(a, BL); e->fxm = arena_take(a, BL * H);
    e->ftok = arena_take(a, BL * KO);
    if (n->mode == NET_TRAIN) {
        e->dsc = arena_take(a, B * H); e->dc = arena_take(a, B * H);
        e->dths = arena_take(a, B * H); e->dth = arena_take(a, B * H);
        e->dfada = arena_take(a, B * 2 * H);
        e->dtok = arena_take(a, BL * KO);
        e->dxm = arena_take(a, BL * H); e->dxhat = arena_take(a, BL * H);
    }
}

// MAE get_2d_sincos_pos_embed: the first H/2 channels encode the column index, the last H/2 the
// row index, each as [sin(pos * w_i), cos(pos * w_i)] with w_i = 1 / 10000^(i / (H/4)).
void dit_pos_embed(float *pos, int H, int grid) {
    int quarter = H / 4;
    for (int r = 0; r < grid; r++)
        for (int c = 0; c < grid; c++) {
            float *v = pos + ((size_t)r * grid + c) * H;
            for (int i = 0; i < quarter; i++) {
                double w = 1.0 / pow(10000.0, (double)i / quarter);
                v[i] = (float)sin(c * w);
                v[quarter + i] = (float)cos(c * w);
                v[2 * quarter + i] = (float)sin(r * w);
                v[3 * quarter + i] = (float)cos(r * w);
            }
        }
}

int dit_family_learnable(const NetConfig *c, int hidden, int patch, MalaErr *err) {
    int values = patch * patch * c->in_channels;
    if (hidden >= values) return 0;
    return mala_errf(err, "on %dx%dx%d images hidden %d is smaller than a patch's %d values (%dx%dx%d), so the model "
                     "cannot represent its output and will not learn; use a smaller patch or a wider model",
                     c->image_size, c->image_size, c->in_channels, hidden, values, patch, patch, c->in_channels);
}

void dit_embed_init(const Net *n, const DitEmbed *e, float *w, Rng *r) {
    size_t H = e->H, K = (size_t)n->cfg.in_channels * e->p * e->p;
    init_xavier_uniform(r, w + e->x_w, H, K, 1.0);  // the patch conv on its flattened weight
    init_normal(r, w + e->y_tab, (n->cfg.num_classes + 1) * H, 0.02f);
    init_normal(r, w + e->t0_w, H * DIT_FREQ_DIM, 0.02f);
    init_normal(r, w + e->t2_w, H * H, 0.02f);
    // biases, both adaLN layers of the final layer and its Linear stay zero
    dit_pos_embed(w + e->pos, (int)H, e->gh);
}

void dit_embed_fwd(Net *n, DitEmbed *e, float *x, const float *img, const float *t, const int32_t *y, int B) {
    const Backend *be = n->be;
    const float *W = n->w;
    int H = e->H, p = e->p, C = n->cfg.in_channels, BL = B * e->T;
    be->patchify_fwd(e->patches, img, B, C, n->cfg.image_size, p);
    be->linear_fwd(x, e->patches, W + e->x_w, W + e->x_b, BL, C * p * p, H);
    be->add_pos(x, W + e->pos, B, e->T, H);
    // c = t_embedder(t) + y_embedder(y); every adaLN layer sees SiLU(c)
    be->timestep_embed(e->tfreq, t, B, DIT_FREQ_DIM);
    be->linear_fwd(e->th, e->tfreq, W + e->t0_w, W + e->t0_b, B, DIT_FREQ_DIM, H);
    be->silu_fwd(e->ths, e->th, (size_t)B * H);
    be->linear_fwd(e->temb, e->ths, W + e->t2_w, W + e->t2_b, B, H, H);
    net_embed_labels(n, e->yemb, W + e->y_tab, y, B, H);
    e->labels = y;
    be->add(e->c, e->temb, e->yemb, (size_t)B * H);
    be->silu_fwd(e->sc, e->c, (size_t)B * H);
}

void dit_final_fwd(Net *n, DitEmbed *e, float *out, const float *x, int B) {
    const Backend *be = n->be;
    const float *W = n->w;
    int H = e->H, L = e->T, BL = B * L, KO = n->out_channels * e->p * e->p;
    be->linear_fwd(e->fada, e->sc, W + e->f_ada_w, W + e->f_ada_b, B, H, 2 * H);
    be->layernorm_modulate_fwd(e->fxm, n->mode == NET_TRAIN ? e->fxhat : NULL, e->frstd, x, e->fada, e->fada + H, B,
                               L, H, 2 * H);
    be->linear_fwd(e->ftok, e->fxm, W + e->f_lin_w, W + e->f_lin_b, BL, H, KO);
    be->unpatchify_fwd(out, e->ftok, B, n->out_channels, n->cfg.image_size, e->p);
}

void dit_final_bwd(Net *n, DitEmbed *e, float *G, float *dx, const float *dout, int B) {
    const Backend *be = n->be;
    const float *W = n->w;
    int H = e->H, L = e->T, BL = B * L, KO = n->out_channels * e->p * e->p;
    size_t nBLH = (size_t)BL * H * sizeof(float);
    be->zero(e->dtok, (size_t)BL * KO * sizeof(float));
    be->unpatchify_bwd(e->dtok, dout, B, n->out_channels, n->cfg.image_size, e->p);
    be->linear_bwd(e->dxm, G + e->f_lin_w, G + e->f_lin_b, e->dtok, e->fxm, W + e->f_lin_w, BL, H, KO, 0.0f);
    be->zero(e->dfada, (size_t)B * 2 * H * sizeof(float));
    be->modulate_bwd(e->dxhat, e->dfada, e->dfada + H, e->dxm, e->fxhat, e->fada + H, B, L, H, 2 * H);
    be->zero(dx, nBLH);
    be->layernorm_bwd(dx, e->dxhat, e->fxhat, e->frstd, BL, H);
    // the first write of dsc: the blocks' adaLN projections add theirs
    be->linear_bwd(e->dsc, G + e->f_ada_w, G + e->f_ada_b, e->dfada, e->sc, W + e->f_ada_w, B, H, 2 * H, 0.0f);
}

void dit_embed_bwd(Net *n, DitEmbed *e, float *G, const float *dx, int B) {
    const Backend *be = n->be;
    const float *W = n->w;
    int H = e->H, p = e->p, BL = B * e->T;
    // conditioning: c = mlp(freq(t)) + table[y]
    be->silu_bwd(e->dc, e->dsc, e->c, (size_t)B * H);
    be->embed_bwd(G + e->y_tab, e->dc, e->labels, B, H);
    be->linear_bwd(e->dths, G + e->t2_w, G + e->t2_b, e->dc, e->ths, W + e->t2_w, B, H, H, 0.0f);
    be->silu_bwd(e->dth, e->dths, e->th, (size_t)B * H);
    be->linear_bwd(NULL, G + e->t0_w, G + e->t0_b, e->dth, e->tfreq, W + e->t0_w, B, DIT_FREQ_DIM, H, 0.0f);
    // patch embedding (pos_embed is fixed)
    be->linear_bwd(NULL, G + e->x_w, G + e->x_b, dx, e->patches, W + e->x_w, BL, n->cfg.in_channels * p * p, H,
                   0.0f);
}

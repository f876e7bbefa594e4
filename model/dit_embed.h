// What the DiT-family backbones (DiT, DiG) share around their blocks (DiT models.py): the patch
// embedding with the fixed sin-cos pos_embed, the conditioning c = t_embedder(t) + y_embedder(y)
// that every adaLN layer sees as SiLU(c), and the adaLN final layer with unpatchify. Same tensor
// names in both official repositories.
#ifndef MALA_DIT_EMBED_H
#define MALA_DIT_EMBED_H

#include "model/net.h"

#define DIT_FREQ_DIM 256  // timestep frequency embedding size

typedef struct {
    int H, p, T, gh;  // hidden, patch, tokens, grid side
    size_t x_w, x_b, pos, t0_w, t0_b, t2_w, t2_b, y_tab, f_lin_w, f_lin_b, f_ada_w, f_ada_b;
    const int32_t *labels;  // y of the last forward (backend memory), for the label-table gradient
    float *patches;         // [BL, C p p]
    float *tfreq, *th, *ths, *temb, *yemb, *c, *sc;  // [B, *]; sc = SiLU(c)
    float *fada, *fxhat, *frstd, *fxm, *ftok;        // final layer
    // backward (training only); dsc [B, H] collects d(loss)/d(SiLU(c)) from every adaLN layer
    float *dsc, *dc, *dths, *dth, *dfada, *dtok, *dxm, *dxhat;
} DitEmbed;

// Parameter rows: the embedders (call before the blocks' rows), the final layer (after them),
// and pos_embed (last: the fixed tensor after every trainable one).
void dit_embed_params_in(Net *n, DitEmbed *e, int H, int patch);
void dit_embed_params_out(Net *n, DitEmbed *e);
void dit_embed_params_fixed(Net *n, DitEmbed *e);
void dit_embed_layout(Net *n, DitEmbed *e, Arena *a);
// DiT's initialize_weights for these tensors (Xavier patch conv, N(0, 0.02) label table and
// t-MLP weights, zero adaLN and final Linear, the sin-cos pos_embed) into a host buffer.
void dit_embed_init(const Net *n, const DitEmbed *e, float *w, Rng *r);
void dit_pos_embed(float *pos, int H, int grid);  // MAE 2-D sin-cos [grid*grid, H]
// A token of `hidden` channels must carry the patch's p*p*C input values and predict as many:
// narrower, the final Linear cannot represent the output (DiT-T/8 on 32x32x3 stalls at noise).
int dit_family_learnable(const NetConfig *c, int hidden, int patch, MalaErr *err);

// x [BL, H] = x_embedder(img) + pos_embed; e->sc = SiLU(t_embedder(t) + y_embedder(y)).
void dit_embed_fwd(Net *n, DitEmbed *e, float *x, const float *img, const float *t, const int32_t *y, int B);
// out [B, C_out, S, S] = unpatchify(final_layer(x [BL, H], c)).
void dit_final_fwd(Net *n, DitEmbed *e, float *out, const float *x, int B);
// dx [BL, H] = d(loss)/d(x) of the final layer (overwritten); zeroes e->dsc, then adds into it.
void dit_final_bwd(Net *n, DitEmbed *e, float *G, float *dx, const float *dout, int B);
// The embedders' gradients from dx [BL, H] (d loss / d embedded tokens) and e->dsc.
void dit_embed_bwd(Net *n, DitEmbed *e, float *G, const float *dx, int B);

#endif

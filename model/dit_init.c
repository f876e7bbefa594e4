// DiT initialize_weights (models.py) for the blocks; the embedders and final layer: dit_embed.c.
// defines: dit_init_weights

#include "model/dit.h"
#include "core/rng.h"

void dit_init_weights(const Net *n, float *w, uint64_t seed) {
    const DitConfig *c = &n->cfg.dit;
    const Dit *m = n->impl;
    size_t H = c->hidden;
    Rng r;
    rng_seed(&r, seed);
    dit_embed_init(n, &m->e, w, &r);
    for (int i = 0; i < c->depth; i++) {
        const BlockOffsets *b = &m->blk[i];
        init_xavier_uniform(&r, w + b->qkv_w, 3 * H, H, 1.0);
        init_xavier_uniform(&r, w + b->proj_w, H, H, 1.0);
        if (c->lepe) {  // PyTorch's default Conv2d init: bound 1/sqrt(fan_in), fan_in = k*k
            double bound = 1.0 / c->lepe;
            init_uniform(&r, w + b->lepe_w, H * c->lepe * c->lepe, bound);
            init_uniform(&r, w + b->lepe_b, H, bound);
        }
        if (c->gate) init_xavier_uniform(&r, w + b->gate_w, H, H, 1.0);
        init_xavier_uniform(&r, w + b->fc1_w, 4 * H, H, 1.0);
        init_xavier_uniform(&r, w + b->fc2_w, H, 4 * H, 1.0);
        // the authors' parts keep the authors' init (qhfan/MALA _init_weights: trunc_normal std 0.02,
        // whose +-2 bounds are 100 std away, and zero bias), so each starts close to identity
        if (c->ffn_dwconv) init_normal(&r, w + b->dw_w, 4 * H * c->ffn_dwconv * c->ffn_dwconv, 0.02f);
        if (c->cpe) init_normal(&r, w + b->pos_w, H * c->cpe * c->cpe, 0.02f);
        // adaLN_modulation and its bias stay zero (adaLN-Zero)
    }
}

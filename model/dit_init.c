// DiT initialize_weights (models.py) and the fixed 2-D sin-cos position embedding.
// defines: dit_init_weights, dit_pos_embed
#include <math.h>
#include <string.h>

#include "dit.h"
#include "rng.h"

static void xavier_uniform(Rng *r, float *w, size_t fan_out, size_t fan_in) {
    double a = sqrt(6.0 / (double)(fan_in + fan_out));
    for (size_t i = 0; i < fan_out * fan_in; i++) w[i] = (float)((2.0 * rng_uniform(r) - 1.0) * a);
}

static void normal(Rng *r, float *w, size_t n, float std) {
    for (size_t i = 0; i < n; i++) w[i] = std * rng_normal(r);
}

static void uniform(Rng *r, float *w, size_t n, double bound) {
    for (size_t i = 0; i < n; i++) w[i] = (float)((2.0 * rng_uniform(r) - 1.0) * bound);
}

// MAE get_2d_sincos_pos_embed: the first H/2 channels encode the column index, the last H/2 the
// row index, each as [sin(pos * w_i), cos(pos * w_i)] with w_i = 1 / 10000^(i / (H/4)).
void dit_pos_embed(float *pos, int H, int grid) {
    int quarter = H / 4;
    for (int r = 0; r < grid; r++)
        for (int c = 0; c < grid; c++) {
            float *e = pos + ((size_t)r * grid + c) * H;
            for (int i = 0; i < quarter; i++) {
                double w = 1.0 / pow(10000.0, (double)i / quarter);
                e[i] = (float)sin(c * w);
                e[quarter + i] = (float)cos(c * w);
                e[2 * quarter + i] = (float)sin(r * w);
                e[3 * quarter + i] = (float)cos(r * w);
            }
        }
}

void dit_init_weights(const Net *n, float *w, uint64_t seed) {
    const DitConfig *c = &n->cfg.dit;
    const Dit *m = n->impl;
    size_t H = c->hidden;
    Rng r;
    rng_seed(&r, seed);
    size_t K = (size_t)n->cfg.in_channels * c->patch * c->patch;
    xavier_uniform(&r, w + m->x_w, H, K);
    normal(&r, w + m->y_tab, (n->cfg.num_classes + 1) * H, 0.02f);
    normal(&r, w + m->t0_w, H * DIT_FREQ_DIM, 0.02f);
    normal(&r, w + m->t2_w, H * H, 0.02f);
    for (int i = 0; i < c->depth; i++) {
        const BlockOffsets *b = &m->blk[i];
        xavier_uniform(&r, w + b->qkv_w, 3 * H, H);
        xavier_uniform(&r, w + b->proj_w, H, H);
        if (c->lepe) {  // PyTorch's default Conv2d init: bound 1/sqrt(fan_in), fan_in = k*k
            double bound = 1.0 / c->lepe;
            uniform(&r, w + b->lepe_w, H * c->lepe * c->lepe, bound);
            uniform(&r, w + b->lepe_b, H, bound);
        }
        if (c->gate) xavier_uniform(&r, w + b->gate_w, H, H);
        xavier_uniform(&r, w + b->fc1_w, 4 * H, H);
        xavier_uniform(&r, w + b->fc2_w, H, 4 * H);
        // adaLN_modulation and its bias stay zero (adaLN-Zero)
    }
    // final_layer.linear and final_layer.adaLN_modulation stay zero
    dit_pos_embed(w + m->pos, (int)H, m->gh);
}

// The DiC backbone (YuchuanTian/DiC dic_models.py, DiC_default; docs/math/dic.md is the math,
// tools/ref/ref_dic.py the PyTorch reference): a conv3x3 hourglass on the latent grid. A 3x3 stem,
// stages of GroupNorm + GELU(erf) + conv blocks with (gate, scale, shift) from stage-specific
// time/class embedders injected between the two convs, conv + pixel-unshuffle down, conv +
// pixel-shuffle up, sparse skip concatenations, an `output` conv and the modulated LayerNorm2d
// final layer with a zero-initialised output conv. What dic.c and dic_config.c share.
#ifndef MALA_DIC_H
#define MALA_DIC_H

#include "model/net.h"

#define DIC_GN_EPS 1e-5f
#define DIC_LN_EPS 1e-6f

// Everything the configuration fixes (ref_dic.Plan): stages s = 0 .. n-1, encoder s < L-1,
// latent s = L-1, decoder s >= L; stage s is W[s] wide on an R[s] x R[s] grid, conditioned by
// embedder cond[s].
typedef struct {
    int n, L;
    int W[DIC_MAX_STAGES], R[DIC_MAX_STAGES], cond[DIC_MAX_STAGES];
} DicPlan;

// 0, or an error naming the rule the configuration breaks.
int dic_plan(const NetConfig *c, DicPlan *p, MalaErr *err);
// Encoder stage s saves block b's output ((d-1-b) % stride == 0); decoder block b concatenates
// a saved map first (b % stride == 0).
int dic_pushes(const DicConfig *c, int s, int b);
int dic_pops(const DicConfig *c, int b);
// The input width of block b of stage s.
int dic_block_cin(const DicConfig *c, const DicPlan *p, int s, int b);
int dic_groups(int channels);  // GroupNorm: min(32, C/4)

// dic_config.c
void dic_config_default(NetConfig *c);
int dic_config_preset(NetConfig *c, const char *preset, MalaErr *err);
int dic_config_validate(const NetConfig *c, MalaErr *err);
void dic_config_describe(const NetConfig *c, char *buf, size_t n);
int dic_read_meta(const StFile *f, NetConfig *c, MalaErr *err);
void dic_write_meta(StWriter *w, const NetConfig *c);
double dic_flops_per_image(const NetConfig *c);

#endif

// The DiG backbone (hustvl/DiG models_dig.py, preset DiG_*_bid_layer_dwconv_qdir; docs/math/dig.md
// is the math, tools/ref/ref_dig.py the PyTorch reference): DiT's embedders and final layer around
// adaLN-Zero blocks whose token mixer is Gated Linear Attention, with a SwiGLU MLP, a 3x3 depthwise
// conv after every block and the token order flipped every block, the grid transposed every
// second block. What dig.c and dig_config.c share.
#ifndef MALA_DIG_H
#define MALA_DIG_H

#include "model/dit_embed.h"
#include "model/net.h"

#define DIG_GATE_RANK 16         // gk_proj = Linear(H, 16) -> Linear(16, K)
#define DIG_GATE_NORMALIZER 16.0f  // log-decay = logsigmoid(.) / 16
#define DIG_NORM_EPS 1e-6f       // the GLA output RMSNorm (DiG passes rms_norm_eps = 1e-6)

// Widths of one block: q/k K = H/2, v/output gate V = H, per head dk, dv; MLP I (multiple of 256).
typedef struct { int H, K, V, dk, dv, I; } DigDims;
DigDims dig_dims(const DigConfig *c);

// dig_config.c
void dig_config_default(NetConfig *c);
int dig_config_preset(NetConfig *c, const char *preset, MalaErr *err);
int dig_config_validate(const NetConfig *c, MalaErr *err);
void dig_config_describe(const NetConfig *c, char *buf, size_t n);
int dig_read_meta(const StFile *f, NetConfig *c, MalaErr *err);
void dig_write_meta(StWriter *w, const NetConfig *c);
double dig_flops_per_image(const NetConfig *c);

#endif

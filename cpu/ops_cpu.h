// CPU implementations of the op table (see backend.h for each op's contract). Split by topic:
// ops_cpu_dense.c (linear, norms, adaLN, elementwise, embeddings, optimiser),
// ops_cpu_attn.c (RoPE, MALA, linear and softmax attention, the depthwise conv), ops_cpu_attn_row.c
// (one explicit attention row, for the viewer),
// ops_cpu_gla.c (gated linear attention, its logsigmoid gate), ops_cpu_conv.c (conv2d),
// ops_cpu_nchw.c (the other NCHW-map ops) and ops_cpu_diffusion.c (randomness, training-loss and
// sampler-update ops).
#ifndef MALA_OPS_CPU_H
#define MALA_OPS_CPU_H

#include "core/backend.h"

// ops_cpu_attn.c
void cpu_elu1_fwd(float *x, int rows, int cols, int ld);
void cpu_elu1_bwd(float *g, const float *y, int rows, int cols, int ld);
void cpu_rope_fwd(float *qkr, const float *qkv, AttnShape s);
void cpu_elu1_rope_fwd(float *qkr, float *qkv, AttnShape s);
void cpu_rope_bwd(float *dqkv, const float *dqkr, AttnShape s);
size_t cpu_mala_cache_floats(AttnShape s);
size_t cpu_linattn_cache_floats(AttnShape s);
size_t cpu_softmax_cache_floats(AttnShape s);
void cpu_mala_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
void cpu_mala_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                  float *cache, AttnShape s);
void cpu_linattn_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
void cpu_linattn_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                     float *cache, AttnShape s);
void cpu_softmax_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
// ops_cpu_attn_row.c
void cpu_attn_row(float *row, const float *qkv, const float *qkr, AttnShape s, int kind, int b, int head,
                  int query, float a);
void cpu_softmax_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                     float *cache, AttnShape s);
void cpu_dwconv_fwd(float *out, const float *x, int ldx, const float *w, const float *b, int k, int B, int gh,
                    int gw, int C);
void cpu_dwconv_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, int ldx, const float *w,
                    int k, int B, int gh, int gw, int C);

// ops_cpu_gla.c
void cpu_logsigmoid_fwd(float *x, int rows, int cols, int ld, float norm);
void cpu_logsigmoid_bwd(float *g, const float *y, int rows, int cols, int ld, float norm);
size_t cpu_gla_cache_floats(GlaShape s);
void cpu_gla_fwd(float *o, float *cache, const float *q, const float *k, const float *v, const float *g,
                 GlaShape s);
void cpu_gla_bwd(float *dq, float *dk, float *dv, float *dg, const float *dout, const float *q, const float *k,
                 const float *v, const float *g, float *cache, GlaShape s);

// ops_cpu_conv.c
size_t cpu_conv2d_workspace_floats(ConvShape s);
void cpu_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s, float *work,
                    size_t work_floats);
void cpu_conv2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                    ConvShape s, float *work, size_t work_floats);

// ops_cpu_nchw.c
void cpu_groupnorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                       int B, int C, int HW, int G, float eps);
void cpu_groupnorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                       const float *rstd, const float *w, int B, int C, int HW, int G);
void cpu_layernorm2d_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                         int B, int C, int HW, float eps);
void cpu_layernorm2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                         const float *rstd, const float *w, int B, int C, int HW);
void cpu_pixel_shuffle_fwd(float *hi, const float *lo, int B, int C, int H, int W, int r);
void cpu_pixel_shuffle_bwd(float *dlo, const float *dhi, int B, int C, int H, int W, int r);
void cpu_pixel_unshuffle_fwd(float *lo, const float *hi, int B, int C, int H, int W, int r);
void cpu_pixel_unshuffle_bwd(float *dhi, const float *dlo, int B, int C, int H, int W, int r);
void cpu_upsample2x_fwd(float *out, const float *x, int B, int C, int H, int W);
void cpu_upsample2x_bwd(float *dx, const float *dout, int B, int C, int H, int W);
void cpu_channel_copy_fwd(float *dst, int dC, int d0, const float *src, int sC, int s0, int C, int B, int HW);
void cpu_channel_copy_bwd(float *dsrc, int sC, int s0, const float *ddst, int dC, int d0, int C, int B, int HW);
void cpu_modulate2d_fwd(float *out, const float *x, const float *shift, const float *scale, int B, int C, int HW,
                        int ms);
void cpu_modulate2d_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                        const float *scale, int B, int C, int HW, int ms);
void cpu_gate_residual2d_fwd(float *x, const float *y, const float *gate, int B, int C, int HW, int ms);
void cpu_gate_residual2d_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate, int B,
                             int C, int HW, int ms);
void cpu_nchw_to_tokens_fwd(float *tokens, const float *x, int B, int C, int HW);
void cpu_nchw_to_tokens_bwd(float *dx, const float *dtokens, int B, int C, int HW);
void cpu_tokens_to_nchw_fwd(float *x, const float *tokens, int B, int C, int HW);
void cpu_tokens_to_nchw_bwd(float *dtokens, const float *dx, int B, int C, int HW);

// ops_cpu_diffusion.c
void cpu_fill(float *x, float v, size_t n);
void cpu_rand_normal(float *out, int rows, size_t cols, uint64_t seed, uint64_t stream0, uint64_t stride);
void cpu_rand_bits(uint32_t *out, size_t n, uint64_t seed, uint64_t stream);
void cpu_diffusion_prepare(float *xt, float *tf, int32_t *t, int32_t *y, const uint32_t *bits, const float *x0,
                           const float *noise, const int32_t *y_in, const double *coefs, int T, float drop,
                           int null_class, int B, size_t per);
void cpu_diffusion_loss(float *grad, double *mse, double *vb, const float *out, const float *x0, const float *noise,
                        const int32_t *t, const double *coefs, double vb_scale, int B, int C, size_t hw,
                        int learn_sigma);
void cpu_sampler_step(float *x, float *x0, const float *x0_prev, const float *out, const float *z,
                      const SamplerStepCoefs *k, int n, int C, size_t hw);

// ops_cpu_pool.c
void cpu_relu_fwd(float *out, const float *x, size_t n);
void cpu_relu_bwd(float *dx, const float *dout, const float *out, size_t n);
void cpu_maxpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p);
void cpu_avgpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p);
void cpu_mean_hw_fwd(float *out, const float *x, int B, int C, int HW);
void cpu_resize_bilinear_fwd(float *out, const float *x, int B, int C, int H, int W, int Ho, int Wo);

#endif

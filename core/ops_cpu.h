// CPU implementations of the op table (see backend.h for each op's contract). Split by topic:
// ops_cpu_dense.c (linear, norms, adaLN, elementwise, embeddings, optimiser),
// ops_cpu_attn.c (RoPE, MALA, linear and softmax attention, the depthwise conv),
// ops_cpu_gla.c (gated linear attention, its logsigmoid gate) and ops_cpu_diffusion.c
// (randomness, training-loss and sampler-update ops).
#ifndef MALA_OPS_CPU_H
#define MALA_OPS_CPU_H

#include "backend.h"

// ops_cpu_attn.c
void cpu_elu1_fwd(float *x, int rows, int cols, int ld);
void cpu_elu1_bwd(float *g, const float *y, int rows, int cols, int ld);
void cpu_rope_fwd(float *qkr, const float *qkv, AttnShape s);
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
void cpu_sampler_step(float *x, float *x0, const float *out, const float *z, const SamplerStepCoefs *k, int n, int C,
                      size_t hw);

#endif

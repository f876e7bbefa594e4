// CPU implementations of the op table (see backend.h for each op's contract). Split by topic:
// ops_cpu_dense.c (linear, norms, adaLN, elementwise, embeddings, optimiser) and
// ops_cpu_attn.c (RoPE, MALA, linear and softmax attention, LePE).
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
                  const float *cache, AttnShape s);
void cpu_linattn_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
void cpu_linattn_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                     const float *cache, AttnShape s);
void cpu_softmax_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
void cpu_softmax_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                     const float *cache, AttnShape s);
void cpu_lepe_fwd(float *out, const float *qkv, const float *w, const float *b, int k, AttnShape s);
void cpu_lepe_bwd(float *dqkv, float *dw, float *db, const float *dout, const float *qkv,
                  const float *w, int k, AttnShape s);

#endif

// CPU dense ops (see backend.h for each contract).
#ifndef MALA_OPS_CPU_DENSE_H
#define MALA_OPS_CPU_DENSE_H

#include <stddef.h>
#include <stdint.h>

void cpu_linear_fwd(float *out, const float *in, const float *w, const float *b, int N, int I, int O);
void cpu_linear_bwd(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                    int N, int I, int O, float din_beta);
void cpu_layernorm_fwd(float *out, float *rstd, const float *x, int N, int C);
void cpu_layernorm_bwd(float *dx, const float *dout, const float *out, const float *rstd, int N, int C);
void cpu_rmsnorm_gate_fwd(float *out, float *rstd, const float *x, const float *gate, const float *w, int N,
                          int heads, int d, int ldg, float eps);
void cpu_rmsnorm_gate_bwd(float *dx, float *dgate, float *dw, const float *dout, const float *x,
                          const float *gate, const float *w, const float *rstd, int N, int heads, int d, int ldg);
void cpu_modulate_fwd(float *out, const float *x, const float *shift, const float *scale, int B, int L, int C, int ms);
void cpu_layernorm_modulate_fwd(float *out, float *xhat, float *rstd, const float *x, const float *shift,
                                const float *scale, int B, int L, int C, int ms);
void cpu_modulate_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                      const float *scale, int B, int L, int C, int ms);
void cpu_gate_residual_fwd(float *x, const float *y, const float *gate, int B, int L, int C, int ms);
void cpu_gate_residual_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate,
                           int B, int L, int C, int ms);
void cpu_gelu_fwd(float *out, const float *x, size_t n);
void cpu_gelu_bwd(float *dx, const float *dout, const float *x, size_t n);
void cpu_gelu_erf_fwd(float *out, const float *x, size_t n);
void cpu_gelu_erf_bwd(float *dx, const float *dout, const float *x, size_t n);
void cpu_silu_fwd(float *out, const float *x, size_t n);
void cpu_silu_bwd(float *dx, const float *dout, const float *x, size_t n);
void cpu_swiglu_fwd(float *out, const float *ab, int N, int F);
void cpu_swiglu_bwd(float *dab, const float *dout, const float *ab, int N, int F);
void cpu_add(float *out, const float *a, const float *b, size_t n);
void cpu_mul_fwd(float *out, const float *a, const float *b, size_t n);
void cpu_mul_bwd(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);
void cpu_patchify_fwd(float *patches, const float *img, int B, int C, int S, int p);
void cpu_patchify_bwd(float *dimg, const float *dpatches, int B, int C, int S, int p);
void cpu_unpatchify_fwd(float *img, const float *tokens, int B, int C, int S, int p);
void cpu_unpatchify_bwd(float *dtokens, const float *dimg, int B, int C, int S, int p);
void cpu_permute_tokens_fwd(float *out, const float *x, int B, int gh, int gw, int C, int flip, int transpose);
void cpu_permute_tokens_bwd(float *dx, const float *dout, int B, int gh, int gw, int C, int flip, int transpose);
void cpu_add_pos(float *x, const float *pos, int B, int L, int C);
void cpu_timestep_embed(float *out, const float *t, int B, int dim);
void cpu_embed_fwd(float *out, const float *table, const int32_t *y, int B, int C);
void cpu_embed_bwd(float *dtable, const float *dout, const int32_t *y, int B, int C);
void cpu_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
               float eps, float wd, int t);
void cpu_ema(float *e, const float *p, size_t n, float decay);
double cpu_sumsq(const float *x, size_t n);
void cpu_scale(float *x, float a, size_t n);

#endif

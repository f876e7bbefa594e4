// int8 products for the CPU backend's --precision int8 (sampling only): the transformer blocks'
// large linears (Backend.linear_fwd_quant) as oneDNN int8 matmuls.
//
// out[n,o] = sa[n] sw[o] sum_i qa[n,i] qw[o,i] + b[o], with
//   qw[o,i] = round(W[o,i] / sw[o]), sw[o] = max_i |W[o,i]| / 127   (per output channel, symmetric)
//   qa[n,i] = round(x[n,i] / sa[n]), sa[n] = max_i |x[n,i]| / 127   (per token, dynamic, symmetric)
// rounding to nearest (ties to even), values in [-127, 127]; an all-zero row or
// channel has scale 0 and quantises to 0. The sum is s8 x s8 with int32 accumulation (oneDNN's
// VNNI kernels); the int32 result is dequantised and the bias added in one pass over the output.
// The weights' int8 copy and scales are a shadow (cpu_bf16.h's cache: made once per weights
// generation, so once after loading when sampling).
// defines: cpu_int8_available, cpu_int8_set, cpu_int8_on, cpu_int8_quantise_rows, cpu_int8_linear_fwd,
//          cpu_int8_linear_fwd_q8
#ifndef MALA_CPU_INT8_H
#define MALA_CPU_INT8_H

#include <stddef.h>
#include <stdint.h>

// Whether int8 products can run here (a oneDNN build whose engine started and products on oneDNN).
int cpu_int8_available(void);
// Turns the int8 linears on or off (0 where on is asked for and they are not available).
int cpu_int8_set(int on);
int cpu_int8_on(void);
// rows x cols of x (row stride ld) into q (dense, rows x cols) and scale[rows], as above.
void cpu_int8_quantise_rows(int8_t *q, float *scale, const float *x, int rows, int cols, int ld);
// out[N,O] = quantised(in[N,I]) quantised(w[O,I])^T dequantised + b (b may be NULL). 0 when not
// taken (int8 not available): the caller computes it in fp32 then.
int cpu_int8_linear_fwd(float *out, const float *in, const float *w, const float *b, int N, int I, int O);
// The same from weights already in int8: qw[O,I] and their scales sw[O] in place of w's shadow (a
// network that holds only those, model/net.h). The same bits as cpu_int8_linear_fwd on a w whose
// quantisation is (qw, sw). 0 when int8 is not available.
int cpu_int8_linear_fwd_q8(float *out, const float *in, const int8_t *qw, const float *sw, const float *b, int N,
                           int I, int O);

#endif

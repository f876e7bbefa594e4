// The CPU backend's matrix products and oneDNN convolutions: oneDNN (dnnl.h) where the
// build has it (MALA_DNNL) and it is usable at run time, OpenBLAS's cblas_sgemm otherwise.
//
// Choosing at run time (tests, benchmarks): MALA_GEMM=openblas|dnnl picks the products' library
// (default dnnl in a oneDNN build); MALA_CONV=dnnl|im2col picks conv2d's route (default dnnl:
// oneDNN's convolutions; im2col: im2col + col2im around cpu_sgemm). Both are read once, at the
// first product; cpu_gemm_select overrides them.
//
// oneDNN primitives are created once per configuration and kept (cpu_dnnl.c's cache: key = op,
// precision, shapes, transposes, alpha, beta, thread count, whether inside a parallel region).
//
// Precision (--precision, backend_cpu.c's set_precision): fp32, or bf16 (oneDNN only): the inputs
// of every product and convolution rounded to bf16 (nearest even), fp32 accumulation and outputs.
// Activations are converted per call into per-thread buffers; weights (cpu_sgemm_wt's B, the
// convolutions' w) come from their bf16 shadows (cpu_bf16.h), made once per optimiser step.
// defines: GemmImpl, ConvImpl, GemmPrec, cpu_sgemm, cpu_sgemm_wt, cpu_gemm_select, cpu_gemm_impl, cpu_conv_impl,
//          cpu_gemm_name, cpu_conv_name, cpu_gemm_precision, cpu_gemm_set_precision, cpu_dnnl_conv2d_fwd,
//          cpu_dnnl_conv2d_dx, cpu_dnnl_conv2d_dw, cpu_dnnl_conv_blocked
#ifndef MALA_CPU_GEMM_H
#define MALA_CPU_GEMM_H

#include "core/backend.h"

typedef enum { GEMM_OPENBLAS = 0, GEMM_DNNL = 1 } GemmImpl;
typedef enum { CONV_IM2COL = 0, CONV_DNNL = 1 } ConvImpl;
typedef enum { GEMM_F32 = 0, GEMM_BF16 = 1 } GemmPrec;

// C[M,N] = alpha op(A) op(B) + beta C, row-major, exactly cblas_sgemm(CblasRowMajor, ...)'s
// contract: op(A) is A[M,K] (lda) or, ta, A^T with A[K,M]; op(B) is B[K,N] (ldb) or, tb, B^T
// with B[N,K]; beta 0 overwrites C (whatever it held). Callable inside OpenMP regions (then
// runs on the calling thread).
void cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc);
// cpu_sgemm where B is a parameter: in bf16 its converted copy is the shadow (cpu_bf16.h).
void cpu_sgemm_wt(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc);

// Picks the libraries (-1 leaves one as it is). Asking for oneDNN in a build without it, or
// where it does not start, leaves OpenBLAS / im2col; returns 0 then (1 otherwise).
int cpu_gemm_select(int gemm, int conv);
GemmImpl cpu_gemm_impl(void);
ConvImpl cpu_conv_impl(void);
const char *cpu_gemm_name(void);  // "openblas" or "dnnl"
const char *cpu_conv_name(void);  // "im2col" or "dnnl"
GemmPrec cpu_gemm_precision(void);
// 0 (and no change) where bf16 is asked for without oneDNN products (a build without it, MALA_GEMM=openblas).
int cpu_gemm_set_precision(GemmPrec p);

// oneDNN's convolutions under backend.h's conv2d contract: out overwritten, dx and dw added
// into (dw over the images of s.B; ops_cpu_conv.c calls it per fixed group of images, in an
// OpenMP region, so that its sums do not depend on the thread count). Used when cpu_conv_impl()
// is CONV_DNNL; 0 where not taken (then im2col computes it). ops_cpu_conv_dnnl.c.
int cpu_dnnl_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s);
int cpu_dnnl_conv2d_dx(float *dx, const float *dout, const float *w, ConvShape s);
int cpu_dnnl_conv2d_dw(float *dw, const float *dout, const float *x, ConvShape s);
// Benchmarks: 1 lets oneDNN pick its blocked layouts (reordering to and from NCHW around each
// call; the default), 0 runs it on the NCHW / OIHW arrays as they are.
void cpu_dnnl_conv_blocked(int blocked);

#endif

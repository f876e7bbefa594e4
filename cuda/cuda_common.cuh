// Shared by the CUDA op files: error macros, launch helpers, the row-major cuBLAS wrapper and the
// declarations of every cuda_* op (the table in backend_cuda.cu points at them).
// defines: CUDA_CHECK, CUBLAS_CHECK, KERNEL_CHECK, warp_sum, block_sum, grid1d, cdiv
#ifndef MALA_CUDA_COMMON_CUH
#define MALA_CUDA_COMMON_CUH

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cublas_v2.h>
#include <cuda_runtime.h>

// The shared math first: its headers (math.h) must not land inside the extern "C" block.
#include "core/diffusion_math.h"
#include "core/ops_math.h"
extern "C" {
#include "core/backend.h"
}

// ---- errors: print file:line, the failing call and the runtime's message, then exit ----
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: CUDA error %s: %s\n  in %s\n  (hint: rerun with CUDA_LAUNCH_BLOCKING=1 " \
            "to pin the failing kernel)\n", __FILE__, __LINE__, cudaGetErrorName(e_), \
            cudaGetErrorString(e_), #call); exit(1); } } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "%s:%d: cuBLAS error %d: %s\n  in %s\n", __FILE__, __LINE__, (int)s_, \
            cublasGetStatusString(s_), #call); exit(1); } } while (0)
// After every kernel launch (catches bad launch configurations; execution errors surface at the
// next synchronising call).
#define KERNEL_CHECK() CUDA_CHECK(cudaGetLastError())
// Host-side argument checks, as the CPU backend does.
#define CU_REQUIRE(cond, ...) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s: ", \
    __FILE__, __LINE__, #cond); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } } while (0)

// ---- launch helpers (all work runs on the legacy default stream, in issue order) ----
#define CU_BLOCK 256
static inline int cdiv(long long a, long long b) { return (int)((a + b - 1) / b); }
// Blocks for a grid-stride loop over n items (capped; kernels loop with size_t indices).
static inline unsigned grid1d(size_t n, int block = CU_BLOCK) {
    size_t g = (n + (size_t)block - 1) / (size_t)block;
    if (g > (size_t)1 << 20) g = (size_t)1 << 20;
    return g ? (unsigned)g : 1u;
}
#define GRID_STRIDE(i, n) for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n); \
                               i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// Sum of v over a 1-D block (blockDim.x a multiple of 32), returned to every thread, in a fixed
// order: a shuffle tree per warp, then warp 0 over the warp sums. red is the caller's
// __shared__ float[33]; the leading barrier lets calls follow one another. Every thread of the
// block must call it.
__device__ __forceinline__ float block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = lane < nw ? red[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) red[32] = t;
    }
    __syncthreads();
    return red[32];
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ---- backend_cuda.cu ----
cublasHandle_t cuda_blas(void);
// Row-major batched GEMM: C_i = alpha op(A_i) op(B_i) + beta C_i, i < batch, with op(A) M x K and
// op(B) K x N; lda/ldb/ldc are row strides of the matrices as stored, sA/sB/sC element strides
// between batch entries. (cuBLAS sees the column-major transposes: C^T = op(B)^T op(A)^T.)
void gemm_rm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, long long sA,
             const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC, int batch);

// ---- ops_bf16.cu ----
// gemm_rm with both operands rounded to bf16 (nearest even), fp32 accumulation and output (--precision bf16).
void gemm_rm_bf16(cublasHandle_t h, bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda,
                  long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC,
                  int batch);

// ---- ops_dense.cu ----
// dst[b*dstride + c] (=|+=) alpha * sum_{r < rows} src[b*sstride + r*ld + c], c < cols, b < batch.
void cuda_colsum(float *dst, long long dstride, const float *src, int rows, int cols, int ld,
                 long long sstride, int batch, float alpha, bool accumulate);
void cuda_dense_init(void);  // the ones vector of cuda_rowsum_add (called by backend_cuda)
void cuda_rowsum_add(float *dst, const float *src, int rows, int cols);  // dst[cols] += column sums
void cuda_linear_fwd(float *out, const float *in, const float *w, const float *b, int N, int I, int O);
void cuda_linear_bwd(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                     int N, int I, int O, float din_beta);

// ---- ops_norm.cu ----
void cuda_layernorm_fwd(float *out, float *rstd, const float *x, int N, int C);
void cuda_layernorm_bwd(float *dx, const float *dout, const float *out, const float *rstd, int N, int C);
void cuda_norm_init(void);  // the rmsnorm_gate dw partials (called by backend_cuda)
void cuda_rmsnorm_gate_fwd(float *out, float *rstd, const float *x, const float *gate, const float *w, int N,
                           int heads, int d, int ldg, float eps);
void cuda_rmsnorm_gate_bwd(float *dx, float *dgate, float *dw, const float *dout, const float *x,
                           const float *gate, const float *w, const float *rstd, int N, int heads, int d, int ldg);
void cuda_modulate_fwd(float *out, const float *x, const float *shift, const float *scale, int B, int L, int C,
                       int ms);
void cuda_modulate_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                       const float *scale, int B, int L, int C, int ms);
void cuda_layernorm_modulate_fwd(float *out, float *xhat, float *rstd, const float *x, const float *shift,
                                 const float *scale, int B, int L, int C, int ms);
void cuda_gate_residual_fwd(float *x, const float *y, const float *gate, int B, int L, int C, int ms);
void cuda_gate_residual_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate, int B,
                            int L, int C, int ms);

// ---- ops_elementwise.cu ----
void cuda_gelu_fwd(float *out, const float *x, size_t n);
void cuda_gelu_bwd(float *dx, const float *dout, const float *x, size_t n);
void cuda_gelu_erf_fwd(float *out, const float *x, size_t n);
void cuda_gelu_erf_bwd(float *dx, const float *dout, const float *x, size_t n);
void cuda_silu_fwd(float *out, const float *x, size_t n);
void cuda_silu_bwd(float *dx, const float *dout, const float *x, size_t n);
void cuda_swiglu_fwd(float *out, const float *ab, int N, int F);
void cuda_swiglu_bwd(float *dab, const float *dout, const float *ab, int N, int F);
void cuda_add(float *out, const float *a, const float *b, size_t n);
void cuda_mul_fwd(float *out, const float *a, const float *b, size_t n);
void cuda_mul_bwd(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);
void cuda_elu1_fwd(float *x, int rows, int cols, int ld);
void cuda_elu1_bwd(float *g, const float *y, int rows, int cols, int ld);
void cuda_logsigmoid_fwd(float *x, int rows, int cols, int ld, float norm);
void cuda_logsigmoid_bwd(float *g, const float *y, int rows, int cols, int ld, float norm);
void cuda_scale(float *x, float a, size_t n);
void cuda_fill(float *x, float v, size_t n);

// ---- ops_rope.cu ----
void cuda_rope_fwd(float *qkr, const float *qkv, AttnShape s);
void cuda_elu1_rope_fwd(float *qkr, float *qkv, AttnShape s);
void cuda_rope_bwd(float *dqkv, const float *dqkr, AttnShape s);

// ---- ops_mala.cu / ops_linattn.cu / ops_softmax.cu ----
size_t cuda_mala_cache_floats(AttnShape s);
void cuda_mala_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
void cuda_mala_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                   float *cache, AttnShape s);
size_t cuda_linattn_cache_floats(AttnShape s);
void cuda_linattn_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
void cuda_linattn_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                      float *cache, AttnShape s);
size_t cuda_softmax_cache_floats(AttnShape s);
void cuda_softmax_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
void cuda_softmax_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                      float *cache, AttnShape s);
// ---- ops_attn_row.cu ----
void cuda_attn_row(float *row, const float *qkv, const float *qkr, AttnShape s, int kind, int b, int head, int query,
                   float a);

// ---- ops_dwconv.cu ----
void cuda_dwconv_fwd(float *out, const float *x, int ldx, const float *w, const float *b, int k, int B, int gh,
                     int gw, int C);
void cuda_dwconv_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, int ldx, const float *w,
                     int k, int B, int gh, int gw, int C);

// ---- ops_gla.cu ----
size_t cuda_gla_cache_floats(GlaShape s);
void cuda_gla_fwd(float *o, float *cache, const float *q, const float *k, const float *v, const float *g,
                  GlaShape s);
void cuda_gla_bwd(float *dq, float *dk, float *dv, float *dg, const float *dout, const float *q, const float *k,
                  const float *v, const float *g, float *cache, GlaShape s);

// ---- ops_permute.cu ----
void cuda_permute_tokens_fwd(float *out, const float *x, int B, int gh, int gw, int C, int flip, int transpose);
void cuda_permute_tokens_bwd(float *dx, const float *dout, int B, int gh, int gw, int C, int flip, int transpose);

// ---- ops_conv.cu ----
size_t cuda_conv2d_workspace_floats(ConvShape s);
void cuda_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s, float *work,
                     size_t work_floats);
void cuda_conv2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                     ConvShape s, float *work, size_t work_floats);

// ---- ops_nchw_norm.cu ----
void cuda_groupnorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                        int B, int C, int HW, int G, float eps);
void cuda_groupnorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                        const float *rstd, const float *w, int B, int C, int HW, int G);
void cuda_layernorm2d_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                          int B, int C, int HW, float eps);
void cuda_layernorm2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                          const float *rstd, const float *w, int B, int C, int HW);
void cuda_modulate2d_fwd(float *out, const float *x, const float *shift, const float *scale, int B, int C, int HW,
                         int ms);
void cuda_modulate2d_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                         const float *scale, int B, int C, int HW, int ms);
void cuda_gate_residual2d_fwd(float *x, const float *y, const float *gate, int B, int C, int HW, int ms);
void cuda_gate_residual2d_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate, int B,
                              int C, int HW, int ms);

// ---- ops_nchw.cu ----
void cuda_pixel_shuffle_fwd(float *hi, const float *lo, int B, int C, int H, int W, int r);
void cuda_pixel_shuffle_bwd(float *dlo, const float *dhi, int B, int C, int H, int W, int r);
void cuda_pixel_unshuffle_fwd(float *lo, const float *hi, int B, int C, int H, int W, int r);
void cuda_pixel_unshuffle_bwd(float *dhi, const float *dlo, int B, int C, int H, int W, int r);
void cuda_upsample2x_fwd(float *out, const float *x, int B, int C, int H, int W);
void cuda_upsample2x_bwd(float *dx, const float *dout, int B, int C, int H, int W);
void cuda_channel_copy_fwd(float *dst, int dC, int d0, const float *src, int sC, int s0, int C, int B, int HW);
void cuda_channel_copy_bwd(float *dsrc, int sC, int s0, const float *ddst, int dC, int d0, int C, int B, int HW);
void cuda_nchw_to_tokens_fwd(float *tokens, const float *x, int B, int C, int HW);
void cuda_nchw_to_tokens_bwd(float *dx, const float *dtokens, int B, int C, int HW);
void cuda_tokens_to_nchw_fwd(float *x, const float *tokens, int B, int C, int HW);
void cuda_tokens_to_nchw_bwd(float *dtokens, const float *dx, int B, int C, int HW);

// ---- ops_pool.cu ----
void cuda_relu_fwd(float *out, const float *x, size_t n);
void cuda_relu_bwd(float *dx, const float *dout, const float *out, size_t n);
void cuda_maxpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p);
void cuda_avgpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p);
void cuda_mean_hw_fwd(float *out, const float *x, int B, int C, int HW);
void cuda_resize_bilinear_fwd(float *out, const float *x, int B, int C, int H, int W, int Ho, int Wo);

// ---- ops_embed.cu ----
void cuda_patchify_fwd(float *patches, const float *img, int B, int C, int S, int p);
void cuda_patchify_bwd(float *dimg, const float *dpatches, int B, int C, int S, int p);
void cuda_unpatchify_fwd(float *img, const float *tokens, int B, int C, int S, int p);
void cuda_unpatchify_bwd(float *dtokens, const float *dimg, int B, int C, int S, int p);
void cuda_add_pos(float *x, const float *pos, int B, int L, int C);
void cuda_timestep_embed(float *out, const float *t, int B, int dim);
void cuda_embed_fwd(float *out, const float *table, const int32_t *y, int B, int C);
void cuda_embed_bwd(float *dtable, const float *dout, const int32_t *y, int B, int C);

// ---- ops_optim.cu ----
void cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                float eps, float wd, int t);
void cuda_ema(float *e, const float *p, size_t n, float decay);
double cuda_sumsq(const float *x, size_t n);
void cuda_optim_init(void);  // allocates the sumsq partials once (called by backend_cuda)

// ---- rng.cu ----
void cuda_rand_normal(float *out, int rows, size_t cols, uint64_t seed, uint64_t stream0, uint64_t stride);
void cuda_rand_bits(uint32_t *out, size_t n, uint64_t seed, uint64_t stream);

// ---- ops_diffusion.cu ----
void cuda_diffusion_prepare(float *xt, float *tf, int32_t *t, int32_t *y, const uint32_t *bits, const float *x0,
                            const float *noise, const int32_t *y_in, const double *coefs, int T, float drop,
                            int null_class, int B, size_t per);
void cuda_diffusion_loss(float *grad, double *mse, double *vb, const float *out, const float *x0, const float *noise,
                         const int32_t *t, const double *coefs, double vb_scale, int B, int C, size_t hw,
                         int learn_sigma);
void cuda_sampler_step(float *x, float *x0, const float *x0_prev, const float *out, const float *z,
                       const SamplerStepCoefs *k, int n, int C, size_t hw);

// ---- attention geometry shared by the attention files ----
// Where head h's q, k (roped when qkr is given) and v start, and their row strides; batch b's
// rows start L * ld further on.
struct HeadPtrs {
    const float *q, *k, *v;  // head h, batch 0
    int ldq, ldv;            // row strides: q and k share ldq (2H with qkr, else 3H); v 3H
};
static inline HeadPtrs head_ptrs(const float *qkv, const float *qkr, AttnShape s, int h) {
    const int H = s.H, d = H / s.heads;
    HeadPtrs p;
    p.ldv = 3 * H;
    p.v = qkv + 2 * (size_t)H + (size_t)h * d;
    if (qkr) { p.ldq = 2 * H; p.q = qkr + (size_t)h * d; }
    else     { p.ldq = 3 * H; p.q = qkv + (size_t)h * d; }
    p.k = p.q + H;
    return p;
}
// Gradient targets of the (roped) q, k: dqkr with RoPE, else the q, k parts of dqkv; NULL when
// not wanted.
struct HeadGradPtrs { float *dq, *dk; int ld; };
static inline HeadGradPtrs head_grad_ptrs(float *dqkv, float *dqkr, bool rope, AttnShape s, int h) {
    const int H = s.H, d = H / s.heads;
    HeadGradPtrs g;
    float *base = rope ? dqkr : dqkv;
    g.ld = rope ? 2 * H : 3 * H;
    g.dq = base ? base + (size_t)h * d : NULL;
    g.dk = base ? base + H + (size_t)h * d : NULL;
    return g;
}
static inline void attn_check(AttnShape s, const char *op) {
    CU_REQUIRE(s.heads > 0 && s.H % s.heads == 0, "%s: H=%d not divisible by heads=%d", op, s.H, s.heads);
    CU_REQUIRE(s.gh * s.gw == s.L, "%s: grid %dx%d does not hold L=%d tokens", op, s.gh, s.gw, s.L);
}
// Scratch regions are rounded up to 64 floats (256 bytes) so every region starts aligned.
static inline size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

#endif

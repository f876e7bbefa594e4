// The CUDA backend: the op table of backend.h on one NVIDIA GPU.
// defines: backend_cuda, cuda_set_precision_fp32, cuda_gemm_gflops, cuda_blas, gemm_rm
//
// Design
// - One arena, no per-step allocation. Pointers given to the ops are plain device pointers from
//   `alloc` (cudaMalloc, then zeroed); callers allocate their arenas (parameters, gradients,
//   moments, activations) once at start-up, and no op ever calls cudaMalloc. Attention keeps what
//   it needs between forward and backward, and the backward's own scratch, in the caller's `cache`
//   buffer, sized by this backend's *_cache_floats (which therefore include the backward scratch;
//   layouts in ops_linear_attn.cu, ops_softmax.cu and ops_gla.cu); conv2d's im2col scratch is the
//   caller's `work`, sized by conv2d_workspace_floats. The only memory the backend owns is the
//   cuBLAS handle's workspace, 1024 doubles for the sumsq partials, a vector of 2^20
//   ones for the bias-gradient GEMVs and 2^18 floats for the RMSNorm-gate weight-gradient
//   partials, all created once in backend_cuda(); and, in bf16 only, ops_bf16.cu's two conversion
//   buffers, which grow to the largest product met in the first steps.
// - Ordering. Everything (kernels, cuBLAS, memsets, device-to-device copies) is issued on the
//   legacy default stream, so ops run in call order; the host waits only in to_host, sumsq and
//   sync.
// - cuBLAS does every matrix product, row-major through the column-major transpose (gemm_rm
//   below): linear forward and backward (din, dw); per head, batched over the batch with
//   cublasSgemmStridedBatched (a head's rows have the uniform batch stride L*3H in qkv, L*2H in
//   qkr, L*H in out, so it is one call per head): MALA's and linear attention's KV = Kr^T V,
//   Qr KV and their four backward products, and softmax attention's Q K^T, P V and its four
//   backward products. TF32 tensor-core math is on by default; cuda_set_precision_fp32(1) turns
//   it off (the parity test does); --precision bf16 (set_precision(PREC_BF16)) sends every product
//   through gemm_rm_bf16 (ops_bf16.cu: bf16 inputs, fp32 accumulation and output). conv2d's
//   products are cuBLAS GEMMs too: W times a chunk's im2col column matrices (one strided batched
//   call per chunk) and the backward's W^T dout and dout col^T.
// - Custom kernels, one small file per family, all fp32, with the per-element math of ops_math.h
//   shared with the CPU: bias add and column sums (ops_dense.cu); LayerNorm, RMSNorm with swish
//   gate, modulate, gated residual (ops_norm.cu); GELU (tanh and exact), SiLU, SwiGLU, add, mul, ELU+1,
//   logsigmoid, scale (ops_elementwise.cu); RoPE (ops_rope.cu); the token means, row statistics
//   and row scalings of MALA and linear attention (ops_linear_attn.cu); the row softmax and its
//   backward (ops_softmax.cu); one explicit attention row for the viewer (ops_attn_row.cu); the
//   depthwise conv of LePE and DiG (ops_dwconv.cu); the chunked
//   gated linear attention (ops_gla.cu); token flips and grid transposes (ops_permute.cu);
//   patches and embeddings (ops_embed.cu); im2col, col2im and the bias sums of conv2d
//   (ops_conv.cu); GroupNorm, LayerNorm over channels and per-channel adaLN on NCHW maps
//   (ops_nchw_norm.cu); pixel (un)shuffle, nearest upsampling, channel copies and map <-> token
//   transposes (ops_nchw.cu); ReLU, pooling and bilinear resize (ops_pool.cu); AdamW, EMA,
//   sumsq (ops_optim.cu); cuRAND Philox fills (rng.cu); the training step's draws, the ADM loss and its gradient and the sampler update,
//   in double with diffusion_math.h shared with the CPU (ops_diffusion.cu).
// - Determinism. The kernels' reductions are fixed-order trees (no float atomics), except
//   embed_bwd, whose atomicAdd only reorders sums when a batch repeats a label.
// - Errors: CUDA_CHECK / CUBLAS_CHECK print file:line, the call and the runtime's message, then
//   exit. A missing device is not an error: backend_cuda() returns NULL and says why.
#include "cuda/cuda_common.cuh"

#include "cuda/backend_cuda.h"

// ---------------------------------------------------------------------------------------------
// cuBLAS handle and precision

static cublasHandle_t g_blas;
static int g_fp32 = 0;  // 0: the reduced precision (g_bf16's), 1: full fp32
static int g_bf16 = 0;  // the reduced precision: 0 TF32 (default), 1 bf16 inputs (ops_bf16.cu)

static void apply_math_mode(void) {
    if (g_blas) CUBLAS_CHECK(cublasSetMathMode(g_blas, g_fp32 || g_bf16 ? CUBLAS_DEFAULT_MATH
                                                                         : CUBLAS_TF32_TENSOR_OP_MATH));
}

extern "C" void cuda_set_precision_fp32(int on) {
    g_fp32 = on ? 1 : 0;
    apply_math_mode();
}

// Backend.set_precision's modes (backend.h): PREC_BF16 / PREC_TF32 also choose the reduced precision
// that PREC_REDUCED returns to.
static void cuda_set_precision(int mode) {
    if (mode == PREC_BF16 || mode == PREC_TF32) g_bf16 = mode == PREC_BF16;
    cuda_set_precision_fp32(mode == PREC_FP32);
}

cublasHandle_t cuda_blas(void) { return g_blas; }

static void cuda_weights_changed(void) {}  // (no reduced-precision copies of weights on CUDA yet)

void gemm_rm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, long long sA,
             const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC, int batch) {
    if (M <= 0 || N <= 0 || batch <= 0) return;
    const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!g_fp32 && g_bf16) {
        gemm_rm_bf16(g_blas, ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch);
        return;
    }
    if (batch == 1)
        CUBLAS_CHECK(cublasSgemm(g_blas, opB, opA, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
    else
        CUBLAS_CHECK(cublasSgemmStridedBatched(g_blas, opB, opA, N, M, K, &alpha, B, ldb, sB, A, lda, sA, &beta,
                                               C, ldc, sC, batch));
}

static const char *cuda_precision(void) { return g_fp32 ? "fp32" : g_bf16 ? "bf16" : "tf32"; }

extern "C" double cuda_gemm_gflops(void) {
    const int M = 8192, K = 384, N = 1152, reps = 20;
    float *a, *b, *c;
    CUDA_CHECK(cudaMalloc(&a, sizeof(float) * M * K));
    CUDA_CHECK(cudaMalloc(&b, sizeof(float) * K * N));
    CUDA_CHECK(cudaMalloc(&c, sizeof(float) * M * N));
    CUDA_CHECK(cudaMemset(a, 0, sizeof(float) * M * K));
    CUDA_CHECK(cudaMemset(b, 0, sizeof(float) * K * N));
    gemm_rm(false, false, M, N, K, 1.0f, a, K, 0, b, N, 0, 0.0f, c, N, 0, 1);  // warm-up
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    CUDA_CHECK(cudaEventRecord(e0, 0));
    for (int r = 0; r < reps; r++) gemm_rm(false, false, M, N, K, 1.0f, a, K, 0, b, N, 0, 0.0f, c, N, 0, 1);
    CUDA_CHECK(cudaEventRecord(e1, 0));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaFree(a)); CUDA_CHECK(cudaFree(b)); CUDA_CHECK(cudaFree(c));
    return 2.0 * M * K * N * reps / (ms * 1e-3) / 1e9;
}

// ---------------------------------------------------------------------------------------------
// Memory

static void *cu_alloc(size_t bytes) {
    void *p = NULL;
    if (!bytes) bytes = 64;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        size_t freeb = 0, total = 0;
        cudaMemGetInfo(&freeb, &total);
        fprintf(stderr, "error: CUDA out of memory allocating %zu bytes (%s; %zu of %zu MiB free); "
                "hint: lower the batch size\n", bytes, cudaGetErrorString(e), freeb >> 20, total >> 20);
        exit(1);
    }
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}
static void cu_release(void *p) { if (p) CUDA_CHECK(cudaFree(p)); }
static void cu_to_device(void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void cu_to_host(void *dst, const void *src, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
static void cu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
}
static void cu_zero(void *p, size_t bytes) { if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, 0)); }
static void cu_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

// ---------------------------------------------------------------------------------------------
// The table

// No int8 on CUDA: backend_select refuses PREC_INT8 here, so no network holds int8 weights (model/net.h).
static void cuda_linear_fwd_q8(float *, const float *, const int8_t *, const float *, const float *, int, int, int) {
    fprintf(stderr, "error: int8 weights: int8 products run on the CPU only (CUDA int8 is not there yet); use --device "
                    "cpu\n");
    exit(1);
}

static Backend g_cuda;
static int g_state = 0;  // 0: not tried, 1: ready, -1: no device
static char g_why[256];

static void fill_table(Backend *t) {
    t->name = "cuda";
    t->alloc = cu_alloc; t->release = cu_release; t->to_device = cu_to_device; t->to_host = cu_to_host;
    t->copy = cu_copy; t->zero = cu_zero; t->sync = cu_sync;
    t->linear_fwd = cuda_linear_fwd; t->linear_bwd = cuda_linear_bwd;
    t->linear_fwd_quant = cuda_linear_fwd;  // (no int8 on CUDA yet: backend_select refuses PREC_INT8 there)
    t->linear_fwd_q8 = cuda_linear_fwd_q8;
    t->layernorm_fwd = cuda_layernorm_fwd; t->layernorm_bwd = cuda_layernorm_bwd;
    t->modulate_fwd = cuda_modulate_fwd; t->modulate_bwd = cuda_modulate_bwd;
    t->layernorm_modulate_fwd = cuda_layernorm_modulate_fwd;
    t->gate_residual_fwd = cuda_gate_residual_fwd; t->gate_residual_bwd = cuda_gate_residual_bwd;
    t->gelu_fwd = cuda_gelu_fwd; t->gelu_bwd = cuda_gelu_bwd;
    t->gelu_erf_fwd = cuda_gelu_erf_fwd; t->gelu_erf_bwd = cuda_gelu_erf_bwd; t->silu_fwd = cuda_silu_fwd;
    t->silu_bwd = cuda_silu_bwd; t->add = cuda_add; t->mul_fwd = cuda_mul_fwd; t->mul_bwd = cuda_mul_bwd;
    t->elu1_fwd = cuda_elu1_fwd; t->elu1_bwd = cuda_elu1_bwd;
    t->rope_fwd = cuda_rope_fwd; t->rope_bwd = cuda_rope_bwd; t->elu1_rope_fwd = cuda_elu1_rope_fwd;
    t->mala_cache_floats = cuda_mala_cache_floats; t->linattn_cache_floats = cuda_linattn_cache_floats;
    t->softmax_cache_floats = cuda_softmax_cache_floats;
    t->mala_fwd = cuda_mala_fwd; t->mala_bwd = cuda_mala_bwd;
    t->linattn_fwd = cuda_linattn_fwd; t->linattn_bwd = cuda_linattn_bwd;
    t->softmax_fwd = cuda_softmax_fwd; t->softmax_bwd = cuda_softmax_bwd;
    t->attn_row = cuda_attn_row;
    t->dwconv_fwd = cuda_dwconv_fwd; t->dwconv_bwd = cuda_dwconv_bwd;
    t->logsigmoid_fwd = cuda_logsigmoid_fwd; t->logsigmoid_bwd = cuda_logsigmoid_bwd;
    t->gla_cache_floats = cuda_gla_cache_floats; t->gla_fwd = cuda_gla_fwd; t->gla_bwd = cuda_gla_bwd;
    t->rmsnorm_gate_fwd = cuda_rmsnorm_gate_fwd; t->rmsnorm_gate_bwd = cuda_rmsnorm_gate_bwd;
    t->swiglu_fwd = cuda_swiglu_fwd; t->swiglu_bwd = cuda_swiglu_bwd;
    t->permute_tokens_fwd = cuda_permute_tokens_fwd; t->permute_tokens_bwd = cuda_permute_tokens_bwd;
    t->conv2d_workspace_floats = cuda_conv2d_workspace_floats; t->conv2d_fwd = cuda_conv2d_fwd;
    t->conv2d_bwd = cuda_conv2d_bwd; t->groupnorm_fwd = cuda_groupnorm_fwd; t->groupnorm_bwd = cuda_groupnorm_bwd;
    t->layernorm2d_fwd = cuda_layernorm2d_fwd; t->layernorm2d_bwd = cuda_layernorm2d_bwd;
    t->pixel_shuffle_fwd = cuda_pixel_shuffle_fwd; t->pixel_shuffle_bwd = cuda_pixel_shuffle_bwd;
    t->pixel_unshuffle_fwd = cuda_pixel_unshuffle_fwd; t->pixel_unshuffle_bwd = cuda_pixel_unshuffle_bwd;
    t->upsample2x_fwd = cuda_upsample2x_fwd; t->upsample2x_bwd = cuda_upsample2x_bwd;
    t->channel_copy_fwd = cuda_channel_copy_fwd; t->channel_copy_bwd = cuda_channel_copy_bwd;
    t->modulate2d_fwd = cuda_modulate2d_fwd; t->modulate2d_bwd = cuda_modulate2d_bwd;
    t->gate_residual2d_fwd = cuda_gate_residual2d_fwd; t->gate_residual2d_bwd = cuda_gate_residual2d_bwd;
    t->nchw_to_tokens_fwd = cuda_nchw_to_tokens_fwd; t->nchw_to_tokens_bwd = cuda_nchw_to_tokens_bwd;
    t->tokens_to_nchw_fwd = cuda_tokens_to_nchw_fwd; t->tokens_to_nchw_bwd = cuda_tokens_to_nchw_bwd;
    t->relu_fwd = cuda_relu_fwd; t->relu_bwd = cuda_relu_bwd; t->maxpool2d_fwd = cuda_maxpool2d_fwd;
    t->avgpool2d_fwd = cuda_avgpool2d_fwd; t->mean_hw_fwd = cuda_mean_hw_fwd;
    t->resize_bilinear_fwd = cuda_resize_bilinear_fwd;
    t->patchify_fwd = cuda_patchify_fwd; t->patchify_bwd = cuda_patchify_bwd;
    t->unpatchify_fwd = cuda_unpatchify_fwd; t->unpatchify_bwd = cuda_unpatchify_bwd;
    t->add_pos = cuda_add_pos; t->timestep_embed = cuda_timestep_embed;
    t->embed_fwd = cuda_embed_fwd; t->embed_bwd = cuda_embed_bwd;
    t->adamw = cuda_adamw; t->ema = cuda_ema; t->sumsq = cuda_sumsq; t->scale = cuda_scale; t->fill = cuda_fill;
    t->rand_normal = cuda_rand_normal; t->rand_bits = cuda_rand_bits;
    t->diffusion_prepare = cuda_diffusion_prepare; t->diffusion_loss = cuda_diffusion_loss;
    t->sampler_step = cuda_sampler_step;
    t->set_precision = cuda_set_precision;
    t->precision = cuda_precision;
    t->gemm_gflops = cuda_gemm_gflops;
    t->weights_changed = cuda_weights_changed;
}

extern "C" const Backend *backend_cuda(const char **why) {
    if (g_state == 0) {
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess) {
            snprintf(g_why, sizeof g_why, "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorString(e),
                     cudaGetErrorName(e));
            cudaGetLastError();  // clear the runtime's last-error state
            g_state = -1;
        } else if (n == 0) {
            snprintf(g_why, sizeof g_why, "no CUDA device found");
            g_state = -1;
        } else {
            int dev = 0;
            CUDA_CHECK(cudaGetDevice(&dev));
            CUDA_CHECK(cudaFree(0));  // create the context now, not inside the first op
            CUBLAS_CHECK(cublasCreate(&g_blas));
            apply_math_mode();
            cuda_optim_init();
            cuda_dense_init();
            cuda_norm_init();
            fill_table(&g_cuda);
            g_state = 1;
        }
    }
    if (g_state < 0) {
        if (why) *why = g_why;
        return NULL;
    }
    if (why) *why = NULL;
    return &g_cuda;
}

// The CPU op table: oneDNN or OpenBLAS for the products (cpu_gemm.h), OpenMP loops for the rest.
// Precision fp32 (the default: today's numbers), bf16 (oneDNN; cpu_gemm.h, cpu_bf16.h) or int8 for the
// transformer blocks' large linears when sampling (oneDNN; cpu_int8.h).
// defines: backend_cpu
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/common.h"
#include "cpu/ops_cpu.h"
#include "cpu/ops_cpu_dense.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_int8.h"

// calloc, 64-byte aligned: a large block comes from the kernel already zero and is not touched here,
// so its pages are mapped on first use (no start-up pass over a training arena of many GB). The
// pointer calloc returned sits just below the aligned one, and the size below it (release drops the
// bf16 shadows of weights in the block).
static void *cpu_alloc(size_t bytes) {
    char *raw = calloc(1, bytes + 64 + 2 * sizeof(void *));
    if (!raw) FATAL("out of memory allocating %zu bytes", bytes);
    char *p = (char *)(((uintptr_t)raw + 2 * sizeof(void *) + 63) & ~(uintptr_t)63);
    ((void **)p)[-1] = raw;
    ((size_t *)p)[-2] = bytes;
    return p;
}
static void cpu_release(void *p) {
    if (!p) return;
    cpu_bf16_forget(p, ((size_t *)p)[-2]);
    free(((void **)p)[-1]);
}
static void cpu_memcpy(void *dst, const void *src, size_t bytes) { if (bytes) memcpy(dst, src, bytes); }
static void cpu_zero(void *p, size_t bytes) { if (bytes) memset(p, 0, bytes); }
static void cpu_sync(void) {}

// Why bf16 (or int8: what) cannot run here: their products and convolutions are oneDNN's.
static const char *bf16_refusal_for(const char *what) {
    static char line[200];
#ifndef MALA_DNNL
    snprintf(line, sizeof line, "this build has no oneDNN (libdnnl-dev, see tools/install_deps.sh), which %s runs on", what);
#else
    snprintf(line, sizeof line, "the products run on OpenBLAS here (MALA_GEMM=openblas, or oneDNN did not start), and "
             "%s needs oneDNN's", what);
#endif
    return line;
}

// Without native bf16 dot products (avx512_bf16) oneDNN emulates them: it runs, slower, and says so.
static void bf16_rate_check(void);
// PREC_INT8: fp32 products everywhere but the transformer blocks' large linears (linear_fwd_quant),
// which run on int8 (cpu_int8.h). Any other mode turns the int8 linears off.
static void cpu_set_precision(int mode) {
    if (mode == PREC_INT8) {
        cpu_gemm_set_precision(GEMM_F32);
        if (!cpu_int8_set(1))
            FATAL("--precision int8: %s; use --precision fp32",
                  bf16_refusal_for("int8"));
        return;
    }
    cpu_int8_set(0);
    const int fp32 = mode == PREC_FP32 || mode == PREC_TF32;  // (PREC_REDUCED and PREC_BF16: bf16)
    if (fp32 || cpu_gemm_precision() == GEMM_BF16) {
        cpu_gemm_set_precision(fp32 ? GEMM_F32 : GEMM_BF16);
        return;
    }
    if (!cpu_gemm_set_precision(GEMM_BF16)) FATAL("--precision bf16: %s; use --precision fp32", bf16_refusal_for("bf16"));
    static int warned;
    if (!cpu_bf16_native() && !warned++)
        fprintf(stderr, "mala: this CPU has no native bf16 dot products (avx512_bf16): oneDNN emulates them, "
                        "slower than --precision fp32\n");
    bf16_rate_check();
}
static const char *cpu_precision(void) {
    return cpu_int8_on() ? "int8" : cpu_gemm_precision() == GEMM_BF16 ? "bf16" : "fp32";
}
static void cpu_linear_fwd_quant(float *out, const float *in, const float *w, const float *b, int N, int I, int O) {
    if (!cpu_int8_on() || !cpu_int8_linear_fwd(out, in, w, b, N, I, O)) cpu_linear_fwd(out, in, w, b, N, I, O);
}
// Weights held in int8 (a network sampling at PREC_INT8): made only where int8 runs, and run in int8 whatever
// the precision is now (there is no fp32 copy to fall back on).
static void cpu_linear_fwd_q8(float *out, const float *in, const int8_t *qw, const float *sw, const float *b, int N,
                              int I, int O) {
    if (!cpu_int8_linear_fwd_q8(out, in, qw, sw, b, N, I, O))
        FATAL("int8 weights: %s", bf16_refusal_for("int8"));
}
static void cpu_weights_changed(void) { cpu_bf16_weights_changed(); }
// The optimiser's ops write parameters: their bf16 shadows are made again at their next use.
static void cpu_adamw_step(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                           float eps, float wd, int t) {
    cpu_adamw(p, g, m, v, n, lr, beta1, beta2, eps, wd, t);
    cpu_bf16_weights_changed();
}
static void cpu_ema_step(float *e, const float *p, size_t n, float decay) {
    cpu_ema(e, p, n, decay);
    cpu_bf16_weights_changed();
}

// cpu_sgemm (oneDNN or OpenBLAS, cpu_gemm.h) on the DiT-S/2-shaped product (8192x384 . 384x1152), warm, 6 repetitions.
// GFLOP/s of reps M x K x N products at the current precision, after one untimed call.
static double gemm_rate(int M, int K, int N, int reps) {
    float *a = xcalloc((size_t)M * K, 4), *b = xcalloc((size_t)K * N, 4), *c = xcalloc((size_t)M * N, 4);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 5) * 0.1f;
    cpu_sgemm_wt(0, 0, M, N, K, 1, a, K, b, N, 0, c, N);  // (b as a weight: bf16 converts it once)
    double t0 = now_seconds();
    for (int r = 0; r < reps; r++) cpu_sgemm_wt(0, 0, M, N, K, 1, a, K, b, N, 0, c, N);
    double dt = now_seconds() - t0;
    cpu_bf16_forget(b, (size_t)K * N * 4);
    free(a); free(b); free(c);
    return 2.0 * M * K * N * reps / dt / 1e9;
}

static double cpu_gemm_gflops(void) { return gemm_rate(8192, 384, 1152, 6); }

// Once per process, when bf16 is first chosen: both product rates on a DiT-T-sized product (about
// 0.1 s in all) and, when bf16 is the slower, one line of advice. MALA_TEST_BF16_RATIO (tests
// only) stands for the measured bf16/fp32 ratio, so the line can be tested on any CPU.
static void bf16_rate_check(void) {
    static int done;
    if (done++) return;
    double f32 = 100, bf = 0;
    const char *fake = getenv("MALA_TEST_BF16_RATIO");
    if (fake) bf = f32 * atof(fake);
    else {
        cpu_gemm_set_precision(GEMM_F32);
        f32 = gemm_rate(1024, 384, 1152, 2);
        cpu_gemm_set_precision(GEMM_BF16);
        bf = gemm_rate(1024, 384, 1152, 2);
    }
    char line[256];
    if (cpu_bf16_advice(f32, bf, line, sizeof line)) fprintf(stderr, "%s\n", line);
}

static const Backend CPU = {
    .name = "cpu",
    .alloc = cpu_alloc, .release = cpu_release, .to_device = cpu_memcpy, .to_host = cpu_memcpy,
    .copy = cpu_memcpy, .zero = cpu_zero, .sync = cpu_sync,
    .set_precision = cpu_set_precision, .precision = cpu_precision, .gemm_gflops = cpu_gemm_gflops,
    .weights_changed = cpu_weights_changed,
    .linear_fwd = cpu_linear_fwd, .linear_bwd = cpu_linear_bwd, .linear_fwd_quant = cpu_linear_fwd_quant,
    .linear_fwd_q8 = cpu_linear_fwd_q8,
    .layernorm_fwd = cpu_layernorm_fwd, .layernorm_bwd = cpu_layernorm_bwd,
    .modulate_fwd = cpu_modulate_fwd, .modulate_bwd = cpu_modulate_bwd,
    .layernorm_modulate_fwd = cpu_layernorm_modulate_fwd,
    .gate_residual_fwd = cpu_gate_residual_fwd, .gate_residual_bwd = cpu_gate_residual_bwd,
    .gelu_fwd = cpu_gelu_fwd, .gelu_bwd = cpu_gelu_bwd, .gelu_erf_fwd = cpu_gelu_erf_fwd,
    .gelu_erf_bwd = cpu_gelu_erf_bwd, .silu_fwd = cpu_silu_fwd, .silu_bwd = cpu_silu_bwd,
    .add = cpu_add, .mul_fwd = cpu_mul_fwd, .mul_bwd = cpu_mul_bwd,
    .elu1_fwd = cpu_elu1_fwd, .elu1_bwd = cpu_elu1_bwd,
    .rope_fwd = cpu_rope_fwd, .rope_bwd = cpu_rope_bwd, .elu1_rope_fwd = cpu_elu1_rope_fwd,
    .mala_cache_floats = cpu_mala_cache_floats, .linattn_cache_floats = cpu_linattn_cache_floats,
    .softmax_cache_floats = cpu_softmax_cache_floats,
    .mala_fwd = cpu_mala_fwd, .mala_bwd = cpu_mala_bwd,
    .linattn_fwd = cpu_linattn_fwd, .linattn_bwd = cpu_linattn_bwd,
    .softmax_fwd = cpu_softmax_fwd, .softmax_bwd = cpu_softmax_bwd,
    .attn_row = cpu_attn_row,
    .dwconv_fwd = cpu_dwconv_fwd, .dwconv_bwd = cpu_dwconv_bwd,
    .logsigmoid_fwd = cpu_logsigmoid_fwd, .logsigmoid_bwd = cpu_logsigmoid_bwd,
    .gla_cache_floats = cpu_gla_cache_floats, .gla_fwd = cpu_gla_fwd, .gla_bwd = cpu_gla_bwd,
    .rmsnorm_gate_fwd = cpu_rmsnorm_gate_fwd, .rmsnorm_gate_bwd = cpu_rmsnorm_gate_bwd,
    .swiglu_fwd = cpu_swiglu_fwd, .swiglu_bwd = cpu_swiglu_bwd,
    .permute_tokens_fwd = cpu_permute_tokens_fwd, .permute_tokens_bwd = cpu_permute_tokens_bwd,
    .conv2d_workspace_floats = cpu_conv2d_workspace_floats, .conv2d_fwd = cpu_conv2d_fwd,
    .conv2d_bwd = cpu_conv2d_bwd, .groupnorm_fwd = cpu_groupnorm_fwd, .groupnorm_bwd = cpu_groupnorm_bwd,
    .layernorm2d_fwd = cpu_layernorm2d_fwd, .layernorm2d_bwd = cpu_layernorm2d_bwd,
    .pixel_shuffle_fwd = cpu_pixel_shuffle_fwd, .pixel_shuffle_bwd = cpu_pixel_shuffle_bwd,
    .pixel_unshuffle_fwd = cpu_pixel_unshuffle_fwd, .pixel_unshuffle_bwd = cpu_pixel_unshuffle_bwd,
    .upsample2x_fwd = cpu_upsample2x_fwd, .upsample2x_bwd = cpu_upsample2x_bwd,
    .channel_copy_fwd = cpu_channel_copy_fwd, .channel_copy_bwd = cpu_channel_copy_bwd,
    .modulate2d_fwd = cpu_modulate2d_fwd, .modulate2d_bwd = cpu_modulate2d_bwd,
    .gate_residual2d_fwd = cpu_gate_residual2d_fwd, .gate_residual2d_bwd = cpu_gate_residual2d_bwd,
    .nchw_to_tokens_fwd = cpu_nchw_to_tokens_fwd, .nchw_to_tokens_bwd = cpu_nchw_to_tokens_bwd,
    .tokens_to_nchw_fwd = cpu_tokens_to_nchw_fwd, .tokens_to_nchw_bwd = cpu_tokens_to_nchw_bwd,
    .relu_fwd = cpu_relu_fwd, .relu_bwd = cpu_relu_bwd, .maxpool2d_fwd = cpu_maxpool2d_fwd,
    .avgpool2d_fwd = cpu_avgpool2d_fwd, .mean_hw_fwd = cpu_mean_hw_fwd, .resize_bilinear_fwd = cpu_resize_bilinear_fwd,
    .patchify_fwd = cpu_patchify_fwd, .patchify_bwd = cpu_patchify_bwd,
    .unpatchify_fwd = cpu_unpatchify_fwd, .unpatchify_bwd = cpu_unpatchify_bwd,
    .add_pos = cpu_add_pos, .timestep_embed = cpu_timestep_embed,
    .embed_fwd = cpu_embed_fwd, .embed_bwd = cpu_embed_bwd,
    .adamw = cpu_adamw_step, .ema = cpu_ema_step, .sumsq = cpu_sumsq, .scale = cpu_scale, .fill = cpu_fill,
    .rand_normal = cpu_rand_normal, .rand_bits = cpu_rand_bits,
    .diffusion_prepare = cpu_diffusion_prepare, .diffusion_loss = cpu_diffusion_loss,
    .sampler_step = cpu_sampler_step,
};

const Backend *backend_cpu(void) { return &CPU; }

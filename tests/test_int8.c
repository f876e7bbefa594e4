// --precision int8 on the CPU (cpu/cpu_int8.h): the quantisation, the int8 product against the
// same quantised math computed exactly, the shadows of the weights, a DiT-XL/2-shaped network's
// guided DDIM-10 samples against fp32, the precision's reach (which linears, which commands), and
// networks that hold their quantised weights in int8 only.
//
// Tolerances.
// - The product: the int8 sums are exact in int32 (|sum| <= I 127^2 < 2^31 for I < 133,000), so
//   the only difference from the double reference on the same int8 values and scales is the fp32
//   dequantisation (two roundings and the bias add): within 4 2^-24 of the largest |output| (as the
//   bound for the output's magnitude plus bias).
// - The product against fp32 on the unquantised values: each input row and weight channel is
//   off by at most half a step (scale / 2) per value; on uniform random data the nerr observed is
//   about 1%: held at 3%.
// - DiT-XL/2-shaped sampling: the x0 after guided DDIM-10 (scale 4), int8 against fp32, same
//   weights and x_T: max |diff| and mean |diff| against the standard deviation of the network's
//   part of the fp32 x0, held at TOL_X0_MAX and TOL_X0_MEAN (observed 0.031 and 0.0063).
// Without oneDNN in the build the int8 cases print a note and check only the refusal.
#include <math.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_int8.h"
#include "core/half.h"
#include "core/quant8.h"
#include "model/checkpoint.h"
#include "model/net.h"
#include "sampler/diffusion.h"
#include "sampler/sampler.h"
#include "testutil.h"

#define EPS24 5.9604645e-8  // 2^-24
#define TOL_VS_FP32 3e-2
#define TOL_X0_MAX 0.10
#define TOL_X0_MEAN 0.02

static int int8_on(const char *what) {
    if (!cpu_int8_available()) {
        printf("%s: skipped, this build has no oneDNN (no int8)\n", what);
        return 0;
    }
    return 1;
}

// Round to nearest, ties to even; per-row scale max|x| / 127; a zero row has scale 0.
START_TEST(test_quantise_rows) {
    const float x[3][4] = {{1.0f, -0.5f, 0.25f, 0.0f}, {0, 0, 0, 0}, {-254.0f, 1.0f, 127.0f, 3.0f}};
    int8_t q[3][3];
    float s[3];
    cpu_int8_quantise_rows(&q[0][0], s, &x[0][0], 3, 3, 4);  // (cols 3 of the 4: the stride is honoured)
    ck_assert_float_eq(s[0], 1.0f / 127.0f);
    ck_assert_int_eq(q[0][0], 127);
    ck_assert_int_eq(q[0][1], -64);  // -63.5: to even
    ck_assert_int_eq(q[0][2], 32);  // 31.75
    ck_assert_float_eq(s[1], 0.0f);
    ck_assert_int_eq(q[1][0], 0);
    ck_assert_int_eq(q[1][2], 0);
    ck_assert_float_eq(s[2], 2.0f);
    ck_assert_int_eq(q[2][0], -127);
    ck_assert_int_eq(q[2][1], 0);  // 0.5: to even
    ck_assert_int_eq(q[2][2], 64);  // 63.5
    // non-finite values (a diverged sample, a damaged file) quantise without undefined behaviour
    const float bad[2][3] = {{NAN, 2.0f, -1.0f}, {INFINITY, 1.0f, NAN}};
    int8_t qb[2][3];
    float sb[2];
    cpu_int8_quantise_rows(&qb[0][0], sb, &bad[0][0], 2, 3, 3);
    ck_assert_float_eq(sb[0], 2.0f / 127.0f);
    ck_assert_int_eq(qb[0][0], 0);
    ck_assert_int_eq(qb[0][1], 127);
    ck_assert_int_eq(qb[0][2], -64);  // -63.5: to even
    ck_assert(isinf(sb[1]));
    ck_assert_int_eq(qb[1][0], 0);
    ck_assert_int_eq(qb[1][1], 0);
    ck_assert_int_eq(qb[1][2], 0);
}
END_TEST

// quant8_row, whose loops are vectorised where the build has AVX2, against the definition written
// plainly: the same int8 values and scale on every row length from 0 to 100 (the vector loops'
// tails) with magnitudes from 2^-140 (subnormal) to 2^100, ties, signed zeros, NaNs and infinities.
static float quant8_row_plain(int8_t *q, const float *x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]);
    if (amax == 0.0f) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    for (int i = 0; i < n; i++) {
        const float v = nearbyintf(x[i] * (127.0f / amax));
        q[i] = isnan(v) ? 0 : v > 127.0f ? 127 : v < -127.0f ? -127 : (int8_t)v;
    }
    return amax / 127.0f;
}

START_TEST(test_quant8_row_vector) {
    uint64_t st = 7;
    float x[100];
    int8_t q[100], want[100];
    for (int trial = 0; trial < 40; trial++)
        for (int n = 0; n <= 100; n++) {
            // (odd trials: magnitude 1 with 127 in the row, so that the .5 values are ties)
            const float mag = trial & 1 ? 1.0f : ldexpf(1.0f, (int)(tu_next(&st) % 241) - 140);
            for (int i = 0; i < n; i++) {
                const uint64_t k = tu_next(&st) % 100;
                x[i] = k < 80  ? ((float)(tu_next(&st) >> 40) / 8388608.0f - 1.0f) * mag
                     : k < 88  ? (float)((int)(tu_next(&st) % 254) - 127) + 0.5f
                     : k < 92  ? (k & 1 ? -0.0f : 0.0f)
                     : k < 95  ? NAN
                     : k < 96  ? (k & 1 ? INFINITY : -INFINITY)
                               : 127.0f;
            }
            const float s = quant8_row(q, x, n), s_want = quant8_row_plain(want, x, n);
            ck_assert_msg(memcmp(&s, &s_want, sizeof s) == 0 || (isnan(s) && isnan(s_want)),
                          "n %d trial %d: scale %g, plainly %g", n, trial, s, s_want);
            ck_assert_msg(!memcmp(q, want, (size_t)n), "n %d trial %d: the int8 values differ", n, trial);
        }
}
END_TEST

// out = sa sw (qa . qw) + b against the double sum of the same int8 values, and against fp32.
static void product_case(int N, int I, int O, int bias, uint64_t seed) {
    float *in = malloc((size_t)N * I * 4), *w = malloc((size_t)O * I * 4), *b = malloc((size_t)O * 4);
    float *out = malloc((size_t)N * O * 4), *f32 = malloc((size_t)N * O * 4);
    tu_fill(in, (size_t)N * I, -2, 2, seed);
    tu_fill(w, (size_t)O * I, -0.1f, 0.1f, seed + 1);
    tu_fill(b, O, -1, 1, seed + 2);
    for (int n = 0; n < N; n += 7) in[(size_t)n * I + n % I] = 9.0f;  // an outlier in some rows
    ck_assert(cpu_int8_linear_fwd(out, in, w, bias ? b : NULL, N, I, O));
    int8_t *qa = malloc((size_t)N * I), *qw = malloc((size_t)O * I);
    float *sa = malloc((size_t)N * 4), *sw = malloc((size_t)O * 4);
    cpu_int8_quantise_rows(qa, sa, in, N, I, I);
    cpu_int8_quantise_rows(qw, sw, w, O, I, I);
    double worst = 0, mag = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            int64_t acc = 0;
            for (int i = 0; i < I; i++) acc += (int64_t)qa[(size_t)n * I + i] * qw[(size_t)o * I + i];
            const double ref = (double)acc * sa[n] * sw[o] + (bias ? b[o] : 0.0);
            worst = fmax(worst, fabs(out[(size_t)n * O + o] - ref));
            mag = fmax(mag, fabs(ref) + (bias ? fabs(b[o]) : 0.0));
        }
    printf("  int8 %dx%dx%d bias%d: max |out - exact quantised| %.2e (bound %.2e)\n", N, I, O, bias, worst,
           4 * EPS24 * mag);
    ck_assert_msg(worst <= 4 * EPS24 * mag, "int8 product off the quantised math by %g", worst);
    const Backend *be = backend_select("cpu", "fp32");
    be->linear_fwd(f32, in, w, bias ? b : NULL, N, I, O);
    const double e = tu_nerr(out, f32, (size_t)N * O, 1e-6);
    printf("  int8 %dx%dx%d against fp32: nerr %.2e (tolerance %.0e)\n", N, I, O, e, TOL_VS_FP32);
    ck_assert_msg(e <= TOL_VS_FP32 && e > 0, "int8 against fp32: %g", e);
    free(in), free(w), free(b), free(out), free(f32), free(qa), free(qw), free(sa), free(sw);
}

START_TEST(test_product) {
    if (!int8_on("int8 product")) return;
    product_case(37, 96, 80, 1, 1);
    product_case(64, 384, 1152, 0, 2);  // DiT-S/2's qkv
    product_case(5, 1536, 384, 1, 3);   // its fc2
    cpu_bf16_weights_changed();
}
END_TEST

// The weights' int8 copies are made once per weights generation: a second call with the same
// weights makes none, a changed generation one more.
START_TEST(test_shadow_once) {
    if (!int8_on("int8 weight shadows")) return;
    enum { N = 8, I = 64, O = 32 };
    float *in = malloc(N * I * 4), *w = malloc(O * I * 4), *out = malloc(N * O * 4), *out2 = malloc(N * O * 4);
    tu_fill(in, N * I, -1, 1, 5);
    tu_fill(w, O * I, -1, 1, 6);
    const uint64_t f0 = cpu_bf16_shadow_fills();
    cpu_int8_linear_fwd(out, in, w, NULL, N, I, O);
    cpu_int8_linear_fwd(out2, in, w, NULL, N, I, O);
    ck_assert_uint_eq(cpu_bf16_shadow_fills() - f0, 1);
    ck_assert(!memcmp(out, out2, sizeof(float) * N * O));
    for (int i = 0; i < O * I; i++) w[i] *= 2;
    cpu_bf16_weights_changed();
    cpu_int8_linear_fwd(out2, in, w, NULL, N, I, O);
    ck_assert_uint_eq(cpu_bf16_shadow_fills() - f0, 2);
    for (int i = 0; i < N * O; i++) ck_assert_msg(fabsf(out2[i] - 2 * out[i]) <= 1e-5f * (1 + fabsf(out[i])), "%d", i);
    cpu_bf16_forget(w, O * I * 4);
    free(in), free(w), free(out), free(out2);
}
END_TEST

// ---- DiT-XL/2-shaped sampling ----

// DiT-XL/2's width (hidden 1152, 16 heads, patch 2, 4 latent channels, learned sigma, softmax
// attention), scaled down in depth (2 blocks of its 28) and tokens (8x8 latents: 16 of its 256)
// so that it runs in seconds; the quantised products are the full-width ones.
static void xl2_shaped(NetConfig *c) {
    net_config_default(c, BACKBONE_DIT);
    c->dit.depth = 2; c->dit.hidden = 1152; c->dit.heads = 16; c->dit.patch = 2;
    dit_config_attn_defaults(&c->dit, ATTN_SOFTMAX);
    c->image_size = 8; c->in_channels = 4; c->num_classes = 10; c->learn_sigma = 1;
}

static void denoise(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n) {
    net_forward(ctx, out, x, t, y, n);
}

// Returns 1 / sqrt(abar) of the first step: with eps = 0 throughout, DDIM's x0 would be that times x_T.
static double ddim10(Net *net, const Backend *be, float *x, const int32_t *y, int n, int C, int S) {
    Diffusion base;
    diffusion_init_dit(&base);
    SamplerConfig sc = sampler_config_default();
    sc.kind = SAMPLER_DDIM; sc.num_steps = 10; sc.cfg_scale = 4.0f; sc.cfg_channels = 3;
    sc.clip_denoised = 0; sc.learn_sigma = 1; sc.num_classes = 10;
    Sampler s;
    MalaErr err;
    ck_assert_msg(sampler_init(&s, be, &base, &sc, n, C, S, denoise, net, &err) == 0, "%s", err.msg);
    ck_assert_msg(sampler_run(&s, x, y, n, &err) == 0, "%s", err.msg);
    const double first = s.sp.sqrt_recip_alphas_cumprod[s.sp.num_timesteps - 1];
    sampler_free(&s);
    diffusion_free(&base);
    return first;
}

START_TEST(test_xl2_shaped_ddim10) {
    if (!int8_on("DiT-XL/2-shaped int8 sampling")) return;
    enum { B = 2 };
    NetConfig c;
    xl2_shaped(&c);
    const Backend *be = backend_select("cpu", "fp32");
    Net *n = net_create(&c, be, 2 * B, NET_INFER);
    net_init_weights(n, 3);
    // (DiT's init zeroes the adaLN gates and the output layer: random weights of about the trained
    // scale, 1/sqrt(fan-in), exercise every product)
    tu_fill(n->w, n->n_floats, -0.03f, 0.03f, 4);
    be->weights_changed();
    const int C = c.in_channels, S = c.image_size;
    const size_t count = (size_t)B * C * S * S;
    float *xT = malloc(count * 4), *x32 = malloc(count * 4), *x8 = malloc(count * 4);
    tu_fill(xT, count, -1.7f, 1.7f, 5);  // (x_T: unit variance)
    memcpy(x32, xT, count * 4);
    memcpy(x8, xT, count * 4);
    const int32_t y[B] = {3, 7};
    const double k = ddim10(n, be, x32, y, B, C, S);
    be->set_precision(PREC_INT8);
    ck_assert_str_eq(be->precision(), "int8");
    ddim10(n, be, x8, y, B, C, S);
    be->set_precision(PREC_FP32);
    // The network's part of x0: x0 - x_T / sqrt(abar_first) (what eps moved it by; a random model's eps
    // is small, so x0 itself is mostly the scaled x_T, which would hide the error). Its spread is the scale.
    double mean = 0, var = 0, maxd = 0, meand = 0;
    for (size_t i = 0; i < count; i++) mean += (x32[i] - k * xT[i]) / count;
    for (size_t i = 0; i < count; i++) {
        const double d = x32[i] - k * xT[i] - mean;
        var += d * d / count;
        maxd = fmax(maxd, fabs(x8[i] - x32[i]));
        meand += fabs(x8[i] - x32[i]) / count;
    }
    const double sd = sqrt(var);
    printf("  DiT-XL/2-shaped guided DDIM-10, int8 vs fp32: max |x0 diff| %.4f, mean %.5f: %.4f and %.5f of the sd of "
           "the network's part of x0 (%.3f); tolerances %.2f and %.3f\n", maxd, meand, maxd / sd, meand / sd, sd,
           TOL_X0_MAX, TOL_X0_MEAN);
    ck_assert_msg(maxd / sd <= TOL_X0_MAX && meand / sd <= TOL_X0_MEAN, "int8 samples off fp32: max %g mean %g (sd %g)",
                  maxd, meand, sd);
    ck_assert_msg(maxd > 0, "int8 samples bit-identical to fp32: int8 did not run");
    free(xT), free(x32), free(x8);
    net_free(n);
}
END_TEST

// Only the blocks' large linears: linear_fwd stays fp32 at PREC_INT8; other modes turn int8 off.
START_TEST(test_reach) {
    if (!int8_on("int8 reach")) return;
    enum { N = 4, I = 64, O = 16 };
    float in[N * I], w[O * I], a[N * O], q[N * O];
    tu_fill(in, N * I, -1, 1, 8);
    tu_fill(w, O * I, -1, 1, 9);
    const Backend *be = backend_select("cpu", "int8");
    ck_assert_str_eq(be->precision(), "int8");
    be->linear_fwd(a, in, w, NULL, N, I, O);
    be->linear_fwd_quant(q, in, w, NULL, N, I, O);
    ck_assert_msg(memcmp(a, q, sizeof a) != 0, "linear_fwd_quant did not quantise");
    float ref[N * O];
    backend_select("cpu", "fp32")->linear_fwd(ref, in, w, NULL, N, I, O);
    ck_assert_msg(!memcmp(a, ref, sizeof a), "linear_fwd is not fp32 at int8");
    be->linear_fwd_quant(q, in, w, NULL, N, I, O);
    ck_assert_msg(!memcmp(q, ref, sizeof q), "linear_fwd_quant is not fp32 at fp32");
    ck_assert_str_eq(be->precision(), "fp32");
    cpu_bf16_forget(w, sizeof w);
}
END_TEST

// A q8 model file: the blocks' linear weights I8 with F32 row scales, the rest F16; loaded, the
// weights are q * scale, and quantising them again (what --precision int8 does) gives back the
// stored int8 values. Scales missing or not finite are refused with the tensor's name.
START_TEST(test_q8_file) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 2; c.dit.hidden = 64; c.dit.heads = 2; c.dit.patch = 2;
    dit_config_attn_defaults(&c.dit, ATTN_MALA);
    c.dit.gate = 1;  // (so that every quantised linear is there)
    c.image_size = 8; c.in_channels = 2; c.num_classes = 3;
    ClassNames cn;
    class_names_default(&cn, c.num_classes);
    const Backend *be = backend_select("cpu", "fp32");
    Net *n = net_create(&c, be, 1, NET_INFER);
    tu_fill(n->w, n->n_floats, -0.2f, 0.2f, 31);
    tu_make_tmpdir("int8");
    MalaErr err;
    ck_assert_msg(ckpt_save_weights(n, &cn, n->w, CKPT_Q8, tp("q8.safetensors"), &err) == 0, "%s", err.msg);
    StFile f;
    ck_assert_msg(st_open(&f, tp("q8.safetensors"), &err) == 0, "%s", err.msg);
    ClassNames cn2;
    Net *m = ckpt_load_model(tp("q8.safetensors"), be, 1, &cn2, &err);
    ck_assert_msg(m, "%s", err.msg);
    int quantised = 0;
    for (int i = 0; i < n->nparams; i++) {
        const ParamInfo *p = &n->params[i];
        const StTensor *t = st_find(&f, p->name);
        ck_assert(t);
        const float *got = m->w + p->offset, *orig = n->w + p->offset;
        if (!p->quant8) {
            ck_assert_msg(t->dtype == ST_F16, "%s is %s", p->name, st_dtype_name(t->dtype));
            for (size_t k = 0; k < p->numel; k++) ck_assert_float_eq(got[k], half_to_f32(f32_to_half(orig[k])));
            continue;
        }
        quantised++;
        ck_assert_msg(t->dtype == ST_I8, "%s is %s", p->name, st_dtype_name(t->dtype));
        char sname[160];
        snprintf(sname, sizeof sname, "%s.q8_scale", p->name);
        const StTensor *ts = st_find(&f, sname);
        ck_assert(ts && ts->dtype == ST_F32 && ts->ndim == 1 && ts->shape[0] == p->shape[0]);
        const int rows = (int)p->shape[0], cols = (int)(p->numel / rows);
        const int8_t *stored = st_data(&f, t);
        float scale_file[4096];
        ck_assert(rows <= 4096);
        ck_assert(st_read_f32(&f, ts, scale_file, &err) == 0);
        int8_t q[4096];
        for (int r = 0; r < rows; r++) {
            const float s2 = quant8_row(q, got + (size_t)r * cols, cols);
            ck_assert_msg(!memcmp(q, stored + (size_t)r * cols, cols), "%s row %d: int8 values changed", p->name, r);
            ck_assert_msg(fabsf(s2 - scale_file[r]) <= 2e-7f * scale_file[r], "%s row %d scale", p->name, r);
            for (int k = 0; k < cols; k++)  // within half a step of the original
                ck_assert(fabsf(got[(size_t)r * cols + k] - orig[(size_t)r * cols + k]) <= 0.5001f * scale_file[r]);
        }
    }
    ck_assert_int_eq(quantised, 2 * 5);  // qkv, gate, proj, fc1, fc2 in each block
    st_close(&f);
    net_free(m);
    class_names_free(&cn2);

    // a q8 file without one of its scales
    StWriter *w = st_writer_new();
    ckpt_write_config(w, &c, &cn);
    for (int i = 0; i < n->nparams; i++) {
        const ParamInfo *p = &n->params[i];
        st_writer_add(w, p->name, p->quant8 && !strcmp(p->name, "blocks.1.mlp.fc2.weight") ? ST_I8 : ST_F32, p->shape,
                      p->ndim, n->w + p->offset);
    }
    ck_assert_msg(st_writer_save(w, tp("noscale.safetensors"), &err) == 0, "%s", err.msg);
    st_writer_free(w);
    ck_assert(!ckpt_load_model(tp("noscale.safetensors"), be, 1, &cn2, &err));
    printf("  q8 file without its scales: %s\n", err.msg);
    ck_assert_msg(strstr(err.msg, "'blocks.1.mlp.fc2.weight' is I8 but its scales 'blocks.1.mlp.fc2.weight.q8_scale' "
                                  "are missing"), "%s", err.msg);
    tu_rm_tmpdir();
    class_names_free(&cn);
    net_free(n);
}
END_TEST

// A network sampling at int8 holds its quant8 weights in int8 only: loaded from a q8 file (its rows
// taken from the file) or from an fp32 one (quantised as they are read) it has no floats of them,
// and its output is bit for bit that of a network holding fp32 weights, loaded from the same file
// and run at PREC_INT8 (its weights quantised into shadows). Saved as q8 again, it writes the file
// the fp32 weights gave.
START_TEST(test_q8_net) {
    if (!int8_on("int8-only weights")) return;
    enum { B = 2 };
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 2; c.dit.hidden = 64; c.dit.heads = 2; c.dit.patch = 2;
    dit_config_attn_defaults(&c.dit, ATTN_MALA);
    c.dit.gate = 1;
    c.image_size = 8; c.in_channels = 2; c.num_classes = 3;
    ClassNames cn;
    class_names_default(&cn, c.num_classes);
    const Backend *be = backend_select("cpu", "fp32");
    Net *n = net_create(&c, be, B, NET_INFER);
    ck_assert(!n->q8);
    tu_fill(n->w, n->n_floats, -0.2f, 0.2f, 41);
    size_t held = 0;  // the quant8 tensors' floats
    for (int i = 0; i < n->nparams; i++) held += n->params[i].quant8 ? n->params[i].numel : 0;
    ck_assert_uint_gt(held, 0);
    tu_make_tmpdir("int8net");
    MalaErr err;
    ck_assert_msg(ckpt_save_weights(n, &cn, n->w, CKPT_Q8, tp("q8.safetensors"), &err) == 0, "%s", err.msg);
    ck_assert_msg(ckpt_save_weights(n, &cn, n->w, ST_F32, tp("f32.safetensors"), &err) == 0, "%s", err.msg);
    const int C = c.in_channels, S = c.image_size;
    const size_t count = (size_t)B * C * S * S, outn = (size_t)B * 2 * C * S * S;
    float *x = malloc(count * 4), *ref = malloc(outn * 4), *got = malloc(outn * 4);
    tu_fill(x, count, -1.5f, 1.5f, 42);
    const float t[B] = {999.0f, 250.0f};
    const int32_t y[B] = {1, 3};  // (3: the null class)
    const char *files[2] = {"q8.safetensors", "f32.safetensors"};
    for (int k = 0; k < 2; k++) {
        ClassNames cn2;
        be = backend_select("cpu", "fp32");
        Net *r = ckpt_load_model(tp(files[k]), be, B, &cn2, &err);
        ck_assert_msg(r, "%s", err.msg);
        class_names_free(&cn2);
        ck_assert(!r->q8 && r->n_floats == n->n_floats);
        be = backend_select("cpu", "int8");
        net_forward(r, ref, x, t, y, B);
        Net *q = ckpt_load_model(tp(files[k]), be, B, &cn2, &err);
        ck_assert_msg(q, "%s", err.msg);
        class_names_free(&cn2);
        ck_assert_msg(q->q8, "a network loaded at int8 holds fp32 weights");
        ck_assert_uint_eq(q->n_floats, n->n_floats - held);
        ck_assert_uint_lt(q->arena_bytes, r->arena_bytes);
        for (int i = 0; i < q->nparams; i++)
            if (q->params[i].quant8) ck_assert_msg(q->params[i].offset == SIZE_MAX, "%s has floats", q->params[i].name);
        net_forward(q, got, x, t, y, B);
        ck_assert_msg(!memcmp(got, ref, outn * 4), "%s: int8-only weights give other output than fp32 ones quantised",
                      files[k]);
        be = backend_select("cpu", "fp32");  // (no fp32 weights to fall back on: it stays int8)
        memset(got, 0, outn * 4);
        net_forward(q, got, x, t, y, B);
        ck_assert(!memcmp(got, ref, outn * 4));
        if (k == 1) {  // saved from the int8 weights
            ck_assert_msg(ckpt_save_weights(q, &cn, q->w, CKPT_Q8, tp("again.safetensors"), &err) == 0, "%s", err.msg);
            size_t la, lb;
            char *a = tu_read_file(tp("q8.safetensors"), &la), *b = tu_read_file(tp("again.safetensors"), &lb);
            ck_assert_msg(la == lb && !memcmp(a, b, la), "a q8 file saved from int8 weights differs");
            free(a), free(b);
        }
        net_free(q);
        net_free(r);
    }
    free(x), free(ref), free(got);
    tu_rm_tmpdir();
    class_names_free(&cn);
    net_free(n);
}
END_TEST

START_TEST(test_refused_without_dnnl) {
    cpu_gemm_select(GEMM_OPENBLAS, -1);
    backend_select("cpu", "int8");
}
END_TEST

int main(void) {
    Suite *s = suite_create("int8");
    TCase *tc = tcase_create("int8");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_quantise_rows);
    tcase_add_test(tc, test_quant8_row_vector);
    tcase_add_test(tc, test_product);
    tcase_add_test(tc, test_shadow_once);
    tcase_add_test(tc, test_reach);
    tcase_add_test(tc, test_xl2_shaped_ddim10);
    tcase_add_test(tc, test_q8_file);
    tcase_add_test(tc, test_q8_net);
    tcase_add_exit_test(tc, test_refused_without_dnnl, 1);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

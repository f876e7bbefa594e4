// mala bench train | sample: throughput of the real training step and of the samplers, as one
// JSON line on stdout.
#include <cblas.h>
#include <string.h>

#include "commands.h"
#include "denoiser.h"
#include "eval_cli.h"
#include "json.h"   // defines: json_printf_line
#include "rng.h"
#include "sampler.h"
#include "trainer.h"
#ifdef MALA_CUDA
#include "cuda/backend_cuda.h"
#endif

// OpenBLAS sgemm rate on a DiT-S/2-shaped product (8192x384 . 384x1152), the ceiling the
// training step is compared against.
static double sgemm_gflops(void) {
    int M = 8192, K = 384, N = 1152, reps = 6;
    float *a = xcalloc((size_t)M * K, 4), *b = xcalloc((size_t)K * N, 4), *c = xcalloc((size_t)M * N, 4);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 0, c, N);
    double t0 = now_seconds();
    for (int r = 0; r < reps; r++) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 0, c, N);
    double dt = now_seconds() - t0;
    free(a); free(b); free(c);
    return 2.0 * M * K * N * reps / dt / 1e9;
}

// The product rate the training step is compared against: OpenBLAS sgemm on the CPU, cuBLAS
// (in the chosen precision) on CUDA, both on the same DiT-S/2-shaped product.
static double gemm_ceiling(const Backend *be) {
#ifdef MALA_CUDA
    if (!strcmp(be->name, "cuda")) return cuda_gemm_gflops();
#endif
    return sgemm_gflops();
}

static const char *precision_name(const Backend *be, const char *precision) {
    if (strcmp(be->name, "cuda")) return "fp32";
    return precision ? precision : "tf32";
}

static void random_batch(float *x, int32_t *y, size_t img, int B, int K, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < img; i++) x[i] = (float)(2.0 * rng_uniform(&r) - 1.0);
    for (int b = 0; b < B; b++) y[b] = (int32_t)rng_below(&r, (uint64_t)K);
}

static int bench_train(int argc, char **argv) {
    ModelOpts mo;
    model_opts_default(&mo, "DiT-S/2");
    int batch = 32, steps = 5, threads = 0;
    const char *device = NULL, *precision = NULL;
    Opt opts[MODEL_OPTS_N + 5];
    model_opts_table(&mo, opts);
    opts[MODEL_OPTS_N + 0] = (Opt){"--batch", OPT_INT, &batch, "B", "batch size"};
    opts[MODEL_OPTS_N + 1] = (Opt){"--steps", OPT_INT, &steps, "N", "timed steps (after one warm-up step)"};
    opts[MODEL_OPTS_N + 2] = (Opt){"--threads", OPT_INT, &threads, "N", "CPU threads (0 = all cores)"};
    opts[MODEL_OPTS_N + 3] = (Opt)OPT_DEVICE(&device);
    opts[MODEL_OPTS_N + 4] = (Opt)OPT_PRECISION(&precision);
    args_parse("usage: mala bench train [flags]\n\nTimes the full training step (forward, loss, backward, AdamW, EMA)\n"
               "on random data and prints one JSON line.",
               opts, MODEL_OPTS_N + 5, argc, argv, 1);
    if (batch < 1 || steps < 1) FATAL("--batch and --steps must be positive");
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    DitConfig c;
    model_opts_config(&mo, &c);
    ClassNames cn;
    class_names_default(&cn, c.num_classes);
    TrainOpts to;
    train_opts_default(&to);
    Trainer *tr = trainer_new(&c, &cn, &to, be, batch);
    trainer_init_weights(tr);
    size_t img = (size_t)batch * c.in_channels * c.image_size * c.image_size;
    float *x = xmalloc(img * sizeof(float));
    int32_t *y = xmalloc(batch * sizeof(int32_t));
    random_batch(x, y, img, batch, c.num_classes, 1);
    trainer_step(tr, x, y);  // warm-up: first-touch of every buffer
    be->sync();
    double t0 = now_seconds();
    for (int s = 0; s < steps; s++) trainer_step(tr, x, y);
    be->sync();
    double dt = (now_seconds() - t0) / steps;
    double flops = 3.0 * dit_flops_per_image(&c) * batch / dt / 1e9;  // backward ~ 2x forward
    double ref = gemm_ceiling(be);
    MalaErr jerr;
    if (json_printf_line(stdout, &jerr, "{\"bench\":\"train\",\"model\":\"%s\",\"attn\":\"%s\",\"device\":\"%s\",\"precision\":\"%s\","
           "\"threads\":%d,\"batch\":%d,"
           "\"image_size\":%d,\"channels\":%d,\"params\":%zu,\"img_per_s\":%.3f,\"s_per_step\":%.4f,"
           "\"gflop_per_img\":%.2f,\"gflops\":%.1f,\"sgemm_gflops\":%.1f,\"fraction_of_sgemm\":%.3f,"
           "\"peak_rss_mb\":%.0f}",
           mo.preset, mo.attn, be->name, precision_name(be, precision), num_threads(), batch, c.image_size,
           c.in_channels, tr->m->n_trainable,
           batch / dt, dt, 3.0 * dit_flops_per_image(&c) / 1e9, flops, ref, ref > 0 ? flops / ref : 0.0,
           peak_rss_bytes() / 1048576.0))
        FATAL("%s", jerr.msg);
    free(x); free(y);
    class_names_free(&cn);
    trainer_free(tr);
    return 0;
}

static int bench_sample(int argc, char **argv) {
    ModelOpts mo;
    model_opts_default(&mo, "DiT-S/2");
    int n = 16, steps = 10, threads = 0;
    float cfg = 4.0f;
    const char *device = NULL, *sampler = "ddim", *precision = NULL;
    Opt opts[MODEL_OPTS_N + 7];
    model_opts_table(&mo, opts);
    opts[MODEL_OPTS_N + 0] = (Opt){"--n", OPT_INT, &n, "N", "images per run"};
    opts[MODEL_OPTS_N + 1] = (Opt){"--steps", OPT_INT, &steps, "N", "sampling steps"};
    opts[MODEL_OPTS_N + 2] = (Opt){"--sampler", OPT_STR, &sampler, "ddpm|ddim", "sampler"};
    opts[MODEL_OPTS_N + 3] = (Opt){"--cfg-scale", OPT_FLOAT, &cfg, "W", "guidance scale of the guided run"};
    opts[MODEL_OPTS_N + 4] = (Opt){"--threads", OPT_INT, &threads, "N", "CPU threads (0 = all cores)"};
    opts[MODEL_OPTS_N + 5] = (Opt)OPT_DEVICE(&device);
    opts[MODEL_OPTS_N + 6] = (Opt)OPT_PRECISION(&precision);
    args_parse("usage: mala bench sample [flags]\n\nTimes sampling with a randomly initialised model of the given\n"
               "shape, without guidance and with --cfg-scale, and prints one JSON line.",
               opts, MODEL_OPTS_N + 7, argc, argv, 1);
    if (n < 1 || steps < 1) FATAL("--n and --steps must be positive");
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    DitConfig c;
    model_opts_config(&mo, &c);
    Dit *m = dit_create(&c, be, 2 * n, DIT_INFER);
    dit_init_weights(m, 0);
    Diffusion base;
    MalaErr err;
    if (diffusion_init(&base, BETA_LINEAR, 1000, &err)) FATAL("%s", err.msg);
    SamplerConfig sc = sampler_config_default();
    if (!strcmp(sampler, "ddim")) sc.kind = SAMPLER_DDIM;
    else if (strcmp(sampler, "ddpm")) FATAL("--sampler %s: expected ddpm or ddim", sampler);
    sc.num_steps = steps;
    sc.learn_sigma = c.learn_sigma;
    sc.num_classes = c.num_classes;
    Sampler s;
    if (sampler_init(&s, be, &base, &sc, n, c.in_channels, c.image_size, denoiser_fn, m, &err)) FATAL("%s", err.msg);
    size_t img = (size_t)n * c.in_channels * c.image_size * c.image_size;
    float *x = xmalloc(img * sizeof(float)), *d_x = be->alloc(img * sizeof(float));
    int32_t *y = xmalloc(n * sizeof(int32_t));
    double rate[2];
    float scales[2] = {1.0f, cfg};
    for (int g = 0; g < 2; g++) {
        s.cfg.cfg_scale = scales[g];
        random_batch(x, y, img, n, c.num_classes, 2);
        double t0 = now_seconds();
        be->to_device(d_x, x, img * sizeof(float));
        if (sampler_run(&s, d_x, y, n, &err) < 0) FATAL("%s", err.msg);
        be->to_host(x, d_x, img * sizeof(float));
        rate[g] = n / (now_seconds() - t0);
    }
    MalaErr jerr;
    if (json_printf_line(stdout, &jerr, "{\"bench\":\"sample\",\"model\":\"%s\",\"attn\":\"%s\",\"device\":\"%s\",\"precision\":\"%s\","
           "\"threads\":%d,\"sampler\":\"%s\","
           "\"steps\":%d,\"n\":%d,\"image_size\":%d,\"channels\":%d,\"img_per_s\":%.3f,\"img_per_s_cfg\":%.3f,"
           "\"cfg_scale\":%g,\"peak_rss_mb\":%.0f}",
           mo.preset, mo.attn, be->name, precision_name(be, precision), num_threads(), sampler, steps, n, c.image_size,
           c.in_channels, rate[0],
           rate[1], cfg, peak_rss_bytes() / 1048576.0))
        FATAL("%s", jerr.msg);
    be->release(d_x);
    free(x); free(y);
    sampler_free(&s);
    diffusion_free(&base);
    dit_free(m);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "train")) return bench_train(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sample")) return bench_sample(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inception")) return cmd_bench_inception(argc - 1, argv + 1);
    fprintf(stderr, "usage: mala bench train|sample|inception [flags]   (mala bench train --help)\n");
    return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
}

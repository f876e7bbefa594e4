// fp32 against bf16 (or int8) on the CPU in ONE process (docs/performance.md, "bf16", "int8"): the
// training step and sampling of a model (default DiT-S/2 MALA, 32x32x1), the two precisions
// alternating step by step (sampling: run by run), so that a machine shared with other jobs slows
// both alike; then the median of each and the median of the per-round ratios. Also the GEMM
// ceiling (Backend.gemm_gflops) in each precision, interleaved the same way.
//
//   make build/bench_precision && OMP_NUM_THREADS=2 ./build/bench_precision [ROUNDS] [MODEL] [BATCH] [N] [PREC]
//   (defaults 5, DiT-S/2, batch 32 for training, 8 images DDIM-10 for sampling, with and without
//   guidance 4, PREC bf16; PREC int8 compares sampling only: int8 does not train)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "model/checkpoint.h"
#include "core/common.h"
#include "pipeline/generate.h"
#include "model/net.h"
#include "core/rng.h"
#include "train/trainer.h"

#define MAX_ROUNDS 64

static int other_mode = PREC_BF16;  // the precision set against fp32 (PREC_BF16 or PREC_INT8)
static const char *other = "bf16";

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[MAX_ROUNDS];
    memcpy(s, v, sizeof *v * n);
    qsort(s, n, sizeof *s, cmp_d);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void random_batch(float *x, int32_t *y, size_t img, int B, int K, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < img; i++) x[i] = (float)(2.0 * rng_uniform(&r) - 1.0);
    for (int b = 0; b < B; b++) y[b] = (int32_t)rng_below(&r, (uint64_t)K);
}

// rate[p][r] for p = 0 fp32, 1 bf16: medians, per-round ratios and their median.
static void report(const char *what, const char *unit, double rate[2][MAX_ROUNDS], int rounds) {
    double ratio[MAX_ROUNDS];
    printf("%-28s fp32 %8.3f %s, %s %8.3f; %s/fp32 per round", what, median(rate[0], rounds), unit, other,
           median(rate[1], rounds), other);
    for (int r = 0; r < rounds; r++) printf(" %.2f", ratio[r] = rate[1][r] / rate[0][r]);
    printf("; median %.2fx\n", median(ratio, rounds));
}

static void bench_train(const Backend *be, const NetConfig *c, int batch, int rounds) {
    ClassNames cn;
    class_names_default(&cn, c->num_classes);
    TrainOpts to;
    train_opts_default(&to);
    Trainer *tr = trainer_new(c, &cn, &to, be, batch);
    trainer_init_weights(tr);
    const size_t img = (size_t)batch * c->in_channels * c->image_size * c->image_size;
    float *x = xmalloc(img * sizeof(float));
    int32_t *y = xmalloc(batch * sizeof(int32_t));
    random_batch(x, y, img, batch, c->num_classes, 1);
    double rate[2][MAX_ROUNDS], gflops[2][MAX_ROUNDS], gemm[2][MAX_ROUNDS];
    const double gflop = 3.0 * net_flops_per_image(c) / 1e9;  // backward ~ 2x forward, as mala bench
    for (int r = -1; r < rounds; r++)  // r = -1: warm-up (first touch, primitives, shadows)
        for (int p = 0; p < 2; p++) {
            be->set_precision(!p);
            const double t0 = now_seconds();
            trainer_step(tr, x, y);
            const double dt = now_seconds() - t0;
            const double g = be->gemm_gflops();
            if (r < 0) continue;
            rate[p][r] = batch / dt, gflops[p][r] = gflop * batch / dt, gemm[p][r] = g;
        }
    be->set_precision(1);
    report("training (img/s)", "img/s", rate, rounds);
    report("GEMM ceiling (GFLOP/s)", "GFLOP/s", gemm, rounds);
    for (int p = 0; p < 2; p++)
        printf("training %s: %.1f GFLOP/s, %.0f%% of the GEMM ceiling in the same precision\n", p ? other : "fp32",
               median(gflops[p], rounds), 100 * median(gflops[p], rounds) / median(gemm[p], rounds));
    free(x), free(y);
    class_names_free(&cn);
    trainer_free(tr);
}

static void bench_sample(const Backend *be, const NetConfig *c, int n, int rounds) {
    ClassNames cn;
    class_names_default(&cn, c->num_classes);
    Generator g;
    generator_new(&g, c, &cn, be, n);
    net_init_weights(g.net, 0);
    const size_t img = (size_t)n * generator_image_floats(&g);
    float *x = xmalloc(img * sizeof(float));
    int32_t *y = xmalloc(n * sizeof(int32_t));
    GenOpts o = gen_opts_default();
    sampler_kind_parse("ddim", &o.kind);
    o.steps = 10;
    double rate[2][2][MAX_ROUNDS];  // [guided][precision][round]
    MalaErr err;
    for (int r = -1; r < rounds; r++)
        for (int guided = 0; guided < 2; guided++)
            for (int p = 0; p < 2; p++) {
                be->set_precision(p ? other_mode : PREC_FP32);
                o.cfg_scale = guided ? 4.0f : 1.0f;
                random_batch(x, y, img, n, c->num_classes, 2);
                const double t0 = now_seconds();
                if (generator_run(&g, &o, x, y, n, 2, 0, NULL, NULL, &err) < 0) FATAL("%s", err.msg);
                if (r >= 0) rate[guided][p][r] = n / (now_seconds() - t0);
            }
    be->set_precision(1);
    report("sampling DDIM-10 (img/s)", "img/s", rate[0], rounds);
    report("guided sampling, cfg 4 (img/s)", "img/s", rate[1], rounds);
    free(x), free(y);
    class_names_free(&cn);
    generator_close(&g);
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 5;
    const char *model = argc > 2 ? argv[2] : "DiT-S/2";
    const int batch = argc > 3 ? atoi(argv[3]) : 32, n = argc > 4 ? atoi(argv[4]) : 8;
    if (argc > 5) other = argv[5];
    if (rounds < 1 || rounds > MAX_ROUNDS || batch < 1 || n < 1 || (strcmp(other, "bf16") && strcmp(other, "int8")))
        FATAL("bench_precision: bad arguments");
    other_mode = strcmp(other, "int8") ? PREC_BF16 : PREC_INT8;
    const Backend *be = backend_select("cpu", other);  // (refused here without oneDNN)
    be->set_precision(1);
    NetConfig c;
    MalaErr err;
    net_config_default(&c, BACKBONE_DIT);
    if (net_config_preset(&c, model, &err)) FATAL("%s", err.msg);
    printf("%s, %dx%dx%d, %d threads, %d interleaved rounds\n", model, c.image_size, c.image_size, c.in_channels,
           num_threads(), rounds);
    if (other_mode == PREC_BF16) bench_train(be, &c, batch, rounds);
    bench_sample(be, &c, n, rounds);
    return 0;
}

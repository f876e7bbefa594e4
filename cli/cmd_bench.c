// mala bench train | sample: throughput of the real training step and of the samplers, as one
// JSON line on stdout: the median of repeated timings with their min and max; --profile adds
// the time per op kind and the slowest ops (backend_profile.h).
#include <string.h>

#include "core/suggest.h"
#include "core/backend_profile.h"
#include "core/bench_stats.h"
#include "cli/commands.h"
#include "pipeline/generate.h"
#include "formats/json.h"   // defines: json_printf_line
#include "core/rng.h"
#include "train/trainer.h"
#include "cpu/cpu_threads.h"

static void random_batch(float *x, int32_t *y, size_t img, int B, int K, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < img; i++) x[i] = (float)(2.0 * rng_uniform(&r) - 1.0);
    for (int b = 0; b < B; b++) y[b] = K > 0 ? (int32_t)rng_below(&r, (uint64_t)K) : 0;  // K = 0: unconditional
}

// The profile of `steps` timed steps (or runs: `what`; total seconds): a table on stderr, and the
// JSON member "<key>":{kind: seconds, ..., "outside_ops": the rest of the step} into json.
static void profile_report(char *json, size_t cap, const char *key, const char *what, double total, int steps) {
    BackendProfile p = backend_profile_read();
    double ops = 0;
    for (int k = 0; k < PROF_KINDS; k++) ops += p.seconds[k];
    const double per = 1.0 / steps, outside = total - ops;
    fprintf(stderr, "time per %s by op kind (%d timed, synchronised after every op):\n", what, steps);
    size_t len = (size_t)snprintf(json, cap, "\"%s\":{", key);
    for (int k = 0; k <= PROF_KINDS; k++) {
        const char *name = k < PROF_KINDS ? backend_profile_kind_name(k) : "outside_ops";
        const double s = k < PROF_KINDS ? p.seconds[k] : outside;
        const long long calls = k < PROF_KINDS ? (long long)p.calls[k] : 0;
        fprintf(stderr, "  %-14s %9.4f s %6.1f%%  %8.0f calls\n", name, s * per, total > 0 ? 100 * s / total : 0.0,
                calls * per);
        len += (size_t)snprintf(json + len, len < cap ? cap - len : 0, "%s\"%s\":%.6f", k ? "," : "", name, s * per);
    }
    fprintf(stderr, "  %-14s %9.4f s\n", "total", total * per);
    // the slots that took the most time, down to 1% of the step
    const char *const *names;
    const int nslots = backend_profile_timed_slots(&names);
    int order[PROF_MAX_SLOTS], n = 0;
    for (int i = 0; i < nslots; i++)
        if (p.slot_calls[i]) order[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && p.slot_seconds[order[j]] > p.slot_seconds[order[j - 1]]; j--) {
            const int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    fprintf(stderr, "by op (down to 1%% of the %s):\n", what);
    for (int i = 0; i < n && p.slot_seconds[order[i]] >= 0.01 * total; i++)
        fprintf(stderr, "  %-24s %9.4f s %6.1f%%  %8.0f calls\n", names[order[i]], p.slot_seconds[order[i]] * per,
                total > 0 ? 100 * p.slot_seconds[order[i]] / total : 0.0, p.slot_calls[order[i]] * per);
    snprintf(json + len, len < cap ? cap - len : 0, ",\"total\":%.6f},", total * per);
}

static int bench_train(int argc, char **argv) {
    ModelOpts mo;
    model_opts_default(&mo, "DiT-S/2");
    int batch = 32, steps = 5, threads = 0, profile = 0;
    const char *device = NULL, *precision = NULL;
    Opt opts[MODEL_OPTS_N + 6];
    model_opts_table(&mo, opts);
    opts[MODEL_OPTS_N + 0] = (Opt){"--batch", OPT_INT, &batch, "B", "batch size", ARG_MIN(1)};
    opts[MODEL_OPTS_N + 1] = (Opt){"--steps", OPT_INT, &steps, "N", "timed steps (after one warm-up step)", ARG_MIN(1)};
    opts[MODEL_OPTS_N + 2] = (Opt)OPT_THREADS(&threads);
    opts[MODEL_OPTS_N + 3] = (Opt)OPT_DEVICE(&device);
    opts[MODEL_OPTS_N + 4] = (Opt)OPT_PRECISION(&precision);
    opts[MODEL_OPTS_N + 5] = (Opt){"--profile", OPT_FLAG, &profile, NULL,
                                   "time every backend op by kind (synchronising after each) and print the table"};
    args_parse("usage: mala bench train [flags]\n\nTimes the full training step (forward, loss, backward, AdamW, EMA)\n"
               "on random data and prints one JSON line: the median step time with the min and max.",
               opts, MODEL_OPTS_N + 6, argc, argv, 1);
    set_threads(threads);
    if (precision && !strcmp(precision, "int8"))
        FATAL("--precision int8: int8 is for sampling only (it has no backward); bench train in fp32 or bf16");
    const Backend *be = backend_select(device, precision);
    if (profile) be = backend_profiled(be);
    NetConfig c;
    model_opts_config(&mo, &c);
    MemPlan plan;
    TrainMemArgs ma = {.batch = batch, .world = 1};
    train_memory_plan(&plan, &c, be, &ma);
    args_check_memory("--batch", batch, plan.total - plan.device - plan.part[MEM_HELD],
                      "the weights, optimiser state and activations of training");
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
    if (profile) backend_profile_reset();
    double *times = xmalloc((size_t)steps * sizeof *times), total = 0;
    for (int s = 0; s < steps; s++) {
        double t0 = now_seconds();
        trainer_step(tr, x, y);
        be->sync();
        times[s] = now_seconds() - t0;
        total += times[s];
    }
    const Spread sp = spread_of(times, steps);
    free(times);
    double dt = sp.median;
    char prof[1024] = "";
    if (profile) profile_report(prof, sizeof prof, "profile_s_per_step", "step", total, steps);
    double flops = 3.0 * net_flops_per_image(&c) * batch / dt / 1e9;  // backward ~ 2x forward
    double ref = be->gemm_gflops();
    MalaErr jerr;
    if (json_printf_line(stdout, &jerr, "{\"bench\":\"train\",\"model\":\"%s\",\"backbone\":\"%s\",\"attn\":\"%s\","
           "\"device\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"batch\":%d,"
           "\"image_size\":%d,\"channels\":%d,\"params\":%zu,\"img_per_s\":%.3f,\"s_per_step\":%.4f,"
           "\"gflop_per_img\":%.2f,\"gflops\":%.1f,\"sgemm_gflops\":%.1f,\"fraction_of_sgemm\":%.3f,"
           "\"steps\":%d,\"s_per_step_min\":%.4f,\"s_per_step_max\":%.4f,%s\"peak_rss_mb\":%.0f}",
           mo.preset, backbone_name(c.backbone), net_mixer_name(&c), be->name, be->precision(),
           num_threads(), batch, c.image_size, c.in_channels, tr->net->n_trainable,
           batch / dt, dt, 3.0 * net_flops_per_image(&c) / 1e9, flops, ref, ref > 0 ? flops / ref : 0.0,
           steps, sp.min, sp.max, prof, peak_rss_bytes() / 1048576.0))
        FATAL("%s", jerr.msg);
    free(x); free(y);
    class_names_free(&cn);
    trainer_free(tr);
    return 0;
}

static int bench_sample(int argc, char **argv) {
    ModelOpts mo;
    model_opts_default(&mo, "DiT-S/2");
    int n = 16, steps = 10, threads = 0, repeats = 3, profile = 0;
    float cfg = 4.0f;
    const char *device = NULL, *sampler = "ddim", *precision = NULL;
    Opt opts[MODEL_OPTS_N + 9];
    model_opts_table(&mo, opts);
    opts[MODEL_OPTS_N + 0] = (Opt){"--n", OPT_INT, &n, "N", "images per run", ARG_MIN(1)};
    opts[MODEL_OPTS_N + 1] = (Opt){"--steps", OPT_INT, &steps, "N", "sampling steps", ARG_MIN(1), ARG_MAX(1000)};
    opts[MODEL_OPTS_N + 2] = (Opt){"--sampler", OPT_STR, &sampler, sampler_kind_list(), "sampler"};
    opts[MODEL_OPTS_N + 3] = (Opt){"--cfg-scale", OPT_FLOAT, &cfg, "W", "guidance scale of the guided run", ARG_MIN(0),
                                   ARG_MAX(100)};
    opts[MODEL_OPTS_N + 4] = (Opt)OPT_THREADS(&threads);
    opts[MODEL_OPTS_N + 5] = (Opt)OPT_DEVICE(&device);
    opts[MODEL_OPTS_N + 6] = (Opt)OPT_PRECISION(&precision);
    opts[MODEL_OPTS_N + 7] = (Opt){"--repeats", OPT_INT, &repeats, "R", "timed runs of each (after one warm-up run)",
                                   ARG_MIN(1)};
    opts[MODEL_OPTS_N + 8] = (Opt){"--profile", OPT_FLAG, &profile, NULL,
                                   "time every backend op by kind (synchronising after each) and print the tables"};
    args_parse("usage: mala bench sample [flags]\n\nTimes sampling with a randomly initialised model of the given\n"
               "shape, without guidance and with --cfg-scale, and prints one JSON line: the median of\n"
               "--repeats runs with the min and max.",
               opts, MODEL_OPTS_N + 9, argc, argv, 1);
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    if (profile) be = backend_profiled(be);
    NetConfig c;
    model_opts_config(&mo, &c);
    if (c.num_classes == 0)
        FATAL("--classes 0: bench sample also times guided sampling, which an unconditional model has not; give "
              "--classes K");
    double gen_dev, gen_bytes = gen_memory_bytes(&c, be, n, &gen_dev);
    args_check_memory("--n", n, gen_bytes - gen_dev,
                      "the model's weights and activations (2 passes per image with guidance)");
    SamplerKind kind;
    if (sampler_kind_parse(sampler, &kind)) FATAL("--sampler %s: expected %s", sampler, sampler_kind_list());
    ClassNames cn;
    class_names_default(&cn, c.num_classes);
    Generator g;
    generator_new(&g, &c, &cn, be, n);
    net_init_weights(g.net, 0);
    MalaErr err;
    size_t img = (size_t)n * generator_image_floats(&g);
    float *x = xmalloc(img * sizeof(float));
    int32_t *y = xmalloc(n * sizeof(int32_t));
    Spread rate[2];
    float scales[2] = {1.0f, cfg};
    GenOpts o = gen_opts_default();
    o.kind = kind;
    o.steps = steps;
    double *rates = xmalloc((size_t)repeats * sizeof *rates);
    char prof[2][1024] = {"", ""};
    for (int r = 0; r < 2; r++) {
        o.cfg_scale = scales[r];
        double total = 0;
        for (int k = -1; k < repeats; k++) {  // k = -1: warm-up
            random_batch(x, y, img, n, c.num_classes, 2);
            if (profile && k == 0) backend_profile_reset();
            double t0 = now_seconds();
            if (generator_run(&g, &o, x, y, n, 2, 0, NULL, NULL, &err) < 0) FATAL("%s", err.msg);
            be->sync();
            double dt = now_seconds() - t0;
            if (k >= 0) rates[k] = n / dt, total += dt;
        }
        rate[r] = spread_of(rates, repeats);
        if (profile)
            profile_report(prof[r], sizeof prof[r], r ? "profile_cfg_s_per_run" : "profile_s_per_run",
                           r ? "guided run" : "run", total, repeats);
    }
    free(rates);
    MalaErr jerr;
    if (json_printf_line(stdout, &jerr, "{\"bench\":\"sample\",\"model\":\"%s\",\"backbone\":\"%s\",\"attn\":\"%s\","
           "\"device\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"sampler\":\"%s\","
           "\"steps\":%d,\"n\":%d,\"image_size\":%d,\"channels\":%d,\"img_per_s\":%.3f,\"img_per_s_cfg\":%.3f,"
           "\"cfg_scale\":%g,\"repeats\":%d,\"img_per_s_min\":%.3f,\"img_per_s_max\":%.3f,\"img_per_s_cfg_min\":%.3f,"
           "\"img_per_s_cfg_max\":%.3f,%s%s\"peak_rss_mb\":%.0f}",
           mo.preset, backbone_name(c.backbone), net_mixer_name(&c), be->name, be->precision(),
           num_threads(), sampler_kind_name(kind), steps, n, c.image_size, c.in_channels, rate[0].median,
           rate[1].median, cfg, repeats, rate[0].min, rate[0].max, rate[1].min, rate[1].max, prof[0], prof[1],
           peak_rss_bytes() / 1048576.0))
        FATAL("%s", jerr.msg);
    free(x); free(y);
    class_names_free(&cn);
    generator_close(&g);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    static const char *const kinds[] = {"train", "sample", "inception", "vae", "gemm"};
    const char *usage = "usage: mala bench train|sample|inception|vae|gemm [flags]   (mala bench train --help)\n";
    if (argc >= 2 && !strcmp(argv[1], "train")) return bench_train(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sample")) return bench_sample(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inception")) return cmd_bench_inception(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "vae")) return cmd_bench_vae(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "gemm")) return cmd_bench_gemm(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { printf("%s", usage); return 0; }
    if (argc >= 2) {
        const char *s = text_suggest(argv[1], kinds, 5);
        fprintf(stderr, "error: mala bench: unknown benchmark '%s'%s%s%s (train, sample, inception, vae or gemm)\n", argv[1],
                s ? "; did you mean " : "", s ? s : "", s ? "?" : "");
        return 2;
    }
    fprintf(stderr, "%s", usage);
    return 2;
}

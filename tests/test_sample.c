// Sampling end to end against PyTorch: tools/ref/ref_sample.py writes a tiny random DiT as a
// PyTorch user would (st_io.save of model.state_dict() with docs/design.md §2's __metadata__), its
// initial noise, and the samples of a complete DDIM run (eta 0, 10 respaced steps, guidance
// w = 4, clip on, labels 0,2,1,2) computed in PyTorch float32 (ADM's ddim_sample + DiT's
// guidance wrapper, within 5e-6 of the same run in float64).
//
//   a. the library: generator_open (ckpt_load_model on the PyTorch-written file) + generator_run
//   b. the CLI: `mala sample` with --init-noise, --save-npy, --save-npz, --out, --out-dir
//   c. seeds: same seed -> identical samples, another seed -> different ones; CLI == library
//   d. errors: the CLI exits non-zero with a message naming the problem; the library returns an
//      error instead of exiting
//
// Every CLI run is the mala binary ($MALA_BIN; testcli.h's run_argv), its stderr captured for the
// messages.
// Samples are compared within 1e-4 max abs (float32 reference; the C sampler keeps float32
// state with float64 per-element arithmetic, the network accumulates in a different order).
// Forked children run with --threads 1 (libgomp does not survive fork once its pool exists;
// the CLI runs of test_seeds come before its library runs) and the results then match the
// library's bit for bit at the same thread count.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/generate.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "cli/commands.h"
#include "pipeline/labels.h"
#include "testutil.h"
#include "testcli.h"
#include "cpu/cpu_threads.h"

#define MODEL "tests/fixtures/sample_model.safetensors"
#define BAD_MODEL "tests/fixtures/sample_bad_shape.safetensors"
#define NOISE "tests/fixtures/sample_noise.npy"
#define REF "tests/fixtures/sample_ddim_out.npy"
#define REF_DPM "tests/fixtures/sample_dpmpp_out.npy"        // tools/ref/ref_dpm.py: 10 steps, w 4
#define REF_DPM_W1 "tests/fixtures/sample_dpmpp_w1_out.npy"  // 8 steps, no guidance
#define N 4
#define S 8
#define PER (S * S)  // one channel
#ifndef TOL
#define TOL 1e-4
#endif

static const int32_t LABELS[N] = {0, 2, 1, 2};
static const char *NAMES[3] = {"circle", "square", "ring"};

// A float32 [4, 1, 8, 8] .npy into a malloc'd buffer.
static float *load_images(const char *path) {
    NpyArray a;
    MalaErr err;
    ck_assert_msg(npy_load(path, &a, &err) == 0, "%s (run /usr/bin/python3 tools/ref/ref_sample.py)", err.msg);
    ck_assert_msg(!strcmp(a.dtype, "<f4") && a.ndim == 4 && a.shape[0] == N && a.shape[1] == 1 && a.shape[2] == S &&
                      a.shape[3] == S,
                  "%s: expected float32 [4,1,8,8], got %s with %d dims", path, a.dtype, a.ndim);
    float *x = malloc(sizeof(float) * N * PER);
    memcpy(x, a.data, sizeof(float) * N * PER);
    npy_free(&a);
    return x;
}

static GenOpts ddim_opts(void) {
    GenOpts o = gen_opts_default();
    o.kind = SAMPLER_DDIM;
    o.steps = 10;
    o.cfg_scale = 4.0f;
    o.eta = 0.0f;
    o.clip = 1;
    return o;
}

static void tmpdir(char *dir) {
    strcpy(dir, "/tmp/mala_sample_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
}

static void rm_tree(const char *dir) {  // one level of subdirectories is all the tests make
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (!stat(p, &st) && S_ISDIR(st.st_mode)) rm_tree(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

// Runs `mala argv...` (argv[0] = "sample", "eval", ...; NULL-terminated), as a user would, with
// its stderr captured into errbuf. Returns the exit status, or 128 + signal.
static int run_cmd(const char **argv, char *errbuf, size_t errlen) { return run_argv(argv, NULL, 0, errbuf, errlen); }

static int run_cli(const char **argv, char *errbuf, size_t errlen) { return run_cmd(argv, errbuf, errlen); }

static void run_cli_ok(const char **argv) {
    char msg[8192];
    int rc = run_cli(argv, msg, sizeof msg);
    ck_assert_msg(rc == 0, "mala sample exited with %d:\n%s", rc, msg);
}

typedef struct {
    int calls, last_index, last_n;
    float x0[N * PER];
} StepLog;

static int log_step(void *ctx, int i, int n, const float *x0) {
    StepLog *l = ctx;
    l->calls++;
    l->last_index = i;
    l->last_n = n;
    memcpy(l->x0, x0, sizeof l->x0);
    return 0;
}

static int cancel_at_3(void *ctx, int i, int n, const float *x0) {
    (void)ctx; (void)n; (void)x0;
    return i == 2;
}

// a. The PyTorch-written model file loads through generator_open (ckpt_load_model) with the
// configuration from its metadata, and a DDIM run matches PyTorch's samples.
START_TEST(test_library_vs_pytorch) {
    MalaErr err;
    Generator g;
    ck_assert_msg(generator_open(&g, MODEL, backend_cpu(), N, &err) == 0, "%s", err.msg);
    const NetConfig *c = &g.net->cfg;
    ck_assert(c->dit.depth == 2 && c->dit.hidden == 32 && c->dit.heads == 2 && c->dit.patch == 2 && c->image_size == S);
    ck_assert(c->in_channels == 1 && c->num_classes == 3 && c->learn_sigma == 1);
    ck_assert(c->dit.attn == ATTN_MALA && c->dit.rope == 1 && c->dit.lepe == 5 && c->dit.gate == 0);
    ck_assert_int_eq(g.classes.n, 3);
    for (int k = 0; k < 3; k++) ck_assert_str_eq(g.classes.names[k], NAMES[k]);

    float *noise = load_images(NOISE), *ref = load_images(REF);
    float x[N * PER];
    memcpy(x, noise, sizeof x);
    GenOpts o = ddim_opts();
    StepLog log = {0};
    ck_assert_msg(generator_run(&g, &o, x, LABELS, N, 0, 0, log_step, &log, &err) == 0, "%s", err.msg);
    double e = tu_max_abs_diff(x, ref, N * PER);
    ck_assert_msg(e < TOL, "DDIM samples differ from PyTorch by %.3g (max abs)", e);
    // one progress call per step; at the last step (abar_prev = 1) the sample is the clipped x0
    ck_assert_int_eq(log.calls, 10);
    ck_assert_int_eq(log.last_index, 9);
    ck_assert_int_eq(log.last_n, 10);
    ck_assert_int_eq(memcmp(log.x0, x, sizeof x), 0);

    // eta 0 is deterministic: the step seed does not matter
    float x2[N * PER];
    memcpy(x2, noise, sizeof x2);
    ck_assert(generator_run(&g, &o, x2, LABELS, N, 12345, 0, NULL, NULL, &err) == 0);
    ck_assert_int_eq(memcmp(x2, x, sizeof x), 0);

    // a smaller batch gives the same images (rows are independent; the GEMM blocking, and so
    // the float rounding, depends on the batch: about 1e-5 apart)
    memcpy(x2, noise + 2 * PER, 2 * PER * sizeof(float));
    ck_assert(generator_run(&g, &o, x2, LABELS + 2, 2, 0, 0, NULL, NULL, &err) == 0);
    e = tu_max_abs_diff(x2, x + 2 * PER, 2 * PER);
    ck_assert_msg(e < TOL, "batch of 2 vs batch of 4: %.3g", e);

    // guidance matters (w = 1 is one unguided pass and gives other images)
    GenOpts o1 = o;
    o1.cfg_scale = 1.0f;
    memcpy(x2, noise, sizeof x2);
    ck_assert(generator_run(&g, &o1, x2, LABELS, N, 0, 0, NULL, NULL, &err) == 0);
    ck_assert(tu_max_abs_diff(x2, ref, N * PER) > 0.1);

    // cancel from the progress callback
    memcpy(x2, noise, sizeof x2);
    ck_assert_int_eq(generator_run(&g, &o, x2, LABELS, N, 0, 0, cancel_at_3, NULL, &err), SAMPLER_CANCELLED);

    // errors come back as messages, not exits
    GenOpts bad = o;
    bad.steps = 0;
    ck_assert_int_ne(generator_run(&g, &bad, x2, LABELS, N, 0, 0, NULL, NULL, &err), 0);
    ck_assert_msg(strstr(err.msg, "steps"), "%s", err.msg);
    bad.steps = 1001;
    ck_assert_int_ne(generator_run(&g, &bad, x2, LABELS, N, 0, 0, NULL, NULL, &err), 0);
    int32_t ybad[N] = {0, 1, 4, 2};
    ck_assert_int_ne(generator_run(&g, &o, x2, ybad, N, 0, 0, NULL, NULL, &err), 0);
    ck_assert_msg(strstr(err.msg, "label 4"), "%s", err.msg);
    // the null class (label K) is allowed: an unconditional sample
    int32_t ynull[N] = {3, 3, 3, 3};
    memcpy(x2, noise, sizeof x2);
    ck_assert_msg(generator_run(&g, &o, x2, ynull, N, 0, 0, NULL, NULL, &err) == 0, "%s", err.msg);

    free(noise);
    free(ref);
    generator_close(&g);
}
END_TEST

// a'. DPM-Solver++(2M) (--sampler dpm++2m) matches tools/ref/ref_dpm.py's float64 PyTorch solver on
// the same model and noise, guided and not; the CLI gives the library's samples.
START_TEST(test_dpmpp_vs_pytorch) {
    char dir[64], npy[128];
    tmpdir(dir);
    snprintf(npy, sizeof npy, "%s/dpm.npy", dir);
    const char *argv[] = {"sample", "--ckpt", MODEL, "--sampler", "DPM++2M", "--steps", "10", "--cfg-scale", "4",
                          "--labels", "0,2,1,2", "--init-noise", NOISE, "--save-npy", npy, "--threads", "1",
                          "--device", "cpu", NULL};
    run_cli_ok(argv);
    float *cli = load_images(npy);

    set_threads(1);
    MalaErr err;
    Generator g;
    ck_assert_msg(generator_open(&g, MODEL, backend_cpu(), N, &err) == 0, "%s", err.msg);
    float *noise = load_images(NOISE);
    const struct { const char *ref; int steps; float w; } runs[] = {{REF_DPM, 10, 4.0f}, {REF_DPM_W1, 8, 1.0f}};
    for (int r = 0; r < 2; r++) {
        float *ref = load_images(runs[r].ref), x[N * PER];
        memcpy(x, noise, sizeof x);
        GenOpts o = ddim_opts();
        o.kind = SAMPLER_DPMPP_2M;
        o.steps = runs[r].steps;
        o.cfg_scale = runs[r].w;
        o.eta = 1.0f;  // ignored: the solver is deterministic
        StepLog log = {0};
        ck_assert_msg(generator_run(&g, &o, x, LABELS, N, 99, 0, log_step, &log, &err) == 0, "%s", err.msg);
        double e = tu_max_abs_diff(x, ref, N * PER);
        printf("  dpm++2m %d steps, w %.0f: max abs %.2e from PyTorch (tol %.0e)\n", runs[r].steps, runs[r].w, e, TOL);
        ck_assert_msg(e < TOL, "dpm++2m %d steps w %g differ from PyTorch by %.3g (max abs)", runs[r].steps,
                      runs[r].w, e);
        ck_assert_int_eq(log.calls, runs[r].steps);
        ck_assert_int_eq(memcmp(log.x0, x, sizeof x), 0);  // the last step lands on its x0
        if (r == 0) ck_assert_int_eq(memcmp(cli, x, sizeof x), 0);
        // the second-order term is live: DDIM (DPM-Solver's first order) gives other samples
        GenOpts od = o;
        od.kind = SAMPLER_DDIM;
        od.eta = 0.0f;
        float xd[N * PER];
        memcpy(xd, noise, sizeof xd);
        ck_assert(generator_run(&g, &od, xd, LABELS, N, 0, 0, NULL, NULL, &err) == 0);
        ck_assert(tu_max_abs_diff(xd, ref, N * PER) > 0.05);
        free(ref);
    }
    free(noise);
    free(cli);
    generator_close(&g);
    rm_tree(dir);
}
END_TEST

// a''. --cfg-channels: tools/ref/ref_cfg_channels.py runs DiT's sample.py (DDPM 10 steps, learned
// variance, clip on, w = 4) on a random 4-channel DiT with DiT's forward_with_cfg verbatim, guiding
// its 3 channels (the 4th eps channel and the variance conditional) and, its alternative, all 4.
// The sampler, given the same per-step noise, matches both; "all" is byte-identical to 4 (and to
// what the sampler did before the flag), and on a 1-channel model 3 is all.
#define CFG4_MODEL "tests/fixtures/cfg4_model.safetensors"
#define CFG4_REF "tests/fixtures/cfg4_ref.npz"
#define CFG4_TOL 1e-4

typedef struct {
    const float *z;
    size_t per_step;
} FixtureNoise;

static void fixture_noise(void *ctx, float *out, size_t count, int step) {
    const FixtureNoise *f = ctx;
    ck_assert(count == f->per_step);
    backend_cpu()->to_device(out, f->z + (size_t)step * f->per_step, count * sizeof(float));
}

static void net_denoise(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n) {
    net_forward(ctx, out, x, t, y, n);
}

static float *npz_floats(const char *key, size_t count) {
    NpyArray a;
    MalaErr err;
    ck_assert_msg(npz_load(CFG4_REF, key, &a, &err) == 0, "%s (run /usr/bin/python3 tools/ref/ref_cfg_channels.py)",
                  err.msg);
    ck_assert(!strcmp(a.dtype, "<f4"));
    float *v = malloc(count * sizeof(float));
    memcpy(v, a.data, count * sizeof(float));
    npy_free(&a);
    return v;
}

// DDPM with the fixture's noise through the sampler; x: in x_T, out the samples.
static void cfg4_run(Generator *g, float *x, const float *z, int channels) {
    const int C = 4;
    SamplerConfig sc = sampler_config_default();
    sc.num_steps = 10;
    sc.cfg_scale = 4.0f;
    sc.cfg_channels = channels;
    sc.clip_denoised = 1;
    sc.num_classes = 3;
    Sampler s;
    MalaErr err;
    ck_assert_msg(sampler_init(&s, backend_cpu(), &g->base, &sc, N, C, S, net_denoise, g->net, &err) == 0, "%s",
                  err.msg);
    FixtureNoise fn = {z, (size_t)N * C * PER};
    sampler_set_noise(&s, fixture_noise, &fn);
    ck_assert_msg(sampler_run(&s, x, LABELS, N, &err) == 0, "%s", err.msg);
    sampler_free(&s);
}

START_TEST(test_cfg_channels_vs_pytorch) {
    set_threads(1);
    MalaErr err;
    Generator g;
    ck_assert_msg(generator_open(&g, CFG4_MODEL, backend_cpu(), N, &err) == 0, "%s", err.msg);
    ck_assert(g.net->cfg.in_channels == 4 && g.net->cfg.learn_sigma);
    const size_t img = (size_t)N * 4 * PER;
    float *xT = npz_floats("x_T", img), *z = npz_floats("z", 10 * img);
    float *dit3 = npz_floats("dit3", img), *all = npz_floats("all", img);
    float *x3 = malloc(img * sizeof(float)), *xa = malloc(img * sizeof(float)), *x4 = malloc(img * sizeof(float));
    memcpy(x3, xT, img * sizeof(float));
    memcpy(xa, xT, img * sizeof(float));
    memcpy(x4, xT, img * sizeof(float));
    cfg4_run(&g, x3, z, 3);
    cfg4_run(&g, xa, z, 0);
    cfg4_run(&g, x4, z, 4);
    double e3 = tu_max_abs_diff(x3, dit3, img), ea = tu_max_abs_diff(xa, all, img);
    printf("  cfg-channels 3: max abs %.2e from DiT's forward_with_cfg; all: %.2e (tol %.0e); 3 vs all %.3f\n", e3,
           ea, CFG4_TOL, tu_max_abs_diff(dit3, all, img));
    ck_assert_msg(e3 < CFG4_TOL, "--cfg-channels 3 differs from DiT's forward_with_cfg by %.3g", e3);
    ck_assert_msg(ea < CFG4_TOL, "--cfg-channels all differs from all-channel guidance by %.3g", ea);
    ck_assert(tu_max_abs_diff(x3, all, img) > 0.05);                 // the 4th channel's guidance matters
    ck_assert_int_eq(memcmp(x4, xa, img * sizeof(float)), 0);       // 4 of 4 channels is all
    free(xT); free(z); free(dit3); free(all); free(x3); free(xa); free(x4);
    generator_close(&g);

    // a 1-channel model: 3 guides its one eps channel, as all does
    ck_assert(generator_open(&g, MODEL, backend_cpu(), N, &err) == 0);
    float *noise = load_images(NOISE), y0[N * PER], y3[N * PER];
    GenOpts o = ddim_opts();
    memcpy(y0, noise, sizeof y0);
    memcpy(y3, noise, sizeof y3);
    ck_assert(generator_run(&g, &o, y0, LABELS, N, 0, 0, NULL, NULL, &err) == 0);
    o.cfg_channels = 3;
    ck_assert(generator_run(&g, &o, y3, LABELS, N, 0, 0, NULL, NULL, &err) == 0);
    ck_assert_int_eq(memcmp(y0, y3, sizeof y0), 0);
    free(noise);
    generator_close(&g);
}
END_TEST

// --cfg-interval (Kynkaenniemi et al. 2024): a step is guided (one call of 2n) exactly when its
// sigma = sqrt(1/abar - 1) lies in (lo, hi], else one conditional pass of n; an interval holding
// every step gives the unlimited run's bytes, one holding none the unguided run's.
typedef struct { Net *net; int calls, sizes[16]; } CallLog;

static void logged_denoise(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n) {
    CallLog *l = ctx;
    if (l->calls < 16) l->sizes[l->calls] = n;
    l->calls++;
    net_forward(l->net, out, x, t, y, n);
}

static void interval_run(Generator *g, float *x, const float *noise, double lo, double hi, float w, CallLog *log) {
    SamplerConfig sc = sampler_config_default();
    sc.kind = SAMPLER_DDIM;
    sc.num_steps = 10;
    sc.cfg_scale = w;
    sc.cfg_lo = lo;
    sc.cfg_hi = hi;
    sc.num_classes = 3;
    Sampler s;
    MalaErr err;
    log->net = g->net;
    log->calls = 0;
    ck_assert(sampler_init(&s, backend_cpu(), &g->base, &sc, N, 1, S, logged_denoise, log, &err) == 0);
    memcpy(x, noise, sizeof(float) * N * PER);
    ck_assert_msg(sampler_run(&s, x, LABELS, N, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(log->calls, 10);
    sampler_free(&s);
}

START_TEST(test_cfg_interval) {
    set_threads(1);
    MalaErr err;
    Generator g;
    ck_assert(generator_open(&g, MODEL, backend_cpu(), N, &err) == 0);
    float *noise = load_images(NOISE), x[N * PER], all[N * PER], none[N * PER];
    CallLog log;
    interval_run(&g, all, noise, 0, 0, 4.0f, &log);         // no interval
    interval_run(&g, x, noise, 0, 1e9, 4.0f, &log);         // every sigma (at most 156 here)
    ck_assert_int_eq(memcmp(x, all, sizeof x), 0);
    interval_run(&g, none, noise, 0, 0, 1.0f, &log);        // unguided
    interval_run(&g, x, noise, 1e8, 1e9, 4.0f, &log);       // no sigma
    ck_assert_int_eq(memcmp(x, none, sizeof x), 0);
    interval_run(&g, x, noise, 0.5, 20.0, 4.0f, &log);
    Diffusion sp;
    ck_assert(diffusion_init_respaced(&sp, &g.base, 10, &err) == 0);
    int guided = 0;
    for (int step = 0; step < 10; step++) {  // DDIM's steps go from index 9 down to 0
        double sigma = sp.sqrt_recipm1_alphas_cumprod[9 - step];
        int inside = sigma > 0.5 && sigma <= 20.0;
        guided += inside;
        ck_assert_msg(log.sizes[step] == (inside ? 2 * N : N), "step %d (sigma %.3f): batch %d", step, sigma,
                      log.sizes[step]);
    }
    ck_assert_msg(guided > 1 && guided < 9, "%d of 10 steps guided: the interval tests nothing", guided);
    ck_assert(memcmp(x, all, sizeof x) && memcmp(x, none, sizeof x));
    diffusion_free(&sp);
    free(noise);
    generator_close(&g);
}
END_TEST

// --label-mode: image i's label depends on (seed, i) only, so any split of the run into batches
// or shards gives the same labels; random ones are near uniform and follow the seed; balanced is i mod K.
START_TEST(test_label_modes) {
    enum { NL = 3000, K = 10 };
    int32_t all[NL], part[NL], again[NL];
    gen_labels(all, LABELS_RANDOM, 7, 0, NL, K);
    for (int first = 0, b = 1; first < NL; first += b, b = b % 17 + 1)  // batches of 1, 2, .. 17, 1, ..
        gen_labels(part + first, LABELS_RANDOM, 7, first, first + b <= NL ? b : NL - first, K);
    ck_assert_int_eq(memcmp(all, part, sizeof all), 0);
    gen_labels(again, LABELS_RANDOM, 8, 0, NL, K);
    ck_assert(memcmp(all, again, sizeof all));
    int count[K] = {0};
    for (int i = 0; i < NL; i++) {
        ck_assert(all[i] >= 0 && all[i] < K);
        count[all[i]]++;
    }
    for (int k = 0; k < K; k++)  // binomial(3000, 0.1): mean 300, sd 16.4; 5 sd either side
        ck_assert_msg(count[k] > 218 && count[k] < 382, "class %d drawn %d times of %d", k, count[k], NL);
    gen_labels(again, LABELS_BALANCED, 7, 5, 12, K);
    for (int i = 0; i < 12; i++) ck_assert_int_eq(again[i], (5 + i) % K);
    LabelMode m;
    ck_assert(label_mode_parse("random", &m) == 0 && m == LABELS_RANDOM && !strcmp(label_mode_name(m), "random"));
    ck_assert(label_mode_parse("uniform", &m) != 0);
}
END_TEST

// b. `mala sample` with every output: .npy equals PyTorch's samples, the .npz is an ADM
// evaluator batch, the grid is torchvision's make_grid size and the directory has one PNG per
// image, named by index and class, holding save_image's pixel values.
START_TEST(test_cli_outputs) {
    char dir[64], npy[128], npz[128], grid[128], pngs[128];
    tmpdir(dir);
    snprintf(npy, sizeof npy, "%s/x.npy", dir);
    snprintf(npz, sizeof npz, "%s/x.npz", dir);
    snprintf(grid, sizeof grid, "%s/grid.png", dir);
    snprintf(pngs, sizeof pngs, "%s/pngs", dir);
    const char *argv[] = {"sample", "--ckpt", MODEL, "--sampler", "ddim", "--steps", "10", "--cfg-scale", "4",
                          "--labels", "0,2,1,2", "--init-noise", NOISE, "--save-npy", npy, "--save-npz", npz,
                          "--out", grid, "--out-dir", pngs, "--threads", "1", "--device", "cpu", NULL};
    run_cli_ok(argv);

    float *x = load_images(npy), *ref = load_images(REF);
    double e = tu_max_abs_diff(x, ref, N * PER);
    ck_assert_msg(e < TOL, "mala sample --save-npy differs from PyTorch by %.3g (max abs)", e);

    // ADM evaluator batch: arr_0 uint8 NHWC = clamp(127.5 x + 128, 0, 255) truncated (DiT's
    // sample_ddp.py), arr_1 the labels
    MalaErr err;
    NpyArray a0, a1;
    ck_assert_msg(npz_load(npz, "arr_0", &a0, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(a0.dtype, "|u1");
    ck_assert_int_eq(a0.ndim, 4);
    ck_assert(a0.shape[0] == N && a0.shape[1] == S && a0.shape[2] == S && a0.shape[3] == 1);
    const uint8_t *u8 = a0.data;
    for (int i = 0; i < N * PER; i++) {
        float v = 127.5f * x[i] + 128.0f;
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        ck_assert_msg(u8[i] == (uint8_t)v, "arr_0[%d] = %d, expected %d", i, u8[i], (uint8_t)v);
    }
    ck_assert_msg(npz_load(npz, "arr_1", &a1, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(a1.ndim, 1);
    ck_assert_int_eq(a1.shape[0], N);
    double *lab;
    ck_assert(npy_to_f64(&a1, &lab, "arr_1", &err) == 0);
    for (int i = 0; i < N; i++) ck_assert_int_eq((int)lab[i], LABELS[i]);
    free(lab);
    npy_free(&a0);
    npy_free(&a1);

    // grid: make_grid(nrow=8, padding=2) of 4 images of 8x8 -> 1 row of 4: 42 x 12
    int w = 0, h = 0;
    ck_assert_msg(image_check(grid, &w, &h, &err) == 0, "%s", err.msg);
    ck_assert_msg(w == 4 * (S + 2) + 2 && h == S + 2 + 2, "grid is %dx%d", w, h);

    // one PNG per image: <index>_<class>.png, save_image pixels (x+1)/2*255 + 0.5, truncated
    int count = 0;
    DIR *d = opendir(pngs);
    ck_assert(d != NULL);
    struct dirent *ent;
    while ((ent = readdir(d)))
        if (strstr(ent->d_name, ".png")) count++;
    closedir(d);
    ck_assert_int_eq(count, N);
    for (int i = 0; i < N; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%06d_%s.png", pngs, i, NAMES[LABELS[i]]);
        uint8_t *pix;
        ck_assert_msg(image_load(p, 1, &pix, &w, &h, &err) == 0, "%s", err.msg);
        ck_assert(w == S && h == S);
        for (int j = 0; j < PER; j++) {
            double v = fmin(fmax(x[i * PER + j], -1.0), 1.0);
            int want = (int)fmin(fmax((v + 1) / 2 * 255 + 0.5, 0), 255);
            ck_assert_msg(abs(pix[j] - want) <= 1, "%s pixel %d: %d, expected %d", p, j, pix[j], want);
        }
        free(pix);
    }
    free(x);
    free(ref);
    rm_tree(dir);
}
END_TEST

// c. Seeds: image i's initial noise depends only on (seed, i); the same seed twice gives the
// same samples (DDPM: per-step noise too), another seed other samples; the CLI's --seed run is
// the library run with that seed.
START_TEST(test_seeds) {
    // the CLI runs first: forked before this process has started OpenMP threads
    char dir[64], p1[128], p2[128], p3[128];
    tmpdir(dir);
    snprintf(p1, sizeof p1, "%s/a.npy", dir);
    snprintf(p2, sizeof p2, "%s/b.npy", dir);
    snprintf(p3, sizeof p3, "%s/c.npy", dir);
    const char *argv[] = {"sample", "--ckpt", MODEL, "--sampler", "ddpm", "--steps", "5", "--labels",
                          "circle,RING,1,2", "--seed", "7", "--save-npy", p1, "--threads", "1", "--device", "cpu", NULL};
    run_cli_ok(argv);
    argv[12] = p2;
    run_cli_ok(argv);
    argv[10] = "8";
    argv[12] = p3;
    run_cli_ok(argv);

    set_threads(1);  // as the CLI runs: float sums depend on the thread count
    MalaErr err;
    Generator g;
    ck_assert_msg(generator_open(&g, MODEL, backend_cpu(), N, &err) == 0, "%s", err.msg);
    float a[N * PER], b[N * PER], part[2 * PER];
    generator_noise(&g, a, 7, 0, N);
    generator_noise(&g, b, 7, 0, N);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    generator_noise(&g, part, 7, 2, 2);
    ck_assert_int_eq(memcmp(part, a + 2 * PER, sizeof part), 0);
    generator_noise(&g, b, 8, 0, N);
    ck_assert(tu_max_abs_diff(a, b, N * PER) > 0.5);
    double mean = 0, var = 0;
    for (int i = 0; i < N * PER; i++) mean += a[i] / (N * PER);
    for (int i = 0; i < N * PER; i++) var += (a[i] - mean) * (a[i] - mean) / (N * PER);
    ck_assert_msg(fabs(mean) < 0.25 && var > 0.6 && var < 1.5, "noise mean %g var %g", mean, var);

    GenOpts o = gen_opts_default();  // DDPM, guidance 4
    o.steps = 5;
    float s1[N * PER], s2[N * PER], s3[N * PER];
    generator_noise(&g, s1, 7, 0, N);
    memcpy(s2, s1, sizeof s1);
    memcpy(s3, s1, sizeof s1);
    ck_assert(generator_run(&g, &o, s1, LABELS, N, 7, 0, NULL, NULL, &err) == 0);
    ck_assert(generator_run(&g, &o, s2, LABELS, N, 7, 0, NULL, NULL, &err) == 0);
    ck_assert_int_eq(memcmp(s1, s2, sizeof s1), 0);
    ck_assert(generator_run(&g, &o, s3, LABELS, N, 8, 0, NULL, NULL, &err) == 0);  // other step noise
    ck_assert(tu_max_abs_diff(s1, s3, N * PER) > 1e-3);
    // DDPM in two batches of 2 (images 0-1, then 2-3) gives the images of one batch of 4
    generator_noise(&g, s3, 7, 0, N);
    ck_assert(generator_run(&g, &o, s3, LABELS, 2, 7, 0, NULL, NULL, &err) == 0);
    ck_assert(generator_run(&g, &o, s3 + 2 * PER, LABELS + 2, 2, 7, 2, NULL, NULL, &err) == 0);
    ck_assert_msg(tu_max_abs_diff(s1, s3, N * PER) < 1e-4, "DDPM depends on batching: %.3g", tu_max_abs_diff(s1, s3, N * PER));
    generator_close(&g);

    float *c1 = load_images(p1), *c2 = load_images(p2), *c3 = load_images(p3);
    ck_assert_int_eq(memcmp(c1, c2, sizeof(float) * N * PER), 0);
    ck_assert(tu_max_abs_diff(c1, c3, N * PER) > 1e-3);
    // names resolve case-insensitively, numbers as indices: the labels are 0,2,1,2 as above
    double e = tu_max_abs_diff(c1, s1, N * PER);
    ck_assert_msg(e == 0, "mala sample --seed 7 vs generator_noise + generator_run: %.3g", e);
    free(c1);
    free(c2);
    free(c3);
    rm_tree(dir);
}
END_TEST

// d. Bad input: the CLI exits non-zero with a message that names the problem; the library
// refuses the same file with an error message and no exit.
START_TEST(test_errors) {
    char dir[64], out[128], wrong_shape[128], wrong_n[128], wrong_dtype[128], msg[8192];
    tmpdir(dir);
    snprintf(out, sizeof out, "%s/x.npy", dir);
    snprintf(wrong_shape, sizeof wrong_shape, "%s/noise_shape.npy", dir);
    snprintf(wrong_n, sizeof wrong_n, "%s/noise_n.npy", dir);
    snprintf(wrong_dtype, sizeof wrong_dtype, "%s/noise_f8.npy", dir);
    MalaErr err;
    float z[N * PER] = {0};
    double z8[N * PER] = {0};
    NpyArray a;
    npy_wrap(&a, "<f4", z, 4, (int64_t[]){N, 1, S, S / 2});
    ck_assert(npy_save(wrong_shape, &a, &err) == 0);
    npy_wrap(&a, "<f4", z, 4, (int64_t[]){N - 1, 1, S, S});
    ck_assert(npy_save(wrong_n, &a, &err) == 0);
    npy_wrap(&a, "<f8", z8, 4, (int64_t[]){N, 1, S, S});
    ck_assert(npy_save(wrong_dtype, &a, &err) == 0);

    // the valid command line, then one thing broken at a time
    const char *ok[] = {"sample", "--ckpt", MODEL, "--sampler", "ddim", "--steps", "2", "--labels", "0,2,1,2",
                        "--save-npy", out, "--threads", "1", "--device", "cpu", "--force", NULL};
    ck_assert_int_eq(run_cli(ok, msg, sizeof msg), 0);

    struct { int idx; const char *value, *expect; } cases[] = {
        {8, "0,Triangle,1,2", "Triangle"},       // unknown class name
        {8, "0,3,1,2", "'3'"},                   // class number out of range (K = 3)
        {2, BAD_MODEL, "blocks.1.attn.lepe.weight"},  // wrong-shape tensor in the model file
        {2, "tests/fixtures/no_such_model.safetensors", "no_such_model"},
        {2, NOISE, NULL},                        // not a safetensors file
        {4, "euler", "euler"},                   // unknown sampler
        {6, "0", "steps"},                       // steps out of range
        {6, "1001", "steps"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[sizeof ok / sizeof ok[0]];
        memcpy(argv, ok, sizeof ok);
        argv[cases[i].idx] = cases[i].value;
        int rc = run_cli(argv, msg, sizeof msg);
        ck_assert_msg(rc != 0 && rc < 128, "case %zu (%s): exit status %d\n%s", i, cases[i].value, rc, msg);
        if (cases[i].expect)
            ck_assert_msg(strstr(msg, cases[i].expect), "case %zu: message lacks '%s': %s", i, cases[i].expect, msg);
    }
    // an empty --labels list
    {
        const char *argv[sizeof ok / sizeof ok[0]];
        memcpy(argv, ok, sizeof ok);
        argv[8] = ",";
        ck_assert_int_ne(run_cli(argv, msg, sizeof msg), 0);
    }

    // --class with an unknown name lists the classes
    {
        const char *argv[] = {"sample", "--ckpt", MODEL, "--class", "triangle", "--n", "2", "--save-npy", out,
                              "--threads", "1", "--device", "cpu", "--force", NULL};
        ck_assert_int_ne(run_cli(argv, msg, sizeof msg), 0);
        ck_assert_msg(strstr(msg, "circle") && strstr(msg, "ring"), "%s", msg);
    }

    // --init-noise with the wrong shape, the wrong count and the wrong dtype
    const char *noises[] = {wrong_shape, wrong_n, wrong_dtype};
    for (int i = 0; i < 3; i++) {
        const char *argv[] = {"sample", "--ckpt", MODEL, "--sampler", "ddim", "--steps", "2", "--labels", "0,2,1,2",
                              "--init-noise", noises[i], "--save-npy", out, "--threads", "1", "--device", "cpu",
                              "--force", NULL};
        int rc = run_cli(argv, msg, sizeof msg);
        ck_assert_msg(rc != 0 && rc < 128, "--init-noise %s: exit status %d", noises[i], rc);
        ck_assert_msg(strstr(msg, "[4,1,8,8]"), "--init-noise %s: %s", noises[i], msg);
    }

    // the library returns the loader's message (the GUI must not exit)
    Generator g;
    ck_assert_int_ne(generator_open(&g, BAD_MODEL, backend_cpu(), 2, &err), 0);
    ck_assert_msg(strstr(err.msg, "blocks.1.attn.lepe.weight") && strstr(err.msg, BAD_MODEL), "%s", err.msg);
    generator_close(&g);
    rm_tree(dir);
}
END_TEST

// e. `mala eval` samples from a checkpoint on the fly (--ckpt) and reads Fashion-MNIST; the
// Inception weights are the random smoke-test ones, so only the plumbing is checked here
// (the network and the metrics are tested in test_inception / test_fid).
START_TEST(test_eval_from_checkpoint) {
    char dir[] = "/tmp/mala_evalck_XXXXXX", stats[128], msg[8192];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(stats, sizeof stats, "%s/fm.npz", dir);
    const char *st[] = {"eval", "stats", "--data", "fashion-mnist-test", "--limit", "6", "--out", stats,
                        "--inception", "random", "--batch", "3", "--threads", "1", NULL};
    int rc = run_cmd(st, msg, sizeof msg);
    ck_assert_msg(rc == 0, "eval stats: %d\n%s", rc, msg);
    const char *fid[] = {"eval", "fid", "--ckpt", MODEL, "--num", "4", "--sample-batch", "2", "--sampler", "ddim",
                         "--steps", "2", "--ref", stats, "--inception", "random", "--splits", "2", "--batch", "2",
                         "--threads", "1", "--device", "cpu", NULL};
    rc = run_cmd(fid, msg, sizeof msg);
    ck_assert_msg(rc == 0 && strstr(msg, "FID ") && strstr(msg, "4 samples"), "eval fid --ckpt: %d\n%s", rc, msg);
    const char *both[] = {"eval", "is", "--ckpt", MODEL, "--samples", stats, "--inception", "random", NULL};
    ck_assert_int_eq(run_cmd(both, msg, sizeof msg), 2);
    rm_tree(dir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("sample");
    TCase *tc = tcase_create("sample");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_library_vs_pytorch);
    tcase_add_test(tc, test_dpmpp_vs_pytorch);
    tcase_add_test(tc, test_cfg_channels_vs_pytorch);
    tcase_add_test(tc, test_label_modes);
    tcase_add_test(tc, test_cfg_interval);
    tcase_add_test(tc, test_cli_outputs);
    tcase_add_test(tc, test_seeds);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_eval_from_checkpoint);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

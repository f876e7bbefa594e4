// The mala CLI with --device cuda on the host emulator of tests/cuda_emu ($MALA_EMU_BIN, built by
// emu.mk from the same objects as the emulated parity suite) against the CPU build ($MALA_BIN):
//
//   a. DDIM (eta 0) at --precision fp32 gives the CPU's images (both start from the host's
//      Philox noise); the default TF32 visibly changes them (the precision reaches cuBLAS)
//   b. DDPM (per-step noise from the device generator): finite, in [-1, 1], independent of
//      --batch byte for byte, and the step noise follows --seed
//   c. train: 4 steps straight == 2 + --resume + 2, byte for byte
//   d. a checkpoint of either device resumes on the other: right step count, and weights within
//      two Adam steps of the checkpoint resumed
//   e. --precision fp64 is refused in one line
//   g. image-to-image, inpainting and the class blend on CUDA
//   h. --precision bf16 reaches cuBLAS (images near the CPU's bf16 ones), and a bf16 run resumes in
//      bf16 (the checkpoint's run.precision) byte for byte
//
// Shapes are the smallest that test the point: the emulated cuBLAS is double-precision loops.
// About 26 s at -O3 on 2 cores, 100 s under `make sanitize`.
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../testutil.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "formats/safetensors.h"

#define MODEL "assets/mala-dit-fmnist.safetensors"  // DiT-T/4, 32x32x1, 10 classes
#define PER (32 * 32)
// The tiny run: DiT-T/8 (16 tokens), batch 2, 8 images; a checkpoint every 2 steps, all kept.
#define TRAIN "train --model DiT-T/8 --batch 2 --limit 8 --lr 1e-3 --ckpt-every 2 --keep 5 --log-every 1 --sample-every 0"
#define LR 1e-3

static const char *emu_bin(void) { return getenv("MALA_EMU_BIN") ? getenv("MALA_EMU_BIN") : "build/cuda_emu/mala"; }
static const char *cpu_bin(void) { return getenv("MALA_BIN") ? getenv("MALA_BIN") : "./mala"; }

static char g_err[16384];  // stderr of the last run()

// Runs `bin ARGS` (a printf format) through the shell with stderr in g_err; returns the exit
// status, or 128 + the signal.
static int run(const char *bin, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(const char *bin, const char *fmt, ...) {
    char args[2048], cmd[3072], errpath[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(errpath, sizeof errpath, "%s/stderr", tu_tmp);
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>%s", bin, args, errpath);
    int st = system(cmd);
    FILE *f = fopen(errpath, "rb");
    size_t n = f ? fread(g_err, 1, sizeof g_err - 1, f) : 0;
    if (f) fclose(f);
    g_err[n] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *err_tail(void) {  // the end of g_err, for assertion messages
    size_t n = strlen(g_err);
    return n > 1500 ? g_err + n - 1500 : g_err;
}

#define RUN_OK(bin, ...) do { int rc_ = run(bin, __VA_ARGS__); \
    ck_assert_msg(rc_ == 0, "%s exited with %d:\n%s", bin, rc_, err_tail()); } while (0)

// A float32 [n, c, s, s] .npy written by mala sample.
static float *load_images_shaped(const char *name, int n, int c, int sz) {
    char path[300];
    snprintf(path, sizeof path, "%s/%s", tu_tmp, name);
    NpyArray a;
    MalaErr err;
    ck_assert_msg(npy_load(path, &a, &err) == 0, "%s", err.msg);
    ck_assert_msg(!strcmp(a.dtype, "<f4") && a.ndim == 4 && a.shape[0] == n && a.shape[1] == c && a.shape[2] == sz &&
                      a.shape[3] == sz, "%s: expected float32 [%d,%d,%d,%d]", path, n, c, sz, sz);
    float *x = malloc(a.nbytes);
    memcpy(x, a.data, a.nbytes);
    npy_free(&a);
    return x;
}

static float *load_images(const char *name, int n) { return load_images_shaped(name, n, 1, 32); }

// a. The initial noise is the host's Philox on both devices and DDIM at eta 0 adds none, so the
// images differ only by float rounding: OpenBLAS's float-accumulated GEMMs against the emulated
// cuBLAS's double-accumulated ones, other reduction orders in the kernels, amplified by guidance
// (w = 4 scales the eps difference by 2w + 1) over 5 steps. Measured 2.3e-5 max abs on the bundled
// model of 36,000 steps (1.9e-5 on the 9,675-step one before it); tolerance 1e-4.
START_TEST(test_ddim_matches_cpu) {
    tu_make_tmpdir("cli_emu");
    const char *same = "sample --ckpt " MODEL " --labels 0,3 --sampler ddim --steps 5 --cfg-scale 4 --seed 3";
    RUN_OK(emu_bin(), "%s --device cuda --precision fp32 --save-npy %s/cuda.npy", same, tu_tmp);
    RUN_OK(cpu_bin(), "%s --device cpu --precision fp32 --save-npy %s/cpu.npy", same, tu_tmp);
    RUN_OK(emu_bin(), "%s --device cuda --save-npy %s/tf32.npy", same, tu_tmp);
    float *cu = load_images("cuda.npy", 2), *cpu = load_images("cpu.npy", 2), *tf = load_images("tf32.npy", 2);
    double e = tu_max_abs_diff(cu, cpu, 2 * PER), etf = tu_max_abs_diff(tf, cpu, 2 * PER);
    printf("a. DDIM-5, w 4: CUDA fp32 vs CPU max |diff| %.3g (tolerance 1e-4); CUDA tf32 vs CPU %.3g\n", e, etf);
    ck_assert_msg(e <= 1e-4, "DDIM on CUDA (fp32) differs from the CPU by %.3g (max abs)", e);
    // TF32 rounds the GEMM inputs to 10 mantissa bits (2^-11 relative): measured 0.069 on the bundled
    // model (guidance 4 multiplies the difference by 2w + 1 = 9, over 5 steps)
    ck_assert_msg(etf > 1e-4 && etf < 0.1, "DDIM on CUDA (tf32) vs the CPU: %.3g, expected within (1e-4, 0.1)", etf);
    free(cu); free(cpu); free(tf);
    tu_rm_tmpdir();
}
END_TEST

// b. DDPM's per-step noise of image i comes from the device generator as a function of (seed, i,
// step), so the batch size cannot change a byte; with --init-noise fixing x_T, another seed still
// gives other images (the step noise follows the seed).
START_TEST(test_ddpm_device_noise) {
    tu_make_tmpdir("cli_emu");
    const char *ddpm = "sample --ckpt " MODEL " --labels 0,3,7 --sampler ddpm --steps 4 --device cuda";
    RUN_OK(emu_bin(), "%s --seed 5 --batch 3 --save-npy %s/b3.npy", ddpm, tu_tmp);
    RUN_OK(emu_bin(), "%s --seed 5 --batch 1 --save-npy %s/b1.npy", ddpm, tu_tmp);
    float noise[3 * PER];
    tu_fill(noise, 3 * PER, -1.7f, 1.7f, 11);  // any x_T will do (unit variance)
    NpyArray a;
    MalaErr err;
    char path[300];
    snprintf(path, sizeof path, "%s/xT.npy", tu_tmp);
    npy_wrap(&a, "<f4", noise, 4, (int64_t[]){3, 1, 32, 32});
    ck_assert_msg(npy_save(path, &a, &err) == 0, "%s", err.msg);
    RUN_OK(emu_bin(), "%s --seed 5 --batch 3 --init-noise %s --save-npy %s/n5.npy", ddpm, path, tu_tmp);
    RUN_OK(emu_bin(), "%s --seed 6 --batch 3 --init-noise %s --save-npy %s/n6.npy", ddpm, path, tu_tmp);
    float *b3 = load_images("b3.npy", 3), *b1 = load_images("b1.npy", 3);
    float *n5 = load_images("n5.npy", 3), *n6 = load_images("n6.npy", 3);
    float lo = INFINITY, hi = -INFINITY;
    int bad = 0;
    for (int i = 0; i < 3 * PER; i++) {
        if (!isfinite(b3[i])) bad++;
        lo = fminf(lo, b3[i]);
        hi = fmaxf(hi, b3[i]);
    }
    double eb = tu_max_abs_diff(b1, b3, 3 * PER), es = tu_max_abs_diff(n5, n6, 3 * PER);
    printf("b. DDPM-4 on CUDA: range [%g, %g], %d non-finite; --batch 1 vs 3 max |diff| %g; "
           "same x_T, --seed 5 vs 6: %.3g\n", lo, hi, bad, eb, es);
    ck_assert_msg(bad == 0 && lo >= -1 && hi <= 1, "DDPM samples: %d non-finite, range [%g, %g]", bad, lo, hi);
    ck_assert_msg(!memcmp(b1, b3, sizeof(float) * 3 * PER), "DDPM --batch 1 vs --batch 3 differ by %.3g", eb);
    ck_assert_msg(es > 0.1, "the same x_T with --seed 5 and 6: max |diff| %.3g; the step noise ignores the seed", es);
    free(b3); free(b1); free(n5); free(n6);
    tu_rm_tmpdir();
}
END_TEST

static void ckpt(char *buf, size_t n, const char *run_dir, int step) {
    snprintf(buf, n, "%s/%s/checkpoints/%07d.safetensors", tu_tmp, run_dir, step);
}

// c. A step's draws are a function of (seed, batch index) on the device generator and the
// checkpoint holds the whole state, so stopping and resuming changes no byte.
START_TEST(test_train_resume_bit_exact) {
    tu_make_tmpdir("cli_emu");
    RUN_OK(emu_bin(), TRAIN " --device cuda --iters 4 --out %s/a", tu_tmp);
    RUN_OK(emu_bin(), TRAIN " --device cuda --iters 2 --out %s/b", tu_tmp);
    RUN_OK(emu_bin(), TRAIN " --device cuda --iters 4 --out %s/b --resume", tu_tmp);
    ck_assert_msg(strstr(g_err, "at step 2"), "--resume did not start at step 2:\n%s", err_tail());
    char pa[300], pb[300];
    ckpt(pa, sizeof pa, "a", 4);
    ckpt(pb, sizeof pb, "b", 4);
    size_t na, nb;
    char *a = tu_read_file(pa, &na), *b = tu_read_file(pb, &nb);
    size_t first = 0;
    while (first < na && first < nb && a[first] == b[first]) first++;
    printf("c. train on CUDA, 4 steps vs 2 + --resume + 2: %zu vs %zu bytes, %s\n", na, nb,
           na == nb && first == na ? "identical" : "DIFFERENT");
    ck_assert_msg(na == nb && first == na, "%s (%zu bytes) and %s (%zu bytes) differ from byte %zu", pa, na, pb, nb, first);
    free(a); free(b);
    tu_rm_tmpdir();
}
END_TEST

// h. bf16 on CUDA. DDIM-5 without guidance, measured on the bundled model:
// CUDA bf16 vs CPU fp32 0.052 max abs (CPU bf16 vs fp32 0.053), CUDA bf16 vs CPU bf16 0.017 (the
// same roundings of the same operands; the sums' order differs and flips a few roundings).
START_TEST(test_bf16_on_cuda) {
    tu_make_tmpdir("cli_emu");
    const char *same = "sample --ckpt " MODEL " --labels 0,3 --sampler ddim --steps 5 --cfg-scale 1 --seed 3";
    RUN_OK(emu_bin(), "%s --device cuda --precision bf16 --save-npy %s/cuda.npy", same, tu_tmp);
    RUN_OK(cpu_bin(), "%s --device cpu --precision fp32 --save-npy %s/cpu.npy", same, tu_tmp);
    float *cu = load_images("cuda.npy", 2), *cpu = load_images("cpu.npy", 2);
    double e = tu_max_abs_diff(cu, cpu, 2 * PER);
    printf("h. DDIM-5: CUDA bf16 vs CPU fp32 max |diff| %.3g (expected within (1e-3, 0.2))\n", e);
    ck_assert_msg(e > 1e-3 && e < 0.2, "CUDA bf16 vs CPU fp32: %.3g", e);
    if (run(cpu_bin(), "%s --device cpu --precision bf16 --save-npy %s/cpu_bf16.npy", same, tu_tmp) == 0) {
        float *cb = load_images("cpu_bf16.npy", 2);
        double eb = tu_max_abs_diff(cu, cb, 2 * PER);
        printf("h. DDIM-5: CUDA bf16 vs CPU bf16 max |diff| %.3g (tolerance 0.05)\n", eb);
        ck_assert_msg(eb < 0.05, "CUDA bf16 vs CPU bf16: %.3g", eb);
        free(cb);
    } else {
        printf("h. the CPU build has no bf16 (no oneDNN): CUDA bf16 checked against fp32 only\n");
    }
    free(cu); free(cpu);
    RUN_OK(emu_bin(), TRAIN " --device cuda --precision bf16 --iters 4 --out %s/a", tu_tmp);
    RUN_OK(emu_bin(), TRAIN " --device cuda --precision bf16 --iters 2 --out %s/b", tu_tmp);
    RUN_OK(emu_bin(), TRAIN " --device cuda --iters 4 --out %s/b --resume", tu_tmp);
    ck_assert_msg(strstr(g_err, "goes on in bf16"), "--resume did not follow the run's bf16:\n%s", err_tail());
    char pa[300], pb[300];
    ckpt(pa, sizeof pa, "a", 4);
    ckpt(pb, sizeof pb, "b", 4);
    size_t na, nb;
    char *a = tu_read_file(pa, &na), *b = tu_read_file(pb, &nb);
    const int same_bytes = na == nb && !memcmp(a, b, na);
    printf("h. bf16 train on CUDA, 4 steps vs 2 + --resume + 2: %s\n", same_bytes ? "identical" : "DIFFERENT");
    ck_assert_msg(same_bytes, "%s and %s differ", pa, pb);
    free(a); free(b);
    tu_rm_tmpdir();
}
END_TEST

// max |w_to - w_from| over the online weights (not ema.*, opt.*) of two checkpoints.
static double weight_step(const char *from, const char *to) {
    StFile f, g;
    MalaErr err;
    ck_assert_msg(st_open(&f, from, &err) == 0, "%s", err.msg);
    ck_assert_msg(st_open(&g, to, &err) == 0, "%s", err.msg);
    double m = 0;
    int tensors = 0;
    for (int i = 0; i < f.n; i++) {
        const StTensor *t = &f.tensors[i], *u = st_find(&g, t->name);
        if (!strncmp(t->name, "ema.", 4) || !strncmp(t->name, "opt.", 4)) continue;
        ck_assert_msg(u && st_numel(u) == st_numel(t), "%s: %s missing or of another size", to, t->name);
        size_t n = (size_t)st_numel(t);
        float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        ck_assert_msg(!st_read_f32(&f, t, x, &err) && !st_read_f32(&g, u, y, &err), "%s", err.msg);
        m = fmax(m, tu_max_abs_diff(x, y, n));
        for (size_t k = 0; k < n; k++) ck_assert_msg(isfinite(y[k]), "%s: %s[%zu] = %g", to, u->name, k, y[k]);
        free(x); free(y);
        tensors++;
    }
    ck_assert_msg(tensors > 10, "%s: only %d weight tensors", from, tensors);
    st_close(&f);
    st_close(&g);
    return m;
}

// Two steps on `first`, then --resume to step 4 on `second`, in one run directory.
static void cross_resume(const char *first, const char *second) {
    const char *b1 = strcmp(first, "cuda") ? cpu_bin() : emu_bin(), *b2 = strcmp(second, "cuda") ? cpu_bin() : emu_bin();
    RUN_OK(b1, TRAIN " --device %s --iters 2 --out %s/%s", first, tu_tmp, first);
    RUN_OK(b2, TRAIN " --device %s --iters 4 --out %s/%s --resume", second, tu_tmp, first);
    ck_assert_msg(strstr(g_err, "at step 2") && strstr(g_err, "done: step 4"),
                  "%s checkpoint resumed on %s:\n%s", first, second, err_tail());
    char p2[300], p4[300];
    ckpt(p2, sizeof p2, first, 2);
    ckpt(p4, sizeof p4, first, 4);
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, p4, &err) == 0, "%s", err.msg);
    const char *step = st_meta(&f, "step"), *batches = st_meta(&f, "batches");
    ck_assert_msg(step && batches && !strcmp(step, "4") && !strcmp(batches, "4"), "%s: step %s, batches %s", p4,
                  step ? step : "?", batches ? batches : "?");
    st_close(&f);
    // Adam moves a weight by at most ~1.01 lr at steps 3 and 4 (|m^| / sqrt(v^) <= 1.003, 1.007 by
    // Cauchy-Schwarz with betas 0.9, 0.999); weights loaded wrong or re-initialised move further.
    double dw = weight_step(p2, p4);
    printf("d. %s checkpoint (step 2) resumed on %s to step 4: max |w4 - w2| %.3g = %.3f lr (bound 2.05 lr)\n",
           first, second, dw, dw / LR);
    ck_assert_msg(dw > 0 && dw <= 2.05 * LR, "%s -> %s: steps 3-4 moved the weights by %.3g (bound %.3g)", first,
                  second, dw, 2.05 * LR);
}

// d. The checkpoint format is the same from either device (the draws are not: the resumed run
// continues with the other device's generator, so only the step count and the size of the steps
// are checked).
START_TEST(test_train_cross_device) {
    tu_make_tmpdir("cli_emu");
    cross_resume("cuda", "cpu");
    cross_resume("cpu", "cuda");
    tu_rm_tmpdir();
}
END_TEST

// The model tensors of a PyTorch-written fixture (without its in.*, out, grad.* reference tensors),
// with its metadata, as a model file at dst.
static void fixture_model(const char *src, const char *dst) {
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, src, &err) == 0, "%s", err.msg);
    StWriter *w = st_writer_new();
    for (int i = 0; i < f.nmeta; i++) st_writer_meta(w, f.meta_keys[i], f.meta_vals[i]);
    for (int i = 0; i < f.n; i++) {
        const StTensor *t = &f.tensors[i];
        if (!strncmp(t->name, "in.", 3) || !strcmp(t->name, "out") || !strncmp(t->name, "grad.", 5)) continue;
        float *x = malloc(sizeof(float) * (size_t)st_numel(t));
        ck_assert_msg(st_read_f32(&f, t, x, &err) == 0, "%s", err.msg);
        st_writer_add_copy(w, t->name, ST_F32, t->shape, t->ndim, x);
        free(x);
    }
    ck_assert_msg(st_writer_save(w, dst, &err) == 0, "%s", err.msg);
    st_writer_free(w);
    st_close(&f);
}

// f. DiG and DiC through the whole CLI on the emulated CUDA backend: train 2 steps, resume to 4
// on the CPU (same file format); DDIM from a PyTorch-written fixture (random non-zero weights,
// 12x12x4) on CUDA and on the CPU gives the same images to float rounding; both benches run.
// Without guidance: a random network's large eps is amplified by 1/sqrt(alpha-bar) (about 150 at
// the first step) and guidance multiplies the difference by 2w + 1 (DiC at w 2: 2.2e-4; w 1: 1.8e-5);
// test a. checks guidance on the bundled trained model.
static const char *BACKBONE_RUNS[][2] = {{"DiG-T/8", "tests/fixtures/dig_t4.safetensors"},
                                         {"DiC-T", "tests/fixtures/dic_t2.safetensors"}};
#define BB_TRAIN "train --model %s --batch 2 --limit 8 --lr 1e-3 --ckpt-every 2 --keep 5 --log-every 1 --sample-every 0"
START_TEST(test_backbones_on_cuda) {
    const char *preset = BACKBONE_RUNS[_i][0], *fixture = BACKBONE_RUNS[_i][1];
    tu_make_tmpdir("cli_emu");
    RUN_OK(emu_bin(), BB_TRAIN " --device cuda --iters 2 --out %s/bb", preset, tu_tmp);
    RUN_OK(cpu_bin(), BB_TRAIN " --device cpu --iters 4 --out %s/bb --resume", preset, tu_tmp);
    ck_assert_msg(strstr(g_err, "at step 2") && strstr(g_err, "done: step 4"), "%s resume:\n%s", preset, err_tail());
    char model[300];
    snprintf(model, sizeof model, "%s/fixture.safetensors", tu_tmp);
    fixture_model(fixture, model);
    const char *same = "--labels 1,4 --sampler ddim --steps 3 --cfg-scale 1 --seed 5 --precision fp32";
    RUN_OK(emu_bin(), "sample --ckpt %s %s --device cuda --save-npy %s/dcu.npy", model, same, tu_tmp);
    RUN_OK(cpu_bin(), "sample --ckpt %s %s --device cpu --save-npy %s/dcpu.npy", model, same, tu_tmp);
    float *cu = load_images_shaped("dcu.npy", 2, 4, 12), *cpu = load_images_shaped("dcpu.npy", 2, 4, 12);
    double e = tu_max_abs_diff(cu, cpu, 2 * 4 * 12 * 12), m = tu_max_abs_diff(cu, cu + 4 * 12 * 12, 4 * 12 * 12);
    printf("f. %s: CUDA train 2 + CPU resume 2; DDIM-3 (fixture model): CUDA fp32 vs CPU max |diff| %.3g "
           "(tolerance 1e-4; the two images differ by %.3g)\n", preset, e, m);
    ck_assert_msg(m > 1e-2, "the two %s samples are nearly equal (%.3g): the model does nothing", preset, m);
    ck_assert_msg(e <= 1e-4, "%s DDIM on CUDA differs from the CPU by %.3g", preset, e);
    free(cu); free(cpu);
    RUN_OK(emu_bin(), "bench train --model %s --batch 2 --steps 1 --device cuda", preset);
    RUN_OK(emu_bin(), "bench sample --model %s --n 2 --steps 2 --device cuda", preset);
    tu_rm_tmpdir();
}
END_TEST

// e. No fp64 on either command: one line on stderr, exit status 1, nothing written.
START_TEST(test_fp64_refused) {
    tu_make_tmpdir("cli_emu");
    const char *cmds[] = {"sample --ckpt " MODEL " --save-npy %s/x.npy", "train --out %s/run"};
    for (int i = 0; i < 2; i++) {
        char args[400];
        snprintf(args, sizeof args, cmds[i], tu_tmp);
        int rc = run(emu_bin(), "%s --device cuda --precision fp64", args);
        const char *nl = strchr(g_err, '\n');
        printf("e. %.6s --device cuda --precision fp64: exit %d, %s", args, rc, g_err);
        ck_assert_msg(rc == 1, "%s --precision fp64: exit status %d\n%s", args, rc, g_err);
        ck_assert_msg(!strncmp(g_err, "error: ", 7) && strstr(g_err, "fp64") && nl && !nl[1],
                      "%s --precision fp64: expected one line 'error: ... fp64 ...', got:\n%s", args, g_err);
    }
    struct stat st;
    char p[300];
    snprintf(p, sizeof p, "%s/x.npy", tu_tmp);
    ck_assert_msg(stat(p, &st) != 0, "sample wrote %s", p);
    snprintf(p, sizeof p, "%s/run", tu_tmp);
    ck_assert_msg(stat(p, &st) != 0, "train created %s", p);
    tu_rm_tmpdir();
}
END_TEST

// g. Image-to-image, inpainting and the class blend on CUDA (the updates run through the
// op table's copy, scale, add and mul_fwd on the device): DDIM img2img from the host's noise matches
// the CPU (fp32, 1e-4, as a.); strength 1 is plain generation byte for byte; inpainting keeps the
// unmasked pixels exactly; blend weight 1 is class B byte for byte.
START_TEST(test_img2img_on_cuda) {
    tu_make_tmpdir("cli_emu");
    uint8_t img[PER], mask[PER];
    for (int i = 0; i < PER; i++) {
        img[i] = (uint8_t)((i / 32) % 6 < 3 ? 210 : 20);
        mask[i] = i / 32 < 16 ? 255 : 0;
    }
    char in[300], mk[300];
    snprintf(in, sizeof in, "%s/in.png", tu_tmp);
    snprintf(mk, sizeof mk, "%s/mask.png", tu_tmp);
    MalaErr err;
    ck_assert(image_write_png(in, img, 32, 32, 1, &err) == 0 && image_write_png(mk, mask, 32, 32, 1, &err) == 0);
    const char *same = "sample --ckpt " MODEL " --labels 0,3 --sampler ddim --steps 5 --cfg-scale 4 --seed 3 --precision fp32";
    RUN_OK(emu_bin(), "%s --device cuda --init-image %s --strength 0.6 --save-npy %s/i_cuda.npy", same, in, tu_tmp);
    RUN_OK(cpu_bin(), "%s --device cpu --init-image %s --strength 0.6 --save-npy %s/i_cpu.npy", same, in, tu_tmp);
    RUN_OK(emu_bin(), "%s --device cuda --save-npy %s/plain.npy", same, tu_tmp);
    RUN_OK(emu_bin(), "%s --device cuda --init-image %s --strength 1 --save-npy %s/s1.npy", same, in, tu_tmp);
    RUN_OK(emu_bin(), "%s --device cuda --init-image %s --mask %s --save-npy %s/inp.npy", same, in, mk, tu_tmp);
    const char *bl = "sample --ckpt " MODEL " --n 2 --sampler ddim --steps 3 --seed 3 --device cuda";
    RUN_OK(emu_bin(), "%s --blend 0,3,1 --save-npy %s/b1.npy", bl, tu_tmp);
    RUN_OK(emu_bin(), "%s --class 3 --save-npy %s/c3.npy", bl, tu_tmp);
    float *cu = load_images("i_cuda.npy", 2), *cpu = load_images("i_cpu.npy", 2), *p = load_images("plain.npy", 2);
    float *s1 = load_images("s1.npy", 2), *inp = load_images("inp.npy", 2), *b1 = load_images("b1.npy", 2);
    float *c3 = load_images("c3.npy", 2);
    double e = tu_max_abs_diff(cu, cpu, 2 * PER);
    printf("g. DDIM-5 img2img at strength 0.6, w 4: CUDA fp32 vs CPU max |diff| %.3g (tolerance 1e-4)\n", e);
    ck_assert_msg(e <= 1e-4, "img2img on CUDA differs from the CPU by %.3g", e);
    ck_assert(!memcmp(p, s1, 2 * PER * sizeof(float)));
    for (int b = 0; b < 2; b++)
        for (int i = PER / 2; i < PER; i++)
            ck_assert_msg(inp[b * PER + i] == (float)img[i] / 127.5f - 1.0f, "kept pixel %d of image %d moved", i, b);
    ck_assert(!memcmp(b1, c3, 2 * PER * sizeof(float)));
    free(cu); free(cpu); free(p); free(s1); free(inp); free(b1); free(c3);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli_emu");
    TCase *tc = tcase_create("cli_emu");
    tcase_set_timeout(tc, 600);  // under ASan the emulator is several times slower
    tcase_add_test(tc, test_ddim_matches_cpu);
    tcase_add_test(tc, test_ddpm_device_noise);
    tcase_add_test(tc, test_train_resume_bit_exact);
    tcase_add_test(tc, test_train_cross_device);
    tcase_add_test(tc, test_fp64_refused);
    tcase_add_test(tc, test_img2img_on_cuda);
    tcase_add_test(tc, test_bf16_on_cuda);
    tcase_add_loop_test(tc, test_backbones_on_cuda, 0, 2);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

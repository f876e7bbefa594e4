// Data-parallel training under mpirun (docs/design.md §9): 2 ranks x batch 4 train the model 1 process x
// batch 8 trains, a run resumes across world sizes (2 -> 1, 1 -> 2) and bit-exactly on the same
// one, a killed rank brings the job down without a partial checkpoint, and sampling sharded over
// 2 ranks writes the bytes one process writes; ZeRO-1 trains the same weights and resumes across
// world sizes and on / off, eval fid --ckpt sharded gives one process's numbers, and a replica
// that drifts stops the job. Runs the built
// program ($MALA_BIN) under `mpirun -np 2` on the CPU backend, 1 thread per process; skipped,
// with a message, when mpirun is missing or mala was built without MPI.
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/dist.h"
#include "formats/safetensors.h"
#include "testutil.h"

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none -np"
// DiT-T/4 on 64 Fashion-MNIST images, global batch 8, no grids; --out and --iters appended.
#define TINY "train --model DiT-T/4 --batch 8 --limit 64 --log-every 1 --sample-every 0 --threads 1 --device cpu"
// Weights after 10 steps: 2 x 4 and 1 x 8 sum the batch's gradient in another order (float
// rounding, ~1e-7 relative), which AdamW's m / sqrt(v) carries into the weights (more where a
// gradient is near zero); measured max |diff| 1.5e-8 with lr 1e-4. Not bit-exact.
#define WEIGHT_TOL 1e-6
#define LOSS_TOL 1e-5

static const char *mala_bin(void) { return getenv("MALA_BIN") ? getenv("MALA_BIN") : "./mala"; }
static char g_err[1 << 16], g_out[1 << 14];

// Runs `[mpirun -np N] mala ARGS` with OMP_NUM_THREADS=1 (np 0: no launcher); returns the exit status.
static int run(int np, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(int np, const char *fmt, ...) {
    char args[4096], cmd[5000], launch[128] = "", ep[300], op[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    // Open MPI leaves its own allocations at MPI_Finalize, which LeakSanitizer reports (make
    // sanitize); the single-process paths, without MPI_Init, run under it in test_cli.
    if (np) snprintf(launch, sizeof launch, "ASAN_OPTIONS=detect_leaks=0 %s %d", MPIRUN, np);
    snprintf(ep, sizeof ep, "%s/.stderr", tu_tmp);
    snprintf(op, sizeof op, "%s/.stdout", tu_tmp);
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 %s %s %s >%s 2>%s </dev/null", launch, mala_bin(), args, op, ep);
    int st = system(cmd);
    FILE *f = fopen(ep, "rb");
    size_t n = f ? fread(g_err, 1, sizeof g_err - 1, f) : 0;
    if (f) fclose(f);
    g_err[n] = 0;
    f = fopen(op, "rb");
    n = f ? fread(g_out, 1, sizeof g_out - 1, f) : 0;
    if (f) fclose(f);
    g_out[n] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define RUN_OK(np, ...) do { int rc_ = run(np, __VA_ARGS__); ck_assert_msg(rc_ == 0, "exit %d:\n%s", rc_, g_err); } while (0)

static const char *ckpt(const char *run_dir, int step) {
    static char buf[4][600];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s/checkpoints/%07d.safetensors", tu_tmp, run_dir, step);
    return buf[i];
}

// Largest |a - b| over every tensor of two checkpoints (weights, EMA, moments); they must hold
// the same tensors and the same "step" and "batch".
static double ckpt_max_diff(const char *a, const char *b) {
    StFile fa, fb;
    MalaErr err;
    ck_assert_msg(st_open(&fa, a, &err) == 0, "%s", err.msg);
    ck_assert_msg(st_open(&fb, b, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(fa.n, fb.n);
    ck_assert_str_eq(st_meta(&fa, "step"), st_meta(&fb, "step"));
    ck_assert_str_eq(st_meta(&fa, "batch"), st_meta(&fb, "batch"));
    double worst = 0;
    for (int i = 0; i < fa.n; i++) {
        const StTensor *ta = &fa.tensors[i], *tb = st_find(&fb, ta->name);
        ck_assert_msg(tb && st_numel(ta) == st_numel(tb), "%s: tensor %s", b, ta->name);
        size_t n = (size_t)st_numel(ta);
        float *xa = malloc(n * sizeof(float)), *xb = malloc(n * sizeof(float));
        ck_assert(st_read_f32(&fa, ta, xa, &err) == 0 && st_read_f32(&fb, tb, xb, &err) == 0);
        double d = tu_max_abs_diff(xa, xb, n);
        if (d > worst) worst = d;
        free(xa);
        free(xb);
    }
    st_close(&fa);
    st_close(&fb);
    return worst;
}

static int same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    ck_assert_msg(x && y, "cannot read %s or %s", a, b);
    int same = na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

// The loss column of log.csv, row by row, within LOSS_TOL of the other run's.
static void logs_agree(const char *ra, const char *rb) {
    char pa[600], pb[600], la[512], lb[512];
    snprintf(pa, sizeof pa, "%s/%s/log.csv", tu_tmp, ra);
    snprintf(pb, sizeof pb, "%s/%s/log.csv", tu_tmp, rb);
    FILE *fa = fopen(pa, "r"), *fb = fopen(pb, "r");
    ck_assert(fa && fb);
    int rows = 0;
    while (fgets(la, sizeof la, fa)) {
        ck_assert_msg(fgets(lb, sizeof lb, fb), "%s has fewer rows than %s", pb, pa);
        unsigned long long sa, sb;
        double a[4], b[4];
        if (sscanf(la, "%llu,%lf,%lf,%lf,%lf", &sa, &a[0], &a[1], &a[2], &a[3]) != 5) continue;
        ck_assert_int_eq(sscanf(lb, "%llu,%lf,%lf,%lf,%lf", &sb, &b[0], &b[1], &b[2], &b[3]), 5);
        ck_assert_uint_eq(sa, sb);
        for (int k = 0; k < 4; k++)  // loss, mse, vb, grad norm
            ck_assert_msg(fabs(a[k] - b[k]) <= LOSS_TOL * (1 + fabs(a[k])), "step %llu column %d: %g vs %g", sa, k + 1,
                          a[k], b[k]);
        rows++;
    }
    ck_assert_int_gt(rows, 0);
    fclose(fa);
    fclose(fb);
}

START_TEST(two_ranks_equal_one_process) {
    tu_make_tmpdir("mpi");
    RUN_OK(0, TINY " --iters 10 --out %s/one", tu_tmp);
    RUN_OK(2, TINY " --iters 10 --out %s/two", tu_tmp);
    ck_assert_msg(strstr(g_err, "processes: 2"), "rank 0 does not report the job:\n%s", g_err);
    double d = ckpt_max_diff(ckpt("one", 10), ckpt("two", 10));
    fprintf(stderr, "2 ranks x 4 vs 1 x 8, 10 steps: max |weight diff| %.3g\n", d);
    ck_assert_msg(d <= WEIGHT_TOL, "2 ranks x 4 differ from 1 x 8 by %g", d);
    logs_agree("one", "two");
    // rank 0 alone writes: one checkpoint set, one log (a second writer would double the rows)
    char p[600];
    snprintf(p, sizeof p, "%s/two/checkpoints/0000010.safetensors.tmp", tu_tmp);
    ck_assert(access(p, F_OK) != 0);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(resume_across_world_sizes) {
    tu_make_tmpdir("mpi");
    RUN_OK(2, TINY " --iters 10 --ckpt-every 5 --keep 5 --out %s/straight2", tu_tmp);
    RUN_OK(0, TINY " --iters 10 --ckpt-every 5 --keep 5 --out %s/straight1", tu_tmp);
    // 2 -> 2: bit-exact, checkpoint bytes included
    RUN_OK(2, TINY " --iters 5 --ckpt-every 5 --keep 5 --out %s/r22", tu_tmp);
    RUN_OK(2, "train --resume --iters 10 --threads 1 --device cpu --out %s/r22", tu_tmp);
    ck_assert_msg(same_bytes(ckpt("straight2", 10), ckpt("r22", 10)), "2 -> 2 resume is not bit-exact");
    // 2 -> 1 and 1 -> 2: the same global batch, so the same model up to the summation order
    RUN_OK(2, TINY " --iters 5 --ckpt-every 5 --keep 5 --out %s/r21", tu_tmp);
    RUN_OK(0, "train --resume --iters 10 --threads 1 --device cpu --out %s/r21", tu_tmp);
    RUN_OK(0, TINY " --iters 5 --ckpt-every 5 --keep 5 --out %s/r12", tu_tmp);
    RUN_OK(2, "train --resume --iters 10 --threads 1 --device cpu --out %s/r12", tu_tmp);
    ck_assert_msg(strstr(g_err, "resuming"), "%s", g_err);
    double d21 = ckpt_max_diff(ckpt("straight1", 10), ckpt("r21", 10));
    double d12 = ckpt_max_diff(ckpt("straight1", 10), ckpt("r12", 10));
    fprintf(stderr, "resume 2 -> 1: max |diff| %.3g; 1 -> 2: %.3g (against 1 process straight)\n", d21, d12);
    ck_assert_msg(d21 <= WEIGHT_TOL && d12 <= WEIGHT_TOL, "2 -> 1: %g, 1 -> 2: %g", d21, d12);
    logs_agree("straight1", "r21");
    logs_agree("straight1", "r12");
    // a global batch that does not split refuses clearly
    int rc = run(2, "train --model DiT-T/4 --batch 7 --limit 64 --iters 2 --threads 1 --out %s/odd", tu_tmp);
    ck_assert_msg(rc != 0 && strstr(g_err, "does not split over 2 processes"), "exit %d:\n%s", rc, g_err);
    tu_rm_tmpdir();
}
END_TEST

// SIGTERM to mpirun reaches every rank: they agree on the step, rank 0 writes one checkpoint. Open
// MPI kills the ranks odls_base_sigkill_timeout seconds after the SIGTERM (1 by default, which a
// loaded machine's checkpoint write outlasts) and waits about twice that before it exits: the
// SIGTERM pass gives them 10, which stops the warning at the start of the run. A killed rank ends
// the job with the default.
START_TEST(sigterm_checkpoints_and_killed_rank_ends_job) {
    tu_make_tmpdir("mpi");
    char cmd[4096];
    for (int pass = 0; pass < 2; pass++) {
        snprintf(cmd, sizeof cmd, "exec env OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=0 %s 2 %s %s " TINY
                 " --iters 1000000 --ckpt-every 1000000 --out %s/run%d >/dev/null 2>%s/.stderr%d", MPIRUN,
                 pass == 0 ? "--mca odls_base_sigkill_timeout 10" : "", mala_bin(), tu_tmp, pass, tu_tmp, pass);
        pid_t mp = fork();
        if (mp == 0) { setpgid(0, 0); execl("/bin/sh", "sh", "-c", cmd, (char *)NULL); _exit(127); }
        char log[600];
        snprintf(log, sizeof log, "%s/run%d/log.csv", tu_tmp, pass);
        for (int i = 0; i < 600; i++) {  // until a few steps are logged (60 s at most)
            struct stat st;
            if (stat(log, &st) == 0 && st.st_size > 200) break;
            usleep(100000);
        }
        if (pass == 0) {
            kill(mp, SIGTERM);
        } else {  // SIGKILL to one rank: mpirun's children are the ranks
            char ps[200], line[64];
            snprintf(ps, sizeof ps, "ps -o pid= --ppid %d", (int)mp);
            FILE *p = popen(ps, "r");
            int victim = 0;
            while (p && fgets(line, sizeof line, p)) victim = atoi(line);
            if (p) pclose(p);
            ck_assert_int_gt(victim, 0);
            kill(victim, SIGKILL);
        }
        double t0 = now_seconds();
        int st;
        waitpid(mp, &st, 0);
        double took = now_seconds() - t0;
        char ep[600], lsdir[600];
        snprintf(ep, sizeof ep, "%s/.stderr%d", tu_tmp, pass);
        size_t n;
        char *err = tu_read_file(ep, &n);
        ck_assert_msg(took < (pass == 0 ? 40 : 20), "the job took %.1f s to end", took);
        snprintf(lsdir, sizeof lsdir, "ls %s/run%d/checkpoints | grep -c safetensors", tu_tmp, pass);
        FILE *p = popen(lsdir, "r");
        char count[32] = "";
        if (p && !fgets(count, sizeof count, p)) count[0] = 0;
        if (p) pclose(p);
        snprintf(lsdir, sizeof lsdir, "ls %s/run%d/checkpoints | grep -c tmp", tu_tmp, pass);
        p = popen(lsdir, "r");
        char tmps[32] = "";
        if (p && !fgets(tmps, sizeof tmps, p)) tmps[0] = 0;
        if (p) pclose(p);
        ck_assert_msg(atoi(tmps) == 0, "a partial checkpoint is left");
        if (pass == 0) {
            ck_assert_msg(strstr(err, "stopped by signal 15"), "%s", err);
            ck_assert_msg(!strstr(err, "odls_base_sigkill_timeout"), "warned with a 10 s timeout:\n%s", err);
            ck_assert_msg(atoi(count) == 1, "SIGTERM: %d checkpoints, expected 1\n%s", atoi(count), err);
        } else {
            ck_assert_msg(strstr(err, "warning: Open MPI's mpirun kills the ranks 1 s after it forwards a signal"),
                          "no warning of the 1 s kill timeout:\n%s", err);
            ck_assert_msg(!WIFEXITED(st) || WEXITSTATUS(st) != 0, "a killed rank, and mpirun exited 0");
            ck_assert_msg(atoi(count) == 0, "a killed rank, and %d checkpoints", atoi(count));
        }
        fprintf(stderr, "%s: the job ended in %.1f s\n", pass ? "rank 1 killed" : "SIGTERM", took);
        free(err);
    }
    tu_rm_tmpdir();
}
END_TEST

// Batches go round-robin over the ranks and are computed as one process computes them: 3
// batches over 2 ranks (ranks 0, 1, 0) give the bytes of one process, floats and uint8 alike, and
// the same random labels (--label-mode random; the .npz's arr_1).
START_TEST(sampling_shards_to_the_same_bytes) {
    tu_make_tmpdir("mpi");
    const char *flags = "sample --ckpt tests/fixtures/sample_model.safetensors --n 11 --batch 4 --steps 10 --sampler ddpm "
                        "--label-mode random --threads 1 --device cpu";
    RUN_OK(0, "%s --save-npz %s/one.npz --save-npy %s/one.npy", flags, tu_tmp, tu_tmp);
    RUN_OK(2, "%s --save-npz %s/two.npz --save-npy %s/two.npy", flags, tu_tmp, tu_tmp);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/one.npz", tu_tmp);
    snprintf(b, sizeof b, "%s/two.npz", tu_tmp);
    ck_assert_msg(same_bytes(a, b), "2-rank .npz differs from 1 process's");
    snprintf(a, sizeof a, "%s/one.npy", tu_tmp);
    snprintf(b, sizeof b, "%s/two.npy", tu_tmp);
    ck_assert_msg(same_bytes(a, b), "2-rank .npy differs from 1 process's");
    tu_rm_tmpdir();
}
END_TEST

// A partial run continues on any world size: each rank keeps the batches it
// samples in the shared DIR.partial (MALA_TEST_STOP_AFTER=1: every rank stops after its first), and
// 2 ranks -> 1 process and 1 process -> 2 ranks give the bytes of 1 process straight; so does eval
// fid --ckpt --save-stats, its numbers and statistics.
static void run_stopped(int np, int k, const char *fmt, const char *a, const char *b) {
    char env[32];
    snprintf(env, sizeof env, "%d", k);
    setenv("MALA_TEST_STOP_AFTER", env, 1);
    int rc = run(np, fmt, a, b);
    unsetenv("MALA_TEST_STOP_AFTER");
    ck_assert_msg(rc != 0 && strstr(g_err, "stopped after"), "expected a stop, got %d:\n%s", rc, g_err);
}

static const char *tpath(const char *name) {
    static char buf[4][600];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tu_tmp, name);
    return buf[i];
}

START_TEST(sampling_resumes_on_any_world_size) {
    tu_make_tmpdir("mpi");
    const char *fl = "sample --ckpt tests/fixtures/sample_model.safetensors --n 11 --batch 3 --steps 4 --sampler ddpm "
                     "--label-mode random --threads 1 --device cpu --save-npz %s --save-npy %s";
    RUN_OK(0, fl, tpath("one.npz"), tpath("one.npy"));
    run_stopped(2, 1, fl, tpath("r21.npz"), tpath("r21.npy"));
    RUN_OK(0, fl, tpath("r21.npz"), tpath("r21.npy"));
    ck_assert_msg(strstr(g_err, "kept 6 of 11 images"), "%s", g_err);
    run_stopped(0, 1, fl, tpath("r12.npz"), tpath("r12.npy"));
    RUN_OK(2, fl, tpath("r12.npz"), tpath("r12.npy"));
    ck_assert_msg(strstr(g_err, "kept 3 of 11 images"), "%s", g_err);
    ck_assert(same_bytes(tpath("one.npz"), tpath("r21.npz")) && same_bytes(tpath("one.npy"), tpath("r21.npy")));
    ck_assert(same_bytes(tpath("one.npz"), tpath("r12.npz")) && same_bytes(tpath("one.npy"), tpath("r12.npy")));

    RUN_OK(0, "eval stats --data fashion-mnist-test --limit 2 --batch 2 --out %s/ref.npz --inception random "
           "--threads 1", tu_tmp);
    char fe[1024], one[1 << 14];
    snprintf(fe, sizeof fe, "eval fid --ckpt tests/fixtures/sample_model.safetensors --inception random --num 7 "
             "--sample-batch 2 --batch 2 --steps 2 --sampler ddim --splits 1 --threads 1 --device cpu --ref %s/ref.npz "
             "--save-stats %%s%%s", tu_tmp);
    RUN_OK(0, fe, tpath("e1.npz"), "");
    char *p = strstr(g_out, ",\"seconds\"");
    ck_assert_ptr_nonnull(p);
    snprintf(one, sizeof one, "%.*s", (int)(p - g_out), g_out);
    run_stopped(2, 1, fe, tpath("e2.npz"), "");
    RUN_OK(0, fe, tpath("e2.npz"), "");
    ck_assert_msg(strstr(g_err, "kept 4 of 7 images") && !strncmp(g_out, one, strlen(one)), "%s\n%s", g_err, g_out);
    ck_assert(same_bytes(tpath("e1.npz"), tpath("e2.npz")));
    tu_rm_tmpdir();
}
END_TEST

// The "optimiser state" line's MB per process.
static double opt_state_mb(void) {
    const char *p = strstr(g_err, "optimiser state (AdamW m, v): ");
    ck_assert_msg(p, "no optimiser state line:\n%s", g_err);
    return atof(p + strlen("optimiser state (AdamW m, v): "));
}

// A run directory holding only run `from`'s checkpoint of `step` and its log, to resume from.
static void copy_run_at(const char *from, int step, const char *to) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/%s/checkpoints && cp %s %s/%s/checkpoints/ && cp %s/%s/log.csv %s/%s/", tu_tmp,
             to, ckpt(from, step), tu_tmp, to, tu_tmp, from, tu_tmp, to);
    ck_assert_int_eq(system(cmd), 0);
}

// ZeRO-1 on 2 ranks: the checkpoints of an unsharded run, byte for byte (each gradient sum is
// one addition, a + b = b + a; no clipping), with half the optimiser memory per process; a
// ZeRO-1 checkpoint resumes on 1 process (within WEIGHT_TOL: the sums change order), and an
// unsharded one resumes with --zero 1 bit-exactly.
START_TEST(zero1_same_weights_and_resumes) {
    tu_make_tmpdir("mpi");
    RUN_OK(2, TINY " --iters 6 --ckpt-every 3 --keep 5 --out %s/off", tu_tmp);
    double mb_off = opt_state_mb();
    RUN_OK(2, TINY " --iters 6 --ckpt-every 3 --keep 5 --zero 1 --out %s/on", tu_tmp);
    double mb_on = opt_state_mb();
    fprintf(stderr, "ZeRO-1 over 2 ranks: optimiser state %.2f MB per process, unsharded %.2f MB\n", mb_on, mb_off);
    ck_assert_msg(mb_on > 0.45 * mb_off && mb_on < 0.55 * mb_off, "%.2f MB vs %.2f MB", mb_on, mb_off);
    ck_assert_msg(same_bytes(ckpt("off", 3), ckpt("on", 3)) && same_bytes(ckpt("off", 6), ckpt("on", 6)),
                  "ZeRO-1 checkpoints differ from unsharded ones (max |diff| %g)", ckpt_max_diff(ckpt("off", 6), ckpt("on", 6)));
    logs_agree("off", "on");
    copy_run_at("on", 3, "on_to_1");
    RUN_OK(0, "train --resume --iters 6 --threads 1 --device cpu --out %s/on_to_1", tu_tmp);
    double d = ckpt_max_diff(ckpt("off", 6), ckpt("on_to_1", 6));
    fprintf(stderr, "ZeRO-1 2 ranks -> 1 process resume: max |diff| %.3g\n", d);
    ck_assert_msg(d <= WEIGHT_TOL, "2 ranks ZeRO-1 -> 1 process: %g", d);
    copy_run_at("off", 3, "off_to_on");
    RUN_OK(2, "train --resume --zero 1 --iters 6 --threads 1 --device cpu --out %s/off_to_on", tu_tmp);
    ck_assert_msg(same_bytes(ckpt("off", 6), ckpt("off_to_on", 6)), "unsharded -> ZeRO-1 resume is not bit-exact");
    tu_rm_tmpdir();
}
END_TEST

// eval fid --ckpt on 2 ranks: 5 images in batches of 2, two rounds (the second: rank 0's short
// batch, nothing for rank 1), the numbers one process prints (random labels: the default).
START_TEST(eval_fid_shards_to_the_same_numbers) {
    tu_make_tmpdir("mpi");
    RUN_OK(0, "eval stats --data fashion-mnist-test --limit 2 --batch 2 --out %s/ref.npz --inception random --threads 1",
           tu_tmp);
    const char *flags = "eval fid --ckpt tests/fixtures/sample_model.safetensors --inception random --num 5 "
                        "--sample-batch 3 --batch 2 --steps 2 --sampler ddim --splits 1 --threads 1 --device cpu";
    char one[1 << 14], *fields[2];
    RUN_OK(0, "%s --ref %s/ref.npz", flags, tu_tmp);
    snprintf(one, sizeof one, "%s", g_out);
    RUN_OK(2, "%s --ref %s/ref.npz", flags, tu_tmp);
    ck_assert_msg(!strchr(strchr(g_out, '\n') ? strchr(g_out, '\n') + 1 : g_out, '{'), "more than one JSON line:\n%s", g_out);
    fields[0] = one;
    fields[1] = g_out;
    double v[2][3];
    for (int k = 0; k < 2; k++) {  // the numbers: everything from "n" to "splits" (not the timings)
        char *p = strstr(fields[k], "\"n\":"), *e = p ? strstr(p, ",\"seconds\"") : NULL;
        ck_assert_msg(p && e, "no result line: %s", fields[k]);
        *e = 0;
        const char *keys[3] = {"\"fid\":", "\"is_mean\":", "\"is_std\":"};
        for (int i = 0; i < 3; i++) {
            const char *f = strstr(p, keys[i]);
            ck_assert_msg(f && sscanf(f + strlen(keys[i]), "%lf", &v[k][i]) == 1, "no %s in %s", keys[i], p);
        }
        fields[k] = p;
    }
    ck_assert_str_eq(fields[0], fields[1]);
    ck_assert_msg(strstr(fields[0], "\"n\":5,"), "%s", fields[0]);
    fprintf(stderr, "eval fid --ckpt, 1 process and 2 ranks: %s\n", fields[0]);
    tu_rm_tmpdir();
}
END_TEST

// A replica that drifts (MALA_TEST_DIVERGE: rank 1 nudges a weight after step 3) stops the job at
// the next checksum with an error naming the rank and the step, and no checkpoint.
START_TEST(weight_checksum_catches_a_divergence) {
    tu_make_tmpdir("mpi");
    setenv("MALA_TEST_DIVERGE", "1:3", 1);
    int rc = run(2, TINY " --iters 10 --log-every 1 --zero 1 --out %s/drift", tu_tmp);
    unsetenv("MALA_TEST_DIVERGE");
    ck_assert_msg(rc != 0, "a diverged replica, and exit 0:\n%s", g_err);
    ck_assert_msg(strstr(g_err, "rank 1: weights differ from rank 0's at step 3") && strstr(g_err, "diverged"), "%s", g_err);
    char p[600];
    snprintf(p, sizeof p, "%s/drift/checkpoints/0000010.safetensors", tu_tmp);
    ck_assert_msg(access(p, F_OK) != 0, "a checkpoint after the divergence");
    tu_rm_tmpdir();
}
END_TEST

// Gradient accumulation over ranks: 2 ranks x 4 images x --accum 2 train the model
// one process with --batch 8 --accum 2 trains (global batch = ranks x per-rank batch x accum = 16),
// also with ZeRO-1, and a run resumes across world sizes with its --accum.
START_TEST(accumulation_over_ranks) {
    tu_make_tmpdir("mpi");
    RUN_OK(0, TINY " --accum 2 --iters 6 --ckpt-every 3 --keep 5 --out %s/one", tu_tmp);
    RUN_OK(2, TINY " --accum 2 --iters 6 --ckpt-every 3 --keep 5 --out %s/two", tu_tmp);
    ck_assert_msg(strstr(g_err, "batch 16 (--batch 8 x --accum 2)"), "%s", g_err);
    RUN_OK(2, TINY " --accum 2 --zero 1 --iters 6 --out %s/zero", tu_tmp);
    RUN_OK(2, TINY " --accum 2 --iters 3 --ckpt-every 3 --out %s/r21", tu_tmp);
    RUN_OK(0, "train --resume --iters 6 --threads 1 --device cpu --out %s/r21", tu_tmp);
    double d2 = ckpt_max_diff(ckpt("one", 6), ckpt("two", 6)), dz = ckpt_max_diff(ckpt("one", 6), ckpt("zero", 6));
    double dr = ckpt_max_diff(ckpt("one", 6), ckpt("r21", 6));
    fprintf(stderr, "accum 2, 6 steps: 2 ranks vs 1 process max |diff| %.3g; ZeRO-1 %.3g; resumed 2 -> 1 %.3g\n", d2,
            dz, dr);
    ck_assert_msg(d2 <= WEIGHT_TOL && dz <= WEIGHT_TOL && dr <= WEIGHT_TOL, "2 ranks %g, ZeRO %g, resumed %g", d2, dz,
                  dr);
    logs_agree("one", "two");
    tu_rm_tmpdir();
}
END_TEST

// --eval-every under mpirun: every rank samples a share of the images from its
// EMA weights, rank 0 runs the features and writes evals.csv; the numbers are one process's.
START_TEST(eval_every_shares_the_sampling) {
    tu_make_tmpdir("mpi");
    char ref[600], a[4096], b[4096];
    snprintf(ref, sizeof ref, "%s/ref.npz", tu_tmp);
    RUN_OK(0, "eval stats --features fmnist --data fashion-mnist-test --limit 100 --out %s", ref);
#define EVF " --iters 4 --eval-every 16 --eval-images 70 --eval-steps 2 --eval-ref %s --out %s/%s"
    RUN_OK(2, TINY EVF, ref, tu_tmp, "two");
    RUN_OK(0, TINY EVF, ref, tu_tmp, "one");
#undef EVF
    snprintf(ref, sizeof ref, "cut -d, -f1,2,4,5 %s/two/evals.csv", tu_tmp);
    FILE *p = popen(ref, "r");
    size_t n = fread(a, 1, sizeof a - 1, p);
    a[n] = 0;
    pclose(p);
    snprintf(ref, sizeof ref, "cut -d, -f1,2,4,5 %s/one/evals.csv", tu_tmp);
    p = popen(ref, "r");
    n = fread(b, 1, sizeof b - 1, p);
    b[n] = 0;
    pclose(p);
    ck_assert_msg(strstr(a, "\n16,2,") && strstr(a, "\n32,4,"), "%s", a);
    ck_assert_str_eq(a, b);  // images, step, fd, class_acc
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("test_mpi: skipped (mpirun not found: install openmpi-bin, tools/install_deps.sh)\n");
        return 0;
    }
    if (!strncmp(dist_engine(), "none", 4)) {
        printf("test_mpi: skipped (mala was built without MPI: %s)\n", dist_engine());
        return 0;
    }
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("mpi");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, two_ranks_equal_one_process);
    tcase_add_test(tc, resume_across_world_sizes);
    tcase_add_test(tc, sigterm_checkpoints_and_killed_rank_ends_job);
    tcase_add_test(tc, sampling_shards_to_the_same_bytes);
    suite_add_tcase(s, tc);
    TCase *tz = tcase_create("zero_eval_checksum");  // CK_RUN_CASE=zero_eval_checksum runs these alone
    tcase_set_timeout(tz, 600);
    tcase_add_test(tz, zero1_same_weights_and_resumes);
    tcase_add_test(tz, eval_fid_shards_to_the_same_numbers);
    tcase_add_test(tz, sampling_resumes_on_any_world_size);
    tcase_add_test(tz, weight_checksum_catches_a_divergence);
    suite_add_tcase(s, tz);
    TCase *ta = tcase_create("accum");
    tcase_set_timeout(ta, 600);
    tcase_add_test(ta, accumulation_over_ranks);
    tcase_add_test(ta, eval_every_shares_the_sampling);
    suite_add_tcase(s, ta);
    return tu_run(s);
}

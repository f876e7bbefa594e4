// The mala program ($MALA_BIN; build-san/mala under `make sanitize`) on hostile and unlucky input
//: every reproducer of a crash exits with a one-line error and no signal; what can be
// read is read; a training run survives stale partial checkpoints and signals at awkward moments;
// no JSON line holds inf or nan.
//
// The reproducers are the committed files of tests/fuzz/regress/ (tests/fuzz/make_inputs.py
// wrote them) plus inputs too large to commit, made here: Fashion-MNIST's t10k images cut short by
// 1, 4, 8 and 9 bytes, and a 2000x2000 16-bit PGM.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "testcli.h"   // defines: run, g_out, g_err, mala_bin
#include "formats/image_io.h"
#include "eval/inception.h"
#include "formats/json.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "train/run_dir.h"

#define REG "tests/fuzz/regress/"
#define FMNIST "/usr/share/datasets/fashion-mnist"
// The tiny run: DiT-T/8 (16 tokens), batch 2, 8 images, no sample grids.
#define TRAIN "train --model DiT-T/8 --batch 2 --limit 8 --lr 1e-3 --log-every 1 --sample-every 0"

static const char *err_tail(void) {
    size_t n = strlen(g_err);
    return n > 2000 ? g_err + n - 2000 : g_err;
}

// Exit status 1 (an error, not a signal: 128 + N) and stderr ending in one "error: " line
// that contains `needle`.
static void expect_last_error(int rc, const char *what, const char *needle) {
    ck_assert_msg(rc == 1, "%s: exit status %d (expected 1; >= 128 is a signal):\n%s", what, rc, err_tail());
    size_t n = strlen(g_err);
    while (n && g_err[n - 1] == '\n') n--;
    const char *last = g_err + n;
    while (last > g_err && last[-1] != '\n') last--;
    ck_assert_msg(!strncmp(last, "error: ", 7), "%s: the last line is not an error line:\n%s", what, err_tail());
    ck_assert_msg(strstr(last, needle), "%s: expected '%s' in the error line: %.*s", what, needle, (int)(g_err + n - last),
                  last);
    ck_assert_msg(!strstr(g_err, "Sanitizer") && !strstr(g_err, "runtime error"), "%s: sanitizer report:\n%s", what,
                  err_tail());
}

static void expect_ok(int rc, const char *what) {
    ck_assert_msg(rc == 0, "%s: exit status %d:\n%s", what, rc, err_tail());
    ck_assert_msg(!strstr(g_err, "Sanitizer") && !strstr(g_err, "runtime error"), "%s: sanitizer report:\n%s", what,
                  err_tail());
}

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tu_tmp, name); }

static void mkdirs(const char *name) {
    char p[400], cmd[500];
    path_in(p, sizeof p, name);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", p);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *name, const void *data, size_t n) {
    char p[400];
    path_in(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    ck_assert_msg(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "cannot write %s", p);
}

static void copy_file(const char *from, const char *to_name, size_t cut) {
    size_t n;
    unsigned char *b = tu_read_file(from, &n);
    ck_assert(n >= cut);
    write_file(to_name, b, n - cut);
    free(b);
}

// A PNG of noise, w x h RGB.
static void write_png(const char *name, int w, int h, uint64_t seed) {
    uint8_t *px = malloc((size_t)w * h * 3);
    uint64_t s = seed * 2654435761u + 1;
    for (int i = 0; i < w * h * 3; i++) px[i] = (uint8_t)(tu_next(&s) >> 56);
    char p[400];
    path_in(p, sizeof p, name);
    MalaErr err;
    ck_assert_msg(image_write_png(p, px, w, h, 3, &err) == 0, "%s", err.msg);
    free(px);
}

// A binary PGM, 16 bits per sample (maxval 65535), sample i = (i * 7919) mod 65536.
static void write_pgm16(const char *name, int w, int h) {
    char head[64];
    int hl = snprintf(head, sizeof head, "P5\n%d %d\n65535\n", w, h);
    size_t n = (size_t)hl + (size_t)w * h * 2;
    unsigned char *b = malloc(n);
    memcpy(b, head, (size_t)hl);
    for (size_t i = 0; i < (size_t)w * h; i++) {
        unsigned v = (unsigned)((i * 7919) & 0xFFFF);
        b[hl + 2 * i] = (unsigned char)(v >> 8);
        b[hl + 2 * i + 1] = (unsigned char)v;
    }
    write_file(name, b, n);
    free(b);
}

// ---------------------------------------------------------------------------------------------
// 1. the reproducers of the first fuzzing campaign's findings

// npz: a zip64 extra field of 16 bytes instead of 24. It used to print a freed name (exit 139).
START_TEST(test_npz_zip64_extra_field) {
    tu_make_tmpdir("hostile");
    int rc = run("eval fid --samples " REG "npz/zip64_extra_claims_16.npz --ref tests/fixtures/npy_samples.npz "
                 "--inception random --threads 2");
    expect_last_error(rc, "npz zip64", "zip64_extra_claims_16.npz: corrupt zip64 extra field for 'a.npy'");
    tu_rm_tmpdir();
}
END_TEST

// Legacy torch pickle whose first opcode after PROTO is MARK (NULL + 0 in pop_mark).
START_TEST(test_torch_pickle_mark_first) {
    tu_make_tmpdir("hostile");
    int rc = run("eval is --samples tests/fixtures/npy_samples.npz --splits 1 --inception " REG
                 "torch_legacy/mark_first.pth");
    expect_last_error(rc, "torch pickle", "mark_first.pth: ");
    tu_rm_tmpdir();
}
END_TEST

// IDX gzip files cut short by 1, 4, 8 and 9 bytes (inside the 8-byte trailer and just before
// it): small committed ones, and Fashion-MNIST's own t10k images (4.4 MB) when installed.
START_TEST(test_idx_gzip_cut_short) {
    tu_make_tmpdir("hostile");
    const int cuts[] = {1, 4, 8, 9};
    mkdirs("good");
    char f[400];
    for (int k = 0; k < 4; k++) {
        char dir[64], img[128], lab[128];
        snprintf(dir, sizeof dir, "cut%d", cuts[k]);
        mkdirs(dir);
        snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
        snprintf(lab, sizeof lab, "%s/train-labels-idx1-ubyte.gz", dir);
        snprintf(f, sizeof f, REG "idx/images_cut%d.gz", cuts[k]);
        copy_file(f, img, 0);
        copy_file(REG "idx/labels_cut1.gz", lab, 0);  // the images fail first
        int rc = run(TRAIN " --iters 1 --data fashion-mnist:%s/%s --out %s/run", tu_tmp, dir, tu_tmp);
        expect_last_error(rc, dir, "train-images-idx3-ubyte.gz: truncated gzip stream");
        if (access(FMNIST "/t10k-images-idx3-ubyte.gz", R_OK) == 0) {
            copy_file(FMNIST "/t10k-images-idx3-ubyte.gz", img, (size_t)cuts[k]);
            copy_file(FMNIST "/t10k-labels-idx1-ubyte.gz", lab, 0);
            rc = run(TRAIN " --iters 1 --data fashion-mnist:%s/%s --out %s/run", tu_tmp, dir, tu_tmp);
            expect_last_error(rc, "t10k images cut short", "train-images-idx3-ubyte.gz: truncated gzip stream");
        }
    }
    tu_rm_tmpdir();
}
END_TEST

// 16-bit PGM / PPM in a class folder (stb_image's 16 -> 8 conversion over-read the buffer): now
// read, by both commands that read folders.
START_TEST(test_16bit_pnm_in_a_folder) {
    tu_make_tmpdir("hostile");
    mkdirs("data/a");
    write_pgm16("data/a/big16.pgm", 2000, 2000);
    copy_file(REG "image/ppm16_20x10.ppm", "data/a/small16.ppm", 0);
    copy_file(REG "image/pgm16_40x30.pgm", "data/a/small16.pgm", 0);
    int rc = run("eval stats --data %s/data --out %s/stats.npz --inception random --threads 2", tu_tmp, tu_tmp);
    expect_ok(rc, "eval stats on 16-bit PGM/PPM");
    ck_assert_msg(strstr(g_out, "\"n\":3"), "expected 3 images in: %s", g_out);
    rc = run(TRAIN " --iters 1 --data %s/data --image-size 32 --channels 1 --out %s/run", tu_tmp, tu_tmp);
    expect_ok(rc, "train on 16-bit PGM/PPM");
    tu_rm_tmpdir();
}
END_TEST

// Files that are refused (TGA: 537 MB and 3 s for 22 bytes; a PNM width that overflows int; a PNG
// of 10^10 pixels) are skipped by name; a class of nothing else is an error.
START_TEST(test_refused_images_are_skipped) {
    tu_make_tmpdir("hostile");
    mkdirs("mixed/a");
    mkdirs("only/a");
    const char *bad[] = {"tga_18176x6666.tga", "pnm_width_overflow.pgm", "png_100000x100000.png"};
    const char *why[] = {"not an image in a supported format", "PGM/PPM width is larger than 32768",
                         "a side longer than 32768"};
    char from[300], to[300];
    for (int k = 0; k < 3; k++) {
        snprintf(from, sizeof from, REG "image/%s", bad[k]);
        snprintf(to, sizeof to, "mixed/a/%s", bad[k]);
        copy_file(from, to, 0);
        snprintf(to, sizeof to, "only/a/%s", bad[k]);
        copy_file(from, to, 0);
    }
    write_png("mixed/a/ok1.png", 40, 36, 1);
    write_png("mixed/a/ok2.png", 33, 50, 2);
    double t0 = now_seconds();
    int rc = run("eval stats --data %s/mixed --out %s/stats.npz --inception random --threads 2", tu_tmp, tu_tmp);
    expect_ok(rc, "eval stats with refused files");
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(strstr(g_err, bad[k]) && strstr(g_err, why[k]), "expected %s skipped as '%s':\n%s", bad[k], why[k],
                      err_tail());
    }
    ck_assert_msg(strstr(g_out, "\"n\":2"), "expected 2 images in: %s", g_out);
    rc = run(TRAIN " --iters 1 --data %s/only --out %s/run", tu_tmp, tu_tmp);
    expect_last_error(rc, "a class of refused files", "class 'a' has no readable images");
    printf("refused images: eval stats + train in %.1f s\n", now_seconds() - t0);
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 2. training runs and signals

// A *.safetensors.tmp left by a killed save is removed when a run starts (fresh or --resume);
// other files are left alone.
START_TEST(test_stale_tmp_removed) {
    tu_make_tmpdir("hostile");
    mkdirs("run/checkpoints");
    write_file("run/checkpoints/0000007.safetensors.tmp", "partial", 7);
    write_file("run/checkpoints/notes.tmp", "mine", 4);
    int rc = run(TRAIN " --iters 2 --ckpt-every 2 --out %s/run", tu_tmp);
    expect_ok(rc, "train with a stale tmp");
    char p[400];
    path_in(p, sizeof p, "run/checkpoints/0000007.safetensors.tmp");
    ck_assert_msg(access(p, F_OK) != 0, "%s is still there", p);
    ck_assert_msg(strstr(g_err, "removed 1 partial checkpoint"), "%s", err_tail());
    path_in(p, sizeof p, "run/checkpoints/notes.tmp");
    ck_assert_msg(access(p, F_OK) == 0, "%s was removed", p);
    write_file("run/checkpoints/0000002.safetensors.tmp", "partial", 7);
    rc = run(TRAIN " --iters 3 --ckpt-every 3 --resume --out %s/run", tu_tmp);
    expect_ok(rc, "resume with a stale tmp");
    path_in(p, sizeof p, "run/checkpoints/0000002.safetensors.tmp");
    ck_assert_msg(access(p, F_OK) != 0, "%s is still there after --resume", p);
    path_in(p, sizeof p, "run/checkpoints/0000003.safetensors");
    ck_assert_msg(access(p, F_OK) == 0, "no checkpoint at step 3:\n%s", err_tail());
    tu_rm_tmpdir();
}
END_TEST

// Starts `mala ARGS` with stderr to `errfile`; returns the pid.
static pid_t spawn(const char *errfile, const char *args) {
    char cmd[3072];
    snprintf(cmd, sizeof cmd, "exec %s %s >/dev/null 2>%s", mala_bin(), args, errfile);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

// 1 when pid runs the mala program (not the forked test or the shell) and has a handler for
// SIGTERM (SigCgt in /proc/pid/status).
static int catches_sigterm(pid_t pid) {
    char p[64], line[256], exe[4096], want[4096];
    snprintf(p, sizeof p, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(p, exe, sizeof exe - 1);
    if (n <= 0 || !realpath(mala_bin(), want)) return 0;
    exe[n] = 0;
    if (strcmp(exe, want)) return 0;
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    unsigned long long mask = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "SigCgt:", 7)) mask = strtoull(line + 7, NULL, 16);
    fclose(f);
    return (int)((mask >> (SIGTERM - 1)) & 1);
}

static int wait_status(pid_t pid) {
    int st;
    ck_assert(waitpid(pid, &st, 0) == pid);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

// The handlers come before anything slow: a SIGTERM while the dataset (60,000 Fashion-MNIST
// images) is still being read stops the run cleanly, and it says so.
START_TEST(test_sigterm_during_startup) {
    if (access(FMNIST "/train-images-idx3-ubyte.gz", R_OK) != 0) return;
    tu_make_tmpdir("hostile");
    char ep[300], args[1024];
    path_in(ep, sizeof ep, "stderr");
    snprintf(args, sizeof args, TRAIN " --iters 5 --ckpt-every 5 --out %s/run", tu_tmp);
    pid_t pid = spawn(ep, args);
    double t0 = now_seconds();
    while (!catches_sigterm(pid) && now_seconds() - t0 < 60) usleep(500);
    slurp(ep, g_err, sizeof g_err);
    ck_assert_msg(!strstr(g_err, "data: "), "SIGTERM is handled only after the dataset was opened:\n%s", err_tail());
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    int rc = wait_status(pid);
    slurp(ep, g_err, sizeof g_err);
    printf("SIGTERM during start-up (%.0f ms in): exit %d, \"%s\"\n", 1e3 * (now_seconds() - t0), rc, err_tail());
    ck_assert_msg(rc == 143, "SIGTERM during start-up: exit status %d, expected 143:\n%s", rc, err_tail());
    ck_assert_msg(strstr(g_err, "stopped by signal 15 at step 0; no checkpoint written") && !strstr(g_err, "done:"),
                  "%s", err_tail());
    tu_rm_tmpdir();
}
END_TEST

// Runs `mala ARGS` with the checkpoint's temporary path `tmp` (under tu_tmp) a FIFO, so that the
// save blocks until this test reads it: `sig` certainly lands inside the write. Returns the bytes
// written (*n of them) and the exit status; stderr is in g_err.
static unsigned char *signal_during_save(const char *tmp, const char *args, int sig, size_t *n, int *rc) {
    char fifo[400], ep[300];
    path_in(fifo, sizeof fifo, tmp);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    int fd = open(fifo, O_RDONLY | O_NONBLOCK);
    ck_assert(fd >= 0);
    path_in(ep, sizeof ep, "stderr");
    pid_t pid = spawn(ep, args);
    struct pollfd pf = {fd, POLLIN, 0};
    ck_assert_msg(poll(&pf, 1, 300000) == 1 && (pf.revents & POLLIN), "the checkpoint write never started");
    const char *times = getenv("MALA_TEST_SIGNALS");  // how many signals (default 1)
    for (int k = 0; k < (times ? atoi(times) : 1); k++) {
        if (k) usleep(200000);  // a handler runs per signal: pending duplicates would merge
        ck_assert_int_eq(kill(pid, sig), 0);
    }
    size_t cap = 1 << 20;
    unsigned char *data = malloc(cap);
    *n = 0;
    for (;;) {
        if (*n == cap) data = realloc(data, cap *= 2);
        ssize_t r = read(fd, data + *n, cap - *n);
        if (r > 0) { *n += (size_t)r; continue; }
        if (r == 0) break;  // the writer closed it
        ck_assert_msg(errno == EAGAIN || errno == EINTR, "read: %s", strerror(errno));
        poll(&pf, 1, 1000);
    }
    close(fd);
    *rc = wait_status(pid);
    slurp(ep, g_err, sizeof g_err);
    return data;
}

// A SIGTERM while the last checkpoint is being written: the save completes (a valid file) and the
// run says it was stopped, not "done: step N", with exit status 143 (128 + SIGTERM).
START_TEST(test_sigterm_during_checkpoint_write) {
    tu_make_tmpdir("hostile");
    mkdirs("run/checkpoints");
    char args[1024];
    snprintf(args, sizeof args, TRAIN " --iters 2 --ckpt-every 2 --out %s/run", tu_tmp);
    size_t n;
    int rc;
    unsigned char *data = signal_during_save("run/checkpoints/0000002.safetensors.tmp", args, SIGTERM, &n, &rc);
    ck_assert_msg(rc == 143, "SIGTERM during a checkpoint write: exit status %d, expected 143:\n%s", rc, err_tail());
    ck_assert_msg(strstr(g_err, "stopped by signal 15 at step 2; the last checkpoint is") && !strstr(g_err, "done:"),
                  "%s", err_tail());
    write_file("written.safetensors", data, n);
    free(data);
    char p[400];
    path_in(p, sizeof p, "written.safetensors");
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, p, &err) == 0, "the checkpoint written during the signal: %s", err.msg);
    ck_assert_str_eq(st_meta(&f, "step"), "2");
    printf("SIGTERM during a checkpoint write: %zu bytes, a valid checkpoint; \"%s\"\n", n, err_tail());
    st_close(&f);
    tu_rm_tmpdir();
}
END_TEST

// A run of --iters 5 stopped by SIGINT at step 2 exits with status 130 (128 +
// SIGINT), and `--resume` without --iters ends exactly at step 5, the run's target.
START_TEST(test_sigint_then_resume_to_iters) {
    tu_make_tmpdir("hostile");
    mkdirs("run/checkpoints");
    char args[1024];
    snprintf(args, sizeof args, TRAIN " --iters 5 --ckpt-every 2 --out %s/run", tu_tmp);
    size_t n;
    int rc;
    unsigned char *data = signal_during_save("run/checkpoints/0000002.safetensors.tmp", args, SIGINT, &n, &rc);
    ck_assert_msg(rc == 130, "SIGINT: exit status %d, expected 130:\n%s", rc, err_tail());
    ck_assert_msg(strstr(g_err, "stopped by signal 2 at step 2"), "%s", err_tail());
    // the save went through the FIFO, renamed into place: its bytes become the checkpoint
    char p[400];
    path_in(p, sizeof p, "run/checkpoints/0000002.safetensors");
    ck_assert_int_eq(unlink(p), 0);
    write_file("run/checkpoints/0000002.safetensors", data, n);
    free(data);
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, p, &err) == 0, "%s", err.msg);
    ck_assert_msg(st_meta(&f, "run.iters") && !strcmp(st_meta(&f, "run.iters"), "5"), "run.iters not stored");
    st_close(&f);
    rc = run("train --resume --out %s/run --threads 2", tu_tmp);
    expect_ok(rc, "--resume after SIGINT");
    ck_assert_msg(strstr(g_err, "done: step 5,"), "%s", err_tail());
    path_in(p, sizeof p, "run/checkpoints/0000005.safetensors");
    ck_assert_msg(access(p, F_OK) == 0, "no checkpoint at step 5:\n%s", err_tail());
    tu_rm_tmpdir();
}
END_TEST

// Waits (at most a minute) until the file errfile holds `what`; 1 when it does.
static int wait_for_text(const char *errfile, const char *what) {
    double t0 = now_seconds();
    while (now_seconds() - t0 < 60) {
        slurp(errfile, g_err, sizeof g_err);
        if (strstr(g_err, what)) return 1;
        usleep(20000);
    }
    return 0;
}

// A SIGINT during an evaluation of --eval-every (1,500 images: half a minute if it ran to the end)
// stops it within a sampling step: "stopping: writing a checkpoint" at once, the checkpoint of the
// evaluation's step, no row for that point in evals.csv, exit 130; --resume evaluates that point
// first, then trains on.
START_TEST(test_sigint_during_evaluation) {
    tu_make_tmpdir("hostile");
    char ep[300], args[1024], p[400];
    path_in(ep, sizeof ep, "stderr");
    snprintf(args, sizeof args, TRAIN " --iters 4 --ckpt-every 100 --eval-every 2s --eval-images 1500 --eval-steps 5 "
             "--threads 1 --out %s/run", tu_tmp);
    pid_t pid = spawn(ep, args);
    ck_assert_msg(wait_for_text(ep, "[eval] step 2: FD of"), "no evaluation started:\n%s", err_tail());
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    int rc = wait_status(pid);
    slurp(ep, g_err, sizeof g_err);
    ck_assert_msg(rc == 130, "SIGINT during an evaluation: exit %d:\n%s", rc, err_tail());
    ck_assert_msg(strstr(g_err, "stopping: writing a checkpoint") &&
                  strstr(g_err, "[eval] step 2: stopped by the signal; the run evaluates this point again") &&
                  strstr(g_err, "stopped by signal 2 at step 2; wrote"), "%s", g_err);
    path_in(p, sizeof p, "run/checkpoints/0000002.safetensors");
    ck_assert_msg(access(p, F_OK) == 0, "no checkpoint at the evaluation's step");
    path_in(p, sizeof p, "run/evals.csv");
    slurp(p, g_out, sizeof g_out);
    ck_assert_msg(!strstr(g_out, ",2,"), "the cut evaluation was recorded:\n%s", g_out);
    rc = run("train --resume --out %s/run --eval-images 20 --threads 1", tu_tmp);
    expect_ok(rc, "--resume after a stop during an evaluation");
    ck_assert_msg(strstr(g_err, "[eval] step 2: FD") && strstr(g_err, "[eval] step 4: FD") &&
                  strstr(g_err, "done: step 4"), "%s", err_tail());
    ck_assert_msg(strstr(g_err, "[eval] step 2: FD") < strstr(g_err, "step 3/4"), "the point was not evaluated first");
    slurp(p, g_out, sizeof g_out);
    ck_assert_msg(strstr(g_out, ",2,") && strstr(g_out, ",4,"), "%s", g_out);
    tu_rm_tmpdir();
}
END_TEST

// A second signal while the checkpoint is written is answered and the save completes (the run stays
// resumable); a third exits at once, without it. The folder it leaves (log rows, no checkpoint)
// is not stuck: --resume starts the run over from step 0, the earlier start's files moved aside.
START_TEST(test_second_and_third_signal) {
    tu_make_tmpdir("hostile");
    mkdirs("run/checkpoints");
    char args[1024], p[400];
    snprintf(args, sizeof args, TRAIN " --iters 4 --ckpt-every 2 --out %s/run", tu_tmp);
    size_t n;
    int rc;
    // two signals (the FIFO holds the save until both have landed): the checkpoint is still written
    setenv("MALA_TEST_SIGNALS", "2", 1);
    unsigned char *data = signal_during_save("run/checkpoints/0000002.safetensors.tmp", args, SIGINT, &n, &rc);
    ck_assert_msg(rc == 130 && strstr(g_err, "still writing the checkpoint") &&
                  strstr(g_err, "stopped by signal 2 at step 2; the last checkpoint is"), "exit %d:\n%s", rc, g_err);
    // the save went through the FIFO, renamed into place: its bytes are the checkpoint
    write_file("written.safetensors", data, n);
    free(data);
    StFile f;
    MalaErr err;
    path_in(p, sizeof p, "written.safetensors");
    ck_assert_msg(st_open(&f, p, &err) == 0, "the checkpoint after two signals: %s", err.msg);
    st_close(&f);
    // three: killed by the third, no checkpoint of its own and nothing said after it
    tu_rm_tmpdir();
    tu_make_tmpdir("hostile");
    mkdirs("run/checkpoints");
    snprintf(args, sizeof args, TRAIN " --iters 4 --ckpt-every 2 --out %s/run", tu_tmp);
    setenv("MALA_TEST_SIGNALS", "3", 1);
    data = signal_during_save("run/checkpoints/0000002.safetensors.tmp", args, SIGINT, &n, &rc);
    unsetenv("MALA_TEST_SIGNALS");
    free(data);
    ck_assert_msg(rc == 130 && !strstr(g_err, "stopped by signal"), "exit %d:\n%s", rc, g_err);
    path_in(p, sizeof p, "run/checkpoints/0000002.safetensors");
    ck_assert_msg(access(p, F_OK) != 0, "a checkpoint after the third signal");
    path_in(p, sizeof p, "run/checkpoints/0000002.safetensors.tmp");  // a kill leaves a cut file, not a FIFO
    ck_assert_int_eq(unlink(p), 0);
    write_file("run/checkpoints/0000002.safetensors.tmp", "partial", 7);
    rc = run(TRAIN " --iters 4 --ckpt-every 2 --out %s/run", tu_tmp);
    ck_assert_msg(rc == 1 && strstr(g_err, "already holds a run"), "%s", err_tail());
    rc = run("train --resume --out %s/run", tu_tmp);  // the stored command line gives the run's settings
    expect_ok(rc, "--resume of a run without a checkpoint");
    ck_assert_msg(strstr(g_err, "has no checkpoint (log.csv had 2 rows): starting the run over from step 0 with "
                                "its stored command line") &&
                  strstr(g_err, "restart-1") && strstr(g_err, "DiT-T/8") && strstr(g_err, "done: step 4"), "%s",
                  err_tail());
    path_in(p, sizeof p, "run/restart-1/log.csv");
    ck_assert_int_eq(run_log_rows(p), 2);
    path_in(p, sizeof p, "run/log.csv");
    ck_assert_int_eq(run_log_rows(p), 4);
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// 3. numbers that must stay finite

// The random Inception (eval/inception.h) with fc.weight multiplied by 2 sqrt(2048): its std goes
// from 1/sqrt(2048) to 2, the sharply peaked logits.
START_TEST(test_is_with_peaked_logits_is_finite) {
    tu_make_tmpdir("hostile");
    InceptionTensor t[INCEPTION_NTENSORS];
    int nt = inception_tensors(t);
    StWriter *wr = st_writer_new();
    float **vals = calloc((size_t)nt, sizeof *vals);
    for (int i = 0; i < nt; i++) {
        int64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
        vals[i] = malloc((size_t)numel * sizeof(float));
        inception_random_tensor(t[i].name, t[i].ndim, t[i].shape, vals[i]);
        if (!strcmp(t[i].name, "fc.weight"))
            for (int64_t k = 0; k < numel; k++) vals[i][k] *= (float)(2.0 * sqrt(2048.0));
        st_writer_add(wr, t[i].name, ST_F32, t[i].shape, t[i].ndim, vals[i]);
    }
    char wpath[400], spath[400];
    path_in(wpath, sizeof wpath, "inception_fc_std2.safetensors");
    MalaErr err;
    ck_assert_msg(st_writer_save(wr, wpath, &err) == 0, "%s", err.msg);
    st_writer_free(wr);
    for (int i = 0; i < nt; i++) free(vals[i]);
    free(vals);
    // 8 images of 32x32 RGB, noise of alternating sources and contrasts
    enum { N = 8, S = 32 };
    uint8_t *img = malloc((size_t)N * S * S * 3);
    float *u = malloc((size_t)S * S * 3 * sizeof *u);
    for (int i = 0; i < N; i++) {
        eval_rand_fill(u, (size_t)S * S * 3, i & 1 ? "b" : "a", 0.0, (i % 5 + 1) / 5.0);
        for (int k = 0; k < S * S * 3; k++) img[(size_t)i * S * S * 3 + k] = (uint8_t)(u[k] * 255.0f);
    }
    NpyArray a;
    npy_wrap(&a, "|u1", img, 4, (int64_t[]){N, S, S, 3});
    path_in(spath, sizeof spath, "samples.npz");
    const char *keys[] = {"arr_0"};
    ck_assert_msg(npz_save(spath, keys, &a, 1, &err) == 0, "%s", err.msg);
    free(img);
    free(u);
    int rc = run("eval is --samples %s --inception %s --splits 2 --threads 2", spath, wpath);
    expect_ok(rc, "eval is with peaked logits");
    JsonValue *v = json_parse(g_out, strlen(g_out), &err);
    ck_assert_msg(v != NULL, "the result line is not JSON (%s): %s", err.msg, g_out);
    const JsonValue *m = json_get(v, "is_mean"), *s = json_get(v, "is_std");
    ck_assert(m && s && m->type == JSON_NUMBER && s->type == JSON_NUMBER);
    printf("eval is, fc std 2: IS %.6f +- %.6f (%s)\n", m->number, s->number, g_out);
    ck_assert_msg(m->number >= 1.0 - 1e-9 && m->number <= N / 2 + 1e-9, "IS %g outside [1, split size]", m->number);
    json_free(v);

    // A NaN in fc.weight makes every logit NaN: an error, and no JSON line (it printed "is_mean":nan)
    StFile f;
    ck_assert_msg(st_open(&f, wpath, &err) == 0, "%s", err.msg);
    size_t off = (size_t)((const uint8_t *)st_data(&f, st_find(&f, "fc.weight")) - (const uint8_t *)f.map);
    st_close(&f);
    float nan = NAN;
    int fd = open(wpath, O_WRONLY);
    ck_assert(fd >= 0 && pwrite(fd, &nan, 4, (off_t)off) == 4 && close(fd) == 0);
    rc = run("eval is --samples %s --inception %s --splits 2 --threads 2", spath, wpath);
    expect_last_error(rc, "eval is with a NaN weight", "is nan");
    ck_assert_msg(g_out[0] == 0, "a result line was printed: %s", g_out);
    tu_rm_tmpdir();
}
END_TEST

// Waits (at most 60 s) until the log has `rows` rows; returns the rows it has.
static int wait_for_rows(const char *csv, int rows) {
    double t0 = now_seconds();
    int n;
    while ((n = run_log_rows(csv)) < rows && now_seconds() - t0 < 60) usleep(20000);
    return n;
}

// A run stopped with SIGSTOP for 3 s and continued leaves the stop out of its training seconds:
// no two consecutive log rows' elapsed_s are the stop apart, and its img/s stays a step's.
START_TEST(test_sigstop_left_out_of_elapsed) {
    tu_make_tmpdir("hostile");
    char ep[300], args[1024], csv[400];
    path_in(ep, sizeof ep, "stderr");
    path_in(csv, sizeof csv, "run/log.csv");
    snprintf(args, sizeof args, TRAIN " --iters 1000000 --ckpt-every 1000000 --threads 1 --out %s/run", tu_tmp);
    pid_t pid = spawn(ep, args);
    int before = wait_for_rows(csv, 5);
    ck_assert_msg(before >= 5, "the run logged %d rows in 60 s:\n%s", before, (slurp(ep, g_err, sizeof g_err), err_tail()));
    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
    usleep(3000000);
    ck_assert_int_eq(kill(pid, SIGCONT), 0);
    int after = wait_for_rows(csv, run_log_rows(csv) + 5);
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    int rc = wait_status(pid);
    slurp(ep, g_err, sizeof g_err);
    ck_assert_msg(rc == 130, "SIGINT after a SIGSTOP: exit %d:\n%s", rc, err_tail());
    RunLog l = {0};
    ck_assert(run_log_read(csv, UINT64_MAX, &l) > 0);
    ck_assert_msg(l.n >= after && after >= before + 5, "%d rows, %d before the stop, %d after", l.n, before, after);
    double gap = 0, min_rate = INFINITY;
    for (int i = 1; i < l.n; i++) {
        if (l.elapsed[i] - l.elapsed[i - 1] > gap) gap = l.elapsed[i] - l.elapsed[i - 1];
        if (l.img_s[i] < min_rate) min_rate = l.img_s[i];
    }
    printf("SIGSTOP for 3 s: %d rows, the largest step between rows' elapsed_s %.3f s, the lowest img/s %.1f\n", l.n,
           gap, min_rate);
    ck_assert_msg(gap < 1.5, "the 3 s stop was counted as training: consecutive rows %.3f s apart", gap);
    ck_assert_msg(min_rate > 2 / 1.5, "a row's img/s counted the stop: %.2f (2 images a step)", min_rate);
    run_log_free(&l);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("hostile");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_npz_zip64_extra_field);
    tcase_add_test(tc, test_torch_pickle_mark_first);
    tcase_add_test(tc, test_idx_gzip_cut_short);
    tcase_add_test(tc, test_16bit_pnm_in_a_folder);
    tcase_add_test(tc, test_refused_images_are_skipped);
    tcase_add_test(tc, test_stale_tmp_removed);
    tcase_add_test(tc, test_sigterm_during_startup);
    tcase_add_test(tc, test_sigterm_during_checkpoint_write);
    tcase_add_test(tc, test_sigint_then_resume_to_iters);
    tcase_add_test(tc, test_sigint_during_evaluation);
    tcase_add_test(tc, test_second_and_third_signal);
    tcase_add_test(tc, test_sigstop_left_out_of_elapsed);
    tcase_add_test(tc, test_is_with_peaked_logits_is_finite);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

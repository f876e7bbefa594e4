// `mala train`'s memory plan (train/mem_plan.c): a run that cannot fit is refused before anything is
// created, with what would fit; the estimate it prints is checked against the peak RSS of real
// one-step runs of three backbones; the cgroup reader on a fake cgroup directory.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/mem_plan.h"
#include "testutil.h"
#include "testcli.h"  // defines: run, g_err, mala_bin

// Peak RSS of the tested estimate may differ by this much: the estimate counts every allocation
// in full and the runtime's buffers as one constant; measured 1.01-1.04x on two threads.
#define EST_MIN 0.9
#define EST_MAX 1.25

// The count of "--batch N fits" in the error, 0 without one.
static int fitting_batch(const char *msg) {
    const char *s = strstr(msg, "): --batch ");
    int b = 0;
    return s && sscanf(s, "): --batch %d fits", &b) == 1 ? b : 0;
}

START_TEST(test_refuse_up_front) {
    tu_make_tmpdir("mem");
    setenv("MALA_TEST_MEMORY", "300M", 1);
    const char *dir = tp("run");
#define XS2 "train --model DiT-XS/2 --limit 64 --iters 1 --sample-every 0 --threads 2"
    int refused = run(XS2 " --batch 16 --out %s", dir);
    ck_assert_msg(refused == 2, "a batch beyond memory: exit %d, expected 2", refused);
    expect_error(refused, "a batch beyond memory", "needs about", "MB available");
    ck_assert_msg(!exists(dir), "the refused run created %s", dir);
    int b = fitting_batch(g_err);
    ck_assert_msg(b >= 1 && b < 16, "no smaller batch suggested: %s", g_err);
    ck_assert_msg(strstr(g_err, "--model DiT-"), "no smaller preset suggested: %s", g_err);
    // the batch it names passes the same check and trains
    int rc = run(XS2 " --batch %d --out %s", b, dir);
    ck_assert_msg(rc == 0, "--batch %d, said to fit, exit %d: %s", b, rc, g_err);
    ck_assert_msg(strstr(g_err, "preparing DiT-XS/2 for batch"), "no 'preparing' line: %s", g_err);
    // the case: DiT-XL/2 at batch 2 counted whole (weights, optimiser, grid generator)
    setenv("MALA_TEST_MEMORY", "16G", 1);
    expect_error(run("train --model DiT-XL/2 --batch 2 --iters 1 --out %s", tp("xl")), "DiT-XL/2",
                 "DiT-XL/2 needs about", "weights, gradient, EMA and AdamW moments");
    ck_assert_msg(strstr(g_err, "--model DiT-"), "no smaller preset suggested: %s", g_err);
    ck_assert_msg(!exists(tp("xl")), "the refused run created its directory");
    unsetenv("MALA_TEST_MEMORY");
    tu_rm_tmpdir();
}
END_TEST

// Runs mala with args (NULL-terminated) and returns its peak RSS in bytes; stderr goes to err_path.
static double peak_rss(const char *const *args, const char *err_path) {
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)mala_bin();
    for (; *args && n < 31; args++) argv[n++] = (char *)*args;
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        FILE *e = freopen(err_path, "w", stderr);
        (void)e;
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    ck_assert_int_eq(wait4(pid, &st, 0, &ru), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exit %d", argv[2], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return (double)ru.ru_maxrss * 1024;
}

// The "about X UNIT" of the preparing line, in bytes.
static double printed_estimate(const char *msg) {
    const char *units[] = {"bytes", "KB", "MB", "GB", "TB"};
    const char *s = strstr(msg, "preparing ");
    s = s ? strstr(s, ": about ") : NULL;
    ck_assert_msg(s != NULL, "no estimate printed: %s", msg);
    double v;
    char unit[8];
    ck_assert_int_eq(sscanf(s, ": about %lf %7s", &v, unit), 2);
    for (int i = 0; i < 5; i++, v *= 1024)
        if (!strcmp(unit, units[i])) return v;
    ck_abort_msg("unit %s", unit);
    return 0;
}

START_TEST(test_estimate_vs_peak_rss) {
#if defined(__SANITIZE_ADDRESS__)
    return;  // the sanitizer's shadow memory and quarantine are no part of the estimate
#endif
    tu_make_tmpdir("memrss");
    const char *presets[3] = {"DiT-XS/2", "DiG-T/2", "DiC-T"};
    for (int i = 0; i < 3; i++) {
        char out[512], errp[512];
        snprintf(out, sizeof out, "%s/run%d", tu_tmp, i);
        snprintf(errp, sizeof errp, "%s/err%d", tu_tmp, i);
        const char *args[] = {"train", "--model", presets[i], "--batch", "8", "--limit", "64", "--iters", "1",
                              "--sample-every", "0", "--threads", "2", "--out", out, NULL};
        double rss = peak_rss(args, errp);
        slurp(errp, g_err, sizeof g_err);
        double est = printed_estimate(g_err), r = est / rss;
        printf("%s batch 8: estimate %.1f MB, peak RSS %.1f MB, ratio %.3f\n", presets[i], est / 1048576,
               rss / 1048576, r);
        ck_assert_msg(r >= EST_MIN && r <= EST_MAX, "%s: estimate %.0f vs peak RSS %.0f bytes (ratio %.3f not in %g..%g)",
                      presets[i], est, rss, r, EST_MIN, EST_MAX);
    }
    tu_rm_tmpdir();
}
END_TEST

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_cgroup_reader) {
    tu_make_tmpdir("cgroup");
    ck_assert(memory_cgroup_free(tu_tmp) < 0);  // no memory.max: no limit
    write_file(tp("memory.max"), "max\n");
    ck_assert(memory_cgroup_free(tu_tmp) < 0);
    write_file(tp("memory.max"), "1000000\n");
    write_file(tp("memory.current"), "600000\n");
    write_file(tp("memory.stat"), "anon 300000\nfile 200000\nkernel 100000\n");
    ck_assert_double_eq(memory_cgroup_free(tu_tmp), 600000);  // the page cache is reclaimable
    write_file(tp("memory.current"), "1200000\n");
    write_file(tp("memory.stat"), "anon 1200000\nfile 0\n");
    ck_assert_double_eq(memory_cgroup_free(tu_tmp), 0);
    setenv("MALA_TEST_MEMORY", "2G", 1);
    double total;
    ck_assert_double_eq(memory_available(&total), 2.0 * (1 << 30));
    ck_assert_double_eq(total, 2.0 * (1 << 30));
    unsetenv("MALA_TEST_MEMORY");
    ck_assert(memory_available(&total) > 0 && total > 0);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("mem");
    TCase *tc = tcase_create("mem");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_cgroup_reader);
    tcase_add_test(tc, test_refuse_up_front);
    tcase_add_test(tc, test_estimate_vs_peak_rss);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

// Running the `mala` binary from a Check suite: run() executes `mala ARGS` through the shell
// (stdin from /dev/null) and keeps its stdout and stderr in g_out / g_err. Needs testutil.h's
// tu_tmp (the test's temporary directory). Header-only, like testutil.h.
#ifndef MALA_TESTCLI_H
#define MALA_TESTCLI_H

#include <fcntl.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char g_out[1 << 16], g_err[1 << 16];  // stdout and stderr of the last run()

// $MALA_BIN, else ./mala (make test runs from the repository root).
static inline const char *mala_bin(void) { return getenv("MALA_BIN") ? getenv("MALA_BIN") : "./mala"; }

static inline void slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
}

// Runs `mala ARGS` (a printf format); returns the exit status, or 128 + the signal that ended it.
static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int run(const char *fmt, ...) {
    char args[4096], cmd[5000], op[300], ep[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(op, sizeof op, "%s/.stdout", tu_tmp);
    snprintf(ep, sizeof ep, "%s/.stderr", tu_tmp);
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s </dev/null", mala_bin(), args, op, ep);
    int st = system(cmd);
    slurp(op, g_out, sizeof g_out);
    slurp(ep, g_err, sizeof g_err);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Runs `mala argv[0] argv[1] ...` (argv NULL-terminated; argv[0] the command, e.g. "sample")
// without a shell, its stdout into out and its stderr into err (cap bytes each; NULL: discarded).
// Returns the exit status, or 128 + the signal that ended it.
static int run_argv(const char *const *argv, char *out, size_t cap_out, char *err, size_t cap_err)
    __attribute__((unused));
static int run_argv(const char *const *argv, char *out, size_t cap_out, char *err, size_t cap_err) {
    char po[] = "/tmp/mala_run_out_XXXXXX", pe[] = "/tmp/mala_run_err_XXXXXX";
    int fo = mkstemp(po), fe = mkstemp(pe);
    if (fo < 0 || fe < 0) { perror("mkstemp"); abort(); }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); abort(); }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        const char *args[128];
        int n = 0;
        args[n++] = mala_bin();
        while (argv[n - 1] && n < 127) { args[n] = argv[n - 1]; n++; }
        args[n] = NULL;
        execv(mala_bin(), (char *const *)args);
        fprintf(stderr, "exec %s failed\n", mala_bin());
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {}
    ssize_t got;
    if (out) { got = pread(fo, out, cap_out - 1, 0); out[got > 0 ? got : 0] = 0; }
    if (err) { got = pread(fe, err, cap_err - 1, 0); err[got > 0 ? got : 0] = 0; }
    close(fo); close(fe);
    unlink(po); unlink(pe);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

#define RUN_OK(...) do { int rc_ = run(__VA_ARGS__); \
    ck_assert_msg(rc_ == 0, "exit %d:\n%s", rc_, g_err); } while (0)

// The last run() failed (exit 1 or 2, no signal) with exactly one "error:" line on stderr holding
// both phrases (NULL: not checked), and named no temporary file.
static void expect_error(int rc, const char *what, const char *p1, const char *p2) __attribute__((unused));
static void expect_error(int rc, const char *what, const char *p1, const char *p2) {
    ck_assert_msg(rc == 1 || rc == 2, "%s: exit %d (expected an error)\n%s", what, rc, g_err);
    const char *nl = strchr(g_err, '\n');
    ck_assert_msg(!strncmp(g_err, "error: ", 7) && nl && !nl[1], "%s: expected one 'error:' line, got:\n%s", what,
                  g_err);
    ck_assert_msg(!p1 || strstr(g_err, p1), "%s: message lacks '%s': %s", what, p1, g_err);
    ck_assert_msg(!p2 || strstr(g_err, p2), "%s: message lacks '%s': %s", what, p2, g_err);
    ck_assert_msg(!strstr(g_err, ".tmp"), "%s: the message shows the internal .tmp name: %s", what, g_err);
}

#endif

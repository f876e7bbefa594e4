// Running the `mala` binary from a Check suite: run() executes `mala ARGS` through the shell
// (stdin from /dev/null) and keeps its stdout and stderr in g_out / g_err. Needs testutil.h's
// tu_tmp (the test's temporary directory). Header-only, like testutil.h.
#ifndef MALA_TESTCLI_H
#define MALA_TESTCLI_H

#include <stdarg.h>
#include <sys/wait.h>

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

#endif

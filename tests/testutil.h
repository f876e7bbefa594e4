// Helpers shared by the Check suites: deterministic random fills, fixture paths, and a central
// finite-difference gradient check. Header-only (static) so each suite stays one file.
#ifndef MALA_TESTUTIL_H
#define MALA_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

// xorshift-based uniform in [lo, hi); deterministic per seed.
static inline uint64_t tu_next(uint64_t *s) {
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s;
}
static inline void tu_fill(float *x, size_t n, float lo, float hi, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 88172645463325252ull;
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)((tu_next(&s) >> 11) * (1.0 / 9007199254740992.0));
}
static inline double tu_dot(const float *a, const float *b, size_t n) {
    double s = 0; for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i]; return s;
}
// max |a-b| / max(max|b|, floor): the normalised error used across suites.
static inline double tu_nerr(const float *a, const float *b, size_t n, double floor) {
    double md = 0, mb = floor;
    for (size_t i = 0; i < n; i++) { double d = fabs((double)a[i] - b[i]); if (d > md) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]); }
    return md / mb;
}

// Central finite differences of a scalar loss(ctx) w.r.t. x[idx] for up to `count` indices
// spread over x; compares with analytic[idx]. Fails the test with the op name and the worst index
// when |fd - an| > atol + rtol * max(|fd|, |an|).
typedef double (*tu_loss_fn)(void *ctx);
static inline void tu_fd_check(const char *what, float *x, size_t n, const float *analytic, tu_loss_fn loss,
                               void *ctx, float h, double atol, double rtol, size_t count) {
    size_t step = n > count ? n / count : 1;
    for (size_t i = 0; i < n; i += step) {
        float x0 = x[i];
        x[i] = x0 + h; double lp = loss(ctx);
        x[i] = x0 - h; double lm = loss(ctx);
        x[i] = x0;
        double fd = (lp - lm) / (2.0 * h), an = analytic[i];
        double tol = atol + rtol * fmax(fabs(fd), fabs(an));
        ck_assert_msg(fabs(fd - an) <= tol, "%s: grad[%zu] analytic %.6g vs finite-difference %.6g", what, i, an, fd);
    }
}

// A temporary directory for the running test (tu_tmp), removed with everything in it.
static char tu_tmp[256] __attribute__((unused));
static inline void tu_make_tmpdir(const char *tag) {
    snprintf(tu_tmp, sizeof tu_tmp, "/tmp/mala_%s_XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(tu_tmp));
}
static inline void tu_rm_tmpdir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tu_tmp);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tu_tmp);
}

static inline double tu_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

// Reads a whole file (a fixture or a test's output); fails the test when absent. A NUL follows
// the bytes, so a text file is a string.
static inline void *tu_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "missing %s (a fixture: run the tools/ scripts with /usr/bin/python3)", path);
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? (size_t)n + 1 : 1);
    ck_assert(fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n > 0 ? n : 0] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

// Runs a suite and returns the process exit status.
static inline int tu_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

// tu_tmp/NAME (64 buffers in turn: up to 64 paths alive at once).
static const char *tp(const char *name) __attribute__((unused));
static const char *tp(const char *name) {
    static char buf[64][512];
    static int i;
    i = (i + 1) % 64;
    snprintf(buf[i], sizeof buf[i], "%s/%s", tu_tmp, name);
    return buf[i];
}

static int exists(const char *path) __attribute__((unused));
static int exists(const char *path) { struct stat st; return stat(path, &st) == 0; }

#endif

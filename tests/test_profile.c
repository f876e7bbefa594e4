// The yardstick: the profiling backend (backend_profile.h) forwards every op to the real one
// unchanged and books its time under the right kind; `mala bench train --profile` prints every
// kind, and its kinds plus the time outside ops add up to the step; the benchmarks' spread
// (bench_stats.h) is the median, min and max. No timing thresholds: only consistency.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/backend_profile.h"
#include "core/bench_stats.h"
#include "formats/json.h"
#include "testutil.h"
#include "testcli.h"

// Slots that are not ops and are forwarded untimed.
static const char *const UNTIMED[] = {
    "alloc", "release", "sync", "set_precision", "precision", "gemm_gflops", "weights_changed", "mala_cache_floats",
    "linattn_cache_floats", "softmax_cache_floats", "gla_cache_floats", "conv2d_workspace_floats",
};

static int untimed(const char *name) {
    for (size_t i = 0; i < sizeof UNTIMED / sizeof *UNTIMED; i++)
        if (!strcmp(UNTIMED[i], name)) return 1;
    return 0;
}

START_TEST(test_every_op_wrapped) {
    const Backend *cpu = backend_cpu(), *p = backend_profiled(cpu);
    backend_check(p);
    int timed = 0;
#define CHECK_SLOT(s)                                                                                              \
    if (untimed(#s)) ck_assert_msg((void *)p->s == (void *)cpu->s, "%s should forward untimed", #s);               \
    else {                                                                                                         \
        ck_assert_msg((void *)p->s != (void *)cpu->s, "slot %s is not timed: rerun tools/gen_backend_profile.py", \
                      #s);                                                                                         \
        timed++;                                                                                                   \
    }
    MALA_BACKEND_SLOTS(CHECK_SLOT)
#undef CHECK_SLOT
    const char *const *names;
    ck_assert_int_eq(backend_profile_timed_slots(&names), timed);
    ck_assert_str_eq(p->name, cpu->name);
}
END_TEST

START_TEST(test_forwarding_and_kinds) {
    const Backend *cpu = backend_cpu(), *p = backend_profiled(cpu);
    enum { N = 5, DIN = 7, DOUT = 3 };
    float in[N * DIN], w[DOUT * DIN], b[DOUT], a[N * DOUT], c[N * DOUT];
    tu_fill(in, N * DIN, -1, 1, 1);
    tu_fill(w, DOUT * DIN, -1, 1, 2);
    tu_fill(b, DOUT, -1, 1, 3);
    cpu->linear_fwd(a, in, w, b, N, DIN, DOUT);
    p->linear_fwd(c, in, w, b, N, DIN, DOUT);
    ck_assert_int_eq(memcmp(a, c, sizeof a), 0);
    float rs[N], lo[N * DIN], lp[N * DIN];
    cpu->layernorm_fwd(lo, rs, in, N, DIN);
    p->layernorm_fwd(lp, rs, in, N, DIN);
    ck_assert_int_eq(memcmp(lo, lp, sizeof lo), 0);
    ck_assert(p->sumsq(in, N * DIN) == cpu->sumsq(in, N * DIN));  // a value-returning op
    p->zero(lp, sizeof lp);
    p->scale(lp, 2.0f, N * DIN);
    BackendProfile r = backend_profile_read();
    const int64_t want[PROF_KINDS] = {[PROF_GEMM] = 1, [PROF_NORM] = 1, [PROF_OPTIMISER] = 1, [PROF_MEMORY] = 1,
                                      [PROF_ELEMENTWISE] = 1};
    for (int k = 0; k < PROF_KINDS; k++) {
        ck_assert_msg(r.calls[k] == want[k], "%s: %lld calls, expected %lld", backend_profile_kind_name(k),
                      (long long)r.calls[k], (long long)want[k]);
        ck_assert(r.seconds[k] >= 0 && (r.calls[k] || r.seconds[k] == 0));
    }
    backend_profile_reset();
    r = backend_profile_read();
    for (int k = 0; k < PROF_KINDS; k++) ck_assert(r.calls[k] == 0 && r.seconds[k] == 0);
    ck_assert(backend_profile_kind_name(PROF_KINDS) == NULL);
}
END_TEST

START_TEST(test_spread) {
    const double v[] = {5, 1, 4, 2, 3}, w[] = {4, 1, 3, 2};
    Spread s = spread_of(v, 5);
    ck_assert(s.median == 3 && s.min == 1 && s.max == 5 && s.n == 5);
    ck_assert(v[0] == 5);  // not sorted in place
    s = spread_of(w, 4);
    ck_assert(s.median == 2.5 && s.min == 1 && s.max == 4);
    s = spread_of(w, 1);
    ck_assert(s.median == 4 && s.min == 4 && s.max == 4);
}
END_TEST

// `mala argv...` (argv[0] = "bench"), stdout and stderr into the buffers.
static int run_bench(const char **argv, char *out, size_t cap_out, char *err, size_t cap_err) {
    return run_argv(argv, out, cap_out, err, cap_err);
}

static double num(const JsonValue *o, const char *key) {
    const JsonValue *v = json_get(o, key);
    ck_assert_msg(v && v->type == JSON_NUMBER, "no number \"%s\"", key);
    return v->number;
}

START_TEST(test_bench_train_profile) {
    static char out[1 << 14], err[1 << 14];
    const char *argv[] = {"bench", "train", "--model", "DiT-T/4", "--image-size", "16", "--batch", "2", "--steps", "3",
                          "--profile", "--threads", "1", "--device", "cpu", NULL};
    int rc = run_bench(argv, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "mala bench train --profile exited with %d:\n%s", rc, err);
    MalaErr e;
    JsonValue *j = json_parse(out, strlen(out), &e);
    ck_assert_msg(j, "%s: %s", e.msg, out);
    const JsonValue *p = json_get(j, "profile_s_per_step");
    ck_assert_msg(p && p->type == JSON_OBJECT, "no profile in %s", out);
    double sum = 0;
    for (int k = 0; k < PROF_KINDS; k++) {
        const char *name = backend_profile_kind_name(k);
        double s = num(p, name);
        ck_assert_msg(s >= 0, "%s: %g", name, s);
        sum += s;
        ck_assert_msg(strstr(err, name), "the table lacks %s:\n%s", name, err);
    }
    ck_assert(num(p, "gemm") > 0 && num(p, "attention") > 0 && num(p, "optimiser") > 0);
    const double outside = num(p, "outside_ops"), total = num(p, "total");
    ck_assert_msg(outside >= -1e-5 && fabs(sum + outside - total) <= 1e-5, "kinds %g + outside %g != total %g", sum,
                  outside, total);
    // the step times: the total is the mean step, the median lies within [min, max]
    const double med = num(j, "s_per_step"), lo = num(j, "s_per_step_min"), hi = num(j, "s_per_step_max");
    ck_assert(lo <= med + 5e-5 && med <= hi + 5e-5 && lo <= total + 5e-5 && total <= hi + 5e-5);
    ck_assert(num(j, "steps") == 3);
    json_free(j);
}
END_TEST

int main(void) {
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_op_wrapped);
    tcase_add_test(tc, test_forwarding_and_kinds);
    tcase_add_test(tc, test_spread);
    tcase_add_test(tc, test_bench_train_profile);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

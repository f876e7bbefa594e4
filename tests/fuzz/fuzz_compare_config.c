// libFuzzer harness: the `mala compare` config parser (compare/compare_config.c): any bytes give a
// config or a one-line error naming the file, and a parsed config is one the harness can use
// (one budget; every arm's evaluation points, at any GFLOP/img, in range and increasing; flags
// split into words that exist).
#include <string.h>

#include "compare/compare_config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static CompareConfig c;
    MalaErr err;
    if (compare_config_parse((const char *)data, size, "fuzz.ini", &c, &err)) {
        if (strncmp(err.msg, "fuzz.ini", 8) || strchr(err.msg, '\n')) abort();
        return 0;
    }
    if (c.narms < 1 || c.narms > COMPARE_MAX_ARMS || c.nseeds < 1 || c.batch < 1) abort();
    if ((c.budget_images > 0) == (c.budget_tflop > 0) || c.budget_images < 0) abort();  // exactly one budget
    static const double GFLOP[] = {0.01, 0.4, 12, 3000};  // GFLOP/img: a tiny model to DiT-XL/2's 119 x 25
    for (int g = 0; g < 4; g++) {
        int64_t *p;
        double *t;
        const int n = compare_arm_points(&c, GFLOP[g], &p, &t);
        if (n < 1 || n > 1000 || p[n - 1] != compare_arm_budget(&c, GFLOP[g]) || p[0] < 1) abort();
        if (c.budget_tflop > 0 && (!t || t[n - 1] != c.budget_tflop || p[0] % c.batch)) abort();
        for (int i = 1; i < n; i++)
            if (p[i] <= p[i - 1] || (t && t[i] <= t[i - 1])) abort();
        free(p);
        free(t);
        if (compare_steps(&c, compare_arm_budget(&c, GFLOP[g])) < 1) abort();
    }
    for (int a = 0; a < c.narms; a++)
        for (int i = 0; i < c.arms[a].nflags; i++)
            if (!c.arms[a].flag[i][0] || strchr(c.arms[a].flag[i], ' ')) abort();
    return 0;
}

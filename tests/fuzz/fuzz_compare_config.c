// libFuzzer harness: the `mala compare` config parser (compare/compare_config.c): any bytes give a
// config or a one-line error naming the file, and a parsed config is one the harness can use
// (evaluation points in range and increasing, flags split into words that exist).
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
    if (c.narms < 1 || c.narms > COMPARE_MAX_ARMS || c.nseeds < 1 || c.batch < 1 || c.budget_images < 1) abort();
    int64_t *p;
    int n = compare_eval_points(&c, &p);
    if (n < 1 || n > 1000 || p[n - 1] != c.budget_images) abort();
    for (int i = 1; i < n; i++)
        if (p[i] <= p[i - 1]) abort();
    free(p);
    if (compare_steps(&c, c.budget_images) < 1) abort();
    for (int a = 0; a < c.narms; a++)
        for (int i = 0; i < c.arms[a].nflags; i++)
            if (!c.arms[a].flag[i][0] || strchr(c.arms[a].flag[i], ' ')) abort();
    return 0;
}

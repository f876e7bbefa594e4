// defines: spread_of
#include "core/bench_stats.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

Spread spread_of(const double *v, int n) {
    double *s = xmalloc((size_t)n * sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    Spread r = {.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]), .min = s[0], .max = s[n - 1], .n = n};
    free(s);
    return r;
}

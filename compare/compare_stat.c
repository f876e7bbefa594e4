// defines: compare_stat
#include <math.h>

#include "compare/compare.h"

// Mean and sample standard deviation (n - 1) of the finite values of v.
CompareStat compare_stat(const double *v, int n) {
    CompareStat s = {NAN, NAN, 0};
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) { sum += v[i]; s.n++; }
    if (!s.n) return s;
    s.mean = sum / s.n;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) sq += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = s.n > 1 ? sqrt(sq / (s.n - 1)) : NAN;
    return s;
}

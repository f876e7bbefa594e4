// The spread of repeated timings: benchmarks report the median with the min and max, not one run.
#ifndef MALA_BENCH_STATS_H
#define MALA_BENCH_STATS_H

typedef struct {
    double median, min, max;  // of the n values (median of an even count: the mean of the middle two)
    int n;
} Spread;

Spread spread_of(const double *v, int n);  // n >= 1; v is not modified

#endif

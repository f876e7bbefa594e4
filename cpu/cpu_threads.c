// defines: set_threads, cpu_usable
#include "cpu/cpu_threads.h"

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef MALA_BLIS
void bli_thread_set_num_threads(int64_t n);  // blis.h: dim_t is int64_t
#else
void openblas_set_num_threads(int n);
#endif

int cpu_usable(void) {
    int n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) n = CPU_COUNT(&set);
    // cgroup v2 quota "QUOTA PERIOD" (or "max PERIOD"): QUOTA/PERIOD CPUs' worth of time, rounded up
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        long long quota, period;
        if (fscanf(f, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0) {
            long long q = (quota + period - 1) / period;
            if (q < n) n = (int)q;
        }
        fclose(f);
    }
    return n < 1 ? 1 : n;
}

void set_threads(int n) {
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    // More threads than CPUs to run them makes OpenMP's barriers wait on descheduled threads (a
    // 2-core machine at --threads 64 ran at half speed): warn once per process.
    static int warned;
    const int usable = cpu_usable();
    if (n > usable && !warned) {
        warned = 1;
        fprintf(stderr, "mala: warning: --threads %d is more than the %d CPU(s) this process may use "
                "(affinity / cgroup quota); it will run slower than --threads %d\n", n, usable, usable);
    }
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
#ifdef MALA_BLIS
    bli_thread_set_num_threads(n);
#else
    openblas_set_num_threads(n);
#endif
}

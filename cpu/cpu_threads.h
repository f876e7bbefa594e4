// The thread count of the CPU backend: OpenMP's and the BLAS library's.
#ifndef MALA_CPU_THREADS_H
#define MALA_CPU_THREADS_H

#include <stddef.h>

// Applies --threads to OpenMP and OpenBLAS (0 = all cores); warns once when n is more than
// cpu_usable().
void set_threads(int n);

// The CPUs this process may use: its affinity mask, capped by a cgroup v2 cpu.max quota.
int cpu_usable(void);

// Below about this many multiply-adds a parallel region costs more than it saves (tiny shapes,
// finite-difference tests): such calls run on the calling thread.
static inline int cpu_small_work(size_t madds) { return madds < ((size_t)1 << 16); }

#endif

// The thread count of the CPU backend: OpenMP's and the BLAS library's.
#ifndef MALA_CPU_THREADS_H
#define MALA_CPU_THREADS_H

// Applies --threads to OpenMP and OpenBLAS (0 = all cores); warns once when n is more than
// cpu_usable().
void set_threads(int n);

// The CPUs this process may use: its affinity mask, capped by a cgroup v2 cpu.max quota.
int cpu_usable(void);

#endif

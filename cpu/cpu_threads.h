// The thread count of the CPU backend: OpenMP's and the BLAS library's.
#ifndef MALA_CPU_THREADS_H
#define MALA_CPU_THREADS_H

// Applies --threads to OpenMP and OpenBLAS (0 = all cores).
void set_threads(int n);

#endif

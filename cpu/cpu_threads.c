// defines: set_threads
#include "cpu/cpu_threads.h"

#include <stdint.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef MALA_BLIS
void bli_thread_set_num_threads(int64_t n);  // blis.h: dim_t is int64_t
#else
void openblas_set_num_threads(int n);
#endif

void set_threads(int n) {
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
#ifdef MALA_BLIS
    bli_thread_set_num_threads(n);
#else
    openblas_set_num_threads(n);
#endif
}

// Prints the OpenBLAS kernel family for this CPU (cpu/blas_core.h), or nothing: `make test`
// passes it to the test programs as OPENBLAS_CORETYPE, as `mala` sets it for itself.
#include <stdio.h>

#include "cpu/blas_core.h"

int main(void) {
    const char *c = blas_core_for_cpu();
    if (c) puts(c);
    return 0;
}

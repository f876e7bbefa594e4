// OpenBLAS (DYNAMIC_ARCH) picks its kernels from the CPU model, and falls back to its oldest
// x86-64 kernel (Prescott, SSE3) on a model it does not know, such as a virtual machine's
// generic "Intel Xeon Processor": 3-6x slower products measured on this project's AVX-512 VM.
// The kernel family follows from the instruction sets instead.
#ifndef MALA_BLAS_CORE_H
#define MALA_BLAS_CORE_H

// "SkylakeX" with AVX-512 (F, BW, DQ, VL), "Haswell" with AVX2 and FMA, NULL otherwise (leave
// the choice to OpenBLAS).
const char *blas_core_for_cpu(void);

#endif

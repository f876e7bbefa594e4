// Run-time choice of the op backend (--device cpu|cuda; default cuda when a GPU is present).
// defines: backend_select (and backend_cuda for builds without CUDA)
#include <string.h>

#include "backend.h"
#include "common.h"
#ifdef MALA_CUDA
#include "cuda/backend_cuda.h"
#endif

#ifndef MALA_CUDA
const Backend *backend_cuda(const char **why) {
    if (why) *why = "this build has no CUDA backend (nvcc was not found or CUDA=0 was given)";
    return NULL;
}
#endif

static const Backend *select_device(const char *name) {
    const char *why = NULL;
    if (!name || !strcmp(name, "auto")) {
        const Backend *cu = backend_cuda(&why);
        return cu ? cu : backend_cpu();
    }
    if (!strcmp(name, "cpu")) return backend_cpu();
    if (!strcmp(name, "cuda")) {
        const Backend *cu = backend_cuda(&why);
        if (!cu) FATAL("--device cuda: %s; use --device cpu", why);
        return cu;
    }
    FATAL("--device %s: unknown device (expected cpu or cuda)", name);
}

const Backend *backend_select(const char *device, const char *precision) {
    int fp32 = 0;
    if (precision && !strcmp(precision, "fp32")) fp32 = 1;
    else if (precision && strcmp(precision, "tf32")) FATAL("--precision %s: unknown precision (expected tf32 or fp32)", precision);
    const Backend *be = select_device(device);
#ifdef MALA_CUDA
    if (!strcmp(be->name, "cuda")) cuda_set_precision_fp32(fp32);
#endif
    (void)fp32;
    return be;
}

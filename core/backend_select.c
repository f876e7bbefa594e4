// Run-time choice of the op backend (--device cpu|cuda; default cuda when a GPU is present) and its
// precision (--precision), and the check that a table fills every slot.
// defines: backend_select, backend_check, backend_host, backend_on_host (and backend_cuda for builds
//          without CUDA)
#include <string.h>

#include "core/backend.h"
#include "core/common.h"

#define COUNT_SLOT(s) +1
_Static_assert(sizeof(Backend) == sizeof(const char *) + (0 MALA_BACKEND_SLOTS(COUNT_SLOT)) * sizeof(void (*)(void)),
               "a slot of struct Backend is missing from MALA_BACKEND_SLOTS (backend.h)");

void backend_check(const Backend *be) {
#define CHECK_SLOT(s) if (!be->s) FATAL("backend %s: op %s is missing from its table", be->name, #s);
    MALA_BACKEND_SLOTS(CHECK_SLOT)
#undef CHECK_SLOT
}

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

// The set_precision mode (backend.h's PREC_*) of --precision on this backend.
static int precision_mode(const Backend *be, const char *precision) {
    const int cpu = be == backend_cpu();
    if (!precision) return cpu ? PREC_FP32 : PREC_TF32;  // the defaults: the CPU's numbers as before, CUDA's TF32
    if (!strcmp(precision, "fp32")) return PREC_FP32;
    if (!strcmp(precision, "tf32")) return cpu ? PREC_FP32 : PREC_TF32;  // (the CPU has no TF32: fp32)
    if (!strcmp(precision, "int8")) return PREC_INT8;
    return PREC_BF16;  // the CPU: oneDNN; CUDA: cuBLAS with bf16 inputs (ops_bf16.cu)
}

const Backend *backend_select(const char *device, const char *precision) {
    if (precision && strcmp(precision, "fp32") && strcmp(precision, "tf32") && strcmp(precision, "bf16") &&
        strcmp(precision, "int8"))
        FATAL("--precision %s: unknown precision (expected fp32, tf32, bf16 or int8)", precision);
    const int int8 = precision && !strcmp(precision, "int8");
    if (int8 && device && !strcmp(device, "cuda"))  // (said before CUDA is started: the same line with or without a GPU)
        FATAL("--precision int8: int8 products run on the CPU only (CUDA int8 is not there yet); use --device cpu "
              "or --precision tf32");
    const Backend *be = select_device(device);
    backend_check(be);
    if (int8 && be != backend_cpu())
        FATAL("--precision int8: int8 products run on the CPU only (CUDA int8 is not there yet); use --device cpu "
              "or --precision tf32");
    be->set_precision(precision_mode(be, precision));
    return be;
}

const Backend *backend_host(void) { return backend_cpu(); }
int backend_on_host(const Backend *be) { return be == backend_cpu(); }

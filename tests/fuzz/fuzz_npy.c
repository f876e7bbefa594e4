// libFuzzer harness: a .npy file (magic, header dict, dtype and shape checks, data), converted to
// float64 and float32 as the statistics and noise loaders do.
#include "fuzz_util.h"
#include "formats/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    NpyArray a;
    MalaErr err;
    if (npy_parse(data, size, "fuzz.npy", &a, &err)) return 0;
    double *d;
    float *f;
    if (npy_to_f64(&a, &d, "fuzz.npy", &err) == 0) free(d);
    if (npy_to_f32(&a, &f, "fuzz.npy", &err) == 0) free(f);
    npy_free(&a);
    return 0;
}

// libFuzzer harness: the Fashion-MNIST classifier file as `mala eval --features fmnist` reads it
// before anything reaches a backend: st_open, then every tensor of the table checked (present,
// shape, finite, no extra one) and read as float32 (eval/fmnist_table.c).
#include "eval/fmnist_features.h"
#include "fuzz_util.h"
#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    StFile f;
    MalaErr err;
    if (st_open(&f, fuzz_file(data, size), &err)) return 0;
    FmnistParam p[FMNIST_FEAT_NPARAMS];
    size_t n = fmnist_params(p);
    float *host = malloc(n * sizeof *host);
    (void)fmnist_weights_read(&f, host, &err);
    free(host);
    st_close(&f);
    return 0;
}

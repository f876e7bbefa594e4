// libFuzzer harness: a .safetensors file (the header JSON, its validation, every tensor's bytes
// converted to float32, the metadata), as st_open / st_load_f32 read model files.
#include <string.h>

#include "fuzz_util.h"
#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    StFile f;
    MalaErr err;
    if (st_open(&f, fuzz_file(data, size), &err)) return 0;
    for (int i = 0; i < f.n; i++) {
        const StTensor *t = &f.tensors[i];
        size_t n = (size_t)st_numel(t);
        float *dst = malloc(n * sizeof(float) + 1);
        if (st_load_f32(&f, t->name, t->shape, t->ndim, dst, &err) != 0) abort();  // valid after st_open
        free(dst);
        if (st_find(&f, t->name) != t) abort();
    }
    for (int i = 0; i < f.nmeta; i++)
        if (!st_meta(&f, f.meta_keys[i])) abort();
    st_close(&f);
    return 0;
}

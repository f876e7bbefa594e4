// libFuzzer harness: a diffusers AutoencoderKL file as `mala vae` reads it before allocating
// anything: st_open, the config off the tensor shapes (either attention naming, norm_num_groups),
// every tensor checked against the table, then each tensor of the table read as float32.
#include <string.h>

#include "fuzz_util.h"
#include "formats/safetensors.h"
#include "model/vae.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    StFile f;
    MalaErr err;
    if (st_open(&f, fuzz_file(data, size), &err)) return 0;
    VaeConfig c;
    VaeTable t;
    if (vae_config_from_file(&c, &f, &err) == 0 && vae_table_build(&t, &c, &err) == 0) {
        for (int i = 0; i < t.n; i++) {
            const VaeParam *p = &t.p[i];
            if (p->numel > ((size_t)1 << 22)) continue;  // a real file's tensors: far beyond a fuzz input
            float *dst = malloc(p->numel * sizeof(float) + 1);
            (void)st_load_f32(&f, p->name, p->shape, p->ndim, dst, &err);
            free(dst);
        }
        vae_table_free(&t);
    }
    st_close(&f);
    return 0;
}

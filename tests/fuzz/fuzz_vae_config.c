// libFuzzer harness: diffusers' config.json of an AutoencoderKL as `--vae DIR` reads it
// (vae_json_parse, model/vae_json.c): any bytes give a configuration in range or one error line.
#include <math.h>
#include <string.h>

#include "fuzz_util.h"
#include "model/vae.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    VaeJson j;
    MalaErr err;
    if (vae_json_parse((const char *)data, size, "config.json", &j, &err) == 0) {
        // what the parser promises the loader: a usable scale and bounded counts
        if (!(j.scale > 0 && j.scale <= 1000 && isfinite(j.scale))) abort();
        if (j.levels < 0 || j.levels > VAE_MAX_LEVELS || j.groups < 0 || j.latent < 0 || j.layers < 0) abort();
        for (int i = 0; i < j.levels; i++)
            if (j.ch[i] < 1) abort();
    } else if (!memchr(err.msg, 0, sizeof err.msg) || strchr(err.msg, '\n')) {
        abort();  // one terminated line
    }
    return 0;
}

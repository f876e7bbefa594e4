// defines: vae_peek, vae_open_for
//
// The --vae flag's file, for `mala vae`, `mala encode` and `mala bench vae`: its configuration,
// and the file loaded for a batch that fits.
#include "cli/commands.h"

#define VAE_AUTO_BATCH_CAP 8
#define VAE_AUTO_BYTES ((size_t)2 << 30)  // activations budget when --batch is not given

void vae_peek(const char *path, VaeConfig *c) {
    MalaErr err;
    if (vae_config_read(path, c, &err)) FATAL("%s", err.msg);
}

Vae *vae_open_for(const char *path, const Backend *be, int batch, int n, int h, int w, int *batch_out) {
    VaeConfig c;
    MalaErr err;
    vae_peek(path, &c);
    if (batch <= 0) batch = vae_batch_for(&c, be, h, w, VAE_AUTO_BYTES, VAE_AUTO_BATCH_CAP);
    if (batch > n && n > 0) batch = n;
    args_check_memory("--batch", batch, (double)vae_activation_bytes(&c, be, batch, h, w) + vae_weight_bytes(&c),
                      "the VAE's weights and activations");
    Vae *v = vae_load(path, be, batch, h, w, &err);
    if (!v) FATAL("%s", err.msg);
    if (batch_out) *batch_out = batch;
    return v;
}

// mala vae preview-fit: the linear latent-to-RGB projection of a VAE (pipeline/latent_preview.h),
// fitted by least squares on random latents decoded through it, printed as the table a latent
// model's step previews use (rows: latent channels; columns: image channels), with each image
// channel's R^2 and, for an SD-VAE, the published factors the previews take for it beside it.
// defines: cmd_vae_preview_fit
#include <stdio.h>

#include "cli/commands.h"
#include "model/vae.h"
#include "pipeline/latent_preview.h"
#include "cpu/cpu_threads.h"

int cmd_vae_preview_fit(int argc, char **argv) {
    const char *vae = NULL, *device = NULL, *precision = NULL;
    int cells = 8, count = 8, threads = 0;
    uint64_t seed = 0;
    Opt opts[] = {
        {"--vae", OPT_STR, &vae, "FILE", "diffusers AutoencoderKL weights (a file, or a folder with config.json)"},
        {"--cells", OPT_INT, &cells, "G", "latents of G x G cells (default 8)", ARG_MIN(1), ARG_MAX(64)},
        {"--count", OPT_INT, &count, "N", "random latents decoded (default 8)", ARG_MIN(1), ARG_MAX(1024)},
        {"--seed", OPT_U64, &seed, "S", "the latents' seed"},
        OPT_THREADS(&threads), OPT_DEVICE(&device), OPT_PRECISION(&precision),
    };
    args_parse("usage: mala vae preview-fit --vae FILE [--cells 8] [--count 8] [--seed 0]\n\n"
               "Fits out = b + W z, z the VAE's scaled latents ~ N(0, 1), to the mean of each decoded cell's\n"
               "block (clamped to [-1, 1]) by least squares, and prints W (rows: latent channels), b and R^2.",
               opts, (int)(sizeof opts / sizeof opts[0]), argc, argv, 1);
    if (!vae) FATAL("mala vae preview-fit: --vae is required");
    set_threads(threads);
    VaeConfig c;
    vae_peek(vae, &c);
    const int f = vae_factor(&c), batch_cap = count < 8 ? count : 8;
    int batch;
    Vae *v = vae_open_for(vae, backend_select(device, precision), batch_cap, count, cells * f, cells * f, &batch);
    LatentProj p, sd;
    MalaErr err;
    if (latent_proj_fit(&p, v, cells, count, seed, &err)) FATAL("--vae %s: %s", vae, err.msg);
    latent_proj_sd(&sd);
    const int published = p.cin == sd.cin && p.cout == sd.cout && p.factor == sd.factor;
    printf("latent-to-image projection of %s: %d random %dx%d latents, seed %llu%s\n", vae, count, cells, cells,
           (unsigned long long)seed, published ? "; in brackets, for comparison, the SD-VAE's published factors (the previews' for the SD-VAE)" : "");
    for (int ch = 0; ch < p.cin; ch++) {
        printf("  z%-2d", ch);
        for (int o = 0; o < p.cout; o++) {
            printf(" %+8.4f", p.w[o][ch]);
            if (published) printf(" [%+7.4f]", sd.w[o][ch]);
        }
        printf("\n");
    }
    printf("  bias");
    for (int o = 0; o < p.cout; o++) printf(" %+8.4f%s", p.b[o], published ? "          " : "");
    printf("\n  R^2 ");
    for (int o = 0; o < p.cout; o++) printf(" %8.4f%s", p.r2[o], published ? "          " : "");
    printf("\n");
    vae_free(v);
    return 0;
}

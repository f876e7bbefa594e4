// defines: generator_recorded_vae, generator_attach_vae, generator_out_channels, generator_out_size,
//          generator_out_floats, generator_decode, generator_preview
//
// Latent models (docs/design.md §8): their samples are VAE latents times the model's latent_scale, and
// every command that writes or shows images decodes them here, through the one VAE it was given.
#include <string.h>
#include <unistd.h>

#include "pipeline/generate.h"
#include "model/vae.h"
#include "model/torch_load.h"  // defines: torch_file_sniff

#define DECODE_BATCH_CAP 8
#define DECODE_BYTES ((size_t)2 << 30)  // the VAE's activations budget

static int is_latent(const Generator *g) { return g->net->cfg.latent_scale > 0; }

int generator_recorded_vae(const Generator *g, const char *model, const char **vae, char *buf, size_t cap,
                           MalaErr *err) {
    if (*vae || !is_latent(g)) return 0;
    int rc = gen_model_recorded_vae(model, buf, cap, err);
    if (rc == 1) *vae = buf;
    return rc;
}

int gen_model_recorded_vae(const char *model, char *buf, size_t cap, MalaErr *err) {
    if (torch_file_sniff(model)) return 0;  // a PyTorch .pt records no VAE
    StFile f;
    if (st_open(&f, model, err)) return -1;
    const char *rec = st_meta(&f, "run.vae");
    snprintf(buf, cap, "%s", rec ? rec : "");
    st_close(&f);
    if (!buf[0]) return 0;
    if (access(buf, R_OK))
        return mala_errf(err, "%s is a latent model; the VAE its run recorded (%s) cannot be read: give --vae FILE",
                         model, buf);
    return 1;
}

int generator_attach_vae(Generator *g, const char *vae_path, const char *model, MalaErr *err) {
    const NetConfig *c = &g->net->cfg;
    if (!is_latent(g)) {
        if (vae_path) return mala_errf(err, "--vae %s: %s is a pixel-space model (its samples are images already)", vae_path, model);
        return 0;
    }
    if (!vae_path)
        return mala_errf(err, "%s is a latent model (%dx%dx%d latents, scale %g): give --vae FILE, the VAE its data was "
                         "encoded with, to decode its samples", model, c->in_channels, c->image_size, c->image_size,
                         c->latent_scale);
    VaeConfig vc;
    if (vae_config_read(vae_path, &vc, err)) return -1;
    if (vc.latent != c->in_channels)
        return mala_errf(err, "--vae %s: its latents have %d channels, %s's have %d", vae_path, vc.latent, model,
                         c->in_channels);
    const int S = c->image_size * vae_factor(&vc);
    int cap = g->max_batch < DECODE_BATCH_CAP ? g->max_batch : DECODE_BATCH_CAP;
    int batch = vae_batch_for(&vc, g->net->be, S, S, DECODE_BYTES, cap);
    g->vae = vae_load(vae_path, g->net->be, batch, S, S, err);
    if (!g->vae) return -1;
    g->out_c = vc.out_channels;
    g->out_s = S;
    return 0;
}

int generator_out_channels(const Generator *g) { return g->vae ? g->out_c : g->net->cfg.in_channels; }
int generator_out_size(const Generator *g) { return g->vae ? g->out_s : g->net->cfg.image_size; }
size_t generator_out_floats(const Generator *g) {
    size_t s = (size_t)generator_out_size(g);
    return (size_t)generator_out_channels(g) * s * s;
}

int generator_decode(Generator *g, const float *x, int n, float *out, MalaErr *err) {
    if (!g->vae) {
        if (is_latent(g)) return mala_errf(err, "a latent model's samples need a VAE to decode (--vae FILE)");
        if (out != x) memcpy(out, x, (size_t)n * generator_image_floats(g) * sizeof(float));
        return 0;
    }
    const NetConfig *c = &g->net->cfg;
    const size_t per = generator_image_floats(g);
    const float *z = x;
    float *rescaled = NULL;
    const float vs = vae_config(g->vae)->scale;
    if (c->latent_scale != vs) {  // the VAE divides by its own scaling_factor; the model's latents are z * latent_scale
        rescaled = xmalloc((size_t)n * per * sizeof(float));
        for (size_t i = 0; i < (size_t)n * per; i++) rescaled[i] = x[i] * (vs / c->latent_scale);
        z = rescaled;
    }
    int rc = vae_decode(g->vae, z, n, c->image_size, c->image_size, out, err);
    g->vae_decodes++;
    free(rescaled);
    return rc;
}

// The SD-VAE family (kl-f8: 128 256 512 512, 4 latent channels, RGB), whose published factors fit.
static int is_sd_vae(const VaeConfig *vc) {
    VaeConfig sd;
    vae_config_sd(&sd);
    if (vc->levels != sd.levels || vc->latent != sd.latent || vc->out_channels != sd.out_channels) return 0;
    for (int i = 0; i < sd.levels; i++)
        if (vc->ch[i] != sd.ch[i]) return 0;
    return 1;
}

#define PREVIEW_FIT_CELLS 8   // the fit's latents: 4 of 8x8 cells (or the model's grid when smaller)
#define PREVIEW_FIT_COUNT 4
#define PREVIEW_FIT_SEED 0x70726576u

int generator_preview(Generator *g, const float *x, int n, float *out, MalaErr *err) {
    if (!g->vae) return generator_decode(g, x, n, out, err);  // a pixel model: a copy (a latent one: the error)
    const NetConfig *c = &g->net->cfg;
    if (!g->proj_ready) {
        const VaeConfig *vc = vae_config(g->vae);
        if (is_sd_vae(vc)) {
            latent_proj_sd(&g->proj);
        } else {
            int cells = c->image_size < PREVIEW_FIT_CELLS ? c->image_size : PREVIEW_FIT_CELLS;
            if (latent_proj_fit(&g->proj, g->vae, cells, PREVIEW_FIT_COUNT, PREVIEW_FIT_SEED, err)) return -1;
            g->vae_decodes += (PREVIEW_FIT_COUNT + vae_max_batch(g->vae) - 1) / vae_max_batch(g->vae);
        }
        g->proj_ready = 1;
    }
    latent_proj_apply(&g->proj, x, n, c->image_size, c->image_size, vae_config(g->vae)->scale / c->latent_scale, out);
    return 0;
}

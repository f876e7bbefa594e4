// The public API's text and image helpers around generation (include/mala.h): the prompt, PNG
// bytes with their parameters, step previews and a PNG's parameters read back, through the code
// `mala sample` and `mala info` run.
// defines: mala_model_prompt, mala_image_png, mala_preview_u8, mala_png_parameters, mala_model_path,
//          mala_model_vae_path, mala_free
#include "api/api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/image_io.h"
#include "formats/png_text.h"
#include "pipeline/gen_params.h"
#include "pipeline/gen_prompt.h"

int mala_model_prompt(const mala_model *m, const char *prompt, mala_gen_params *p, char *errbuf, size_t cap) {
    GenPrompt gp;
    MalaErr err;
    if (gen_prompt_parse(&m->g.classes, prompt ? prompt : "", "prompt", &gp, &err)) {
        if (errbuf && cap) snprintf(errbuf, cap, "%s", err.msg);
        return MALA_ERROR;
    }
    p->labels = NULL;
    p->class_id = gp.cls;
    p->blend = gp.blend;
    p->blend_a = gp.a;
    p->blend_b = gp.b;
    p->blend_w = gp.w;
    return MALA_OK;
}

static int image_png(mala_model *m, const mala_gen_params *p, const mala_init_image *init, int i, const float *image,
                     uint8_t **png, size_t *len) {
    *png = NULL;
    *len = 0;
    if (i < 0 || i >= p->count) return api_model_fail(m, "image %d: the run has images 0..%d", i, p->count - 1);
    GenOpts o;
    int32_t *y;
    if (api_gen_setup(m, p, &o, &y)) return MALA_ERROR;
    const Generator *g = &m->g;
    o.clip = o.clip && !(g->net->cfg.latent_scale > 0);  // as the sampler runs it (cmd_sample's `used`)
    const int oc = generator_out_channels(g), os = generator_out_size(g);
    GenParams gp = {.model_path = m->path, .vae_path = g->vae ? m->vae : NULL, .classes = &g->classes,
                    .labels = y + i, .n = 1, .seed = p->seed, .first = i, .opts = &o, .channels = oc, .width = os,
                    .height = os};
    if (init) {
        gp.strength = init->strength;
        gp.init_path = init->image_name ? init->image_name : "init image";
        gp.mask_path = init->mask ? init->mask_name ? init->mask_name : "mask" : NULL;
        gp.resample = init->resample;
    }
    MalaErr err;
    char *text = gen_params_text(&gp, &err);
    free(y);
    if (!text) return api_model_fail(m, "%s", err.msg);
    uint8_t *rgb;
    int W, H;
    int rc = image_grid_u8(&rgb, &W, &H, image, 1, oc, os, os, 1, 0, &err);  // `mala sample --out-dir`'s pixels
    if (!rc) {
        rc = image_encode_png_text(rgb, W, H, 3, GEN_PARAMS_KEYWORD, text, "image", png, len, &err);
        free(rgb);
    }
    free(text);
    return rc ? api_model_fail(m, "%s", err.msg) : MALA_OK;
}

int mala_image_png(mala_model *m, const mala_gen_params *p, const mala_init_image *init, int i, const float *image,
                   uint8_t **png, size_t *len) {
    return image_png(m, p, init, i, image, png, len);
}

int mala_preview_u8(mala_model *m, const float *preview, uint8_t *out) {
    Generator *g = &m->g;
    const int C = generator_out_channels(g), S = generator_out_size(g);
    const float *x = preview;
    float *img = NULL;
    if (g->vae) {  // a latent model: the predicted x0's latent-to-RGB projection, no VAE pass
        MalaErr err;
        img = malloc(sizeof(float) * generator_out_floats(g));
        if (!img) return api_model_fail(m, "out of memory");
        if (generator_preview(g, preview, 1, img, &err)) {
            free(img);
            return api_model_fail(m, "%s", err.msg);
        }
        x = img;
    }
    api_chw_to_u8(x, C, S, out);
    free(img);
    return MALA_OK;
}

int mala_png_parameters(const void *png, size_t len, char **text, char *errbuf, size_t cap) {
    MalaErr err;
    *text = NULL;
    int rc = png_text_find(png, len, "PNG", GEN_PARAMS_KEYWORD, text, &err);
    if (rc < 0) {
        if (errbuf && cap) snprintf(errbuf, cap, "%s", err.msg);
        return MALA_ERROR;
    }
    return MALA_OK;
}

const char *mala_model_path(const mala_model *m) { return m->path; }
const char *mala_model_vae_path(const mala_model *m) { return m->g.vae ? m->vae : ""; }
void mala_free(void *p) { free(p); }

// defines: sample_init_list, sample_init_load, sample_init_free, sample_parse_blend
#include "cli/sample_init.h"
#include "pipeline/gen_prompt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/image_io.h"
#include "pipeline/gen_inputs.h"

void sample_init_list(SampleInit *si, const char *init, const char *mask) {
    memset(si, 0, sizeof *si);
    si->init = init;
    si->mask = mask;
    if (!init) return;
    struct stat st;
    if (stat(init, &st)) FATAL("--init-image %s: no such file or folder", init);
    MalaErr err;
    if (S_ISDIR(st.st_mode)) {
        if (gen_list_images(init, &si->paths, &si->npaths, &err)) FATAL("--init-image %s", err.msg);
        return;
    }
    si->paths = xmalloc(sizeof(char *));
    si->paths[0] = xstrdup(init);
    si->npaths = 1;
}

// The mask against the inputs: the same aspect ratio or an error (the crops would cover other
// regions); another size is said once, with how it is brought to the model's; alpha is said too.
static void sample_mask_check(const SampleInit *si, int os) {
    MalaErr err;
    int mw, mh;
    if (image_check(si->mask, &mw, &mh, &err)) FATAL("--mask %s", err.msg);
    for (int i = 0; i < si->npaths; i++) {
        int w, h;
        if (image_check(si->paths[i], &w, &h, &err)) FATAL("--init-image %s", err.msg);
        if ((int64_t)mw * h != (int64_t)mh * w)
            FATAL("--mask %s: %dx%d has another aspect ratio than --init-image %s (%dx%d); give a mask of the input's shape",
                  si->mask, mw, mh, si->paths[i], w, h);
        if ((mw != w || mh != h) && i == 0)
            fprintf(stderr, "note: --mask %s is %dx%d, --init-image %s %dx%d: each is brought to %dx%d by the same "
                    "center_crop_arr (box halving, then bicubic), the mask then thresholded at 128\n",
                    si->mask, mw, mh, si->paths[i], w, h, os, os);
    }
    if (gen_png_has_alpha(si->mask))
        fprintf(stderr, "note: --mask %s has an alpha channel, which is ignored: white (gray >= 128 of its colour) is "
                "regenerated, transparency is not read\n", si->mask);
}

void sample_init_load(SampleInit *si, Generator *g, int n, float strength, int resample) {
    if (!si->init) return;
    MalaErr err;
    const int oc = generator_out_channels(g), os = generator_out_size(g), S = g->net->cfg.image_size;
    const size_t oper = generator_out_floats(g), per = generator_image_floats(g);
    float *pix = xmalloc((size_t)n * oper * sizeof(float));
    for (int i = 0; i < n; i++) {
        if (i >= si->npaths) {  // one file: every image starts from it
            memcpy(pix + oper * i, pix, oper * sizeof(float));
            continue;
        }
        if (gen_load_image(si->paths[i], oc, os, pix + oper * i, &err)) FATAL("--init-image %s", err.msg);
    }
    si->image = xmalloc((size_t)n * per * sizeof(float));
    if (generator_encode(g, pix, n, si->image, &err)) FATAL("--init-image: %s", err.msg);
    free(pix);
    if (si->mask) {
        sample_mask_check(si, os);
        float *m = xmalloc((size_t)os * os * sizeof(float));
        if (gen_load_mask(si->mask, os, m, &err)) FATAL("--mask %s", err.msg);
        si->grid_mask = xmalloc((size_t)n * S * S * sizeof(float));
        generator_mask_to_grid(g, m, 1, si->grid_mask);
        for (int i = 1; i < n; i++) memcpy(si->grid_mask + (size_t)i * S * S, si->grid_mask, (size_t)S * S * sizeof(float));
        free(m);
    }
    si->gi = (GenInit){.image = si->image, .strength = strength, .mask = si->grid_mask, .resample = resample};
}

void sample_init_free(SampleInit *si) {
    for (int i = 0; i < si->npaths; i++) free(si->paths[i]);
    free(si->paths);
    free(si->image);
    free(si->grid_mask);
    memset(si, 0, sizeof *si);
}

void sample_parse_blend(const char *s, const ClassNames *cn, GenOpts *o) {
    GenPrompt gp;
    MalaErr err;
    if (gen_prompt_blend(cn, s, "--blend", &gp, &err)) FATAL("%s", err.msg);
    o->blend = 1;
    o->blend_a = gp.a;
    o->blend_b = gp.b;
    o->blend_w = gp.w;
}

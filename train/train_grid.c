// defines: train_grid_init, train_grid_write, train_grid_free
#include "train/train_grid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/image_io.h"
#include "train/mem_plan.h"  // defines: train_grid_images

int train_grid_init(TrainGrid *p, const NetConfig *c, const ClassNames *cn, const Backend *be, const char *vae,
                    int images, int steps, volatile sig_atomic_t *stop, MalaErr *err) {
    memset(p, 0, sizeof *p);
    p->stop = stop;
    p->n = train_grid_images(c, images);
    p->steps = steps;
    generator_new(&p->g, c, cn, be, p->n);
    if (generator_attach_vae(&p->g, vae, "the model trained", err)) return -1;
    p->x = xmalloc((size_t)p->n * generator_image_floats(&p->g) * sizeof(float));
    p->img = xmalloc((size_t)p->n * generator_out_floats(&p->g) * sizeof(float));
    p->y = xmalloc(p->n * sizeof(int32_t));
    const int K = c->num_classes > 0 ? c->num_classes : 1;  // unconditional: label 0, no guidance
    p->per_class = p->n / K > 0 ? p->n / K : 1;
    for (int i = 0; i < p->n; i++) p->y[i] = (i / p->per_class) % K;
    return 0;
}

static int grid_step(void *ctx, int i, int n, const float *x0) {
    TrainGrid *p = ctx;
    char eta[32];
    progress_format_eta(eta, sizeof eta, (n - i - 1) * (now_seconds() - p->t0) / (i + 1));
    progress_update(&p->pg, i + 1 == n, "sample grid: %d images, DDIM step %d/%d, ETA %s (--sample-images, "
                    "--sample-steps)", p->n, i + 1, n, eta);
    return *p->stop != 0;  // a stop does not wait for the grid
}

int train_grid_write(TrainGrid *p, const Trainer *tr, const char *path) {
    MalaErr err;
    tr->be->copy(p->g.net->w, tr->ema, tr->net->n_floats * sizeof(float));
    GenOpts o = gen_opts_default();
    o.kind = SAMPLER_DDIM;
    if (tr->net->cfg.num_classes == 0) o.cfg_scale = 1.0f;
    o.steps = p->steps;
    generator_noise(&p->g, p->x, 1234, 0, p->n);
    const int oc = generator_out_channels(&p->g), os = generator_out_size(&p->g);
    const int k = tr->net->cfg.num_classes;
    const int cols = !k ? (p->n < 8 ? p->n : 8) : p->per_class > 1 ? p->per_class : p->n < k ? p->n : k;
    progress_init(&p->pg, stderr);
    p->t0 = now_seconds();
    int rc = generator_run(&p->g, &o, p->x, p->y, p->n, 1234, 0, grid_step, p, &err);
    progress_break(&p->pg);
    if (rc == SAMPLER_CANCELLED) {
        fprintf(stderr, "sample grid: cancelled by the stop (no %s)\n", path);
        return -1;
    }
    if (rc < 0 || generator_decode(&p->g, p->x, p->n, p->img, &err) ||
        image_save_grid(path, p->img, p->n, oc, os, os, cols, 2, &err)) {
        fprintf(stderr, "warning: sample grid: %s\n", err.msg);
        return -1;
    }
    return 0;
}

void train_grid_free(TrainGrid *p) {
    free(p->x);
    free(p->img);
    free(p->y);
    generator_close(&p->g);
}

// defines: train_init_peek, train_init_config, train_init_check, train_init_load, init_meta_pairs, init_meta_read
#include "cli/train_init.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"
#include "model/torch_load.h"
#include "core/sha256.h"
#include "train/trainer_init.h"

void train_init_peek(const char *path, int heads, NetConfig *ic) {
    ClassNames cn;
    MalaErr err;
    if (torch_file_sniff(path)) {
        if (torch_read_config(path, NULL, heads, ic, &cn, NULL, 0, &err))  // both sets have one shape
            FATAL("--init %s", err.msg);
        class_names_free(&cn);
        return;
    }
    StFile f;
    if (st_open(&f, path, &err)) FATAL("--init %s", err.msg);
    if (ckpt_read_config(&f, ic, &cn, &err)) FATAL("--init: %s", err.msg);
    class_names_free(&cn);
    st_close(&f);
}

void train_init_config(const ModelOpts *mo, const Opt *opts, const NetConfig *ic, NetConfig *c) {
    model_opts_apply_given(mo, opts, ic, c, "--init");
    c->in_channels = mo->channels;
    c->num_classes = mo->classes;
    c->image_size = mo->image_size;
    c->latent_scale = 0;  // the data's, set by the caller
    MalaErr err;
    if (net_config_validate(c, &err)) FATAL("--init: %s", err.msg);
}

void train_init_check(const NetConfig *c, const char *path, int online) {
    InitReport rep;
    MalaErr err;
    if (trainer_init_check(c, path, online, &rep, &err)) FATAL("%s", err.msg);
}

static void print_report(const InitReport *r, const char *path, const InitMeta *im) {
    const int total = r->carried + r->fresh + r->recomputed;
    fprintf(stderr, "--init %s (%s weights%s%s): carried over %d of %d tensors (%.2fM values)%s\n", path,
            !strcmp(im->weights, "model") ? "the model file's" : im->weights, im->step[0] ? ", step " : "", im->step,
            r->carried, total, r->carried_floats / 1e6, r->carried == total ? ", all of them" : "; the others:");
    for (int i = 0; i < r->fresh && i < INIT_LIST; i++) fprintf(stderr, "  new: %s\n", r->fresh_names[i]);
    if (r->fresh > INIT_LIST) fprintf(stderr, "  new: %d more label tables\n", r->fresh - INIT_LIST);
    if (r->recomputed) fprintf(stderr, "  recomputed: %s\n", r->recomputed_name);
}

void train_init_load(Trainer *tr, const char *path, int online, int lead, InitMeta *im) {
    InitReport rep;
    MalaErr err;
    if (trainer_init_from(tr, path, online, &rep, &err)) FATAL("%s", err.msg);
    char abs[PATH_MAX];
    snprintf(im->path, sizeof im->path, "%s", realpath(path, abs) ? abs : path);
    if (sha256_file(path, im->sha256, &err)) FATAL("--init %s", err.msg);
    snprintf(im->weights, sizeof im->weights, "%s", rep.weights);
    StFile f;
    im->step[0] = 0;
    if (!torch_file_sniff(path) && !st_open(&f, path, &err)) {  // a .pt records no step
        const char *s = st_meta(&f, "step");
        if (s) snprintf(im->step, sizeof im->step, "%s", s);
        st_close(&f);
    }
    if (lead) print_report(&rep, path, im);
}

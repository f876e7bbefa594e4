// defines: fine_tune_peek, fine_tune_check, fine_tune_load
#include "train/fine_tune.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "model/checkpoint.h"
#include "model/torch_load.h"
#include "train/trainer_init.h"

int fine_tune_peek(const char *path, int heads, NetConfig *ic, MalaErr *err) {
    ClassNames cn;
    MalaErr e;
    if (torch_file_sniff(path)) {
        if (torch_read_config(path, NULL, heads, ic, &cn, NULL, 0, &e))  // both sets have one shape
            return mala_errf(err, "--init %s", e.msg);
        class_names_free(&cn);
        return 0;
    }
    StFile f;
    if (st_open(&f, path, &e)) return mala_errf(err, "--init %s", e.msg);
    if (ckpt_read_config(&f, ic, &cn, &e)) {
        st_close(&f);
        return mala_errf(err, "--init: %s", e.msg);
    }
    class_names_free(&cn);
    st_close(&f);
    return 0;
}

int fine_tune_check(const NetConfig *c, const char *path, int online, MalaErr *err) {
    InitReport rep;
    return trainer_init_check(c, path, online, &rep, err) ? -1 : 0;
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

int fine_tune_load(Trainer *tr, const char *path, int online, int lead, InitMeta *im, MalaErr *err) {
    InitReport rep;
    MalaErr e;
    if (trainer_init_from(tr, path, online, &rep, err)) return -1;
    char abs[PATH_MAX];
    snprintf(im->path, sizeof im->path, "%s", realpath(path, abs) ? abs : path);
    if (sha256_file(path, im->sha256, &e)) return mala_errf(err, "--init %s", e.msg);
    snprintf(im->weights, sizeof im->weights, "%s", rep.weights);
    StFile f;
    im->step[0] = 0;
    if (!torch_file_sniff(path) && !st_open(&f, path, &e)) {  // a .pt records no step
        const char *s = st_meta(&f, "step");
        if (s) snprintf(im->step, sizeof im->step, "%s", s);
        st_close(&f);
    }
    if (lead) print_report(&rep, path, im);
    return 0;
}

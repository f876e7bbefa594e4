// defines: fmnist_params, fmnist_weights_read
// The weight table of the Fashion-MNIST feature classifier and its checked reader (no backend:
// tests/fuzz/fuzz_fmnist.c runs this on hostile files).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/fmnist_features.h"

static const int kWidths[FMNIST_FEAT_BLOCKS] = {32, 64, 96, 128};

static void param(FmnistParam *p, size_t *off, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                  int64_t d3) {
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    int64_t d[4] = {d0, d1, d2, d3};
    p->numel = 1;
    for (int i = 0; i < 4; i++) {
        p->shape[i] = i < ndim ? d[i] : 0;
        if (i < ndim) p->numel *= (size_t)d[i];
    }
    p->offset = *off;
    *off += p->numel;
}

size_t fmnist_params(FmnistParam *p) {
    size_t off = 0;
    char name[40];
    int cin = 1;
    for (int b = 0; b < FMNIST_FEAT_BLOCKS; b++) {
        int c = kWidths[b];
        snprintf(name, sizeof name, "blocks.%d.conv.weight", b);
        param(p++, &off, name, 4, c, cin, 3, 3);
        snprintf(name, sizeof name, "blocks.%d.conv.bias", b);
        param(p++, &off, name, 1, c, 0, 0, 0);
        snprintf(name, sizeof name, "blocks.%d.norm.weight", b);
        param(p++, &off, name, 1, c, 0, 0, 0);
        snprintf(name, sizeof name, "blocks.%d.norm.bias", b);
        param(p++, &off, name, 1, c, 0, 0, 0);
        cin = c;
    }
    param(p++, &off, "fc.weight", 2, FMNIST_FEAT_CLASSES, FMNIST_FEAT_DIM, 0, 0);
    param(p++, &off, "fc.bias", 1, FMNIST_FEAT_CLASSES, 0, 0, 0);
    return off;
}

int fmnist_weights_read(const StFile *f, float *host, MalaErr *err) {
    FmnistParam p[FMNIST_FEAT_NPARAMS];
    fmnist_params(p);
    for (int i = 0; i < FMNIST_FEAT_NPARAMS; i++) {
        if (st_load_f32(f, p[i].name, p[i].shape, p[i].ndim, host + p[i].offset, err)) return -1;
        for (size_t k = 0; k < p[i].numel; k++)
            if (!isfinite(host[p[i].offset + k]))
                return mala_errf(err, "%s: tensor '%s' holds a non-finite value at [%zu]", f->path, p[i].name, k);
    }
    if (f->n != FMNIST_FEAT_NPARAMS) {  // every expected tensor is there, so some other one is too
        for (int t = 0; t < f->n; t++) {
            int known = 0;
            for (int i = 0; i < FMNIST_FEAT_NPARAMS && !known; i++) known = !strcmp(f->tensors[t].name, p[i].name);
            if (!known)
                return mala_errf(err, "%s: tensor '%s' is not part of the Fashion-MNIST classifier (%s, from "
                                      "tools/ref/train_fmnist_classifier.py)", f->path, f->tensors[t].name, FMNIST_FEAT_FILE);
        }
    }
    return 0;
}

// defines: trainer_init_from, trainer_init_check
#include "train/trainer_init.h"

#include <stdio.h>
#include <string.h>

#include "train/init_file.h"

// A label table: one row per class and the null class (DiT's LabelEmbedder, DiC's per stage).
static int is_label_table(const char *name) {
    return !strncmp(name, "y_embedder", 10) && strstr(name, "embedding_table.weight") != NULL;
}

static void shape_str(char *buf, size_t n, const int64_t *shape, int ndim) {
    buf[0] = 0;
    for (int d = 0; d < ndim; d++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", d ? ", " : "[", (long long)shape[d]);
    snprintf(buf + strlen(buf), n - strlen(buf), "]");
}

// A tensor of the file's chosen set that the model does not have: the first one, or NULL.
static const char *extra_tensor(const Net *m, const InitFile *f) {
    for (int i = 0; i < init_file_count(f); i++) {
        const char *name = init_file_name(f, i);
        if (name && !net_find_param(m, name)) return name;
    }
    return NULL;
}

// Whether the file's tensor (ndim dimensions of shape, -1: absent) of the model's parameter p keeps
// the fresh value (recorded in rep), or refuses (-1); 1 when it is carried over.
static int check_param(const Net *m, const InitFile *f, const ParamInfo *p, int ndim, const int64_t *shape,
                       InitReport *rep, MalaErr *err) {
    char desc[256], want[64], have[64];
    net_config_describe(&m->cfg, desc, sizeof desc);
    shape_str(want, sizeof want, p->shape, p->ndim);
    if (ndim < 0)
        return mala_errf(err, "--init %s: has no tensor '%s%s' %s of the model trained (%s): another backbone or depth "
                         "cannot be fine-tuned from it", f->path, rep->prefix, p->name, want, desc);
    int same = ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = shape[d] == p->shape[d];
    if (same) return 1;
    shape_str(have, sizeof have, shape, ndim);
    const int last_same = ndim == p->ndim && shape[ndim - 1] == p->shape[p->ndim - 1];
    if (last_same && is_label_table(p->name)) {
        if (rep->fresh < INIT_LIST)
            snprintf(rep->fresh_names[rep->fresh], sizeof rep->fresh_names[0], "%s %s (%lld classes + the null class; "
                     "the file's %s: re-initialised, N(0, 0.02))", p->name, want, (long long)p->shape[0] - 1, have);
        rep->fresh++;
        return 0;
    }
    if (last_same && !strcmp(p->name, "pos_embed")) {
        snprintf(rep->recomputed_name, sizeof rep->recomputed_name, "pos_embed %s (the fixed sin-cos table of a %dx%d "
                 "image; the file's %s)", want, m->cfg.image_size, m->cfg.image_size, have);
        rep->recomputed++;
        return 0;
    }
    return mala_errf(err, "--init %s: tensor '%s%s' is %s there and %s in the model trained (%s): another width, patch "
                     "size or channel count cannot be fine-tuned from it", f->path, rep->prefix, p->name, have, want,
                     desc);
}

// Whether parameter p's tensor in f has p's shape (it is carried over).
static int same_shape(const InitFile *f, const ParamInfo *p) {
    int64_t shape[ST_MAX_DIMS > TL_MAX_DIMS ? ST_MAX_DIMS : TL_MAX_DIMS];
    int same = init_file_shape(f, p->name, shape) == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = shape[d] == p->shape[d];
    return same;
}

// The checks of the file's chosen set against model m (its parameter table): -1 with err at the first
// tensor that does not fit; rep filled.
static int check_file(const Net *m, const InitFile *f, InitReport *rep, MalaErr *err) {
    memset(rep, 0, sizeof *rep);
    snprintf(rep->prefix, sizeof rep->prefix, "%s", f->prefix);
    rep->weights = f->weights;
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        int64_t shape[ST_MAX_DIMS > TL_MAX_DIMS ? ST_MAX_DIMS : TL_MAX_DIMS];
        int k = check_param(m, f, p, init_file_shape(f, p->name, shape), shape, rep, err);
        if (k < 0) return -1;
        if (k == 1) {
            rep->carried++;
            rep->carried_floats += p->numel;
        }
    }
    const char *extra = extra_tensor(m, f);
    if (extra) {
        char desc[256];
        net_config_describe(&m->cfg, desc, sizeof desc);
        return mala_errf(err, "--init %s: tensor '%s%s' is not in the model trained (%s): another backbone or depth "
                         "cannot be fine-tuned from it", f->path, f->prefix, extra, desc);
    }
    return 0;
}

int trainer_init_check(const NetConfig *c, const char *path, int online, InitReport *rep, MalaErr *err) {
    InitFile f;
    if (init_file_open(&f, path, online, err)) return -1;
    Net *m = net_plan(c);
    int rc = check_file(m, &f, rep, err);
    net_plan_free(m);
    init_file_close(&f);
    return rc;
}

int trainer_init_from(Trainer *tr, const char *path, int online, InitReport *rep, MalaErr *err) {
    InitFile f;
    if (init_file_open(&f, path, online, err)) return -1;
    const Net *m = tr->net;
    int rc = check_file(m, &f, rep, err);
    float *host = rc ? NULL : xmalloc(m->n_floats * sizeof(float));
    if (!rc) tr->be->to_host(host, m->w, m->n_floats * sizeof(float));  // the fresh run's values
    for (int i = 0; i < m->nparams && !rc; i++) {  // the carried tensors, as check_file found them
        const ParamInfo *p = &m->params[i];
        if (same_shape(&f, p)) rc = init_file_read(&f, p->name, host + p->offset, err);
    }
    if (!rc) {  // weights and EMA start from the file's; AdamW's moments stay zero
        tr->be->to_device(m->w, host, m->n_floats * sizeof(float));
        tr->be->copy(tr->ema, m->w, m->n_floats * sizeof(float));
    }
    free(host);
    init_file_close(&f);
    return rc;
}

// defines: trainer_init_from, trainer_init_check
#include "train/trainer_init.h"

#include <string.h>

#include "formats/safetensors.h"

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

// A tensor of the file's chosen set (prefix) that the model does not have: the first one, or NULL.
static const char *extra_tensor(const Net *m, const StFile *f, const char *prefix) {
    size_t pl = strlen(prefix);
    for (int i = 0; i < f->n; i++) {
        const char *name = f->tensors[i].name;
        if (pl ? strncmp(name, prefix, pl) != 0 : !strncmp(name, "ema.", 4) || !strncmp(name, "opt.", 4) ||
                                                      !strncmp(name, "train.", 6))
            continue;
        if (!net_find_param(m, name + pl)) return name;
    }
    return NULL;
}

// Whether the file's tensor t of the model's parameter p keeps the fresh value (recorded in rep),
// or refuses (-1); 1 when it is carried over.
static int check_param(const Net *m, const StFile *f, const ParamInfo *p, const StTensor *t, InitReport *rep,
                       MalaErr *err) {
    char desc[256], want[64], have[64];
    net_config_describe(&m->cfg, desc, sizeof desc);
    shape_str(want, sizeof want, p->shape, p->ndim);
    if (!t)
        return mala_errf(err, "--init %s: has no tensor '%s%s' %s of the model trained (%s): another backbone or depth "
                         "cannot be fine-tuned from it", f->path, rep->prefix, p->name, want, desc);
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (same) return 1;
    shape_str(have, sizeof have, t->shape, t->ndim);
    const int last_same = t->ndim == p->ndim && t->shape[t->ndim - 1] == p->shape[p->ndim - 1];
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

// A training checkpoint (EMA weights beside the online ones) rather than a model file.
static int has_ema(const StFile *f) {
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->tensors[i].name, "ema.", 4)) return 1;
    return 0;
}

// The checks of the file's chosen set against model m (its parameter table): -1 with err at the first
// tensor that does not fit; rep filled.
static int check_file(const Net *m, const StFile *f, int online, InitReport *rep, MalaErr *err) {
    memset(rep, 0, sizeof *rep);
    const int training = has_ema(f);
    if (online && !training)
        return mala_errf(err, "--init-weights online: %s holds one set of weights (a model file); the online weights "
                         "are in training checkpoints (runs/NAME/checkpoints/)", f->path);
    rep->prefix = training && !online ? "ema." : "";
    char name[128];
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        snprintf(name, sizeof name, "%s%s", rep->prefix, p->name);
        int k = check_param(m, f, p, st_find(f, name), rep, err);
        if (k < 0) return -1;
        if (k == 1) {
            rep->carried++;
            rep->carried_floats += p->numel;
        }
    }
    const char *extra = extra_tensor(m, f, rep->prefix);
    if (extra) {
        char desc[256];
        net_config_describe(&m->cfg, desc, sizeof desc);
        return mala_errf(err, "--init %s: tensor '%s' is not in the model trained (%s): another backbone or depth "
                         "cannot be fine-tuned from it", f->path, extra, desc);
    }
    return 0;
}

int trainer_init_check(const NetConfig *c, const char *path, int online, InitReport *rep, MalaErr *err) {
    StFile f;
    if (st_open(&f, path, err)) return -1;
    Net *m = net_plan(c);
    int rc = check_file(m, &f, online, rep, err);
    net_plan_free(m);
    st_close(&f);
    return rc;
}

int trainer_init_from(Trainer *tr, const char *path, int online, InitReport *rep, MalaErr *err) {
    StFile f;
    if (st_open(&f, path, err)) return -1;
    const Net *m = tr->net;
    int rc = check_file(m, &f, online, rep, err);
    float *host = rc ? NULL : xmalloc(m->n_floats * sizeof(float));
    if (!rc) tr->be->to_host(host, m->w, m->n_floats * sizeof(float));  // the fresh run's values
    char name[128];
    for (int i = 0; i < m->nparams && !rc; i++) {  // the carried tensors, as check_file found them
        const ParamInfo *p = &m->params[i];
        snprintf(name, sizeof name, "%s%s", rep->prefix, p->name);
        const StTensor *t = st_find(&f, name);
        int same = t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        if (same) rc = st_read_f32(&f, t, host + p->offset, err);
    }
    if (!rc) {  // weights and EMA start from the file's; AdamW's moments stay zero
        tr->be->to_device(m->w, host, m->n_floats * sizeof(float));
        tr->be->copy(tr->ema, m->w, m->n_floats * sizeof(float));
    }
    free(host);
    st_close(&f);
    return rc;
}

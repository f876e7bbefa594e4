// defines: init_file_open, init_file_close, init_file_shape, init_file_read, init_file_count, init_file_name
#include "train/init_file.h"

#include <stdio.h>
#include <string.h>

#include "model/torch_load.h"  // defines: torch_file_sniff

// A training checkpoint of ours: EMA weights beside the online ones.
static int st_has_ema(const StFile *f) {
    for (int i = 0; i < f->n; i++)
        if (!strncmp(f->tensors[i].name, "ema.", 4)) return 1;
    return 0;
}

static int refuse_online(const char *path, MalaErr *err) {
    return mala_errf(err, "--init-weights online: %s holds one set of weights (a model file); the online weights "
                     "are in training checkpoints (runs/NAME/checkpoints/, or a PyTorch checkpoint's `model`)", path);
}

static int open_torch(InitFile *f, const char *path, int online, MalaErr *err) {
    f->pt = torch_file_open(path, NULL, err);  // ema when the file is a training checkpoint, as DiT's find_model
    if (!f->pt) return -1;
    const char *sub = torch_file_weights(f->pt);
    if (online && !sub) {
        torch_legacy_close(f->pt);
        f->pt = NULL;
        return refuse_online(path, err);
    }
    if (online && strcmp(sub, "model")) {
        torch_legacy_close(f->pt);
        if (!(f->pt = torch_file_open(path, "model", err))) return -1;
        sub = "model";
    }
    // DiT's checkpoint names its online weights `model`; a bare or `state_dict` file holds one set
    f->weights = !sub ? "model" : !strcmp(sub, "ema") ? "ema" : !strcmp(sub, "model") ? "online" : "model";
    snprintf(f->prefix, sizeof f->prefix, "%s%s", sub ? sub : "", sub ? "." : "");
    return 0;
}

int init_file_open(InitFile *f, const char *path, int online, MalaErr *err) {
    memset(f, 0, sizeof *f);
    f->path = path;
    if (torch_file_sniff(path)) return open_torch(f, path, online, err);
    if (st_open(&f->st, path, err)) return -1;
    const int training = st_has_ema(&f->st);
    if (online && !training) {
        st_close(&f->st);
        return refuse_online(path, err);
    }
    snprintf(f->prefix, sizeof f->prefix, "%s", training && !online ? "ema." : "");
    f->weights = training ? (online ? "online" : "ema") : "model";
    return 0;
}

void init_file_close(InitFile *f) {
    if (f->pt) torch_legacy_close(f->pt);
    else st_close(&f->st);
    f->pt = NULL;
}

static const StTensor *st_tensor(const InitFile *f, const char *name) {
    char full[160];
    snprintf(full, sizeof full, "%s%s", f->prefix, name);
    return st_find(&f->st, full);
}

int init_file_shape(const InitFile *f, const char *name, int64_t *shape) {
    if (f->pt) {
        const TorchTensor *x = torch_legacy_find(f->pt, name);
        if (!x) return -1;
        memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
        return x->ndim;
    }
    const StTensor *t = st_tensor(f, name);
    if (!t) return -1;
    memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    return t->ndim;
}

int init_file_read(const InitFile *f, const char *name, float *dst, MalaErr *err) {
    if (f->pt) {
        const TorchTensor *x = torch_legacy_find(f->pt, name);
        if (!x) return mala_errf(err, "%s: no tensor '%s%s'", f->path, f->prefix, name);
        return torch_legacy_read_f32(f->pt, x, dst, err);
    }
    const StTensor *t = st_tensor(f, name);
    if (!t) return mala_errf(err, "%s: no tensor '%s%s'", f->path, f->prefix, name);
    return st_read_f32(&f->st, t, dst, err);
}

int init_file_count(const InitFile *f) { return f->pt ? torch_legacy_count(f->pt) : f->st.n; }

const char *init_file_name(const InitFile *f, int i) {
    if (f->pt) return torch_legacy_tensor(f->pt, i)->name;  // the chosen sub-dict's tensors only
    const char *name = f->st.tensors[i].name;
    size_t pl = strlen(f->prefix);
    if (pl) return strncmp(name, f->prefix, pl) ? NULL : name + pl;
    if (!strncmp(name, "ema.", 4) || !strncmp(name, "opt.", 4) || !strncmp(name, "train.", 6)) return NULL;
    return name;
}

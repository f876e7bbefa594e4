// defines: vae_weights_file, vae_file_open, vae_file_read, vae_file_close, vae_config_read
#include "model/vae_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/st_meta.h"
#include "model/torch_load.h"  // defines: torch_file_sniff

#define VAE_JSON_MAX (1 << 20)  // a config.json is a few hundred bytes

static int is_dir(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

static int is_file(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISREG(s.st_mode);
}

static int read_json(const char *path, VaeJson *j, MalaErr *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return mala_errf(err, "%s: cannot open", path);
    char *buf = xmalloc(VAE_JSON_MAX + 1);
    size_t n = fread(buf, 1, VAE_JSON_MAX + 1, f);
    fclose(f);
    int rc = n > VAE_JSON_MAX ? mala_errf(err, "%s: over %d bytes: not diffusers' config.json", path, VAE_JSON_MAX)
                              : vae_json_parse(buf, n, path, j, err);
    free(buf);
    return rc;
}

// The weights file and the config.json (cfg[0] = 0: none) that PATH names.
static int resolve(const char *path, char *weights, size_t wn, char *cfg, size_t cn, MalaErr *err) {
    cfg[0] = 0;
    if (is_dir(path)) {
        snprintf(cfg, cn, "%s/config.json", path);
        if (!is_file(cfg))
            return mala_errf(err, "%s: a folder without config.json (--vae takes diffusers' folder: config.json and "
                             "diffusion_pytorch_model.safetensors or .bin, or a weights file)", path);
        snprintf(weights, wn, "%s/diffusion_pytorch_model.safetensors", path);
        if (is_file(weights)) return 0;
        snprintf(weights, wn, "%s/diffusion_pytorch_model.bin", path);
        if (is_file(weights)) return 0;
        return mala_errf(err, "%s: no diffusion_pytorch_model.safetensors or diffusion_pytorch_model.bin beside its "
                         "config.json", path);
    }
    snprintf(weights, wn, "%s", path);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (!strncmp(base, "diffusion_pytorch_model.", 24)) {  // diffusers' file: its folder's config.json
        snprintf(cfg, cn, "%.*sconfig.json", (int)(base - path), path);
        if (!is_file(cfg)) cfg[0] = 0;
    }
    return 0;
}

static int st_shape(void *ctx, const char *name, int64_t shape[4]) {
    const StTensor *t = st_find((const StFile *)ctx, name);
    if (!t) return -1;
    for (int i = 0; i < t->ndim && i < 4; i++) shape[i] = t->shape[i];
    return t->ndim;
}

static int pt_shape(void *ctx, const char *name, int64_t shape[4]) {
    const TorchTensor *t = torch_legacy_find((const TorchLegacy *)ctx, name);
    if (!t) return -1;
    for (int i = 0; i < t->ndim && i < 4; i++) shape[i] = t->shape[i];
    return t->ndim;
}

// config.json's architecture fields, where it states them, against the weights'.
static int json_agrees(const VaeJson *j, const VaeConfig *c, const char *cfg, MalaErr *err) {
    const struct { const char *key; int said, has; } f[] = {
        {"latent_channels", j->latent, c->latent}, {"layers_per_block", j->layers, c->layers},
        {"in_channels", j->in_channels, c->in_channels}, {"out_channels", j->out_channels, c->out_channels},
        {"norm_num_groups", j->groups, c->groups}};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].said && f[i].said != f[i].has)
            return mala_errf(err, "%s: \"%s\" is %d, the weights' is %d", cfg, f[i].key, f[i].said, f[i].has);
    int same = !j->levels || j->levels == c->levels;
    for (int i = 0; same && i < j->levels; i++) same = j->ch[i] == c->ch[i];
    if (!same) return mala_errf(err, "%s: \"block_out_channels\" is not the weights' (%d levels)", cfg, c->levels);
    return 0;
}

// Every tensor of the table in the file with its shape, and nothing else in it.
static int check_table(const VaeFile *f, MalaErr *err) {
    VaeTable t;
    if (vae_table_build(&t, &f->c, err)) return -1;
    int rc = 0;
    for (int i = 0; i < t.n && !rc; i++) {
        const VaeParam *p = &t.p[i];
        if (!f->pt) {
            rc = st_expect(&f->st, p->name, p->shape, p->ndim, err);
            continue;
        }
        const TorchTensor *x = torch_legacy_find(f->pt, p->name);
        int same = x && x->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = x->shape[d] == p->shape[d];
        if (!x) rc = mala_errf(err, "%s: tensor '%s' is missing", f->path, p->name);
        else if (!same) rc = mala_errf(err, "%s: tensor '%s' has another shape than this AutoencoderKL's", f->path,
                                       p->name);
    }
    const int n = f->pt ? torch_legacy_count(f->pt) : f->st.n;
    for (int i = 0; i < n && !rc; i++) {
        const char *name = f->pt ? torch_legacy_tensor(f->pt, i)->name : f->st.tensors[i].name;
        if (!vae_table_find(&t, name))
            rc = mala_errf(err, "%s: tensor '%s' is not part of this AutoencoderKL (%d levels, %s names)", f->path,
                           name, f->c.levels, f->c.naming == VAE_NAMES_NEW ? "current" : "old");
    }
    vae_table_free(&t);
    return rc;
}

int vae_weights_file(const char *path, char *out, size_t n, MalaErr *err) {
    char cfg[4200];
    return resolve(path, out, n, cfg, sizeof cfg, err);
}

int vae_file_open(VaeFile *f, const char *path, MalaErr *err) {
    memset(f, 0, sizeof *f);
    char cfg[4200];
    if (resolve(path, f->path, sizeof f->path, cfg, sizeof cfg, err)) return -1;
    VaeJson j = {.scale = VAE_SCALE};
    if (cfg[0] && read_json(cfg, &j, err)) return -1;
    int groups = j.groups ? j.groups : VAE_DEFAULT_GROUPS;
    if (torch_file_sniff(f->path)) {
        if (!(f->pt = torch_file_open(f->path, NULL, err))) return -1;
    } else {
        if (st_open(&f->st, f->path, err)) return -1;
        if (!j.groups && st_meta_int(&f->st, "norm_num_groups", &groups, err) < 0) goto fail;
    }
    if (vae_config_derive(&f->c, f->pt ? pt_shape : st_shape, f->pt ? (void *)f->pt : (void *)&f->st, f->path,
                          groups, err))
        goto fail;
    f->c.scale = j.scale;
    if ((cfg[0] && json_agrees(&j, &f->c, cfg, err)) || check_table(f, err)) goto fail;
    return 0;
fail:
    vae_file_close(f);
    return -1;
}

int vae_file_read(const VaeFile *f, const char *name, float *dst, MalaErr *err) {
    if (f->pt) {
        const TorchTensor *t = torch_legacy_find(f->pt, name);
        if (!t) return mala_errf(err, "%s: no tensor '%s'", f->path, name);
        return torch_legacy_read_f32(f->pt, t, dst, err);
    }
    const StTensor *t = st_find(&f->st, name);
    if (!t) return mala_errf(err, "%s: no tensor '%s'", f->path, name);
    return st_read_f32(&f->st, t, dst, err);
}

void vae_file_close(VaeFile *f) {
    if (f->pt) torch_legacy_close(f->pt);
    else st_close(&f->st);  // a zeroed StFile closes as nothing
    f->pt = NULL;
}

int vae_config_read(const char *path, VaeConfig *c, MalaErr *err) {
    VaeFile f;
    if (vae_file_open(&f, path, err)) return -1;
    *c = f.c;
    vae_file_close(&f);
    return 0;
}

// defines: init_meta_pairs, init_meta_read, run_meta_fill, run_meta_read
#include "train/run_settings.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_meta.h"  // defines: train_meta_opt_u64

// The integer settings: key, flag range (as the flag accepts them).
static const struct { const char *key; int lo, hi; } RUN_INT_KEYS[RUN_INTS] = {
    {"run.log_every", 1, INT_MAX}, {"run.sample_every", 0, INT_MAX}, {"run.ckpt_every", 1, INT_MAX},
    {"run.hflip", -1, 1},          {"run.limit", 0, INT_MAX},        {"run.keep", 1, INT_MAX},
    {"run.sample_steps", 1, 1000}, {"run.sample_images", 0, 256}, {"run.tensorboard", 0, 1},
};

static int *run_ints(RunSettings *r, int i) {
    int *v[RUN_INTS] = {&r->log_every, &r->sample_every, &r->ckpt_every, &r->hflip,
                        &r->limit,     &r->keep,         &r->sample_steps, &r->sample_images, &r->tensorboard};
    return v[i];
}


void run_meta_fill(RunMeta *m, RunSettings *r) {
    static const char *keys[5] = {"run.data", "run.channels_from", "run.classes_from", "run.vae", "run.precision"};
    snprintf(m->val[0], sizeof m->val[0], "%s", r->data);
    snprintf(m->val[1], sizeof m->val[0], "%s", r->channels_from);
    snprintf(m->val[2], sizeof m->val[0], "%s", r->classes_from);
    snprintf(m->val[3], sizeof m->val[0], "%s", r->vae ? r->vae : "");
    snprintf(m->val[4], sizeof m->val[0], "%s", r->precision);
    for (int i = 0; i < 5; i++) m->kv[2 * i] = keys[i];
    for (int i = 0; i < RUN_INTS; i++) {
        snprintf(m->val[5 + i], sizeof m->val[0], "%d", *run_ints(r, i));
        m->kv[2 * (5 + i)] = RUN_INT_KEYS[i].key;
    }
    m->kv[2 * RUN_KEYS - 4] = "run.iters";
    snprintf(m->val[RUN_KEYS - 2], sizeof m->val[0], "%llu", (unsigned long long)r->iters);
    m->kv[2 * RUN_KEYS - 2] = "run.eval";
    eval_every_meta(&r->eval, m->val[RUN_KEYS - 1], sizeof m->val[0]);
    for (int i = 0; i < RUN_KEYS; i++) m->kv[2 * i + 1] = m->val[i];
    int k = init_meta_pairs(&r->init);  // a fine-tuned run's origin
    memcpy(m->kv + 2 * RUN_KEYS, r->init.kv, 2 * k * sizeof(char *));
    m->n = RUN_KEYS + k;
}

// A run.* integer within its flag's range: 1 when present (*out set), 0 when absent; -1 with err
// naming the file and the key for a value out of range or malformed (a damaged --log-every 0 would
// divide by 0).
static int meta_int(const StFile *f, const char *key, int lo, int hi, int *out, MalaErr *err) {
    const char *v = st_meta(f, key);
    if (!v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return mala_errf(err, "%s: metadata '%s' = '%s' is not an integer from %d to %d", f->path, key, v, lo, hi);
    *out = (int)x;
    return 1;
}

int run_meta_read(const char *path, RunSettings *r, char *buf, size_t cap, char *vae_buf, size_t vae_cap,
                  int *iters_found, MalaErr *err) {
    StFile f;
    MalaErr e;
    *iters_found = 0;
    if (st_open(&f, path, &e)) return 0;
    int found = 0, rc = 0;
    const char *data = st_meta(&f, "run.data");
    if (data) { snprintf(buf, cap, "%s", data); r->data = buf; found++; }
    const char *vae = st_meta(&f, "run.vae");
    if (vae) { snprintf(vae_buf, vae_cap, "%s", vae); r->vae = vae_buf[0] ? vae_buf : NULL; }
    for (int i = 0; i < RUN_INTS && rc >= 0; i++)
        if ((rc = meta_int(&f, RUN_INT_KEYS[i].key, RUN_INT_KEYS[i].lo, RUN_INT_KEYS[i].hi, run_ints(r, i), err)) > 0)
            found++;
    if (rc >= 0) rc = train_meta_opt_u64(&f, "run.iters", 1, UINT64_MAX, &r->iters, err);
    const char *ev = rc >= 0 ? st_meta(&f, "run.eval") : NULL;
    if (ev && *ev && eval_every_meta_read(ev, &r->eval))
        rc = mala_errf(err, "%s: metadata 'run.eval' is malformed", path);
    if (rc < 0) {
        st_close(&f);
        return -1;
    }
    *iters_found = rc == 0;
    init_meta_read(&f, &r->init);
    const char *cf = st_meta(&f, "run.channels_from"), *kf = st_meta(&f, "run.classes_from");
    const char *prec = st_meta(&f, "run.precision");  // (absent in older files: "")
    snprintf(r->precision, sizeof r->precision, "%s", prec ? prec : "");
    if (cf) snprintf(r->channels_from, sizeof r->channels_from, "%s", cf);
    if (kf) snprintf(r->classes_from, sizeof r->classes_from, "%s", kf);
    st_close(&f);
    return found;
}

int init_meta_pairs(InitMeta *im) {
    if (!im->path[0]) return 0;
    static const char *keys[INIT_KEYS] = {"run.init", "run.init_sha256", "run.init_weights", "run.init_step"};
    const char *vals[INIT_KEYS] = {im->path, im->sha256, im->weights, im->step};
    for (int i = 0; i < INIT_KEYS; i++) {
        im->kv[2 * i] = keys[i];
        im->kv[2 * i + 1] = vals[i];
    }
    return INIT_KEYS;
}

void init_meta_read(const StFile *f, InitMeta *im) {
    const char *p = st_meta(f, "run.init"), *h = st_meta(f, "run.init_sha256"), *w = st_meta(f, "run.init_weights");
    const char *s = st_meta(f, "run.init_step");
    memset(im, 0, sizeof *im);
    if (!p) return;
    snprintf(im->path, sizeof im->path, "%s", p);
    snprintf(im->sha256, sizeof im->sha256, "%s", h ? h : "");
    snprintf(im->weights, sizeof im->weights, "%s", w ? w : "");
    snprintf(im->step, sizeof im->step, "%s", s ? s : "");
}

// The public API's training runs (include/mala.h): a fresh run set up as `mala train` sets up one
// (cli/cmd_train.c: the same model, data order, settings and run directory), and trained by the
// same loop (train/train_run.h), so its checkpoints are the bytes `mala train` writes.
// defines: mala_train_options_default, mala_train_open, mala_train_free, mala_train_error,
//          mala_train_step, mala_train_run, mala_train_save
#include "api/api_internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/dir_lock.h"
#include "data/dataset.h"
#include "data/latents.h"
#include "formats/atomic_file.h"
#include "train/loader.h"
#include "train/run_dir.h"
#include "train/run_settings.h"
#include "train/train_run.h"
#include "train/trainer.h"

struct mala_train {
    mala_context *ctx;
    mala_train_options o;
    char data[4096], out[4096];
    Dataset *ds;
    Loader *ld;
    Trainer *tr;
    ClassNames cn;
    RunSettings rs;
    RunMeta meta;
    float *x;
    int32_t *y;
    volatile sig_atomic_t stop;
    MalaErr err;
};

mala_train_options mala_train_options_default(void) {
    TrainOpts to;
    train_opts_default(&to);
    return (mala_train_options){.data = "fashion-mnist", .model = "DiT-S/2", .batch = 256, .lr = to.lr,
                                .ema_decay = to.ema_decay, .label_drop = to.label_drop, .weight_decay = to.weight_decay,
                                .grad_clip = to.grad_clip, .warmup = to.warmup, .seed = to.seed, .iters = 400000,
                                .ckpt_every = 5000, .log_every = 100, .keep = 3};
}

__attribute__((format(printf, 2, 3))) static int train_fail(mala_train *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err.msg, sizeof t->err.msg, fmt, ap);
    va_end(ap);
    return MALA_ERROR;
}

const char *mala_train_error(const mala_train *t) { return t->err.msg; }

static void train_free(mala_train *t) {
    free(t->x);
    free(t->y);
    loader_free(t->ld);
    trainer_free(t->tr);
    dataset_close(t->ds);
    class_names_free(&t->cn);
    free(t);
}

// The options checked as `mala train` checks its flags, before anything is opened.
static int check_options(const mala_train_options *o, char *msg, size_t cap) {
    const char *bad = !o->data ? "data: none given" : !o->model ? "model: none given" : NULL;
    if (!bad && o->batch < 1) bad = "batch: expected 1 or more";
    if (!bad && !(o->lr >= 0 && o->lr <= 1)) bad = "lr: expected 0..1";
    if (!bad && !(o->ema_decay >= 0 && o->ema_decay <= 1)) bad = "ema_decay: expected 0..1";
    if (!bad && !(o->label_drop >= 0 && o->label_drop <= 1)) bad = "label_drop: expected 0..1";
    if (!bad && !(o->weight_decay >= 0 && o->weight_decay <= 10)) bad = "weight_decay: expected 0..10";
    if (!bad && !(o->grad_clip >= 0 && isfinite(o->grad_clip))) bad = "grad_clip: expected 0 or more";
    if (!bad && (o->warmup < 0 || o->limit < 0 || o->image_size < 0)) bad = "warmup, limit and image_size: expected 0 or more";
    if (!bad && (o->iters < 1 || o->ckpt_every < 1 || o->log_every < 1 || o->keep < 1))
        bad = "iters, ckpt_every, log_every and keep: expected 1 or more";
    if (bad) snprintf(msg, cap, "mala_train_open: %s", bad);
    return bad != NULL;
}

static int train_open(mala_context *ctx, const mala_train_options *o, mala_train **out) {
    *out = NULL;
    char msg[MALA_ERR_LEN];
    if (check_options(o, msg, sizeof msg)) return api_ctx_fail(ctx, msg);
    if (!strcmp(ctx->precision, "int8"))
        return api_ctx_fail(ctx, "precision int8: int8 is for sampling only (it has no backward); train in fp32 or bf16");
    mala_train *t = calloc(1, sizeof *t);
    if (!t) return api_ctx_fail(ctx, "out of memory");
    t->ctx = ctx;
    t->o = *o;
    snprintf(t->data, sizeof t->data, "%s", o->data);
    snprintf(t->out, sizeof t->out, "%s", o->out ? o->out : "");
    t->o.data = t->data;
    t->o.out = o->out ? t->out : NULL;
    MalaErr err;
    // the model from the preset, shaped by the data (cli/model_opts.c, cli/cmd_train.c)
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    if (net_config_preset(&c, o->model, &err)) goto fail;
    const int latent = latent_is_set(o->data);
    t->ds = dataset_open(o->data, latent && !o->image_size ? 0 : o->image_size ? o->image_size : 32, 0, &err);
    if (!t->ds || (o->limit > 0 && dataset_limit(t->ds, o->limit, &err))) goto fail;
    c.image_size = t->ds->views ? t->ds->image_size : o->image_size ? o->image_size : 32;
    c.in_channels = t->ds->channels;
    c.num_classes = t->ds->num_classes;
    c.latent_scale = t->ds->latent_scale;
    if (net_config_validate(&c, &err) || net_check_learnable(&c, &err)) goto fail;
    if (o->batch > t->ds->n) {
        mala_errf(&err, "batch %d is larger than the data (%lld images in %s)", o->batch, (long long)t->ds->n, o->data);
        goto fail;
    }
    t->cn.n = c.num_classes;
    t->cn.names = calloc(t->cn.n ? t->cn.n : 1, sizeof(char *));
    for (int i = 0; i < t->cn.n; i++) t->cn.names[i] = strdup(t->ds->class_names[i]);
    TrainOpts to;
    train_opts_default(&to);
    to.lr = o->lr, to.ema_decay = o->ema_decay, to.label_drop = o->label_drop, to.weight_decay = o->weight_decay;
    to.grad_clip = o->grad_clip, to.warmup = o->warmup, to.seed = o->seed, to.accum = 1;
    // the run's settings as `mala train` records them (run.* in every checkpoint)
    t->rs = (RunSettings){t->data, NULL, o->log_every, 0, o->ckpt_every, -1, o->limit, o->keep, 50, 0, o->iters, 0,
                          "data", "data"};
    t->rs.tensorboard = o->tensorboard != 0;
    eval_every_default(&t->rs.eval);
    snprintf(t->rs.precision, sizeof t->rs.precision, "%s", ctx->be->precision());
    int hflip = strcmp(o->data, "fashion-mnist") != 0 && strncmp(o->data, "fashion-mnist:", 14) != 0;
    if (t->ds->views) hflip = t->ds->views == 2;  // a latent set's flips are its encoded views
    t->ld = loader_new(t->ds, o->batch, to.seed, hflip, &err);
    if (!t->ld) goto fail;
    t->tr = trainer_new(&c, &t->cn, &to, ctx->be, o->batch);
    trainer_shard(t->tr, 0, 1);
    trainer_init_weights(t->tr);
    run_meta_fill(&t->meta, &t->rs);
    t->tr->n_meta = t->meta.n;
    t->tr->meta = t->meta.kv;
    const size_t per = (size_t)c.in_channels * c.image_size * c.image_size;
    t->x = malloc(sizeof(float) * per * o->batch);
    t->y = malloc(sizeof(int32_t) * o->batch);
    if (!t->x || !t->y) {
        mala_errf(&err, "out of memory for a batch of %d", o->batch);
        goto fail;
    }
    *out = t;
    return MALA_OK;
fail:
    train_free(t);
    return api_ctx_fail(ctx, err.msg);
}

static int train_step(mala_train *t, mala_train_stats *st) {
    loader_next(t->ld, t->x, t->y);
    StepStats s = trainer_step(t->tr, t->x, t->y);
    if (st)
        *st = (mala_train_stats){t->tr->step, s.loss, s.mse, s.vb, s.grad_norm, 0, train_lr(&t->tr->opt, t->tr->step),
                                 s.skipped};
    return MALA_OK;
}

typedef struct {
    mala_train_log_fn fn;
    void *user;
} LogCtx;

static int on_log(void *user, uint64_t step, const TbRow *row) {
    LogCtx *l = user;
    mala_train_stats st = {step, row->loss, row->mse, row->vb, row->grad_norm, row->img_per_s, row->lr, 0};
    return l->fn(l->user, &st);
}

// A directory with a run in it (log rows, checkpoints) is never trained into: its results stay.
static int run_dir_empty(const char *out, char *msg, size_t cap) {
    char p[4200];
    snprintf(p, sizeof p, "%s/checkpoints", out);
    uint64_t *steps = NULL;
    int n = run_list_checkpoints(out, &steps);
    free(steps);
    struct stat st;
    snprintf(p, sizeof p, "%s/log.csv", out);
    if (n > 0 || !stat(p, &st)) {
        snprintf(msg, cap, "%s: holds a training run (log.csv or checkpoints): give an empty or new directory (mala "
                 "train --resume continues it)", out);
        return 0;
    }
    return 1;
}

static int train_run(mala_train *t, mala_train_log_fn fn, void *user) {
    if (!t->o.out) return train_fail(t, "mala_train_run: options.out is NULL (a run writes its directory; "
                                        "mala_train_step trains without one)");
    if (t->tr->step) return train_fail(t, "mala_train_run: the run has taken steps with mala_train_step already");
    const char *out = t->o.out;
    char dir[4200], csv[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints", out);
    snprintf(csv, sizeof csv, "%s/log.csv", out);
    MalaErr err;
    if (!run_dir_empty(out, err.msg, sizeof err.msg) || dirs_make(dir, &err)) return train_fail(t, "%s", err.msg);
    DirLock lock = {-1};
    if (dir_lock_take(&lock, out, "mala_train_run", &err)) return train_fail(t, "%s", err.msg);
    FILE *f = fopen(csv, "w");
    if (!f || fprintf(f, "step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time\n") < 0 || fclose(f)) {
        dir_lock_release(&lock);
        return train_fail(t, "%s: cannot write: %s", csv, strerror(errno));
    }
    TfEvents tb = {0};
    if (t->rs.tensorboard && tfev_open_dir(&tb, out, &err)) {
        dir_lock_release(&lock);
        return train_fail(t, "%s", err.msg);
    }
    RunLog hist = {0};
    LogCtx lc = {fn, user};
    loader_seek(t->ld, t->tr->batches);
    TrainRun run = {t->tr, t->ld, &t->tr->opt, &t->rs, &t->meta, out, t->o.batch, 1, NULL, 0, NULL, &tb, &hist, 1,
                    &t->stop};
    run.quiet = 1;
    run.on_log = fn ? on_log : NULL;
    run.user = &lc;
    int rc = train_run_loop(&run);
    int closed = tfev_close(&tb, &err);
    run_log_free(&hist);
    dir_lock_release(&lock);
    if (rc) return train_fail(t, "%s", run.err.msg);
    if (closed) return train_fail(t, "%s", err.msg);
    return MALA_OK;
}

static int train_save(mala_train *t, const char *path) {
    MalaErr err;
    if (!path) return train_fail(t, "mala_train_save: no path");
    run_meta_fill(&t->meta, &t->rs);
    return trainer_save(t->tr, path, &err) ? train_fail(t, "%s", err.msg) : MALA_OK;
}

// ---- the calls that compute, each between api_begin and api_end ----

int mala_train_open(mala_context *ctx, const mala_train_options *o, mala_train **out) {
    api_begin(ctx);
    return api_end(ctx, train_open(ctx, o, out));
}
void mala_train_free(mala_train *t) {
    if (!t) return;
    mala_context *ctx = t->ctx;
    api_begin(ctx);
    train_free(t);
    api_end(ctx, 0);
}
int mala_train_step(mala_train *t, mala_train_stats *st) {
    api_begin(t->ctx);
    return api_end(t->ctx, train_step(t, st));
}
int mala_train_run(mala_train *t, mala_train_log_fn on_log, void *user) {
    api_begin(t->ctx);
    return api_end(t->ctx, train_run(t, on_log, user));
}
int mala_train_save(mala_train *t, const char *path) {
    api_begin(t->ctx);
    return api_end(t->ctx, train_save(t, path));
}

// The public API's training runs (include/mala.h): a second front end of train/train_setup.h, as
// `mala train` (cli/cmd_train.c) is the first: the options become the set-up's settings, the set-up
// builds the run (the same model, data order, settings, memory plan and run directory), quietly,
// and train/train_run.h's loop trains it, so its checkpoints are the bytes `mala train` writes.
// defines: mala_train_options_default, mala_train_open, mala_train_free, mala_train_error,
//          mala_train_step, mala_train_run, mala_train_save
#include "api/api_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train_run.h"
#include "train/train_setup.h"

struct mala_train {
    mala_context *ctx;
    TrainSetup s;
    char data[4096], out[4096], model[256];  // the options' strings, which the set-up points at
    float *x;                                 // mala_train_step's batch
    int32_t *y;
    volatile sig_atomic_t stop;               // (no signal handler: a library leaves the signals alone)
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
    MalaErr err;
    tfev_close(&t->s.tb, &err);  // (a run that was never trained: its empty event file)
    train_setup_free(&t->s);
    free(t->x);
    free(t->y);
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

// The set-up's model (TrainModelHooks.config): options.model's preset with the data's channels,
// classes and image size.
static int model_config(void *user, const NetConfig *init, int channels, int classes, int image_size, NetConfig *c,
                        MalaErr *err) {
    const mala_train *t = user;
    net_config_default(c, BACKBONE_DIT);
    if (net_config_preset(c, t->model, err)) return -1;
    c->image_size = image_size;
    c->in_channels = channels;
    c->num_classes = classes;
    return net_config_validate(c, err) ? -1 : 0;
}

// The options as the set-up's settings: those of `mala train` with the same flags, given (TrainGiven)
// where they differ from the defaults; no sample grids, no evaluations, a fresh run on one process.
static void train_settings(mala_train *t, const mala_train_options *o) {
    const mala_train_options d = mala_train_options_default();
    TrainSetup *s = &t->s;
    snprintf(t->data, sizeof t->data, "%s", o->data);
    snprintf(t->out, sizeof t->out, "%s", o->out ? o->out : "");
    snprintf(t->model, sizeof t->model, "%s", o->model);
    train_opts_default(&s->to);
    s->to.lr = o->lr, s->to.ema_decay = o->ema_decay, s->to.label_drop = o->label_drop;
    s->to.weight_decay = o->weight_decay, s->to.grad_clip = o->grad_clip, s->to.warmup = o->warmup, s->to.seed = o->seed;
    s->rs = (RunSettings){t->data, NULL, o->log_every, 0, o->ckpt_every, -1, o->limit, o->keep, 50, 0, o->iters, 0,
                          "data", "data"};
    s->rs.tensorboard = o->tensorboard != 0;
    eval_every_default(&s->rs.eval);
    s->out = o->out ? t->out : NULL;
    s->be = t->ctx->be;  // the context's backend and precision (the set-up refuses int8)
    s->precision = t->ctx->precision;
    s->quiet = 1;
    s->batch = o->batch;
    s->accum = 1;
    s->iters = o->iters;
    s->image_size = o->image_size ? o->image_size : 32;  // (a latent set's own unless given)
    s->preset = t->model;
    s->model = (TrainModelHooks){model_config, NULL, t};
    s->stop = &t->stop;
    TrainGiven *g = &s->given;
    g->batch = o->batch != d.batch, g->iters = o->iters != d.iters, g->seed = o->seed != d.seed;
    g->lr = o->lr != d.lr, g->ema_decay = o->ema_decay != d.ema_decay, g->warmup = o->warmup != d.warmup;
    g->weight_decay = o->weight_decay != d.weight_decay, g->grad_clip = o->grad_clip != d.grad_clip;
    g->label_drop = o->label_drop != d.label_drop, g->limit = o->limit != d.limit, g->keep = o->keep != d.keep;
    g->log_every = o->log_every != d.log_every, g->ckpt_every = o->ckpt_every != d.ckpt_every;
    g->tensorboard = o->tensorboard != d.tensorboard, g->image_size = o->image_size != 0;
    g->data = strcmp(o->data, d.data) != 0, g->model = strcmp(o->model, d.model) != 0;
}

static int train_open(mala_context *ctx, const mala_train_options *o, mala_train **out) {
    *out = NULL;
    char msg[MALA_ERR_LEN];
    if (check_options(o, msg, sizeof msg)) return api_ctx_fail(ctx, msg);
    mala_train *t = calloc(1, sizeof *t);
    if (!t) return api_ctx_fail(ctx, "out of memory");
    t->ctx = ctx;
    train_settings(t, o);
    TrainSetup *s = &t->s;
    MalaErr err = {""};
    if (train_setup_open(s, &err) || train_setup_settings(s, &err) || train_setup_data(s, &err) ||
        train_setup_plan(s, &err) || train_setup_prepare(s, &err) || train_setup_report(s, &err)) {
        train_free(t);
        return api_ctx_fail(ctx, err.msg);
    }
    const size_t per = (size_t)s->c.in_channels * s->c.image_size * s->c.image_size;
    t->x = malloc(sizeof(float) * per * s->batch);
    t->y = malloc(sizeof(int32_t) * s->batch);
    if (!t->x || !t->y) {
        snprintf(msg, sizeof msg, "out of memory for a batch of %d", s->batch);
        train_free(t);
        return api_ctx_fail(ctx, msg);
    }
    *out = t;
    return MALA_OK;
}

static int train_step(mala_train *t, mala_train_stats *st) {
    Trainer *tr = t->s.tr;
    loader_next(t->s.ld, t->x, t->y);
    StepStats s = trainer_step(tr, t->x, t->y);
    if (st) *st = (mala_train_stats){tr->step, s.loss, s.mse, s.vb, s.grad_norm, 0, train_lr(&tr->opt, tr->step), s.skipped};
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

static int train_run(mala_train *t, mala_train_log_fn fn, void *user) {
    TrainSetup *s = &t->s;
    if (!s->out) return train_fail(t, "mala_train_run: options.out is NULL (a run writes its directory; "
                                      "mala_train_step trains without one)");
    if (s->tr->step) return train_fail(t, "mala_train_run: the run has taken steps with mala_train_step already");
    LogCtx lc = {fn, user};
    TrainRun run = {s->tr, s->ld, &s->to, &s->rs, &s->meta, s->out, s->batch, s->accum, NULL, 0, s->tev, &s->tb,
                    &s->hist, s->lead, &t->stop};
    run.quiet = 1;
    run.on_log = fn ? on_log : NULL;
    run.user = &lc;
    int rc = train_run_loop(&run);
    MalaErr err;
    int closed = tfev_close(&s->tb, &err);
    if (rc) return train_fail(t, "%s", run.err.msg);
    if (closed) return train_fail(t, "%s", err.msg);
    return MALA_OK;
}

static int train_save(mala_train *t, const char *path) {
    MalaErr err;
    if (!path) return train_fail(t, "mala_train_save: no path");
    run_meta_fill(&t->s.meta, &t->s.rs);
    return trainer_save(t->s.tr, path, &err) ? train_fail(t, "%s", err.msg) : MALA_OK;
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

// --resume: the run continued from the newest complete checkpoint of --out (train/train_setup.h),
// with the run's model, optimiser, data, logging and evaluation settings, except those given again.
// defines: train_setup_resume
#include "train/train_setup.h"

#include <string.h>

#include "core/dist.h"
#include "train/mem_plan.h"
#include "train/run_guard.h"
#include "train/train_batch.h"

// Without --precision the run goes on in the precision it trained in (run.precision; tf32 is fp32
// on the CPU); --precision given may change it (checkpoints hold fp32 either way). A note says
// which when they differ.
static void resume_precision(const Backend *be, const char *device, const char *given, const char *run, int say) {
    if (!*run || !strcmp(run, be->precision())) return;  // (an older file has none: the flag's or the default)
    if (!given) {
        backend_select(device, run);  // the same backend, set to the run's precision
        be->weights_changed();
    }
    if (say) fprintf(stderr, "note: the run trained in %s; it goes on in %s%s\n", run, be->precision(),
                     given ? " (--precision)" : " (the run's; --precision changes it)");
}

// The newest checkpoint that loads into t->tr (its optimiser settings into *saved); t->tr stays
// NULL when none does. n, steps: the run's checkpoints.
static int load_newest(TrainSetup *t, int n, const uint64_t *steps, TrainOpts *saved, MalaErr *err) {
    for (int i = n - 1; i >= 0 && !t->tr; i--) {  // newest complete checkpoint
        run_ckpt_path(t->resume_path, sizeof t->resume_path, t->out, steps[i]);
        int saved_batch;
        MalaErr e;
        if (trainer_peek(t->resume_path, &t->c, &t->cn, saved, &saved_batch, &e)) {
            fprintf(stderr, "warning: skipping %s\n", e.msg);
            continue;
        }
        BatchFlags bf = {t->batch, t->accum, t->gbatch, t->given.batch, t->given.accum, t->given.gbatch};
        if (check_resumed_batch(&bf, saved_batch, saved->accum, err)) return -1;
        t->batch = saved_batch;
        t->accum = saved->accum;
        if (t->batch % t->world)
            return mala_errf(err, "--resume: the run's global batch %d does not split over %d processes", t->batch,
                             t->world);
        TrainMemArgs ma = {.batch = t->batch / t->world, .world = t->world, .zero = t->zero, .accum = t->accum,
                           .grids = t->lead && t->rs.sample_every > 0, .grid_images = t->rs.sample_images,
                           .vae = t->rs.vae};
        if (train_memory_check(&t->c, t->be, &ma, t->batch, 1, "the resumed model", 0, err)) {  // "resuming ..." says it
            t->no_memory = 1;
            return -1;
        }
        t->tr = trainer_new(&t->c, &t->cn, saved, t->be, t->batch / t->world);
        trainer_shard(t->tr, t->rank, t->world);
        if (t->zero) trainer_zero1(t->tr);
        if (trainer_load(t->tr, t->resume_path, &e)) {
            fprintf(stderr, "warning: skipping %s\n", e.msg);
            trainer_free(t->tr);
            t->tr = NULL;
            class_names_free(&t->cn);
        }
    }
    return 0;
}

// The checkpoint's optimiser settings, except those given again (a manual schedule).
static int resume_optimiser(TrainSetup *t, TrainOpts saved, MalaErr *err) {
    const TrainGiven *g = &t->given;
    if (g->seed && t->to.seed != saved.seed)
        return mala_errf(err, "--resume: --seed %llu contradicts the run's seed %llu (it fixes the data order and the "
                         "noise)", (unsigned long long)t->to.seed, (unsigned long long)saved.seed);
    if (g->lr) saved.lr = t->to.lr;
    if (g->ema_decay) saved.ema_decay = t->to.ema_decay;
    if (g->warmup) saved.warmup = t->to.warmup;
    if (g->decay_start) saved.decay_start = t->to.decay_start;
    if (g->decay_end) saved.decay_end = t->to.decay_end;
    if (g->lr_end) saved.lr_end = t->to.lr_end;
    if (g->weight_decay) saved.weight_decay = t->to.weight_decay;
    if (g->grad_clip) saved.grad_clip = t->to.grad_clip;
    if (g->label_drop) saved.label_drop = t->to.label_drop;
    saved.max_bad_steps = t->to.max_bad_steps;
    t->to = saved;
    t->tr->opt = t->to;
    return 0;
}

// The run's data, logging and evaluation settings (run.*), except those given again. 0, or -1 with
// err for a malformed value.
static int resume_settings(TrainSetup *t, MalaErr *err) {
    const TrainGiven *g = &t->given;
    RunSettings r = t->rs;
    int found = run_meta_read(t->resume_path, &r, t->data_buf, sizeof t->data_buf, t->vae_buf, sizeof t->vae_buf,
                              &t->iters_stored, err);
    if (found < 0) return -1;
    if (!found)
        fprintf(stderr, "warning: %s has no run settings (an older mala wrote it): using the command line's\n",
                t->resume_path);
    if (t->iters_stored && !g->iters && !g->epochs) t->iters = r.iters;
    if (!g->data) t->rs.data = r.data;
    if (!g->vae) t->rs.vae = r.vae;
    if (!g->log_every) t->rs.log_every = r.log_every;
    if (!g->sample_every) t->rs.sample_every = r.sample_every;
    if (!g->ckpt_every) t->rs.ckpt_every = r.ckpt_every;
    if (!g->hflip) t->rs.hflip = r.hflip;
    if (!g->limit) t->rs.limit = r.limit;
    if (!g->keep) t->rs.keep = r.keep;
    if (!g->sample_steps) t->rs.sample_steps = r.sample_steps;
    if (!g->sample_images) t->rs.sample_images = r.sample_images;
    if (!g->tensorboard) t->rs.tensorboard = r.tensorboard;
    memcpy(t->rs.channels_from, r.channels_from, sizeof t->rs.channels_from);
    memcpy(t->rs.classes_from, r.classes_from, sizeof t->rs.classes_from);
    t->rs.init = r.init;
    EvalEvery fl = t->rs.eval;  // the stored evaluation settings, except flags given again
    t->rs.eval = r.eval;
    if (g->eval_images) t->rs.eval.images = fl.images;
    if (g->eval_steps) t->rs.eval.steps = fl.steps;
    if (g->eval_cfg_scale) t->rs.eval.cfg_scale = fl.cfg_scale;
    resume_precision(t->be, t->device, t->precision, r.precision, t->say);
    return 0;
}

int train_setup_resume(TrainSetup *t, MalaErr *err) {
    uint64_t *steps;
    int n = run_list_checkpoints(t->out, &steps);
    TrainOpts saved = t->to;
    int rc = load_newest(t, n, steps, &saved, err);
    free(steps);
    if (rc) return -1;
    if (!t->tr) {
        if (t->lead && no_checkpoint_to_resume(t->out, t->dir, t->csv, n, err)) return -1;
        dist_barrier();
        t->resume = 0;  // a fresh start from here on
        return 0;
    }
    if (t->model.check_resumed && t->model.check_resumed(t->model.user, &t->c, err)) return -1;
    if (resume_optimiser(t, saved, err) || resume_settings(t, err)) return -1;
    return 0;
}

// The last steps of a run's set-up (train/train_setup.h): the data order, the sample grids, the
// trainer, the run directory and its log files, the evaluations, and what the run is said on the
// console; and the set-up freed.
// defines: train_setup_prepare, train_setup_report, train_setup_free
#include "train/train_setup.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/dist.h"
#include "formats/atomic_file.h"  // defines: atomic_remove_stale, atomic_write_file, dirs_make
#include "train/fine_tune.h"
#include "train/run_guard.h"
#include "train/train_run.h"  // defines: train_check_replicas

// The loss history of the run (for the curve), re-read from log.csv on resume: keeps the rows up
// to `upto` (rows logged after the checkpoint we resume from are dropped from the file too).
// Returns the training seconds of the last row kept (its elapsed_s column; 0 without one).
static double history_load(RunLog *h, const char *csv, uint64_t upto) {
    long keep_bytes = run_log_read(csv, upto, h);
    if (keep_bytes < 0) return 0;
    if (truncate(csv, (off_t)keep_bytes)) fprintf(stderr, "warning: %s: cannot trim: %s\n", csv, strerror(errno));
    return h->n && !isnan(h->elapsed[h->n - 1]) ? h->elapsed[h->n - 1] : 0;
}

// DIR/train.args: a fresh run's command line (its arguments, each ended by a NUL), so that a run
// killed before its first checkpoint starts over with --resume alone, as it was started.
static int args_save(const char *out, int argc, char **argv, MalaErr *err) {
    size_t len = 0;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *buf = xmalloc(len ? len : 1), p[4200];
    len = 0;
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]) + 1;
        memcpy(buf + len, argv[i], l);
        len += l;
    }
    snprintf(p, sizeof p, "%s/train.args", out);
    int rc = atomic_write_file(p, buf, len, err);
    free(buf);
    return rc ? -1 : 0;
}

// Rank 0's run directory, made once every rank has checked the run: --out locked (a new one now
// that it exists, and checked again under the lock), partial checkpoints of a killed run removed.
static int make_run_dir(TrainSetup *t, MalaErr *err) {
    if (dirs_make(t->dir, err)) return -1;
    if (t->lock.fd < 0 &&
        (dir_lock_take(&t->lock, t->out, "mala train", err) || refuse_existing_run(t->out, t->csv, t->say, err)))
        return -1;
    int stale = atomic_remove_stale(t->dir, ".safetensors", err);  // partial saves of a killed run
    if (stale > 0 && t->say)
        fprintf(stderr, "removed %d partial checkpoint%s (*.safetensors.tmp) in %s\n", stale, stale > 1 ? "s" : "",
                t->dir);
    if (t->grid_every > 0) {
        snprintf(t->path, sizeof t->path, "%s/samples", t->out);
        if (dirs_make(t->path, err)) return -1;
    }
    return 0;
}

int train_setup_prepare(TrainSetup *t, MalaErr *err) {
    // the data order and the sample grids (their VAE loaded), before anything is written
    t->ld = loader_new(t->ds, t->batch / t->world, t->to.seed, t->hflip, err);
    if (!t->ld) return -1;
    if (t->world > 1) loader_shard(t->ld, t->batch, t->rank * (t->batch / t->world));
    if (t->grid_every > 0 && train_grid_init(&t->pv, &t->c, &t->cn, t->be, t->rs.vae, t->rs.sample_images,
                                             t->rs.sample_steps, t->stop, err))
        return -1;

    // the trainer (a fresh one: --init's weights checked and loaded first), then the run directory
    // (rank 0's, once every rank has checked the run)
    if (!t->resume) {
        t->tr = trainer_new(&t->c, &t->cn, &t->to, t->be, t->batch / t->world);
        trainer_shard(t->tr, t->rank, t->world);
        if (t->zero) trainer_zero1(t->tr);
        trainer_init_weights(t->tr);
        if (t->init &&
            fine_tune_load(t->tr, t->init, !strcmp(t->init_weights, "online"), t->lead, &t->rs.init, err))
            return -1;
    }
    dist_barrier();
    const int writes = t->lead && t->out;  // this process writes the run directory
    if (writes && make_run_dir(t, err)) return -1;
    if (t->resume) {
        if (t->say)
            fprintf(stderr, "resuming %s at step %llu, to step %llu (%s)\n", t->resume_path,
                    (unsigned long long)t->tr->step, (unsigned long long)t->iters,
                    t->given.iters ? "--iters" : t->given.epochs ? "--epochs"
                    : t->iters_stored ? "the run's --iters; give --iters to change it"
                                      : "--iters' default: the checkpoint stores no target");
        if (t->lead) t->rs.elapsed = history_load(&t->hist, t->csv, t->tr->step);
        return 0;
    }
    if (writes && !t->restarting && t->argc > 0 && args_save(t->out, t->argc, t->argv, err)) return -1;
    FILE *f = writes ? fopen(t->csv, "w") : NULL;
    if (writes && (!f || fprintf(f, "step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time\n") < 0 || fclose(f)))
        return mala_errf(err, "%s: cannot write: %s", t->csv, strerror(errno));
    return 0;
}

// What the run is: the processes, the model, the optimiser's state, the data, the schedule, the
// grids (rank 0's console).
static void say_run(const TrainSetup *t) {
    char desc[256];
    net_config_describe(&t->c, desc, sizeof desc);
    if (t->world > 1)
        fprintf(stderr, "processes: %d (%s), %d images each of the global batch %d\n", t->world, dist_engine(),
                t->tr->batch, t->batch);
    fprintf(stderr, "model: %s; %.2fM parameters, %s backend, %d threads\n", desc, t->tr->net->n_trainable / 1e6,
            t->be->name, num_threads());
    if (t->world > 1 || t->zero)
        fprintf(stderr, "optimiser state (AdamW m, v): %.2f MB per process%s\n", trainer_opt_state_bytes(t->tr) / 1e6,
                t->tr->zero ? " (ZeRO-1: 1/world of it)" : t->world > 1 ? " (each holds all of it; --zero 1 shards it)"
                                                          : " (--zero 1: one process, nothing to shard)");
    char bdesc[64];
    snprintf(bdesc, sizeof bdesc, t->accum > 1 ? "%d (--batch %d x --accum %d)" : "%d", t->batch * t->accum, t->batch,
             t->accum);
    char kdesc[64];
    snprintf(kdesc, sizeof kdesc, t->c.num_classes ? "%d classes" : "%d classes unused (an unconditional model)",
             t->ds->num_classes);
    fprintf(stderr, "data: %s, %lld images, %d channel%s, %s; batch %s, lr %g, EMA %g; %llu steps; run dir %s\n",
            t->rs.data, (long long)t->ds->n, t->ds->channels, t->ds->channels > 1 ? "s" : "", kdesc, bdesc, t->to.lr,
            t->to.ema_decay, (unsigned long long)t->iters, t->out ? t->out : "none");
    if (t->to.decay_end > t->to.decay_start)
        fprintf(stderr, "lr decay: linear from %g after step %llu to %g at step %llu\n", t->to.lr,
                (unsigned long long)t->to.decay_start, t->to.lr_end, (unsigned long long)t->to.decay_end);
    if (t->grid_every > 0)
        fprintf(stderr, "sample grids: %d images, DDIM %d steps, every %d steps and at the end (--sample-images, "
                "--sample-steps, --sample-every 0 for none)\n", t->pv.n, t->pv.steps, t->grid_every);
    if (t->tr->step >= t->iters)
        fprintf(stderr, "note: the run is at step %llu, its target: nothing to train (give a larger --iters to go "
                "on)\n", (unsigned long long)t->tr->step);
}

int train_setup_report(TrainSetup *t, MalaErr *err) {
    EvalEvery *e = &t->rs.eval;
    t->rs.iters = t->iters;
    if (t->lead && t->out && t->rs.tensorboard &&
        (tfev_open_dir(&t->tb, t->out, err) || (t->resume && tfev_session_start(&t->tb, (int64_t)t->tr->step + 1, err))))
        return -1;
    snprintf(t->rs.precision, sizeof t->rs.precision, "%s", t->be->precision());
    if (e->every && t->tr->step <= t->iters &&  // (at the target: its last point may be due, a stop cut it)
        !(t->tev = train_eval_open(e, &t->c, &t->cn, t->be, t->rs.vae, t->out, trainer_step_images(t->tr))))
        return 1;  // its error line is out
    if (t->say && t->tev)
        fprintf(stderr, "evaluation: %s every %llu %s and at the end, %d images, %s %d steps, guidance %g, against %s "
                "(evals.csv, fd.png, best.json)\n", e->inception[0] ? "FID" : "FD (fmnist features)",
                (unsigned long long)e->every, e->in_steps ? "steps" : "training images", e->images, e->sampler,
                e->steps, e->cfg_scale, e->ref);
    run_meta_fill(&t->meta, &t->rs);
    t->tr->n_meta = t->meta.n;
    t->tr->meta = t->meta.kv;
    loader_seek(t->ld, t->tr->batches);
    if (train_check_replicas(t->tr, err)) {
        t->diverged = 1;
        return -1;
    }
    if (t->say) say_run(t);
    return 0;
}

void train_setup_free(TrainSetup *t) {
    if (t->grid_every > 0 && t->ld) train_grid_free(&t->pv);  // (the grids are made after the loader)
    train_eval_free(t->tev);
    run_log_free(&t->hist);
    loader_free(t->ld);
    dataset_close(t->ds);
    trainer_free(t->tr);
    class_names_free(&t->cn);
    if (t->lock.fd >= 0) dir_lock_release(&t->lock);
}

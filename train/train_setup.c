// defines: train_setup_open, train_setup_settings, train_setup_data, train_setup_plan
#include "train/train_setup.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dist.h"
#include "data/latents.h"  // defines: latent_is_set
#include "model/vae.h"
#include "sampler/sampler.h"
#include "train/fine_tune.h"
#include "train/mem_plan.h"
#include "train/run_guard.h"
#include "train/train_batch.h"

int train_setup_open(TrainSetup *t, MalaErr *err) {
    t->lock.fd = -1;
    t->rank = dist_rank();
    t->world = dist_world();
    t->lead = t->rank == 0;
    t->say = t->lead && !t->quiet;
    if (t->precision && !strcmp(t->precision, "int8"))
        return mala_errf(err, "--precision int8: int8 is for sampling only (it has no backward); train in fp32 or bf16");
    if (!t->be) t->be = backend_select(t->device, t->precision);
    if (!t->out)  // no run directory: nothing to check or lock
        return t->resume ? mala_errf(err, "--resume: continues the run in --out: give --out") : 0;

    snprintf(t->dir, sizeof t->dir, "%s/checkpoints", t->out);
    snprintf(t->csv, sizeof t->csv, "%s/log.csv", t->out);
    snprintf(t->plot, sizeof t->plot, "%s/loss.png", t->out);

    // the model: a checkpoint's (--resume) or the settings' (shaped by the data, train_setup_data).
    // Rank 0 holds --out's writer lock (core/dir_lock.h) from before it reads the run until the end:
    // a second run on the same directory, fresh or --resume, is refused naming this process.
    struct stat st;
    if (t->lead && !t->dry_run && !stat(t->out, &st) && S_ISDIR(st.st_mode) &&
        dir_lock_take(&t->lock, t->out, "mala train", err))
        return -1;
    if (t->resume) return train_setup_resume(t, err);
    if (stat(t->out, &st) == 0 && !S_ISDIR(st.st_mode))
        return mala_errf(err, "--out %s: exists and is not a directory", t->out);
    if (!t->dry_run && t->restarting && t->lead)
        return move_earlier_start(t->out, t->csv, "its stored command line (DIR/train.args)", err);
    if (!t->dry_run && !t->restarting) return refuse_existing_run(t->out, t->csv, t->say, err);
    return 0;
}

int train_setup_settings(TrainSetup *t, MalaErr *err) {
    EvalEvery *e = &t->rs.eval;
    if (!t->dry_run && t->out && refuse_out_in_data(t->out, t->rs.data, err)) return -1;
    if (t->eval_every && eval_every_parse(t->eval_every, e, err)) return -1;
    if (t->eval_sampler) snprintf(e->sampler, sizeof e->sampler, "%s", t->eval_sampler);
    if (t->eval_ref) snprintf(e->ref, sizeof e->ref, "%s", t->eval_ref);
    if (t->inception) snprintf(e->inception, sizeof e->inception, "%s", t->inception);
    if (strchr(e->ref, ';') || strchr(e->inception, ';'))  // run.eval's separator
        return mala_errf(err, "--eval-ref / --inception: a path with ';' cannot be stored in the run's settings: rename it");
    SamplerKind eval_kind;
    if (sampler_kind_parse(e->sampler, &eval_kind))
        return mala_errf(err, "--eval-sampler %s: expected %s", e->sampler, sampler_kind_list());
    if (e->every && strncmp(e->ref, "fashion-mnist", 13) && access(e->ref, R_OK))
        return mala_errf(err, "--eval-ref %s: %s", e->ref, strerror(errno));

    // the schedule as settings and checkpoint make it
    if (!t->to.decay_end && (t->given.decay_start || t->given.lr_end))
        return mala_errf(err, "--decay-start and --lr-end need --decay-end (the step the decay ends at)");
    if (t->to.decay_end && t->to.decay_end <= t->to.decay_start)
        return mala_errf(err, "--decay-end %llu must be after --decay-start %llu", (unsigned long long)t->to.decay_end,
                         (unsigned long long)t->to.decay_start);
    return 0;
}

// A resumed run's data: the kind, the classes and their names its model was trained on.
static int check_resumed_data(const TrainSetup *t, MalaErr *err) {
    const Dataset *ds = t->ds;
    if ((ds->views > 0) != (t->c.latent_scale > 0))
        return mala_errf(err, "%s: %s, the resumed model is a %s model", t->rs.data, ds->views ? "a latent set" : "images",
                         t->c.latent_scale > 0 ? "latent" : "pixel-space");
    if (t->c.num_classes && ds->num_classes != t->c.num_classes)  // an unconditional model takes any data
        return mala_errf(err, "%s: %d classes, the resumed model has %d", t->rs.data, ds->num_classes, t->c.num_classes);
    for (int i = 0; i < t->cn.n; i++)
        if (strcmp(t->cn.names[i], ds->class_names[i]))
            return mala_errf(err, "%s: class %d is '%s', the resumed model's is '%s' (the labels would change meaning)",
                             t->rs.data, i, ds->class_names[i], t->cn.names[i]);
    return 0;
}

// A fresh run's model: the data's channels and classes unless given, then the settings' model or
// --init's, checked that it can learn and (--init) that it takes the file's weights.
static int fresh_model(TrainSetup *t, MalaErr *err) {
    const Dataset *ds = t->ds;
    const int uncond = t->given.classes && t->classes == 0;  // the data's labels unused
    if (t->given.classes && !uncond && t->classes != ds->num_classes)
        return mala_errf(err, "--classes %d contradicts the data: %s has %d classes (--classes 0: an unconditional "
                         "model)", t->classes, t->rs.data, ds->num_classes);
    snprintf(t->rs.channels_from, sizeof t->rs.channels_from, "%s", t->given.channels ? "--channels" : "data");
    snprintf(t->rs.classes_from, sizeof t->rs.classes_from, "%s", t->given.classes ? "--classes" : "data");
    t->channels = ds->channels;
    t->classes = uncond ? 0 : ds->num_classes;
    if (ds->views) t->image_size = ds->image_size;
    if (t->model.config(t->model.user, t->from_init ? &t->ic : NULL, t->channels, t->classes, t->image_size, &t->c,
                        err))
        return -1;
    t->c.latent_scale = ds->latent_scale;  // the model file records that it is a latent model
    MalaErr e;
    if (net_check_learnable(&t->c, &e)) return mala_errf(err, "%s: %s", t->model_name, e.msg);
    if (t->init && fine_tune_check(&t->c, t->init, !strcmp(t->init_weights, "online"), err))  // before the memory plan
        return -1;
    t->cn.n = t->classes;
    t->cn.names = xcalloc(t->cn.n, sizeof(char *));
    for (int i = 0; i < t->cn.n; i++) t->cn.names[i] = xstrdup(ds->class_names[i]);
    return 0;
}

int train_setup_data(TrainSetup *t, MalaErr *err) {
    t->from_init = t->init && !t->given.model;  // else the settings' model
    if (t->init && fine_tune_peek(t->init, t->init_heads, &t->ic, err)) return -1;
    if (t->from_init && !t->given.image_size) t->image_size = t->ic.image_size;
    t->model_name = t->from_init ? "the --init model" : t->preset;
    // a latent set fixes the image size (its latents'), unless a setting asks for one
    const int latent_data = latent_is_set(t->rs.data);
    t->ds = dataset_open(t->rs.data,
                         t->resume ? t->c.image_size : latent_data && !t->given.image_size ? 0 : t->image_size,
                         t->resume ? t->c.in_channels : t->given.channels ? t->channels : 0, err);
    if (!t->ds) return -1;
    if (t->rs.limit > 0 && dataset_limit(t->ds, t->rs.limit, err)) return -1;
    if (t->resume ? check_resumed_data(t, err) : fresh_model(t, err)) return -1;
    if (t->batch % t->world)
        return mala_errf(err, "--batch %d does not split over %d processes: give a multiple of %d", t->batch, t->world,
                         t->world);
    if (t->batch > t->ds->n)
        return mala_errf(err, "--batch %d is larger than the data (%lld images in %s%s): lower --batch", t->batch,
                         (long long)t->ds->n, t->rs.data, t->rs.limit > 0 ? " with --limit" : "");
    if (t->given.epochs) {  // a step takes --batch x --accum images
        uint64_t per_epoch = (uint64_t)t->ds->n / ((uint64_t)t->batch * t->accum);
        t->iters = (uint64_t)t->epochs * (per_epoch ? per_epoch : 1);
    }
    return 0;
}

// --vae, checked before anything is written: a latent set's decoder (a VAE file whose latents have
// the set's channels). DiT's `--vae ema|mse` name a download; here the setting names the file.
static int check_vae(const char *vae, const char *data, const Dataset *ds, MalaErr *err) {
    const char *dit = !strcmp(vae, "ema") || !strcmp(vae, "mse")
                          ? " (DiT's --vae ema|mse name a VAE to download; here --vae is a VAE file, docs/latent.md)"
                          : "";
    if (!ds->views)
        return mala_errf(err, "--vae %s: %s holds images, not latents: a pixel-space run needs no VAE%s", vae, data, dit);
    if (access(vae, R_OK)) return mala_errf(err, "--vae %s: %s%s", vae, strerror(errno), dit);
    VaeConfig vc;
    if (vae_config_read(vae, &vc, err)) return -1;
    if (vc.latent != ds->channels)
        return mala_errf(err, "--vae %s: its latents have %d channels, %s's have %d", vae, vc.latent, data,
                         ds->channels);
    return 0;
}

int train_setup_plan(TrainSetup *t, MalaErr *err) {
    const RunSettings *rs = &t->rs;
    t->hflip = rs->hflip >= 0 ? rs->hflip
                              : strcmp(rs->data, "fashion-mnist") != 0 && strncmp(rs->data, "fashion-mnist:", 14) != 0;
    if (t->ds->views) {  // a latent set's flips are its encoded views (a latent cannot be mirrored)
        if (rs->hflip == 1 && t->ds->views == 1)
            return mala_errf(err, "--hflip 1: %s holds one view per image; encode with `mala encode --hflip` to train "
                             "with flips", rs->data);
        t->hflip = rs->hflip >= 0 ? rs->hflip : t->ds->views == 2;
    }
    // the sample grids' settings and their VAE, checked before the memory plan prints its line
    if (!t->lead) t->rs.sample_every = 0;  // rank 0's grids only
    t->grid_every = rs->sample_every;
    if (t->grid_every > 0 && t->c.latent_scale > 0 && !rs->vae) {
        if (t->say)
            fprintf(stderr, "note: a latent model's sample grids decode through the VAE: no grids without --vae FILE\n");
        t->grid_every = 0;
    }
    if (rs->eval.every && t->c.latent_scale > 0 && !rs->vae)
        return mala_errf(err, "--eval-every: a latent model's samples decode through the VAE: give --vae FILE");
    if (rs->vae && (t->given.vae || t->grid_every > 0 || rs->eval.every) && check_vae(rs->vae, rs->data, t->ds, err))
        return -1;
    if (!t->resume) {  // everything the run allocates, refused before anything is created
        TrainMemArgs ma = {.batch = t->batch / t->world, .world = t->world, .zero = t->zero, .accum = t->accum,
                           .grids = t->grid_every > 0, .grid_images = rs->sample_images, .vae = rs->vae,
                           .data_n = t->ds->n};
        if (t->auto_accum) choose_accum(&t->c, t->be, &ma, t->gbatch, &t->batch, &t->accum, t->say);
        if (train_memory_check(&t->c, t->be, &ma, t->batch, 0, t->model_name, t->say, err)) {
            t->no_memory = 1;
            return -1;
        }
    }
    t->to.accum = t->accum;
    return 0;
}

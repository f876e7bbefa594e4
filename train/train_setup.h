// A training run's set-up, from its settings to what train/train_run.h's loop takes: the run to
// continue (--resume) or the directory to start in, the checks of the settings and the data, the
// model (shaped by the data), the memory plan, the trainer, the data order, the sample grids, the
// run directory, the log files and the evaluations (docs/train.md). Two front ends fill in the
// settings: `mala train` (cli/cmd_train.c) and the library's mala_train_open (api/train.c). Every
// step returns its error (one line naming the setting and the problem) instead of exiting, so that
// the front end says it and chooses the exit status; the steps run in order, each after the one
// before succeeded:
//   train_setup_open -> train_setup_settings -> train_setup_data -> (a dry run stops here)
//   -> train_setup_plan -> train_setup_prepare -> train_setup_report, then train_run_loop.
// Parts still exit on their own: backend_select (train_setup_open without a backend given) and
// whatever the model hooks do; neither is reached by the library's kind of run (its context's
// backend, its own hooks).
//
// Under MPI every process runs the set-up (dist_init first); rank 0 alone writes the run
// directory and the console (lead). Without dist_init (a library's caller) it is one process.
#ifndef MALA_TRAIN_SETUP_H
#define MALA_TRAIN_SETUP_H

#include <signal.h>

#include "core/backend.h"
#include "core/dir_lock.h"
#include "data/dataset.h"
#include "formats/tfevents.h"
#include "train/loader.h"
#include "train/run_dir.h"
#include "train/run_settings.h"
#include "train/train_eval.h"
#include "train/train_grid.h"
#include "train/trainer.h"

// The settings given explicitly (a flag on the command line): a given one wins over a resumed
// run's stored value, and a few checks apply only to given ones.
typedef struct {
    unsigned char batch, accum, gbatch, iters, epochs;
    unsigned char seed, lr, ema_decay, warmup, decay_start, decay_end, lr_end, weight_decay, grad_clip, label_drop;
    unsigned char data, vae, log_every, sample_every, ckpt_every, hflip, limit, keep, sample_steps, sample_images,
        tensorboard, eval_images, eval_steps, eval_cfg_scale;
    unsigned char model;  // the model's preset or backbone (--model, --backbone): the flags' model, not --init's
    unsigned char image_size, channels, classes;
} TrainGiven;

// The model's configuration as the front end's model flags make it. config: a fresh run's model,
// from the flags (init NULL) or from --init's configuration with the flags given applied, with the
// data's channels, classes and image size. check_resumed: whether the flags given agree with a
// resumed run's model c. Both return 0, or -1 with err.
typedef struct {
    int (*config)(void *user, const NetConfig *init, int channels, int classes, int image_size, NetConfig *c,
                  MalaErr *err);
    int (*check_resumed)(void *user, const NetConfig *c, MalaErr *err);
    void *user;
} TrainModelHooks;

typedef struct {
    // ---- the settings (the caller's) ----
    TrainOpts to;
    RunSettings rs;
    const char *eval_every, *eval_sampler, *eval_ref, *inception;  // NULL: the default / the run's
    const char *out;                // the run directory; NULL: none (nothing written, no lock: a library's run
                                    // stepped by hand)
    const char *device, *precision, *init, *init_weights;  // init_weights: "ema" or "online"
    const Backend *be;              // NULL: backend_select(device, precision); else the caller's, set up already
    int quiet;                      // 1: nothing on the console (a library's set-up): errors come back alone
    int batch, gbatch, accum, resume, epochs, zero, dry_run, init_heads;
    int auto_accum;                 // --global-batch alone: the memory check picks --accum
    uint64_t iters;
    int image_size, channels, classes;  // the model's shape as given (channels, classes: 0 = the data's)
    const char *preset;             // the model's name in messages (--model as given)
    TrainGiven given;
    TrainModelHooks model;
    int restarting;                 // a --resume without a checkpoint, started over from DIR/train.args
    int argc;                       // the command line a fresh run stores in DIR/train.args (argc 0: none)
    char **argv;
    volatile sig_atomic_t *stop;    // set by a signal: the run stops (the sample grids' sampling too)
    int rank, world, lead;          // the processes (lead: rank 0)
    // ---- the run (the set-up's) ----
    int say;           // this process writes the console: lead and not quiet
    int no_memory;     // the error is the memory plan's refusal (train/mem_plan.h; `mala train` exits 2)
    int diverged;      // the error is train_check_replicas' (exit 1)
                       // (both fail every process alike; a process without a line stops quietly)
    char dir[4096], path[4200], csv[4200], plot[4200], data_buf[4200], vae_buf[4200];
    NetConfig c, ic;  // the model, and --init's (fine-tuned at its image size unless --image-size)
    ClassNames cn;
    Trainer *tr;
    char resume_path[4200];
    int iters_stored;  // the checkpoint's run.iters was read
    int from_init;
    const char *model_name;
    Dataset *ds;
    int hflip, grid_every;
    Loader *ld;
    TrainGrid pv;
    RunLog hist;
    TfEvents tb;       // a new file per start: earlier files are never rewritten
    TrainEval *tev;    // --eval-every (collective)
    RunMeta meta;
    DirLock lock;      // rank 0: --out's writer lock, from before it reads the run (fd -1: not held)
} TrainSetup;

// The processes' place (dist_*), the precision refused for training, the backend; then the run to
// continue (--resume: train_setup_resume) or the directory to start in, checked. 0, or -1 with err.
int train_setup_open(TrainSetup *t, MalaErr *err);
// --resume: the newest complete checkpoint of --out with the run's settings except those given
// again; a directory without one starts fresh (t->resume set to 0). 0, or -1 with err.
int train_setup_resume(TrainSetup *t, MalaErr *err);
// The evaluation and schedule settings, checked before anything is written.
int train_setup_settings(TrainSetup *t, MalaErr *err);
// The data, checked; it shapes a fresh model (t->model.config); the batch against the data and the
// processes; --epochs made steps.
int train_setup_data(TrainSetup *t, MalaErr *err);
// The flips, the sample grids' settings and their VAE, and the memory plan (a fresh run's).
int train_setup_plan(TrainSetup *t, MalaErr *err);
// The data order, the sample grids, the trainer (--init's weights loaded), and the run directory.
int train_setup_prepare(TrainSetup *t, MalaErr *err);
// The event file, the evaluations, the checkpoints' metadata, and what the run is said on the
// console. 0; 1 when the evaluations cannot start (their error line is out); -1 with err.
int train_setup_report(TrainSetup *t, MalaErr *err);
// Frees what the set-up made (any part of it) and gives the run lock back.
void train_setup_free(TrainSetup *t);

#endif

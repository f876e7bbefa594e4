// A training run's loop: the trainer stepped over the data until the run's target step or a stop,
// with everything a run keeps on the way (docs/train.md): the console's progress line, log.csv
// and the loss curve, TensorBoard scalars, checkpoints every --ckpt-every steps (and the newest
// --keep kept), sample grids, evaluations, a checkpoint at a stop, and the replicas' weights
// compared at every log line under MPI (docs/design.md §9). `mala train` sets the run up
// (train/train_setup.h) and hands it here.
#ifndef MALA_TRAIN_RUN_H
#define MALA_TRAIN_RUN_H

#include <signal.h>

#include "formats/tfevents.h"
#include "train/loader.h"
#include "train/run_dir.h"
#include "train/run_settings.h"
#include "train/train_eval.h"
#include "train/train_grid.h"
#include "train/train_tensorboard.h"  // defines: TbRow
#include "train/trainer.h"

typedef struct {
    Trainer *tr;
    Loader *ld;                   // positioned at the trainer's step
    const TrainOpts *to;
    RunSettings *rs;              // rs->iters: the step to train to; rs->elapsed: seconds before this start
    RunMeta *meta;                // the checkpoints' run.* metadata (tr->meta points into it), refilled at each save
    const char *out;              // the run directory
    int batch, accum;             // images per forward pass over every process; batches per optimiser step
    TrainGrid *grid;              // a sample grid every grid_every steps and at the end (0: none)
    int grid_every;
    TrainEval *tev;               // evaluations (NULL: none)
    TfEvents *tb;                 // the event file (tb->f NULL: none)
    RunLog *hist;                 // the loss curve's rows
    int lead;                     // this process writes the console, log.csv and loss.png (rank 0)
    volatile sig_atomic_t *stop;  // set by a signal: the run stops after the step under way
    // NULL, or a count a SIGCONT handler raises: a step during which the process was stopped
    // (SIGSTOP, Ctrl-Z) counts as its neighbours' mean step in the logged training seconds
    volatile sig_atomic_t *continued;
    int quiet;                    // 1: nothing on the console (the library's runs)
    // NULL, or called at every log line (lead only) with its row; non-zero stops the run after this
    // step, which is then checkpointed
    int (*on_log)(void *user, uint64_t step, const TbRow *row);
    void *user;
    MalaErr err;                  // why the run returned 1 or TRAIN_RUN_IO_ERROR
} TrainRun;

// A run's file could not be written (log.csv, the event file, a checkpoint): r->err says which.
#define TRAIN_RUN_IO_ERROR (-2)

// Trains to rs->iters (or until on_log asks to stop). Returns the exit status: 0; 1 after
// --max-bad-steps non-finite steps in a row, or at once (no checkpoint) when the replicas' weights
// differ under MPI (the line said by the rank that differs); 128 + the signal after a stop (its checkpoint written
// first); TRAIN_RUN_IO_ERROR when a file of the run cannot be written.
int train_run_loop(TrainRun *r);
// Under MPI: 0 when every replica's weights are rank 0's; else -1 on every process, with err the
// line of a rank whose weights differ (empty on the others, which stop quietly beside it).
int train_check_replicas(const Trainer *tr, MalaErr *err);

#endif

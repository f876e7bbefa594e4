// mala train --eval-every: `mala eval fid`'s pass (the quick preset by default) on the EMA weights
// during training, sampled from memory (no file written): FD and class accuracy with the
// Fashion-MNIST classifier's features (the Inception's FID with --inception) against --eval-ref.
// Every rank samples a share of the images (pipeline/generate_shard.h, as eval --ckpt under mpirun);
// rank 0 runs the features and writes evals.csv (append-only, one row per evaluation), fd.png, the
// TensorBoard scalars eval/fd and eval/class_acc, and best.json with best.safetensors (the lowest FD;
// in the run directory, outside checkpoints/ and its pruning). Points already in evals.csv (a resumed
// run) are not evaluated again.
// defines: EvalEvery, TrainEval, eval_every_default, eval_every_parse, eval_every_meta, eval_every_meta_read,
//          train_eval_open, train_eval_due, train_eval_run, train_eval_free
#ifndef MALA_TRAIN_EVAL_H
#define MALA_TRAIN_EVAL_H

#include <stdint.h>

#include "core/backend.h"
#include "formats/tfevents.h"
#include "train/trainer.h"

// The settings (stored in the checkpoints as run.eval, eval_every_meta).
typedef struct {
    uint64_t every;       // evaluate when the run passes a multiple of it (0: never) ...
    int in_steps;         // ... counted in optimiser steps (--eval-every Ns), else in training images
    int images, steps;    // sampled images per evaluation, sampler steps
    char sampler[16];
    float cfg_scale;
    char ref[1024];       // reference: statistics .npz, images, fashion-mnist-test
    char inception[1024]; // "": the Fashion-MNIST classifier's features; else the Inception's weights
} EvalEvery;

// The quick preset: DDIM 50 steps, 10,000 images, guidance 1.5; every = 0.
void eval_every_default(EvalEvery *e);
// --eval-every N (training images) or Ns (optimiser steps); 0 = off. -1 with err.
int eval_every_parse(const char *s, EvalEvery *e, MalaErr *err);
// As one metadata value ("key=value;...", "" when off), and back (0; -1 when it is not one).
void eval_every_meta(const EvalEvery *e, char *buf, size_t cap);
int eval_every_meta_read(const char *s, EvalEvery *e);

typedef struct TrainEval TrainEval;

// Collective. Loads the features and the reference statistics (rank 0), reads evals.csv in out (what
// was evaluated, the best FD), and builds a generator of the model c (its VAE: vae). NULL after an
// error line (every rank).
TrainEval *train_eval_open(const EvalEvery *e, const NetConfig *c, const ClassNames *cn, const Backend *be,
                           const char *vae, const char *out, int step_images);
// Whether step is an evaluation point (a multiple passed, or the run's last step) not evaluated yet.
int train_eval_due(const TrainEval *t, uint64_t step, uint64_t last_step);
// Collective: evaluates tr's EMA weights at its step (train_s: the run's training seconds so far),
// writes the results (rank 0; tb may be NULL) and best.safetensors when the FD is the lowest yet.
// stop (a signal handler's flag) cancels the sampling within one step: nothing is recorded and the
// point stays due (train_eval_due), so a resumed run evaluates it again.
void train_eval_run(TrainEval *t, const Trainer *tr, double train_s, TfEvents *tb, const volatile int *stop);
void train_eval_free(TrainEval *t);

#endif

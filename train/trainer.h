// One training step of DiT's recipe (train.py): label dropout to the null class, uniform t,
// q_sample, forward, ADM loss (MSE + VB), backward, optional clipping, AdamW, EMA; plus the
// training checkpoint (DESIGN 2: plain = online weights, ema.*, opt.m.*, opt.v.*, and the
// trainer state in metadata) for bit-exact resume.
#ifndef MALA_TRAINER_H
#define MALA_TRAINER_H

#include <stdint.h>

#include "checkpoint.h"
#include "diffusion.h"
#include "dit.h"
#include "rng.h"

typedef struct {
    float lr;            // constant learning rate (DiT: 1e-4)
    int warmup;          // linear warmup steps (0 = none)
    float weight_decay;  // AdamW decoupled weight decay (DiT: 0)
    float beta1, beta2, eps;
    float grad_clip;     // max global grad norm (0 = off)
    float ema_decay;     // DiT: 0.9999
    float label_drop;    // classifier-free guidance dropout (DiT: 0.1)
    int max_bad_steps;   // stop after this many non-finite steps in a row
    uint64_t seed;
} TrainOpts;

void train_opts_default(TrainOpts *o);

typedef struct {
    double loss, mse, vb, grad_norm;
    int skipped;         // 1 when the step was not finite and was skipped
} StepStats;

typedef struct {
    Dit *m;
    const Backend *be;
    TrainOpts opt;
    Diffusion diff;
    ClassNames classes;
    int batch;
    uint64_t step;         // optimiser steps taken (AdamW's t)
    uint64_t batches;      // batches consumed (the data loader's position)
    uint64_t skipped_total;
    int bad_in_a_row;
    Rng rng;               // label dropout, timesteps, noise
    // host workspace
    float *x0, *noise, *xt, *tf, *out, *dout;
    int32_t *t, *y;
    double *mse_b, *vb_b;  // per-sample loss terms of the last step
    // backend copies of the model's inputs and output gradient
    float *d_xt, *d_tf, *d_out, *d_dout;
    int32_t *d_y;
} Trainer;

Trainer *trainer_new(const DitConfig *c, const ClassNames *cn, const TrainOpts *o, const Backend *be, int batch);
void trainer_free(Trainer *tr);
// Fresh weights (DiT init from opt.seed), EMA = weights, zero moments.
void trainer_init_weights(Trainer *tr);
// One step on a batch x0 [B,C,S,S] in [-1,1] with labels y[B]. Returns the stats; a non-finite
// loss or gradient leaves weights, EMA and moments untouched and sets stats.skipped.
StepStats trainer_step(Trainer *tr, const float *x0, const int32_t *y);

// Training checkpoint (atomic). trainer_load restores everything trainer_save wrote.
int trainer_save(const Trainer *tr, const char *path, MalaErr *err);
int trainer_load(Trainer *tr, const char *path, MalaErr *err);
// Reads only the configuration and class names of a training checkpoint (to build a Trainer).
int trainer_peek(const char *path, DitConfig *c, ClassNames *cn, TrainOpts *o, int *batch, MalaErr *err);
// Saves the EMA weights alone as a sampling file (dtype F32 or F16).
int trainer_export_ema(const Trainer *tr, const char *path, StDtype dtype, MalaErr *err);

#endif

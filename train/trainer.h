// One training step of DiT's recipe (train.py): label dropout to the null class, uniform t,
// q_sample, forward, ADM loss (MSE + VB), backward, optional clipping, AdamW, EMA; plus the
// training checkpoint (docs/design.md §2: plain = online weights, ema.*, opt.m.*, opt.v.*, and the
// trainer state in metadata) for bit-exact resume.
//
// Everything runs in the backend's memory: the host copies in the batch (images and labels) and
// copies out the per-sample loss terms and the gradient norm. The step's random draws come from
// the backend's counter-based generator (cuRAND's Philox on CUDA) as a function of (seed, batch
// index), so a checkpoint needs no generator state and resumes exactly on the device that wrote
// it; checkpoints are the same format from either device.
#ifndef MALA_TRAINER_H
#define MALA_TRAINER_H

#include <stdint.h>

#include "model/checkpoint.h"
#include "sampler/diffusion.h"
#include "model/net.h"

typedef struct {
    float lr;            // constant learning rate (DiT: 1e-4)
    int warmup;          // linear warmup steps (0 = none)
    // linear decay from lr at step decay_start to lr_end at decay_end, lr_end after it
    // (decay_end <= decay_start: none; the default)
    uint64_t decay_start, decay_end;
    float lr_end;
    float weight_decay;  // AdamW decoupled weight decay (DiT: 0)
    float beta1, beta2, eps;
    float grad_clip;     // max global grad norm (0 = off)
    float ema_decay;     // DiT: 0.9999
    float label_drop;    // classifier-free guidance dropout (DiT: 0.1)
    int accum;           // gradient accumulation: micro-batches per optimiser step (1 = none)
    int max_bad_steps;   // stop after this many non-finite steps in a row
    uint64_t seed;
} TrainOpts;

void train_opts_default(TrainOpts *o);

// The learning rate of optimiser step `step` (1-based): warmup, then lr, then the decay.
float train_lr(const TrainOpts *o, uint64_t step);

typedef struct {
    double loss, mse, vb, grad_norm;
    int skipped;         // 1 when the step was not finite and was skipped
} StepStats;

typedef struct {
    Net *net;
    const Backend *be;
    // optimiser state, backend memory (one block, d_opt): [n_floats] each
    void *d_opt;
    float *grad, *m, *v, *ema;
    TrainOpts opt;
    Diffusion diff;
    ClassNames classes;
    int batch;
    uint64_t step;         // optimiser steps taken (AdamW's t)
    uint64_t batches;      // micro-batches consumed (the data loader's position; opt.accum per step)
    uint64_t skipped_total;
    int bad_in_a_row;
    // Extra metadata entries trainer_save writes as they are (the command's run settings,
    // "run.data", ...): n_meta key/value pairs, meta[2i] the key and meta[2i+1] the value.
    int n_meta;
    const char *const *meta;
    double *loss_host;     // [2B] per-sample mse then vb of the last step
    // backend memory (one block, d_mem): coefficient rows, loss terms, batch, draws, model io
    void *d_mem;
    double *d_coefs, *d_loss;
    float *d_x0, *d_noise, *d_xt, *d_tf, *d_out, *d_dout;
    uint32_t *d_bits;      // [2B]: timesteps, then label dropout
    int32_t *d_t, *d_y;
    // data parallelism (trainer_shard): rank of world, each with `batch` of the global batch
    int rank, world;
    uint32_t *d_gbits;     // [2 * step images]: the optimiser step's draws, of which d_bits is a slice
    int gbits_images;      // the step images d_gbits was allocated for (0: none)
    float *host_grad;      // gradient staging for the all-reduce when the backend is not host memory
    // ZeRO-1 (trainer_zero1): m and v hold this rank's block of the trainable floats only
    int zero;
    size_t zblock, zoff, zlen;  // block size (dist_block), this rank's offset and floats in it
    size_t grad_floats;         // floats of grad: n_floats, or zblock * world when that is more
    float *gshard;              // [zblock] this rank's block of the averaged gradient
    float *host_shard;          // [zblock] its host staging when the backend is not host memory
} Trainer;

#define TRAIN_NOISE_KEY 0x6a09e667f3bcc909ull  // seed ^ this: the noise's generator seed

Trainer *trainer_new(const NetConfig *c, const ClassNames *cn, const TrainOpts *o, const Backend *be, int batch);
void trainer_free(Trainer *tr);
// Gradient accumulation (opt.accum = K): a step is K micro-batches of `batch` per rank; their
// gradients add up in grad and are scaled by 1/K, so the step is the one a batch of K x the global
// batch takes (to the order of the sums). The step's draws are those of that big batch: its 2 x
// (K x world x batch) bits from the stream of the step's index, each micro-batch and rank a slice,
// and the noise of image j of the step from stream step x images + j (per image, not per batch).
// Makes this trainer rank `rank` of `world` data-parallel trainers (docs/design.md §9) whose batches are
// slices of a global batch of world x batch: its step draws and trains on samples rank*batch ..
// of the global batch's draws, gradients, loss terms and norm are averaged over the ranks
// (dist_sum_f32), so every rank takes the step one process with the global batch takes (up to
// the order of the gradient sums) and keeps identical weights. Checkpoints record the global batch.
void trainer_shard(Trainer *tr, int rank, int world);
int trainer_global_batch(const Trainer *tr);  // world x batch: one micro-batch over the ranks
// Images of one optimiser step over every rank and micro-batch: world x batch x accum.
int trainer_step_images(const Trainer *tr);
// ZeRO-1 (docs/design.md §9), after trainer_shard and before trainer_init_weights / trainer_load: AdamW's
// moments are split in dist_block blocks over the ranks. A step reduce-scatters the gradient,
// updates this rank's block of the weights and of m, v, and all-gathers the weights; the EMA
// stays whole on every rank (the sample grids and the cross-rank checksum read it). The same
// weights as unsharded: bit for bit with 2 ranks (each sum is one addition) and without clipping
// (the norm's partial sums change order), else to float rounding. trainer_save then is collective
// (rank 0 gathers m, v and writes); trainer_load reads each rank's block. No-op in one process.
void trainer_zero1(Trainer *tr);
// Bytes of AdamW's state (m, v) this rank holds.
size_t trainer_opt_state_bytes(const Trainer *tr);
// FNV-1a over the online and EMA weights (64-bit words): equal on every rank of a job.
uint64_t trainer_weights_hash(const Trainer *tr);
// Fresh weights (DiT init from opt.seed), EMA = weights, zero moments.
void trainer_init_weights(Trainer *tr);
// One step on a batch x0 [K*B,C,S,S] in [-1,1] with labels y[K*B] (K = opt.accum micro-batches of
// B = batch, one after the other; an unconditional model, num_classes 0, ignores y: every image gets
// label 0, the one row of its label table). Returns the stats (means over the step's images); a non-finite
// loss or gradient leaves weights, EMA and moments untouched and sets stats.skipped.
StepStats trainer_step(Trainer *tr, const float *x0, const int32_t *y);
// The same step with the draws given (host): bits[2KB] (the K*B timesteps, then the K*B label
// dropouts; see diffusion_prepare in backend.h) and noise [KB,C,S,S]. For tests that compare backends.
StepStats trainer_step_given(Trainer *tr, const float *x0, const int32_t *y, const uint32_t *bits, const float *noise);

// Training checkpoint (atomic). trainer_load restores everything trainer_save wrote. With ZeRO-1
// every rank calls trainer_save (rank 0 writes, the others return 0).
int trainer_save(const Trainer *tr, const char *path, MalaErr *err);
int trainer_load(Trainer *tr, const char *path, MalaErr *err);
// Reads only the configuration and class names of a training checkpoint (to build a Trainer).
int trainer_peek(const char *path, NetConfig *c, ClassNames *cn, TrainOpts *o, int *batch, MalaErr *err);
// Saves the EMA weights alone as a sampling file (dtype F32 or F16).
int trainer_export_ema(const Trainer *tr, const char *path, StDtype dtype, MalaErr *err);

#endif

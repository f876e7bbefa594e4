// A training run's settings beyond the model and the optimiser (the data, logging, grids,
// evaluations, precision, where a fine-tuned run started), as the run.* metadata of every
// checkpoint: so --resume continues with them unless they are given again (docs/train.md).
#ifndef MALA_RUN_SETTINGS_H
#define MALA_RUN_SETTINGS_H

#include <stdint.h>

#include "formats/safetensors.h"
#include "train/train_eval.h"  // defines: EvalEvery

// --init FILE: where a fine-tuned run started: run.init (the file's absolute path), run.init_sha256
// (as sha256sum prints it), run.init_weights (ema, online, or model: a model file's one set) and
// run.init_step (FILE's step, when it records one).
enum { INIT_KEYS = 4 };

typedef struct {
    char path[4200], sha256[65], weights[8], step[24];  // path[0] = 0: not a fine-tuned run
    const char *kv[2 * INIT_KEYS];
} InitMeta;

// The metadata pairs of im into im->kv: INIT_KEYS pairs, or 0 for a run that is not fine-tuned.
int init_meta_pairs(InitMeta *im);
// A resumed run's origin from its checkpoint f (im->path empty when it has none).
void init_meta_read(const StFile *f, InitMeta *im);

typedef struct {
    const char *data;
    const char *vae;                 // latent data: the VAE of the sample grids ("" = none)
    int log_every, sample_every, ckpt_every, hflip, limit, keep;
    int sample_steps, sample_images;  // the grids' DDIM steps and images (0 = 4 per class, at most 64)
    uint64_t iters;                  // the step the run trains to
    double elapsed;                  // training seconds before this process started (from log.csv)
    char channels_from[16], classes_from[16];  // "data" or the flag that set them
    int tensorboard;                 // 1: the TensorBoard event file
    char precision[8];               // what the products ran in: be->precision() of the writing process
    InitMeta init;                   // --init: where the run started (run.init*)
    EvalEvery eval;                  // --eval-every and its settings (run.eval)
} RunSettings;

enum { RUN_INTS = 9, RUN_KEYS = 7 + RUN_INTS };  // 5 strings, the integers, run.iters, run.eval

typedef struct {
    char val[RUN_KEYS][4200];
    const char *kv[2 * (RUN_KEYS + INIT_KEYS)];
    int n;  // pairs in kv
} RunMeta;

// Fills the key/value list trainer_save writes. Nothing that differs between two runs of the same
// steps and settings goes in (no clock), so a resumed run's checkpoints stay byte-identical to a
// straight one's.
void run_meta_fill(RunMeta *m, RunSettings *r);
// Reads the run.* settings of a checkpoint into r (keeps r's values for keys it lacks); strings
// are copied into buf and vae_buf. *iters_found: whether it stores the run's --iters (older files
// do not). Returns the number of keys found, or -1 with err naming the file and the key of a
// malformed value.
int run_meta_read(const char *path, RunSettings *r, char *buf, size_t cap, char *vae_buf, size_t vae_cap,
                  int *iters_found, MalaErr *err);

#endif

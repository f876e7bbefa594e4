// mala train's sample grids: the EMA weights sampled through the one sampling API (DDIM, guidance
// 4, a fixed seed, so the grids of one run are comparable): --sample-images images (default 4 per
// class, at most 64) in --sample-steps DDIM steps (default 50), with a progress line; a stop request
// cancels a grid under way. A latent model's grid decodes through the run's VAE (pipeline/decode.c).
#ifndef MALA_TRAIN_GRID_H
#define MALA_TRAIN_GRID_H

#include <signal.h>

#include "core/progress.h"
#include "pipeline/generate.h"
#include "train/trainer.h"

typedef struct {
    Generator g;
    int n, per_class, steps;
    float *x, *img;
    int32_t *y;
    Progress pg;
    double t0;
    volatile sig_atomic_t *stop;  // non-zero: cancel the grid under way
} TrainGrid;

// 0, or -1 with err (one line) when the VAE cannot be attached (checked before the
// run writes anything); train_grid_free frees p either way.
int train_grid_init(TrainGrid *p, const NetConfig *c, const ClassNames *cn, const Backend *be, const char *vae,
                    int images, int steps, volatile sig_atomic_t *stop, MalaErr *err);
// 0 when the grid of tr's EMA weights was written to path; -1 when a stop cancelled it or it could
// not be made (a warning says why).
int train_grid_write(TrainGrid *p, const Trainer *tr, const char *path);
void train_grid_free(TrainGrid *p);

#endif

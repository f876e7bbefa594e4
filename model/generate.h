// Image generation from a model file: the one sampling API that `mala sample`, `mala eval` and
// the viewer call. Holds the model, the denoise adapter and a sampler sized for max_batch images.
#ifndef MALA_GENERATE_H
#define MALA_GENERATE_H

#include <stdint.h>

#include "checkpoint.h"
#include "denoiser.h"
#include "sampler.h"

typedef struct {
    Dit *m;
    ClassNames classes;
    Denoiser dn;
    Diffusion base;
    Sampler s;
    int max_batch;
    uint64_t noise_seed;   // per-step noise of the run in progress (see generator_run)
    int64_t noise_first;
} Generator;

typedef struct {
    SamplerKind kind;
    int steps;
    float cfg_scale, eta;
    int clip;
} GenOpts;

GenOpts gen_opts_default(void);  // DiT's sample.py: DDPM, 250 steps, guidance 4, clip on
// Opens `path` (EMA weights when present) for batches of up to max_batch images.
int generator_open(Generator *g, const char *path, const Backend *be, int max_batch, MalaErr *err);
void generator_close(Generator *g);
// Fills noise [n, C, S, S] for images first..first+n-1 of a run seeded by seed: image i's noise
// depends only on (seed, i), so batching does not change the images.
void generator_noise(const Generator *g, float *noise, uint64_t seed, int64_t first, int n);
// x: in the initial noise, out the samples in [-1, 1], for images first..first+n-1 of a run
// seeded by seed. The per-step noise of image i (DDPM, DDIM with eta > 0) depends only on
// (seed, first + i, step), so batching changes nothing. on_step (may be NULL) sees the
// predicted x0 after every step and may cancel (returns 1).
int generator_run(Generator *g, const GenOpts *o, float *x, const int32_t *y, int n, uint64_t seed, int64_t first,
                  SamplerStepFn on_step, void *ctx, MalaErr *err);

#endif

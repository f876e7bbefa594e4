// Image generation: a network, the diffusion and a sampler joined. The one sampling API that
// `mala sample`, `mala eval`, `mala bench sample`, the training preview and the viewer call; it
// sits above model/ and sampler/ and is the only place that wires them together.
#ifndef MALA_GENERATE_H
#define MALA_GENERATE_H

#include <stdint.h>

#include "checkpoint.h"
#include "sampler.h"

typedef struct {
    Net *net;
    ClassNames classes;
    Diffusion base;
    Sampler s;
    int max_batch;
    uint64_t noise_seed;   // per-step noise of the run in progress (see generator_run)
    int64_t noise_first;
    int run_n;             // images in the run in progress
    float *d_x;            // backend copy of the images being sampled [max_batch, C, S, S]
    float *x0_host;        // host copy of the predicted x0 for the caller's on_step
    SamplerStepFn user_step; void *user_ctx;
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
// The same with the network mode: NET_INFER_ATTN keeps each block's attention inputs of the last
// forward (net_attn_row; the viewer's maps), at the cost of depth x 5H floats per token and image.
int generator_open_mode(Generator *g, const char *path, const Backend *be, int max_batch, int mode, MalaErr *err);
// A generator over a new network of configuration c with zero weights: the caller fills g->net->w
// (net_init_weights, or a copy of a trainer's EMA).
void generator_new(Generator *g, const NetConfig *c, const ClassNames *cn, const Backend *be, int max_batch);
// Floats of one image [C, S, S].
size_t generator_image_floats(const Generator *g);
void generator_close(Generator *g);
// Fills noise [n, C, S, S] (host) for images first..first+n-1 of a run seeded by seed: image i's
// noise depends only on (seed, i), so batching does not change the images, and it is the host's
// Philox on every backend, so the same seed starts from the same x_T on CPU and CUDA.
void generator_noise(const Generator *g, float *noise, uint64_t seed, int64_t first, int n);
// x (host): in the initial noise, out the samples in [-1, 1], for images first..first+n-1 of a
// run seeded by seed. The per-step noise of image i (DDPM, DDIM with eta > 0) depends only on
// (seed, first + i, step) on a given backend, so batching changes nothing. on_step (may be NULL)
// sees the predicted x0 (host memory) after every step and may cancel (returns 1).
int generator_run(Generator *g, const GenOpts *o, float *x, const int32_t *y, int n, uint64_t seed, int64_t first,
                  SamplerStepFn on_step, void *ctx, MalaErr *err);

#endif

// A run of n generated images sharded over the processes of a job (docs/design.md §9, DiT's
// sample_ddp.py) for a consumer on rank 0 that takes them in order (mala sample, eval --ckpt): batch j,
// images j*B .. j*B+B-1, is sampled by rank j % world exactly as one process samples it (image
// i's noise depends only on (seed, i)), a round of world batches at a time, and gathered on rank
// 0, which so sees the images one process sees. Image i's class is gen_labels' (labels.h; default
// balanced, i mod K) unless the run's labels are given; its noise is generator_noise's unless given.
#ifndef MALA_GENERATE_SHARD_H
#define MALA_GENERATE_SHARD_H

#include "pipeline/generate.h"
#include "pipeline/batch_store.h"
#include "pipeline/labels.h"

typedef struct {
    Generator *g;
    GenOpts o;
    uint64_t seed;
    int n, batch, rank, world;
    LabelMode labels;  // balanced after init; set it before the first round
    BatchStore *store; // NULL, or where each rank keeps the batches it samples and finds those kept
    int next;          // rank 0: the next image handed out
    int round_first;   // rank 0: first image of the round in buf, and its images
    int round_n;
    float *buf;        // rank 0: [world * batch] images of a round; the others: [batch]
    int32_t *y;        // [batch]
    // NULL, or a flag (a signal handler's) that cancels the run: the sampling stops within one step
    // on the process that sees it set, every process learns of it at the end of the round (one vote
    // a round, so none waits for a batch never sent), and next / serve return -1 with cancelled 1.
    const volatile int *cancel;
    int cancelled;
    // Optional, set before the first round (NULL: the defaults): the run's labels [n]; its starting
    // noise [n, C, S, S] (image i's at i C S S; it may be the array sharded_gen_next fills, as a
    // round reads its images' noise before they are handed out); its input images (img2img and
    // inpainting: image and mask are image 0's, a batch takes its own from there).
    const int32_t *given_y;
    const float *given_noise;
    const GenInit *init;
    // NULL, or called at every sampler step of each batch this rank samples (kept batches are not
    // sampled); batch_first and batch_n say which images, batches_run how many batches this rank
    // sampled before this one. Returns 1 to cancel, as SamplerStepFn.
    SamplerStepFn on_step;
    void *step_ctx;
    int batch_first, batch_n, batches_run;
} ShardedGen;

// batch <= g->max_batch. Collective use follows: rank 0 calls sharded_gen_next, the others
// sharded_gen_serve, over the same (n, batch).
void sharded_gen_init(ShardedGen *s, Generator *g, const GenOpts *o, uint64_t seed, int n, int batch);
void sharded_gen_free(ShardedGen *s);
// Rank 0: the next k images (k <= max, never across a batch) into x [k, C, S, S] in [-1, 1];
// returns k, 0 after the last image, -1 on an error (err).
int sharded_gen_next(ShardedGen *s, float *x, int max, MalaErr *err);
// Ranks > 0: samples this rank's batches of every round and sends them to rank 0.
int sharded_gen_serve(ShardedGen *s, MalaErr *err);

#endif

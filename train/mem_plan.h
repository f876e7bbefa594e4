// Memory plans: every byte a command will allocate, counted before it allocates anything, against
// what the machine can give. `train` refuses a plan that does not fit and names what would: the
// largest batch, a smaller preset of the same backbone, --zero 1 over the processes.
#ifndef MALA_MEM_PLAN_H
#define MALA_MEM_PLAN_H

#include "model/net.h"

// Bytes this process can still allocate: MemAvailable (free memory plus reclaimable caches), or
// less under a cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes). *total (may be
// NULL) gets MemTotal or the cgroup limit when lower. MALA_TEST_MEMORY=BYTES (K, M or G suffix
// allowed) replaces both, for tests. 0 when nothing can be read.
double memory_available(double *total);
// The cgroup v2 directory dir's free bytes (memory.max less the non-file part of memory.current),
// or -1 without a limit there.
double memory_cgroup_free(const char *dir);
// Resident bytes of this process now (/proc/self/statm), 0 when unknown.
double memory_resident(void);

// Bytes of a Generator for batches of up to n images (generator_new / generator_open): the
// network for 2n guided passes with its weights, the sampler's buffers and the host copies;
// *device (may be NULL) gets the part in a backend's own memory (0 on the CPU).
double gen_memory_bytes(const NetConfig *c, const Backend *be, int n, double *device);

// The images of training's sample grid (the trainer's EMA, DDIM): --sample-images when > 0, else
// 4 per class, at most 64 (16 for an unconditional model).
int train_grid_images(const NetConfig *c, int images);

enum { MEM_MODEL, MEM_ACT, MEM_GRID, MEM_DATA, MEM_STAGING, MEM_HELD, MEM_PARTS };

typedef struct {
    int batch;          // images per process (of one forward pass)
    int accum;          // gradient accumulation: passes per step (the host keeps the step's images; 0 = 1)
    int world, zero;    // processes, ZeRO-1
    int grids;          // 1: the sample-grid generator is built
    int grid_images;    // its images (--sample-images; 0 = the default)
    const char *vae;    // a latent model's grid decoder (NULL: none)
    int64_t data_n;     // samples of the data (the loader's permutation); 0 when not known yet
} TrainMemArgs;

typedef struct {
    double part[MEM_PARTS];  // bytes: weights/optimiser, activations, grids, data, staging, held
    double total, device;    // all of it; the part in a backend's own memory (not the host's)
} MemPlan;

// What one training process allocates (train/trainer.c, the network arenas, the loader, the
// grid generator, checkpoint staging) plus what it holds already (program, libraries, data set).
void train_memory_plan(MemPlan *p, const NetConfig *c, const Backend *be, const TrainMemArgs *a);
// Whether the plan fits what this process can allocate; collective under MPI (every rank's answer: all fit).
int train_memory_fits(const NetConfig *c, const Backend *be, const TrainMemArgs *a);
// Prints "preparing PRESET for batch B: about X of memory (...)" on stderr when say and returns 0,
// or returns -1 with err's one line: the bytes needed, what the machine has, and what would fit (a
// smaller batch unless batch_fixed, no sample grids, a smaller preset of the same backbone, --zero
// 1 when there are processes). `mala train` exits 2 on it.
// Collective under MPI (dist_any): when one rank does not fit, every rank returns -1; the ranks
// that fit with an empty err (the one that does not says why).
// global_batch is --batch (world x a->batch); preset names the model in messages.
int train_memory_check(const NetConfig *c, const Backend *be, const TrainMemArgs *a, int global_batch, int batch_fixed,
                       const char *preset, int say, MalaErr *err);

#endif

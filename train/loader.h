// The training batch stream over a dataset (data/dataset.h, docs/design.md §5): deterministic,
// double-buffered, with exact resume.
#ifndef MALA_LOADER_H
#define MALA_LOADER_H

#include <stdint.h>

#include "data/dataset.h"

// The sample stream is a sequence of epochs; epoch e visits every sample once in a permutation
// drawn from (seed, e) (Fisher-Yates over splitmix64). Stream position p = e * n + j holds
// sample perm_e[j]; batch k holds positions k*B .. k*B+B-1 (batches run across epoch ends, no
// sample is dropped). With hflip, position p is mirrored when a hash of (seed, p) says so.
// A latent set's position p is z = (mean + exp(logvar / 2) * eps) * scale of its sample, eps the
// Philox normals of stream p under seed ^ LOADER_LATENT_KEY, of view 1 when flipped and the set
// has two views: a fresh z for every use, a function of (seed, p) only, so resume is exact.
// Batches are produced by a background thread one batch ahead of the consumer (folder images
// are decoded with up to $MALA_LOADER_THREADS OpenMP threads, default min(4, cores)). A folder
// image that fails to decode later (it passed the open-time check) is reported once on stderr
// and replaced by the next decodable sample in index order (with that sample's label), so batch contents stay
// deterministic.
typedef struct Loader Loader;
#define LOADER_LATENT_KEY 0x3c6ef372fe94f82bull

Loader *loader_new(Dataset *d, int batch, uint64_t seed, int hflip, MalaErr *err);
// Copies the next batch: x [B, C, S, S] in [-1, 1], y [B] (either may be NULL to skip it).
void loader_next(Loader *l, float *x, int32_t *y);
// Positions the stream so that the next loader_next returns batch `batches_consumed`, exactly
// as a fresh loader would after that many calls (resume).
void loader_seek(Loader *l, uint64_t batches_consumed);
uint64_t loader_position(const Loader *l);     // index of the batch the next loader_next returns
// Data parallelism: this loader's batches become slices of a global batch, positions
// k*global_batch + offset .. + B-1 of the stream for batch k (rank r of a job: offset r*B).
void loader_shard(Loader *l, int global_batch, int offset);
// Sample index and flip of stream position p (what loader_next puts there). Recomputes the
// epoch's permutation: O(n), meant for tests and checks.
int64_t loader_sample_at(const Loader *l, uint64_t p, int *flip);
void loader_free(Loader *l);

#endif

// A long sampling run kept on disk as it goes, so that the same command run again continues it:
// `mala sample --save-npz|--save-npy|--out-dir` and `mala eval fid|is --ckpt`.
//
//   DIR/settings.json      what decides the samples (a manifest.h object: the model's hash, the
//                          sampler and its options, the labels' hash, N, the batch, the seed, the
//                          device, the program version, ...), written once when the run starts
//   DIR/batch-NNNNNNN.f32  the samples of batch j (images j B .. j B + B - 1, float32 [nb, C, S, S]
//                          in the model's space, before any decoding), written atomically by the
//                          process that sampled it, right after it
//
// Batch j's samples depend on (settings, j) alone, so a kept batch is what an uninterrupted run
// computes: the finished output is byte-identical, under any number of processes before and after
// (the folder must be one they all see). A run with other settings refuses the folder, naming what
// differs. The folder goes once the outputs are written.
// MALA_TEST_STOP_AFTER=K (tests): a process exits with status 3 after writing K batches (under
// mpirun once every rank has written K: each must have K to write).
#ifndef MALA_BATCH_STORE_H
#define MALA_BATCH_STORE_H

#include <stddef.h>

#include "core/dir_lock.h"
#include "pipeline/manifest.h"

typedef struct {
    char dir[4096];
    int n, batch;          // images of the run, and per batch
    size_t per;            // floats of one image
    int kept;              // images in the batches found on disk when opened
    int saved;             // batches this process wrote
    int stop_after;        // MALA_TEST_STOP_AFTER (0: never)
    DirLock lock;          // rank 0: the folder's writer lock (core/dir_lock.h), held until finished
} BatchStore;

// Collective (every rank calls it): rank 0 creates DIR with settings.json, or checks the partial
// run there. A run with other settings exits with an error naming the differences (flag: the
// option that named the output), unless force, which discards it. Then every rank counts the kept
// batches. A folder another process is writing (its lock, DIR/.lock) is refused naming that process.
void batch_store_open(BatchStore *bs, const char *dir, const Manifest *settings, int n, int batch, size_t per,
                      int force, const char *flag);
// 1 with x [nb images] filled when batch j is kept, else 0.
int batch_store_load(const BatchStore *bs, int j, float *x, int nb);
// 1 when batch j (nb images) is kept: batch_store_load would fill it. Reads nothing.
int batch_store_has(const BatchStore *bs, int j, int nb);
// Keeps batch j (atomically); exits on a write error.
void batch_store_save(BatchStore *bs, int j, const float *x, int nb);
// Removes the folder and what is in it (rank 0, after the outputs are written).
void batch_store_finish(BatchStore *bs);
// "PATH.partial" for an output PATH (a trailing '/' dropped).
void batch_store_dir_for(char *dir, size_t cap, const char *output);

#endif

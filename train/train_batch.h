// mala train's batch flags: --batch B (one forward pass, over all processes), --accum K (gradient
// accumulation: K passes per optimiser step) and --global-batch G (alias --global-batch-size, DiT's
// name) = B x K, the images of one optimiser step. G alone is B = G, K = 1 when that fits in
// memory, else the fewest K (G divisible by K, G / K by the processes) whose batch G / K fits.
#ifndef MALA_TRAIN_BATCH_H
#define MALA_TRAIN_BATCH_H

#include "core/backend.h"
#include "core/common.h"
#include "train/mem_plan.h"
#include "model/net.h"

typedef struct {
    int batch, accum, global;           // --batch, --accum, --global-batch as parsed
    int batch_given, accum_given, global_given;
} BatchFlags;

// --global-batch G with --batch or --accum: the other one (G must be their product); alone: B = G, K = 1
// (choose_accum may split it later). 0, or -1 with err (one line) when they do not fit together.
int split_global_batch(int global, int *batch, int *accum, int batch_given, int accum_given, MalaErr *err);
// --resume: a flag given again must be the run's (a run keeps its batch and accumulation). 0, or -1
// with err.
int check_resumed_batch(const BatchFlags *f, int run_batch, int run_accum, MalaErr *err);
// --global-batch G alone: the fewest K whose per-process batch G / K / world fits (train_memory_fits),
// into *batch, *accum and a->batch, a->accum, with a note when K > 1; K = 1 when none fits (the
// memory check then says what would).
void choose_accum(const NetConfig *c, const Backend *be, TrainMemArgs *a, int global, int *batch, int *accum, int lead);

#endif

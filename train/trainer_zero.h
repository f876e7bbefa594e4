// ZeRO-1's parts of a training step and of a checkpoint (train/trainer_zero.c), for trainer.c.
#ifndef MALA_TRAINER_ZERO_H
#define MALA_TRAINER_ZERO_H

#include "train/trainer.h"

// grad (every rank's full gradient) -> gshard: this rank's block of the mean over the ranks.
// Returns the global gradient norm (the blocks' sums of squares summed over the ranks).
double zero_reduce_grad(Trainer *tr);
// After the update of this rank's block of the weights: every rank's blocks into every rank's w.
void zero_gather_weights(Trainer *tr);
// Collective: on rank 0 a host copy [max(n_floats, zblock * world)] of the whole moment whose
// block `block` (backend memory) each rank holds, zero past the trainable floats; NULL elsewhere.
float *zero_gather_moment(const Trainer *tr, const float *block);
// This rank's block of a whole moment `full` (backend memory, n_floats) into block [zblock].
void zero_take_block(const Trainer *tr, float *block, const float *full);

#endif

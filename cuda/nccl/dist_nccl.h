// The GPU collectives of core/dist.h on NCCL, for a front end to register with
// dist_set_device_ops (only builds with CUDA, MPI and nccl.h link them: Makefile NCCL=1).
#ifndef MALA_DIST_NCCL_H
#define MALA_DIST_NCCL_H

#include <stddef.h>

#include "core/dist.h"

const DistDeviceOps *dist_nccl_ops(void);

void dist_nccl_pick_device(int local_rank, int local_size);
int dist_nccl_sum_f32(float *x, size_t n);
int dist_nccl_reduce_scatter_f32(const float *x, float *shard, size_t block);
int dist_nccl_allgather_f32(float *x, size_t block);
void dist_nccl_finalize(void);

#endif

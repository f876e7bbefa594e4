// Processes of a data-parallel job (docs/design.md §9): MPI when mala is built with it (MALA_MPI), one
// process otherwise. Rank r of W; every call is collective (all ranks make it, in the same
// order). The one-process build refuses to run as one of several processes a launcher started
// (mpirun, srun), instead of training W independent copies.
#ifndef MALA_DIST_H
#define MALA_DIST_H

#include <stddef.h>
#include <stdint.h>

// Joins the job (MPI_Init on first call; later calls do nothing). Exits with a message when the
// build has no MPI and the environment says the job has more than one process.
void dist_init(int *argc, char ***argv);
void dist_finalize(void);
int dist_rank(void);
int dist_world(void);
int dist_local_rank(void);  // rank among the processes of this host (one GPU each)
const char *dist_engine(void);  // "MPI (Open MPI 4.1.4 ...)" or "none (built without MPI)"

// In-place sums over all ranks; every rank receives the same result.
void dist_sum_f32(float *x, size_t n);
void dist_sum_f64(double *x, size_t n);
// The same sum on GPU memory through NCCL; -1 (nothing done) in a build without NCCL.
int dist_sum_f32_device(float *x, size_t n);
// ZeRO-1's partition (docs/design.md §9): a vector of n floats splits into world blocks of
// dist_block(n) = ceil(n / world) floats, rank r's at offset r * block (the last ones short or
// empty); a buffer that holds the whole vector for these calls has block * world floats.
size_t dist_block(size_t n);
// shard[block] = this rank's block of the sum over the ranks of x[block * world] (reduce-scatter).
void dist_reduce_scatter_f32(const float *x, float *shard, size_t block);
// x[block * world], each rank's own block at its offset: afterwards every rank's x holds every
// rank's block (all-gather, in place).
void dist_allgather_f32(float *x, size_t block);
// root's x[block * world] (its own block already at its offset) receives every rank's block;
// every other rank's x is its block [block] (gather, in place at the root).
void dist_gather_f32(float *x, size_t block, int root);
// The same reduce-scatter and all-gather on GPU memory through NCCL; -1 (nothing done) in a
// build without NCCL or where the ranks of a host share a GPU (NCCL needs one each).
int dist_reduce_scatter_f32_device(const float *x, float *shard, size_t block);
int dist_allgather_f32_device(float *x, size_t block);
// 1 on every rank when any rank passes a non-zero flag.
int dist_any(int flag);
// Copies root's bytes into every rank's buf.
void dist_bcast(void *buf, size_t bytes, int root);
void dist_barrier(void);
// Ends every process of the job with this exit code (MPI_Abort); exit() in one process.
void dist_abort(int code) __attribute__((noreturn));

// The collectives on GPU memory (cuda/nccl/dist_nccl.c): a layer above core/ implements them, and
// the front end that links it registers the table before dist_init, so core/ never names the
// layer above. Without a table the *_device calls return -1 and the trainer sums on the host.
typedef struct {
    void (*pick_device)(int local_rank, int local_size);  // before any CUDA context
    int (*sum_f32)(float *x, size_t n);
    int (*reduce_scatter_f32)(const float *x, float *shard, size_t block);
    int (*allgather_f32)(float *x, size_t block);
    void (*finalize)(void);
} DistDeviceOps;
void dist_set_device_ops(const DistDeviceOps *ops);

#endif

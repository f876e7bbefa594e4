// The GPU side of dist (docs/design.md §9, as llm.c's zero.cuh): one GPU per rank of a host, an NCCL
// communicator over all ranks whose unique id rank 0 broadcasts over MPI, the gradient
// all-reduce on device memory, and ZeRO-1's reduce-scatter and all-gather. Linked into mala only in builds with CUDA, MPI and nccl.h
// (Makefile: NCCL=1), whose front end registers dist_nccl_ops with core/dist.c; without
// them, the trainer sums on the host.
// defines: dist_nccl_ops, dist_nccl_pick_device, dist_nccl_sum_f32, dist_nccl_reduce_scatter_f32,
//          dist_nccl_allgather_f32, dist_nccl_finalize
#include <cuda_runtime.h>
#include <nccl.h>

#include "core/common.h"
#include "core/dist.h"
#include "cuda/nccl/dist_nccl.h"

static ncclComm_t g_comm;
static cudaStream_t g_stream;
static int g_ready;
static int g_shared;  // the ranks of this host outnumber its GPUs: NCCL refuses two ranks on one GPU

#define CUDA_OK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "error: rank %d: %s: %s\n", dist_rank(), #call, cudaGetErrorString(e_)); dist_abort(1); } } while (0)
#define NCCL_OK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
    fprintf(stderr, "error: rank %d: %s: %s\n", dist_rank(), #call, ncclGetErrorString(r_)); dist_abort(1); } } while (0)

void dist_nccl_pick_device(int local_rank, int local_size) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return;  // no GPU: the CPU backend's job
    CUDA_OK(cudaSetDevice(local_rank % n));
    g_shared = local_size > n;
    if (g_shared && local_rank == 0)
        fprintf(stderr, "note: %d processes share %d GPU%s on this host, and NCCL needs one GPU per process: the "
                "gradients are summed through the host (MPI)\n", local_size, n, n > 1 ? "s" : "");
}

// Collective: every rank's first call builds the communicator.
static void nccl_ready(void) {
    if (g_ready) return;
    ncclUniqueId id;
    if (dist_rank() == 0) NCCL_OK(ncclGetUniqueId(&id));
    dist_bcast(&id, sizeof id, 0);
    NCCL_OK(ncclCommInitRank(&g_comm, dist_world(), id, dist_rank()));
    CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    g_ready = 1;
}

// In-place sum of x (device memory) over the ranks; the caller has synchronised its own stream.
int dist_nccl_sum_f32(float *x, size_t n) {
    if (g_shared) return -1;
    nccl_ready();
    NCCL_OK(ncclAllReduce(x, x, n, ncclFloat, ncclSum, g_comm, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream));
    return 0;
}

// ZeRO-1 (core/dist.h's blocks): shard[block] = this rank's block of the sum of x[block * world].
int dist_nccl_reduce_scatter_f32(const float *x, float *shard, size_t block) {
    if (g_shared) return -1;
    nccl_ready();
    NCCL_OK(ncclReduceScatter(x, shard, block, ncclFloat, ncclSum, g_comm, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream));
    return 0;
}

// In place: this rank's block at x + rank * block, as NCCL's in-place all-gather wants it.
int dist_nccl_allgather_f32(float *x, size_t block) {
    if (g_shared) return -1;
    nccl_ready();
    NCCL_OK(ncclAllGather(x + (size_t)dist_rank() * block, x, block, ncclFloat, g_comm, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream));
    return 0;
}

void dist_nccl_finalize(void) {
    if (!g_ready) return;
    ncclCommDestroy(g_comm);
    cudaStreamDestroy(g_stream);
    g_ready = 0;
}

const DistDeviceOps *dist_nccl_ops(void) {
    static const DistDeviceOps ops = {dist_nccl_pick_device, dist_nccl_sum_f32, dist_nccl_reduce_scatter_f32,
                                      dist_nccl_allgather_f32, dist_nccl_finalize};
    return &ops;
}

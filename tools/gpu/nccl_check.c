// make gpu-check's 1-GPU NCCL check (tools/gpu/gpu_check.sh, section dist): mala's own NCCL calls
// (cuda/nccl/dist_nccl.c) on a communicator of one rank, with core/dist.c built without MPI (one
// process): the all-reduce, ZeRO-1's reduce-scatter and all-gather of a vector of n floats on
// GPU 0 must leave it as it was (a sum over one rank), exactly. Prints one line; exit 0 when so.
//   cc -I. -Icore -I$CUDA_HOME/include tools/gpu/nccl_check.c cuda/nccl/dist_nccl.c core/dist.c \
//      core/common.c -L$CUDA_HOME/lib64 -lnccl -lcudart -o nccl_check
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/dist.h"
#include "cuda/nccl/dist_nccl.h"

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : (1u << 20) + 7;  // not a multiple of anything
    int devices = 0, version = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) { printf("no CUDA device\n"); return 1; }
    dist_nccl_pick_device(0, 1);
    ncclGetVersion(&version);
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    float *host = xmalloc(n * sizeof(float)), *back = xmalloc(n * sizeof(float)), *d, *d2;
    for (size_t i = 0; i < n; i++) host[i] = (float)((i * 2654435761u) % 1000003) / 1000003.0f - 0.5f;
    if (cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess || cudaMalloc((void **)&d2, n * sizeof(float)) != cudaSuccess) {
        printf("cudaMalloc of 2 x %zu floats failed\n", n);
        return 1;
    }
    const char *what[3] = {"all-reduce", "reduce-scatter", "all-gather"};
    int bad = -1;
    for (int k = 0; k < 3 && bad < 0; k++) {
        cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemset(d2, 0, n * sizeof(float));
        int rc = k == 0 ? dist_nccl_sum_f32(d, n) : k == 1 ? dist_nccl_reduce_scatter_f32(d, d2, n) : dist_nccl_allgather_f32(d, n);
        cudaMemcpy(back, k == 1 ? d2 : d, n * sizeof(float), cudaMemcpyDeviceToHost);
        if (rc != 0 || memcmp(back, host, n * sizeof(float))) bad = k;
    }
    dist_nccl_finalize();
    printf("NCCL %d: a 1-rank communicator on GPU 0 (%s, %d GPU%s): %s of %zu floats %s\n", version, prop.name, devices,
           devices > 1 ? "s" : "", bad < 0 ? "all-reduce, reduce-scatter, all-gather" : what[bad], n,
           bad < 0 ? "exact" : "WRONG");
    return bad < 0 ? 0 : 1;
}

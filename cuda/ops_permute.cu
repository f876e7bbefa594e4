// Token permutations of DiG's scan directions on [B, L, C] (L = gh * gw): flip reverses the
// token order, then transpose reads the gh x gw grid by columns (backend.h). One thread per
// output element; the backward scatters through the same map (a permutation: no two writes meet).
// defines: cuda_permute_tokens_fwd, cuda_permute_tokens_bwd
#include "cuda/cuda_common.cuh"

// The source token of output token l.
__device__ __forceinline__ int perm_src(int l, int L, int gh, int gw, int flip, int transpose) {
    const int m = transpose ? (l % gh) * gw + l / gh : l;
    return flip ? L - 1 - m : m;
}

// out[b, l] = x[b, src(l)]
__global__ void k_permute_fwd(float *out, const float *x, int L, int gh, int gw, int C, int flip, int transpose,
                              size_t total) {
    GRID_STRIDE(i, total) {
        const size_t c = i % (size_t)C, bl = i / (size_t)C, b = bl / L;
        out[i] = x[(b * L + perm_src((int)(bl % (size_t)L), L, gh, gw, flip, transpose)) * C + c];
    }
}

// dx[b, src(l)] += dout[b, l]
__global__ void k_permute_bwd(float *dx, const float *dout, int L, int gh, int gw, int C, int flip, int transpose,
                              size_t total) {
    GRID_STRIDE(i, total) {
        const size_t c = i % (size_t)C, bl = i / (size_t)C, b = bl / L;
        dx[(b * L + perm_src((int)(bl % (size_t)L), L, gh, gw, flip, transpose)) * C + c] += dout[i];
    }
}

void cuda_permute_tokens_fwd(float *out, const float *x, int B, int gh, int gw, int C, int flip, int transpose) {
    const size_t total = (size_t)B * gh * gw * C;
    if (!total) return;
    k_permute_fwd<<<grid1d(total), CU_BLOCK>>>(out, x, gh * gw, gh, gw, C, flip, transpose, total);
    KERNEL_CHECK();
}

void cuda_permute_tokens_bwd(float *dx, const float *dout, int B, int gh, int gw, int C, int flip, int transpose) {
    const size_t total = (size_t)B * gh * gw * C;
    if (!total) return;
    k_permute_bwd<<<grid1d(total), CU_BLOCK>>>(dx, dout, gh * gw, gh, gw, C, flip, transpose, total);
    KERNEL_CHECK();
}

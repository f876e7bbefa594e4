// 2-D RoPE (docs/design.md §1) of the q' and k' parts of qkv into qkr. Pair p of a head (channels 2p,
// 2p+1), p < d/2: for p < d/4 the angle is row * w_p, otherwise col * w_{p - d/4}, with w from
// rope_freq (ops_math.h); (x, y) -> (x cos - y sin, y cos + x sin).
// defines: cuda_rope_fwd, cuda_elu1_rope_fwd, cuda_rope_bwd
#include "cuda/cuda_common.cuh"

// The angle of pair p (0 <= p < d/2) of token l on a grid gw wide, as the CPU computes it.
__device__ __forceinline__ void rope_cs(int l, int gw, int p, int d, float *cs, float *sn) {
    const int nf = d / 4;
    const float pos = p < nf ? (float)(l / gw) : (float)(l % gw);
    const float a = pos * rope_freq(p < nf ? p : p - nf, d);
    *cs = cosf(a);
    *sn = sinf(a);
}

// One thread per channel pair of the 2H-wide [q | k] row; total = B * L * H pairs.
// qkv row r: [q(H) | k(H) | v(H)] stride 3H; qkr row r: [q(H) | k(H)] stride 2H; both hold q, k at
// the same channel offsets c0 in [0, 2H).
__global__ void k_rope_fwd(float *qkr, const float *qkv, int L, int H, int d, int gw, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t row = i / (size_t)H;
        const int c0 = 2 * (int)(i % (size_t)H);      // even channel in [0, 2H)
        const int p = (c0 % d) / 2;                     // pair within the head (H is a multiple of d)
        float cs, sn;
        rope_cs((int)(row % (size_t)L), gw, p, d, &cs, &sn);
        const float *x = qkv + row * 3 * (size_t)H + c0;
        float *o = qkr + row * 2 * (size_t)H + c0;
        const float a = x[0], c = x[1];
        o[0] = a * cs - c * sn;
        o[1] = c * cs + a * sn;
    }
}

// dqkv (q, k parts) += R^T dqkr
__global__ void k_rope_bwd(float *dqkv, const float *dqkr, int L, int H, int d, int gw, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t row = i / (size_t)H;
        const int c0 = 2 * (int)(i % (size_t)H);
        const int p = (c0 % d) / 2;
        float cs, sn;
        rope_cs((int)(row % (size_t)L), gw, p, d, &cs, &sn);
        const float *g = dqkr + row * 2 * (size_t)H + c0;
        float *o = dqkv + row * 3 * (size_t)H + c0;
        const float ga = g[0], gc = g[1];
        o[0] += ga * cs + gc * sn;
        o[1] += gc * cs - ga * sn;
    }
}

void cuda_rope_fwd(float *qkr, const float *qkv, AttnShape s) {
    attn_check(s, "rope_fwd");
    const int d = s.H / s.heads;
    CU_REQUIRE(d % 4 == 0, "rope_fwd: head dim %d must be a multiple of 4", d);
    const size_t total = (size_t)s.B * s.L * s.H;
    if (!total) return;
    k_rope_fwd<<<grid1d(total), CU_BLOCK>>>(qkr, qkv, s.L, s.H, d, s.gw, total);
    KERNEL_CHECK();
}

// elu1 on q and k in place, then RoPE: the two kernels one after the other (the CPU fuses them).
void cuda_elu1_rope_fwd(float *qkr, float *qkv, AttnShape s) {
    cuda_elu1_fwd(qkv, s.B * s.L, 2 * s.H, 3 * s.H);
    cuda_rope_fwd(qkr, qkv, s);
}

void cuda_rope_bwd(float *dqkv, const float *dqkr, AttnShape s) {
    attn_check(s, "rope_bwd");
    const int d = s.H / s.heads;
    CU_REQUIRE(d % 4 == 0, "rope_bwd: head dim %d must be a multiple of 4", d);
    const size_t total = (size_t)s.B * s.L * s.H;
    if (!total || !dqkv) return;
    k_rope_bwd<<<grid1d(total), CU_BLOCK>>>(dqkv, dqkr, s.L, s.H, d, s.gw, total);
    KERNEL_CHECK();
}

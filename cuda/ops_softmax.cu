// Softmax attention (DiT's baseline, O(L^2)): per (batch, head) S = s Q K^T, P = softmax_rows(S),
// out = P V, s = 1/sqrt(d); Q, K are the raw q, k of qkv or the roped ones in qkr. The products are
// cuBLAS strided-batched GEMMs, one call per head (a head's rows have a uniform batch stride), the
// row softmax and its backward are one warp per row.
//
// Cache layout: P[B][heads][L][L] (kept for the backward), then dP[B][L][L] (backward scratch for
// one head at a time, written through a cast of the const cache pointer; P itself is never written
// by the backward).
// defines: cuda_softmax_cache_floats, cuda_softmax_fwd, cuda_softmax_bwd
#include "cuda/cuda_common.cuh"

#define WARPS_PER_BLOCK (CU_BLOCK / 32)

static size_t pl_floats(AttnShape s) { return up64((size_t)s.B * s.heads * s.L * s.L); }

size_t cuda_softmax_cache_floats(AttnShape s) { return pl_floats(s) + up64((size_t)s.B * s.L * s.L); }

// In place on each L-long row: p = exp(x - max) / sum
__global__ void k_softmax_rows(float *P, int L, size_t rows) {
    const size_t r = (size_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;
    float *p = P + r * L;
    float mx = -INFINITY;
    for (int j = lane; j < L; j += 32) mx = fmaxf(mx, p[j]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j < L; j += 32) { float e = expf(p[j] - mx); p[j] = e; sum += e; }
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < L; j += 32) p[j] *= inv;
}

// One head: in place on dP[B*L][L], dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik); the head's P rows are
// Ph + (b*heads*L + i)*L for row r = b*L + i (Ph = P + h*L*L).
__global__ void k_softmax_rows_bwd(float *dP, const float *Ph, int L, int nh, size_t rows) {
    const size_t r = (size_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (r >= rows) return;
    const size_t b = r / L, i = r % L;
    const float *p = Ph + (b * nh * L + i) * L;
    float *g = dP + r * L;
    float acc = 0.0f;
    for (int j = lane; j < L; j += 32) acc += p[j] * g[j];
    const float rs = warp_sum(acc);
    for (int j = lane; j < L; j += 32) g[j] = p[j] * (g[j] - rs);
}

void cuda_softmax_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s) {
    attn_check(s, "softmax_fwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    if (B <= 0 || L <= 0) return;
    const float sc = 1.0f / sqrtf((float)d);
    const long long LL = (long long)L * L, sP = nh * LL;
    float *P = cache;
    for (int h = 0; h < nh; h++) {
        HeadPtrs p = head_ptrs(qkv, qkr, s, h);
        const long long sq = (long long)L * p.ldq;
        gemm_rm(false, true, L, L, d, sc, p.q, p.ldq, sq, p.k, p.ldq, sq, 0.0f, P + h * LL, L, sP, B);
    }
    const size_t rows = (size_t)B * nh * L;
    k_softmax_rows<<<cdiv((long long)rows, WARPS_PER_BLOCK), CU_BLOCK>>>(P, L, rows);
    KERNEL_CHECK();
    for (int h = 0; h < nh; h++) {
        HeadPtrs p = head_ptrs(qkv, qkr, s, h);
        gemm_rm(false, false, L, d, L, 1.0f, P + h * LL, L, sP, p.v, p.ldv, (long long)L * p.ldv, 0.0f,
                out + (size_t)h * d, H, (long long)L * H, B);
    }
}

// Per head: dV += P^T G;  dP = G V^T;  dS = P o (dP - rowsum(P o dP));  dQ += s dS K;  dK += s dS^T Q
void cuda_softmax_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                      float *cache, AttnShape s) {
    attn_check(s, "softmax_bwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    if (B <= 0 || L <= 0) return;
    const float sc = 1.0f / sqrtf((float)d);
    const long long LL = (long long)L * L, sP = nh * LL, sG = (long long)L * H;
    const float *P = cache;
    float *dP = cache + pl_floats(s);  // backward scratch region, one head
    const size_t rows = (size_t)B * L;
    for (int h = 0; h < nh; h++) {
        HeadPtrs p = head_ptrs(qkv, qkr, s, h);
        HeadGradPtrs g = head_grad_ptrs(dqkv, dqkr, qkr != NULL, s, h);
        const float *Gh = dout + (size_t)h * d, *Ph = P + h * LL;
        if (dqkv)
            gemm_rm(true, false, L, d, L, 1.0f, Ph, L, sP, Gh, H, sG, 1.0f, dqkv + 2 * (size_t)H + (size_t)h * d,
                    3 * H, (long long)L * 3 * H, B);
        if (!g.dq && !g.dk) continue;
        gemm_rm(false, true, L, L, d, 1.0f, Gh, H, sG, p.v, p.ldv, (long long)L * p.ldv, 0.0f, dP, L, LL, B);
        k_softmax_rows_bwd<<<cdiv((long long)rows, WARPS_PER_BLOCK), CU_BLOCK>>>(dP, Ph, L, nh, rows);
        KERNEL_CHECK();
        const long long sq = (long long)L * p.ldq, sg = (long long)L * g.ld;
        if (g.dq) gemm_rm(false, false, L, d, L, sc, dP, L, LL, p.k, p.ldq, sq, 1.0f, g.dq, g.ld, sg, B);
        if (g.dk) gemm_rm(true, false, L, d, L, sc, dP, L, LL, p.q, p.ldq, sq, 1.0f, g.dk, g.ld, sg, B);
    }
}

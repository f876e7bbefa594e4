// The two kernelised linear attentions: MALA (docs/design.md §1) and plain linear attention. Both are
// O(L d^2) per (batch, head): the d x d state KV = c * sum_j kr_j v_j^T and the row products
// qr_i KV go through cuBLAS (one strided-batched call per head, batched over the batch); the
// means/sums over tokens, the per-row statistics and the final row scalings are small kernels.
//
//   MALA:   kbar = mean_j k'_j, vbar = mean_j v_j, z_i = s q'_i . kbar, KV = (s/L) sum_j kr_j v_j^T,
//           out_i = beta_i (qr_i KV) - z_i vbar,  beta_i = 1 + 1/(z_i + eps)
//   linear: ksum = sum_j k'_j, den_i = q'_i . ksum + eps, KV = sum_j kr_j v_j^T,
//           out_i = (qr_i KV) / den_i
// (q', k' from qkv, phi already applied; qr, kr = the roped copies in qkr, or q', k' without RoPE.)
//
// Cache layout (floats, each region rounded up to 64 floats). Kept from forward to backward:
//   KV[B][heads][d][d] (scaled as above), stat[B*L][heads] (z or den), mean[B][2H] (MALA: kbar
//   then vbar; linear: ksum in the first H).
// Backward scratch (backend.h lets the backward overwrite this part of the cache; the forward
// state above is never written, so a second backward gives the same result):
//   da[B*L][H] (first a_i = qr_i KV, then the row-scaled dout), dstat[B*L][heads] (dz or dden),
//   dKV[B][heads][d][d], dmean[B][2H].
// defines: cuda_mala_cache_floats, cuda_mala_fwd, cuda_mala_bwd, cuda_linattn_cache_floats,
//          cuda_linattn_fwd, cuda_linattn_bwd
#include "cuda/cuda_common.cuh"

enum { KIND_MALA = 0, KIND_LIN = 1 };

struct LinCache {
    float *KV, *stat, *mean, *da, *dstat, *dKV, *dmean;
};

static size_t lin_layout(float *base, AttnShape s, LinCache *c) {
    const size_t B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    size_t off = 0;
    float **fields[7] = {&c->KV, &c->stat, &c->mean, &c->da, &c->dstat, &c->dKV, &c->dmean};
    const size_t sizes[7] = {B * H * d, B * L * nh, 2 * B * H, B * L * H, B * L * nh, B * H * d, 2 * B * H};
    for (int i = 0; i < 7; i++) {
        *fields[i] = base ? base + off : NULL;
        off += up64(sizes[i]);
    }
    return off;
}

size_t cuda_mala_cache_floats(AttnShape s) { LinCache c; return lin_layout(NULL, s, &c); }
size_t cuda_linattn_cache_floats(AttnShape s) { LinCache c; return lin_layout(NULL, s, &c); }

// ---------------------------------------------------------------------------------------------
// Kernels. "Row" = token row b*L + i; a warp owns one (row, head) pair: w = row * heads + h, which
// is also the index of that pair's statistic.

#define WARPS_PER_BLOCK (CU_BLOCK / 32)

// stat[w] = MALA: s * q'_i . kbar        linear: q'_i . ksum + eps
__global__ void k_row_stat(float *stat, const float *qkv, const float *mean, float sc, int kind, int L, int H,
                           int nh, int d, size_t nwarps) {
    const size_t w = (size_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (w >= nwarps) return;
    const size_t row = w / nh, b = row / L;
    const int h = (int)(w % nh);
    const float *q = qkv + row * 3 * (size_t)H + (size_t)h * d;
    const float *m = mean + b * 2 * (size_t)H + (size_t)h * d;  // kbar or ksum of head h
    float acc = 0.0f;
    for (int c = lane; c < d; c += 32) acc += q[c] * m[c];
    acc = warp_sum(acc);
    if (lane == 0) stat[w] = kind == KIND_MALA ? sc * acc : acc + MALA_ATTN_EPS;
}

// out holds a_i = qr_i KV; MALA: out = beta a - z vbar;  linear: out = a * (1 / den)
__global__ void k_finish_out(float *out, const float *stat, const float *mean, int kind, int L, int H, int nh,
                             int d, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t col = i % (size_t)H, row = i / (size_t)H, b = row / L;
        const float st = stat[row * nh + col / d];
        if (kind == KIND_MALA) {
            const float beta = 1.0f + 1.0f / (st + MALA_ATTN_EPS);
            out[i] = beta * out[i] - st * mean[b * 2 * (size_t)H + H + col];
        } else {
            out[i] *= 1.0f / st;
        }
    }
}

// da holds a_i = qr_i KV on entry; per (row, head):
//   MALA:   dz = -(inv^2) (g . a) - g . vbar,  da = (1 + inv) g,   inv = 1 / (z + eps)
//   linear: dden = -(inv^2) (g . a),            da = inv g,         inv = 1 / den
__global__ void k_row_bwd(float *da, float *dstat, const float *dout, const float *stat, const float *mean,
                          int kind, int L, int H, int nh, int d, size_t nwarps) {
    const size_t w = (size_t)blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (w >= nwarps) return;
    const size_t row = w / nh, b = row / L;
    const int h = (int)(w % nh);
    float *a = da + row * (size_t)H + (size_t)h * d;
    const float *g = dout + row * (size_t)H + (size_t)h * d;
    const float *vbar = mean + b * 2 * (size_t)H + H + (size_t)h * d;
    float ga = 0.0f, gv = 0.0f;
    for (int c = lane; c < d; c += 32) {
        ga += g[c] * a[c];
        if (kind == KIND_MALA) gv += g[c] * vbar[c];
    }
    ga = warp_sum(ga);
    gv = warp_sum(gv);
    const float st = stat[w];
    const float inv = kind == KIND_MALA ? 1.0f / (st + MALA_ATTN_EPS) : 1.0f / st;
    const float rs = kind == KIND_MALA ? 1.0f + inv : inv;
    if (lane == 0) dstat[w] = kind == KIND_MALA ? -(inv * inv) * ga - gv : -(inv * inv) * ga;
    for (int c = lane; c < d; c += 32) a[c] = rs * g[c];  // each lane rewrites only what it read
}

// Token sums for the gradients of the means, per (batch, column), fixed-order reduction:
//   col < H:   dmean[b][col] = f * sum_i (a_st * dstat[i, h]) q'_i[col]     (MALA: a_st = s, f = 1/L;
//                                                                             linear: a_st = 1, f = 1)
//   col >= H:  dmean[b][col] = f * sum_i (-z_i) dout_i[col - H]           (MALA only: the vbar part)
#define TOK_ROWS 16
__global__ void k_mean_grads(float *dmean, const float *dstat, const float *stat, const float *qkv,
                             const float *dout, float a_st, float f, int ncols, int L, int H, int nh, int d) {
    __shared__ float part[TOK_ROWS][33];
    const int col = blockIdx.x * 32 + threadIdx.x, b = blockIdx.y;
    float acc = 0.0f;
    if (col < ncols) {
        const size_t r0 = (size_t)b * L;
        if (col < H) {
            const int h = col / d;
            for (int i = threadIdx.y; i < L; i += TOK_ROWS)
                acc += (a_st * dstat[(r0 + i) * nh + h]) * qkv[(r0 + i) * 3 * (size_t)H + col];
        } else {
            const int cc = col - H, h = cc / d;
            for (int i = threadIdx.y; i < L; i += TOK_ROWS)
                acc += (-stat[(r0 + i) * nh + h]) * dout[(r0 + i) * (size_t)H + cc];
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < ncols) {
        float t = 0.0f;
        for (int y = 0; y < TOK_ROWS; y++) t += part[y][threadIdx.x];
        dmean[(size_t)b * 2 * H + col] = t * f;
    }
}

// The parts of dqkv that go through the means (ncols = 3H for MALA, 2H for linear):
//   q:  += (a_st * dstat[row, h]) * mean[b][col]        (kbar or ksum)
//   k:  += dmean[b][col - H]                             (dkbar / L, or dksum)
//   v:  += dmean[b][col - H]                             (MALA: dvbar / L)
__global__ void k_mean_dqkv(float *dqkv, const float *dstat, const float *mean, const float *dmean, float a_st,
                            int ncols, int L, int H, int nh, int d, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t col = i % (size_t)ncols, row = i / (size_t)ncols, b = row / L;
        float *o = dqkv + row * 3 * (size_t)H + col;
        if (col < (size_t)H) *o += (a_st * dstat[row * nh + col / d]) * mean[b * 2 * (size_t)H + col];
        else                 *o += dmean[b * 2 * (size_t)H + col - H];
    }
}

// ---------------------------------------------------------------------------------------------
// Per-head products (cuBLAS), batched over the batch. KV of (b, h) sits at KV + (b*nh + h) d^2.

// KV_h = alpha kr^T v;  if out: out_h = qr KV_h
static void kv_forward(float *KV, float *out, float alpha, const float *qkv, const float *qkr, AttnShape s) {
    const int L = s.L, H = s.H, nh = s.heads, d = H / nh;
    const long long sKV = (long long)nh * d * d;
    for (int h = 0; h < nh; h++) {
        HeadPtrs p = head_ptrs(qkv, qkr, s, h);
        float *KVh = KV + (size_t)h * d * d;
        gemm_rm(true, false, d, d, L, alpha, p.k, p.ldq, (long long)L * p.ldq, p.v, p.ldv, (long long)L * p.ldv,
                0.0f, KVh, d, sKV, s.B);
        if (out)
            gemm_rm(false, false, L, d, d, 1.0f, p.q, p.ldq, (long long)L * p.ldq, KVh, d, sKV, 0.0f,
                    out + (size_t)h * d, H, (long long)L * H, s.B);
    }
}

// a_h = qr KV_h into da (rows of stride H)
static void kv_rows(float *da, const float *KV, const float *qkv, const float *qkr, AttnShape s) {
    const int L = s.L, H = s.H, nh = s.heads, d = H / nh;
    for (int h = 0; h < nh; h++) {
        HeadPtrs p = head_ptrs(qkv, qkr, s, h);
        gemm_rm(false, false, L, d, d, 1.0f, p.q, p.ldq, (long long)L * p.ldq, KV + (size_t)h * d * d, d,
                (long long)nh * d * d, 0.0f, da + (size_t)h * d, H, (long long)L * H, s.B);
    }
}

// With da = the row-scaled dout: dKV_h = alpha qr^T da;  dqr += da KV^T;  dkr += v dKV^T;
// dv += kr dKV.
static void kv_backward(float *dKV, const float *da, const float *KV, float alpha, float *dqkv, float *dqkr,
                        const float *qkv, const float *qkr, AttnShape s) {
    const int L = s.L, H = s.H, nh = s.heads, d = H / nh;
    const long long sKV = (long long)nh * d * d, sda = (long long)L * H;
    for (int h = 0; h < nh; h++) {
        HeadPtrs p = head_ptrs(qkv, qkr, s, h);
        HeadGradPtrs g = head_grad_ptrs(dqkv, dqkr, qkr != NULL, s, h);
        const float *dah = da + (size_t)h * d, *KVh = KV + (size_t)h * d * d;
        float *dKVh = dKV + (size_t)h * d * d;
        const long long sq = (long long)L * p.ldq, sg = (long long)L * g.ld;
        if (g.dq)
            gemm_rm(false, true, L, d, d, 1.0f, dah, H, sda, KVh, d, sKV, 1.0f, g.dq, g.ld, sg, s.B);
        if (!g.dk && !dqkv) continue;
        gemm_rm(true, false, d, d, L, alpha, p.q, p.ldq, sq, dah, H, sda, 0.0f, dKVh, d, sKV, s.B);
        if (g.dk)
            gemm_rm(false, true, L, d, d, 1.0f, p.v, p.ldv, (long long)L * p.ldv, dKVh, d, sKV, 1.0f, g.dk, g.ld,
                    sg, s.B);
        if (dqkv)
            gemm_rm(false, false, L, d, d, 1.0f, p.k, p.ldq, sq, dKVh, d, sKV, 1.0f,
                    dqkv + 2 * (size_t)H + (size_t)h * d, 3 * H, (long long)L * 3 * H, s.B);
    }
}

// ---------------------------------------------------------------------------------------------

static void lin_fwd(int kind, float *out, float *cache, const float *qkv, const float *qkr, AttnShape s) {
    attn_check(s, kind == KIND_MALA ? "mala_fwd" : "linattn_fwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    if (B <= 0 || L <= 0) return;
    LinCache c;
    lin_layout(cache, s, &c);
    const float sc = 1.0f / sqrtf((float)d), invL = 1.0f / (float)L;
    // token means (MALA: kbar, vbar) or sums (linear: ksum) of the k' and v parts of qkv
    const int ncols = kind == KIND_MALA ? 2 * H : H;
    cuda_colsum(c.mean, 2LL * H, qkv + H, L, ncols, 3 * H, (long long)L * 3 * H, B,
                kind == KIND_MALA ? invL : 1.0f, false);
    const size_t nwarps = (size_t)B * L * nh;
    const int wblocks = cdiv((long long)nwarps, WARPS_PER_BLOCK);
    k_row_stat<<<wblocks, CU_BLOCK>>>(c.stat, qkv, c.mean, sc, kind, L, H, nh, d, nwarps);
    KERNEL_CHECK();
    kv_forward(c.KV, out, kind == KIND_MALA ? sc * invL : 1.0f, qkv, qkr, s);
    const size_t total = (size_t)B * L * H;
    k_finish_out<<<grid1d(total), CU_BLOCK>>>(out, c.stat, c.mean, kind, L, H, nh, d, total);
    KERNEL_CHECK();
}

static void lin_bwd(int kind, float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                    float *cache, AttnShape s) {
    attn_check(s, kind == KIND_MALA ? "mala_bwd" : "linattn_bwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    if (B <= 0 || L <= 0) return;
    if (!dqkv && !(qkr && dqkr)) return;
    LinCache c;
    lin_layout(cache, s, &c);  // forward state is only read; scratch regions written
    const float sc = 1.0f / sqrtf((float)d), invL = 1.0f / (float)L;
    // a_i = qr_i KV, then the per-row backward: dstat and da = row scale * dout
    kv_rows(c.da, c.KV, qkv, qkr, s);
    const size_t nwarps = (size_t)B * L * nh;
    const int wblocks = cdiv((long long)nwarps, WARPS_PER_BLOCK);
    k_row_bwd<<<wblocks, CU_BLOCK>>>(c.da, c.dstat, dout, c.stat, c.mean, kind, L, H, nh, d, nwarps);
    KERNEL_CHECK();
    // the products: dKV, dqr, dkr, dv
    kv_backward(c.dKV, c.da, c.KV, kind == KIND_MALA ? sc * invL : 1.0f, dqkv, dqkr, qkv, qkr, s);
    // the paths through the token means / sums, into q', k' (and v for MALA)
    if (dqkv) {
        const float a_st = kind == KIND_MALA ? sc : 1.0f, f = kind == KIND_MALA ? invL : 1.0f;
        const int mcols = kind == KIND_MALA ? 2 * H : H;  // dkbar and dvbar, or dksum
        dim3 grid(cdiv(mcols, 32), B), block(32, TOK_ROWS);
        k_mean_grads<<<grid, block>>>(c.dmean, c.dstat, c.stat, qkv, dout, a_st, f, mcols, L, H, nh, d);
        KERNEL_CHECK();
        const int ncols = mcols + H;  // q and k parts (and v for MALA)
        const size_t total = (size_t)B * L * ncols;
        k_mean_dqkv<<<grid1d(total), CU_BLOCK>>>(dqkv, c.dstat, c.mean, c.dmean, a_st, ncols, L, H, nh, d, total);
        KERNEL_CHECK();
    }
}

void cuda_mala_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s) {
    lin_fwd(KIND_MALA, out, cache, qkv, qkr, s);
}
void cuda_mala_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                   float *cache, AttnShape s) {
    lin_bwd(KIND_MALA, dqkv, dqkr, dout, qkv, qkr, cache, s);
}
void cuda_linattn_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s) {
    lin_fwd(KIND_LIN, out, cache, qkv, qkr, s);
}
void cuda_linattn_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                      float *cache, AttnShape s) {
    lin_bwd(KIND_LIN, dqkv, dqkr, dout, qkv, qkr, cache, s);
}

// One explicit attention row (backend.h attn_row; the CPU version, ops_cpu_attn_row.c, states the
// scores): a single block walks the heads; per head, kbar / ksum comes from d block sums over the
// L keys, then every thread scores its own tokens (softmax: a max pass, a sum pass, a write pass,
// each recomputing the O(d) dot products). O(L d) per head, accumulated in row itself; no L x L
// matrix and no scratch beyond the block's shared memory.
// defines: cuda_attn_row
#include "cuda/cuda_common.cuh"

#define ROW_MAX_D 256

__device__ static float block_max(float v, float *red) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = lane < nw ? red[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0) red[32] = t;
    }
    __syncthreads();
    return red[32];
}

__device__ static float row_dot(const float *a, const float *b, int d) {
    float s = 0.0f;
    for (int c = 0; c < d; c++) s += a[c] * b[c];
    return s;
}

__global__ void k_attn_row(float *row, const float *qkv, const float *qkr, int L, int H, int nh, int kind, int b,
                           int h0, int h1, int query, float a) {
    __shared__ float red[33];
    __shared__ float kvec[ROW_MAX_D];
    const int d = H / nh, tid = threadIdx.x;
    const size_t ld = (size_t)3 * H, ldr = qkr ? (size_t)2 * H : ld;
    const float sc = 1.0f / sqrtf((float)d);
    for (int j = tid; j < L; j += blockDim.x) row[j] = 0.0f;
    for (int h = h0; h < h1; h++) {
        const float *q = qkv + (size_t)b * L * ld + (size_t)h * d, *k = q + H;
        const float *qr = qkr ? qkr + (size_t)b * L * ldr + (size_t)h * d : q, *kr = qkr ? qr + H : k;
        const float *qri = qr + (size_t)query * ldr;
        if (kind == ATTN_ROW_SOFTMAX) {
            float m = -INFINITY, sum = 0.0f;
            for (int j = tid; j < L; j += blockDim.x) m = fmaxf(m, sc * a * row_dot(qri, kr + (size_t)j * ldr, d));
            m = block_max(m, red);
            for (int j = tid; j < L; j += blockDim.x) sum += expf(sc * a * row_dot(qri, kr + (size_t)j * ldr, d) - m);
            sum = block_sum(sum, red);
            for (int j = tid; j < L; j += blockDim.x)
                row[j] += expf(sc * a * row_dot(qri, kr + (size_t)j * ldr, d) - m) / sum;
            continue;
        }
        for (int c = 0; c < d; c++) {
            float part = 0.0f;
            for (int l = tid; l < L; l += blockDim.x) part += k[(size_t)l * ld + c];
            part = block_sum(part, red);
            if (tid == 0) kvec[c] = kind == ATTN_ROW_MALA ? part / (float)L : part;
        }
        __syncthreads();
        const float stat = a * row_dot(q + (size_t)query * ld, kvec, d);
        if (kind == ATTN_ROW_MALA) {
            const float z = sc * stat, beta = 1.0f + 1.0f / (z + MALA_ATTN_EPS), gamma = z / (float)L;
            for (int j = tid; j < L; j += blockDim.x)
                row[j] += beta * (sc / (float)L) * a * row_dot(qri, kr + (size_t)j * ldr, d) - gamma;
        } else {
            const float den = stat + MALA_ATTN_EPS;
            for (int j = tid; j < L; j += blockDim.x) row[j] += a * row_dot(qri, kr + (size_t)j * ldr, d) / den;
        }
        __syncthreads();  // kvec is rewritten by the next head
    }
    if (h1 - h0 > 1)
        for (int j = tid; j < L; j += blockDim.x) row[j] /= (float)(h1 - h0);
}

void cuda_attn_row(float *row, const float *qkv, const float *qkr, AttnShape s, int kind, int b, int head, int query,
                   float a) {
    CU_REQUIRE(s.heads > 0 && s.H % s.heads == 0 && s.H / s.heads <= ROW_MAX_D,
               "attn_row: H=%d, heads=%d (head dim at most %d)", s.H, s.heads, ROW_MAX_D);
    CU_REQUIRE(kind == ATTN_ROW_MALA || kind == ATTN_ROW_SOFTMAX || kind == ATTN_ROW_LINEAR,
               "attn_row: unknown kind %d", kind);
    CU_REQUIRE(b >= 0 && b < s.B && query >= 0 && query < s.L && head < s.heads,
               "attn_row: image %d, query %d or head %d out of range (B=%d, L=%d, heads=%d)", b, query, head, s.B,
               s.L, s.heads);
    const int h0 = head < 0 ? 0 : head, h1 = head < 0 ? s.heads : head + 1;
    k_attn_row<<<1, CU_BLOCK>>>(row, qkv, qkr, s.L, s.H, s.heads, kind, b, h0, h1, query, a);
    KERNEL_CHECK();
}

// Depthwise k x k cross-correlation over the gh x gw token grid of x (rows of stride ldx: LePE's
// v part of qkv, or DiG's activations), zero padding k/2, plus bias, added to out [B, L, C]:
//   out[b, (r,c), ch] += bias[ch] + sum_{ky,kx} w[ch, ky, kx] x[b, (r+ky-k/2, c+kx-k/2), ch]
// Forward and dx are one thread per output element (dx gathers, so no atomics); dw is a
// fixed-order reduction per (tap, 32-channel tile); db is a column sum.
// defines: cuda_dwconv_fwd, cuda_dwconv_bwd
#include "cuda/cuda_common.cuh"

__global__ void k_dwconv_fwd(float *out, const float *x, int ldx, const float *w, const float *bias, int k, int L,
                             int H, int gh, int gw, size_t total) {
    const int pad = k / 2, kk = k * k;
    GRID_STRIDE(i, total) {
        const int ch = (int)(i % (size_t)H);
        const size_t bl = i / (size_t)H, b = bl / L;
        const int l = (int)(bl % (size_t)L), r = l / gw, c = l % gw;
        const float *v0 = x + b * (size_t)L * ldx + ch;
        const float *wc = w + (size_t)ch * kk;
        float acc = bias ? bias[ch] : 0.0f;
        for (int ky = 0; ky < k; ky++) {
            const int rr = r + ky - pad;
            if (rr < 0 || rr >= gh) continue;
            for (int kx = 0; kx < k; kx++) {
                const int cc = c + kx - pad;
                if (cc < 0 || cc >= gw) continue;
                acc += wc[ky * k + kx] * v0[(size_t)(rr * gw + cc) * ldx];
            }
        }
        out[i] += acc;
    }
}

// dx[b, (r,c), ch] += sum_{ky,kx} w[ch, ky, kx] dout[b, (r-ky+k/2, c-kx+k/2), ch]
__global__ void k_dwconv_bwd_dx(float *dx, int ldx, const float *dout, const float *w, int k, int L, int H, int gh,
                                int gw, size_t total) {
    const int pad = k / 2, kk = k * k;
    GRID_STRIDE(i, total) {
        const int ch = (int)(i % (size_t)H);
        const size_t bl = i / (size_t)H, b = bl / L;
        const int l = (int)(bl % (size_t)L), r = l / gw, c = l % gw;
        const float *g0 = dout + b * (size_t)L * H + ch;
        const float *wc = w + (size_t)ch * kk;
        float acc = 0.0f;
        for (int ky = 0; ky < k; ky++) {
            const int ro = r - ky + pad;
            if (ro < 0 || ro >= gh) continue;
            for (int kx = 0; kx < k; kx++) {
                const int co = c - kx + pad;
                if (co < 0 || co >= gw) continue;
                acc += wc[ky * k + kx] * g0[(size_t)(ro * gw + co) * H];
            }
        }
        dx[bl * (size_t)ldx + ch] += acc;
    }
}

// dw[ch, t] += sum_{b, tokens} dout[b, (r,c), ch] x[b, (r+ky-k/2, c+kx-k/2), ch],  t = ky*k + kx.
// Block (32, DW_ROWS) per (32-channel tile, tap): threadIdx.y strides over the B*L output tokens.
#define DW_ROWS 16
__global__ void k_dwconv_bwd_dw(float *dw, const float *dout, const float *x, int ldx, int k, int B, int L, int H,
                                int gh, int gw) {
    __shared__ float part[DW_ROWS][33];
    const int ch = blockIdx.x * 32 + threadIdx.x, t = blockIdx.y, ky = t / k, kx = t % k, pad = k / 2;
    float acc = 0.0f;
    if (ch < H) {
        const size_t n = (size_t)B * L;
        for (size_t p = threadIdx.y; p < n; p += DW_ROWS) {
            const size_t b = p / L;
            const int l = (int)(p % (size_t)L), r = l / gw, c = l % gw;
            const int rr = r + ky - pad, cc = c + kx - pad;
            if (rr < 0 || rr >= gh || cc < 0 || cc >= gw) continue;
            acc += dout[p * H + ch] * x[(b * L + (size_t)(rr * gw + cc)) * ldx + ch];
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && ch < H) {
        float s = 0.0f;
        for (int y = 0; y < DW_ROWS; y++) s += part[y][threadIdx.x];
        dw[(size_t)ch * k * k + t] += s;
    }
}

static void dwconv_check(int k, int ldx, int B, int gh, int gw, int C, const char *op) {
    CU_REQUIRE(k >= 1 && k % 2 == 1, "%s: kernel size %d must be odd", op, k);
    CU_REQUIRE(B >= 0 && gh >= 0 && gw >= 0 && C > 0 && ldx >= C, "%s: bad shape B%d grid %dx%d C%d ldx %d", op, B,
               gh, gw, C, ldx);
}

void cuda_dwconv_fwd(float *out, const float *x, int ldx, const float *w, const float *b, int k, int B, int gh,
                     int gw, int C) {
    dwconv_check(k, ldx, B, gh, gw, C, "dwconv_fwd");
    const int L = gh * gw;
    const size_t total = (size_t)B * L * C;
    if (!total) return;
    k_dwconv_fwd<<<grid1d(total), CU_BLOCK>>>(out, x, ldx, w, b, k, L, C, gh, gw, total);
    KERNEL_CHECK();
}

void cuda_dwconv_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, int ldx, const float *w,
                     int k, int B, int gh, int gw, int C) {
    dwconv_check(k, ldx, B, gh, gw, C, "dwconv_bwd");
    const int L = gh * gw;
    const size_t total = (size_t)B * L * C;
    if (!total) return;
    if (dx) {
        k_dwconv_bwd_dx<<<grid1d(total), CU_BLOCK>>>(dx, ldx, dout, w, k, L, C, gh, gw, total);
        KERNEL_CHECK();
    }
    if (dw) {
        dim3 grid(cdiv(C, 32), k * k), block(32, DW_ROWS);
        k_dwconv_bwd_dw<<<grid, block>>>(dw, dout, x, ldx, k, B, L, C, gh, gw);
        KERNEL_CHECK();
    }
    if (db) cuda_rowsum_add(db, dout, B * L, C);
}

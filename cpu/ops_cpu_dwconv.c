// CPU depthwise convolution over a token grid: LePE's on the attention's v, DiG's after each
// block, the MALA authors' CPE and FFN convs. Contracts are in backend.h. Nothing is allocated
// per call: a task's transposed weights and partial sums live on the stack (2 k^2 * 32 floats).
// defines: cpu_dwconv_fwd, cpu_dwconv_bwd
#include "cpu/ops_cpu.h"

#include <string.h>

#include "core/common.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_threads.h"  // defines: cpu_small_work

// Depthwise k x k cross-correlation over the gh x gw token grid of x (rows of stride ld: LePE's v
// part of qkv, or plain activations), zero padding k/2, plus bias:
//   out[b, (r,c), ch] += bias[ch] + sum_{ky,kx} w[ch, ky, kx] x[b, (r+ky-k/2, c+kx-k/2), ch].
// Work is split over (batch, block of DW_CB channels); each task keeps its weights transposed
// to [tap][channel] so the inner loops run contiguously over channels.
#define DW_CB 32

// One (batch, channel block) task of the forward. Called with cb == DW_CB (a compile-time
// constant after inlining, so the channel loops unroll) or with the tail width.
static inline void dwconv_fwd_block(float *restrict out, const float *restrict v0, const float *restrict wt,
                                    const float *restrict bias, int k, int gh, int gw, size_t ld, int H, int cb) {
    const int pad = k / 2;
    float acc[DW_CB], acc2[DW_CB];  // two accumulators (even / odd kx) halve the add chains
    for (int r = 0; r < gh; r++) {
        const int ky0 = pad - r > 0 ? pad - r : 0, ky1 = gh - 1 - r + pad < k - 1 ? gh - 1 - r + pad : k - 1;
        for (int col = 0; col < gw; col++) {
            const int kx0 = pad - col > 0 ? pad - col : 0, kx1 = gw - 1 - col + pad < k - 1 ? gw - 1 - col + pad : k - 1;
            for (int c = 0; c < cb; c++) { acc[c] = bias ? bias[c] : 0.0f; acc2[c] = 0.0f; }
            for (int ky = ky0; ky <= ky1; ky++) {
                const int nrow = (r + ky - pad) * gw + col - pad;  // + kx >= 0 for valid taps
                int kx = kx0;
                for (; kx + 1 <= kx1; kx += 2) {
                    const float *src = v0 + (size_t)(nrow + kx) * ld, *wr = wt + (ky * k + kx) * DW_CB;
                    const float *src2 = src + ld, *wr2 = wr + DW_CB;
                    #pragma omp simd
                    for (int c = 0; c < cb; c++) { acc[c] += wr[c] * src[c]; acc2[c] += wr2[c] * src2[c]; }
                }
                if (kx <= kx1) {
                    const float *src = v0 + (size_t)(nrow + kx) * ld, *wr = wt + (ky * k + kx) * DW_CB;
                    #pragma omp simd
                    for (int c = 0; c < cb; c++) acc[c] += wr[c] * src[c];
                }
            }
            float *o = out + (size_t)(r * gw + col) * H;
            #pragma omp simd
            for (int c = 0; c < cb; c++) o[c] += acc[c] + acc2[c];
        }
    }
}

static void dwconv_transpose_w(float *wt, const float *w, int c0, int cb, int kk) {
    for (int c = 0; c < cb; c++)
        for (int t = 0; t < kk; t++) wt[t * DW_CB + c] = w[(size_t)(c0 + c) * kk + t];
}

static void check_dwconv(int k, int ldx, int B, int gh, int gw, int C, const char *op) {
    CHECK(k >= 1 && k % 2 == 1, "%s: kernel size %d must be odd", op, k);
    CHECK(B >= 0 && gh >= 0 && gw >= 0 && C > 0 && ldx >= C, "%s: bad shape B%d grid %dx%d C%d ldx %d", op, B, gh,
          gw, C, ldx);
}

// (each channel's taps sum within its own vector lane: the clone gives the same bits)
MALA_ELEMENTWISE_CLONES void cpu_dwconv_fwd(float *out, const float *x, int ldx, const float *w, const float *bias,
                                            int k, int B, int gh, int gw, int C) {
    check_dwconv(k, ldx, B, gh, gw, C, "dwconv_fwd");
    const int L = gh * gw, H = C, kk = k * k;
    const int nblk = (H + DW_CB - 1) / DW_CB;
    const size_t ld = (size_t)ldx;
    #pragma omp parallel for collapse(2) schedule(static) if (cpu_small_work((size_t)B * L * H * kk) == 0)
    for (int b = 0; b < B; b++) {
        for (int blk = 0; blk < nblk; blk++) {
            const int c0 = blk * DW_CB, cb = H - c0 < DW_CB ? H - c0 : DW_CB;
            float wt[kk * DW_CB];
            dwconv_transpose_w(wt, w, c0, cb, kk);
            const float *v0 = x + (size_t)b * L * ld + c0;
            float *o0 = out + (size_t)b * L * H + c0;
            const float *b0 = bias ? bias + c0 : NULL;
            if (cb == DW_CB) dwconv_fwd_block(o0, v0, wt, b0, k, gh, gw, ld, H, DW_CB);
            else dwconv_fwd_block(o0, v0, wt, b0, k, gh, gw, ld, H, cb);
        }
    }
}

// One (batch, channel block) task of the backward: dbl/dwl get the block's bias and weight
// gradients (summed over this batch's tokens), dv (may be NULL) the x gradient.
//   dw[t] += sum_(r,c) dout(r,c) v(r+ky-k/2, c+kx-k/2);   dv(r,c) += sum_t w[t] dout(r-ky+k/2, c-kx+k/2)
static inline void dwconv_bwd_block(float *restrict dv, float *restrict dwl, float *restrict dbl,
                                    const float *restrict g0, const float *restrict v0, const float *restrict wt,
                                    int k, int gh, int gw, size_t ld, int H, int cb) {
    const int pad = k / 2;
    float acc[DW_CB];
    for (int r = 0; r < gh; r++) {
        const int ky0 = pad - r > 0 ? pad - r : 0, ky1 = gh - 1 - r + pad < k - 1 ? gh - 1 - r + pad : k - 1;
        for (int col = 0; col < gw; col++) {
            const int kx0 = pad - col > 0 ? pad - col : 0, kx1 = gw - 1 - col + pad < k - 1 ? gw - 1 - col + pad : k - 1;
            const float *g = g0 + (size_t)(r * gw + col) * H;
            #pragma omp simd
            for (int c = 0; c < cb; c++) dbl[c] += g[c];
            // The taps valid for reading around (r, col) are exactly those valid for the mirrored
            // gather (r - ky + pad, col - kx + pad) with (ky, kx) -> (k-1-ky, k-1-kx); both use the
            // same neighbour set, so one loop over neighbours serves dw and dv.
            for (int c = 0; c < cb; c++) acc[c] = 0.0f;
            for (int ky = ky0; ky <= ky1; ky++) {
                const int nrow = (r + ky - pad) * gw + col - pad;
                for (int kx = kx0; kx <= kx1; kx++) {
                    const size_t nb = (size_t)(nrow + kx);  // neighbour token (r + ky - pad, col + kx - pad)
                    const float *src = v0 + nb * ld, *gn = g0 + nb * H;
                    float *dwr = dwl + (ky * k + kx) * DW_CB;
                    const float *wr = wt + ((k - 1 - ky) * k + (k - 1 - kx)) * DW_CB;
                    #pragma omp simd
                    for (int c = 0; c < cb; c++) {
                        dwr[c] += g[c] * src[c];
                        acc[c] += wr[c] * gn[c];
                    }
                }
            }
            if (dv) {
                float *o = dv + (size_t)(r * gw + col) * ld;
                #pragma omp simd
                for (int c = 0; c < cb; c++) o[c] += acc[c];
            }
        }
    }
}

// Backward: one task per 32-channel block, looping over the batch inside, so each task owns its
// channels' dw and db outright (no atomics: the sums come out in the same order on every run,
// which bit-exact resume needs); dx is gathered per output token.
void cpu_dwconv_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, int ldx, const float *w,
                    int k, int B, int gh, int gw, int C) {
    check_dwconv(k, ldx, B, gh, gw, C, "dwconv_bwd");
    const int L = gh * gw, H = C, kk = k * k;
    const int nblk = (H + DW_CB - 1) / DW_CB;
    const size_t ld = (size_t)ldx;
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * L * H * kk) == 0)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * DW_CB, cb = H - c0 < DW_CB ? H - c0 : DW_CB;
        float wt[kk * DW_CB], dwl[kk * DW_CB], dbl[DW_CB];
        dwconv_transpose_w(wt, w, c0, cb, kk);
        memset(dwl, 0, sizeof dwl);
        memset(dbl, 0, sizeof dbl);
        for (int b = 0; b < B; b++) {
            const float *v0 = x + (size_t)b * L * ld + c0;
            const float *g0 = dout + (size_t)b * L * H + c0;
            float *dv = dx ? dx + (size_t)b * L * ld + c0 : NULL;
            if (cb == DW_CB) dwconv_bwd_block(dv, dwl, dbl, g0, v0, wt, k, gh, gw, ld, H, DW_CB);
            else dwconv_bwd_block(dv, dwl, dbl, g0, v0, wt, k, gh, gw, ld, H, cb);
        }
        if (dw)
            for (int c = 0; c < cb; c++)
                for (int t = 0; t < kk; t++) dw[(size_t)(c0 + c) * kk + t] += dwl[t * DW_CB + c];
        if (db)
            for (int c = 0; c < cb; c++) db[c0 + c] += dbl[c];
    }
}

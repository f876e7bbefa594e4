// CPU ops on NCHW maps besides the conv: GroupNorm, LayerNorm over channels, pixel (un)shuffle,
// nearest x2 upsampling, channel block copies, per-channel modulation and gated residual, and the
// map <-> token-row transposes. Contracts are in backend.h. Sums over pixels run in double, each
// in one task in a fixed order (vectorised: `omp simd` reductions, the same lanes on every run),
// so results do not depend on the thread count.
// defines: cpu_groupnorm_*, cpu_layernorm2d_*, cpu_pixel_shuffle_*, cpu_pixel_unshuffle_*,
//          cpu_upsample2x_*, cpu_channel_copy_*, cpu_modulate2d_*, cpu_gate_residual2d_*,
//          cpu_nchw_to_tokens_*, cpu_tokens_to_nchw_*
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "cpu/ops_cpu.h"

#define PAR_MIN ((size_t)1 << 15)  // below this many floats a loop runs on one thread

// ---------------------------------------------------------------------------------------------
// GroupNorm: group (b, g) is the contiguous block x[b, g*Cg .. (g+1)*Cg - 1, :] of n = Cg*HW values.

void cpu_groupnorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                       int B, int C, int HW, int G, float eps) {
    CHECK(G > 0 && C % G == 0 && B >= 0 && HW > 0, "groupnorm_fwd: C=%d not divisible by G=%d (or bad shape)", C, G);
    const int Cg = C / G;
    const size_t n = (size_t)Cg * HW;
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int bg = 0; bg < B * G; bg++) {
        const float *xg = x + (size_t)bg * n;
        float *og = out + (size_t)bg * n;
        double s = 0.0;
        #pragma omp simd reduction(+:s)
        for (size_t i = 0; i < n; i++) s += xg[i];
        const double m = s / (double)n;
        double v = 0.0;
        #pragma omp simd reduction(+:v)
        for (size_t i = 0; i < n; i++) { const double d = xg[i] - m; v += d * d; }
        const float mf = (float)m, r = (float)(1.0 / sqrt(v / (double)n + eps));
        for (int cc = 0; cc < Cg; cc++) {
            const int c = (bg % G) * Cg + cc;
            const float wc = w ? w[c] : 1.0f, bc = bias ? bias[c] : 0.0f;
            const float *xr = xg + (size_t)cc * HW;
            float *o = og + (size_t)cc * HW;
            #pragma omp simd
            for (int p = 0; p < HW; p++) o[p] = (xr[p] - mf) * r * wc + bc;
        }
        mean[bg] = mf;
        rstd[bg] = r;
    }
}

// dw[c] += sum_{b,p} dout xh, db[c] += sum_{b,p} dout, one task per channel; stat(b, p) is the
// index of the mean/rstd that normalised x[b, c, p] (its group, or its pixel for LayerNorm2d).
static void norm_affine_grads(float *dw, float *db, const float *dout, const float *x, const float *mean,
                              const float *rstd, int B, int C, int HW, int G) {
    if (!dw && !db) return;
    const int Cg = G ? C / G : 0;
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int c = 0; c < C; c++) {
        double sw = 0.0, sb = 0.0;
        for (int b = 0; b < B; b++) {
            const float *xo = x + ((size_t)b * C + c) * HW, *go = dout + ((size_t)b * C + c) * HW;
            if (G) {  // one group statistic for the whole plane
                const float m = mean[(size_t)b * G + c / Cg], r = rstd[(size_t)b * G + c / Cg];
                #pragma omp simd reduction(+:sw, sb)
                for (int p = 0; p < HW; p++) {
                    sw += (double)go[p] * ((xo[p] - m) * r);
                    sb += go[p];
                }
            } else {  // one statistic per pixel
                const float *m = mean + (size_t)b * HW, *r = rstd + (size_t)b * HW;
                #pragma omp simd reduction(+:sw, sb)
                for (int p = 0; p < HW; p++) {
                    sw += (double)go[p] * ((xo[p] - m[p]) * r[p]);
                    sb += go[p];
                }
            }
        }
        if (dw) dw[c] += (float)sw;
        if (db) db[c] += (float)sb;
    }
}

void cpu_groupnorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                       const float *rstd, const float *w, int B, int C, int HW, int G) {
    CHECK(G > 0 && C % G == 0 && B >= 0 && HW > 0, "groupnorm_bwd: C=%d not divisible by G=%d (or bad shape)", C, G);
    const int Cg = C / G;
    const size_t n = (size_t)Cg * HW;
    if (dx) {
        #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
        for (int bg = 0; bg < B * G; bg++) {
            const size_t o = (size_t)bg * n;
            const float m = mean[bg], r = rstd[bg];
            double su = 0.0, suxh = 0.0;
            for (int cc = 0; cc < Cg; cc++) {
                const float wc = w ? w[(bg % G) * Cg + cc] : 1.0f;
                #pragma omp simd reduction(+:su, suxh)
                for (int p = 0; p < HW; p++) {
                    const size_t i = o + (size_t)cc * HW + p;
                    const float u = dout[i] * wc;
                    su += u;
                    suxh += (double)u * ((x[i] - m) * r);
                }
            }
            const float mu = (float)(su / (double)n), muxh = (float)(suxh / (double)n);
            for (int cc = 0; cc < Cg; cc++) {
                const float wc = w ? w[(bg % G) * Cg + cc] : 1.0f;
                #pragma omp simd
                for (int p = 0; p < HW; p++) {
                    const size_t i = o + (size_t)cc * HW + p;
                    dx[i] += r * (dout[i] * wc - mu - (x[i] - m) * r * muxh);
                }
            }
        }
    }
    norm_affine_grads(dw, db, dout, x, mean, rstd, B, C, HW, G);
}

// ---------------------------------------------------------------------------------------------
// LayerNorm over channels: pixels in blocks of LN_PIX, the channel loop outside, so the strided
// per-pixel sums become contiguous vector adds. Per pixel the sum runs over c in order (as on CUDA).
#define LN_PIX 64

void cpu_layernorm2d_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                         int B, int C, int HW, float eps) {
    CHECK(B >= 0 && C > 0 && HW > 0, "layernorm2d_fwd: bad shape B%d C%d HW%d", B, C, HW);
    const int nblk = (HW + LN_PIX - 1) / LN_PIX;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int blk = 0; blk < nblk; blk++) {
            const int p0 = blk * LN_PIX, np = HW - p0 < LN_PIX ? HW - p0 : LN_PIX;
            const float *xb = x + (size_t)b * C * HW + p0;
            float *ob = out + (size_t)b * C * HW + p0;
            float m[LN_PIX] = {0}, v[LN_PIX] = {0};
            for (int c = 0; c < C; c++)
                for (int j = 0; j < np; j++) m[j] += xb[(size_t)c * HW + j];
            for (int j = 0; j < np; j++) m[j] /= (float)C;
            for (int c = 0; c < C; c++)
                for (int j = 0; j < np; j++) { const float d = xb[(size_t)c * HW + j] - m[j]; v[j] += d * d; }
            for (int j = 0; j < np; j++) v[j] = 1.0f / sqrtf(v[j] / (float)C + eps);
            for (int c = 0; c < C; c++) {
                const float wc = w ? w[c] : 1.0f, bc = bias ? bias[c] : 0.0f;
                for (int j = 0; j < np; j++) ob[(size_t)c * HW + j] = (xb[(size_t)c * HW + j] - m[j]) * v[j] * wc + bc;
            }
            memcpy(mean + (size_t)b * HW + p0, m, sizeof(float) * np);
            memcpy(rstd + (size_t)b * HW + p0, v, sizeof(float) * np);
        }
}

void cpu_layernorm2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                         const float *rstd, const float *w, int B, int C, int HW) {
    CHECK(B >= 0 && C > 0 && HW > 0, "layernorm2d_bwd: bad shape B%d C%d HW%d", B, C, HW);
    if (dx) {
        const int nblk = (HW + LN_PIX - 1) / LN_PIX;
        #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
        for (int b = 0; b < B; b++)
            for (int blk = 0; blk < nblk; blk++) {
                const int p0 = blk * LN_PIX, np = HW - p0 < LN_PIX ? HW - p0 : LN_PIX;
                const size_t o = (size_t)b * C * HW + p0;
                const float *m = mean + (size_t)b * HW + p0, *r = rstd + (size_t)b * HW + p0;
                float su[LN_PIX] = {0}, suxh[LN_PIX] = {0};
                for (int c = 0; c < C; c++) {
                    const float wc = w ? w[c] : 1.0f;
                    for (int j = 0; j < np; j++) {
                        const size_t i = o + (size_t)c * HW + j;
                        const float u = dout[i] * wc;
                        su[j] += u;
                        suxh[j] += u * ((x[i] - m[j]) * r[j]);
                    }
                }
                for (int j = 0; j < np; j++) { su[j] /= (float)C; suxh[j] /= (float)C; }
                for (int c = 0; c < C; c++) {
                    const float wc = w ? w[c] : 1.0f;
                    for (int j = 0; j < np; j++) {
                        const size_t i = o + (size_t)c * HW + j;
                        dx[i] += r[j] * (dout[i] * wc - su[j] - (x[i] - m[j]) * r[j] * suxh[j]);
                    }
                }
            }
    }
    norm_affine_grads(dw, db, dout, x, mean, rstd, B, C, HW, 0);
}

// ---------------------------------------------------------------------------------------------
// Pixel shuffle: hi[b, c, h*r + i, w*r + j] <-> lo[b, (c*r + i)*r + j, h, w]. One loop over hi
// (rows of lo per hi row), in either direction; `add` accumulates into the destination.

static void shuffle_map(float *hi, const float *lo_src, float *lo, const float *hi_src, int B, int C, int H, int W,
                        int r, int add) {
    const int Hh = H * r, Wh = W * r;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * Hh * Wh >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++)
        for (int y = 0; y < Hh; y++) {
            const int b = bc / C, c = bc % C, h = y / r, i = y % r;
            const size_t hrow = ((size_t)bc * Hh + y) * Wh;
            for (int xx = 0; xx < Wh; xx++) {
                const size_t l = ((((size_t)b * C + c) * r + i) * r + xx % r) * H * W + (size_t)h * W + xx / r;
                if (hi) hi[hrow + xx] = add ? hi[hrow + xx] + lo_src[l] : lo_src[l];
                else lo[l] = add ? lo[l] + hi_src[hrow + xx] : hi_src[hrow + xx];
            }
        }
}

static void check_shuffle(int B, int C, int H, int W, int r, const char *op) {
    CHECK(B >= 0 && C > 0 && H > 0 && W > 0 && r > 0, "%s: bad shape B%d C%d %dx%d r%d", op, B, C, H, W, r);
}

void cpu_pixel_shuffle_fwd(float *hi, const float *lo, int B, int C, int H, int W, int r) {
    check_shuffle(B, C, H, W, r, "pixel_shuffle_fwd");
    shuffle_map(hi, lo, NULL, NULL, B, C, H, W, r, 0);
}
void cpu_pixel_shuffle_bwd(float *dlo, const float *dhi, int B, int C, int H, int W, int r) {
    check_shuffle(B, C, H, W, r, "pixel_shuffle_bwd");
    shuffle_map(NULL, NULL, dlo, dhi, B, C, H, W, r, 1);
}
void cpu_pixel_unshuffle_fwd(float *lo, const float *hi, int B, int C, int H, int W, int r) {
    check_shuffle(B, C, H, W, r, "pixel_unshuffle_fwd");
    shuffle_map(NULL, NULL, lo, hi, B, C, H, W, r, 0);
}
void cpu_pixel_unshuffle_bwd(float *dhi, const float *dlo, int B, int C, int H, int W, int r) {
    check_shuffle(B, C, H, W, r, "pixel_unshuffle_bwd");
    shuffle_map(dhi, dlo, NULL, NULL, B, C, H, W, r, 1);
}

// ---------------------------------------------------------------------------------------------
// Nearest x2 upsampling

void cpu_upsample2x_fwd(float *out, const float *x, int B, int C, int H, int W) {
    const int W2 = 2 * W;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * H * W * 4 >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++)
        for (int h = 0; h < H; h++) {
            const float *xr = x + ((size_t)bc * H + h) * W;
            float *o = out + ((size_t)bc * 2 * H + 2 * h) * W2;
            for (int w = 0; w < W; w++) o[2 * w] = o[2 * w + 1] = xr[w];
            memcpy(o + W2, o, sizeof(float) * W2);
        }
}

// dx[h, w] += dout[2h, 2w] + dout[2h, 2w+1] + dout[2h+1, 2w] + dout[2h+1, 2w+1], in that order
void cpu_upsample2x_bwd(float *dx, const float *dout, int B, int C, int H, int W) {
    const int W2 = 2 * W;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * H * W * 4 >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++)
        for (int h = 0; h < H; h++) {
            float *d = dx + ((size_t)bc * H + h) * W;
            const float *g0 = dout + ((size_t)bc * 2 * H + 2 * h) * W2, *g1 = g0 + W2;
            for (int w = 0; w < W; w++) d[w] += ((g0[2 * w] + g0[2 * w + 1]) + g1[2 * w]) + g1[2 * w + 1];
        }
}

// ---------------------------------------------------------------------------------------------
// Channel block copy

static void check_copy(int dC, int d0, int sC, int s0, int C, const char *op) {
    CHECK(C >= 0 && d0 >= 0 && s0 >= 0 && d0 + C <= dC && s0 + C <= sC,
          "%s: channels %d+%d of %d from %d+%d of %d out of range", op, d0, C, dC, s0, C, sC);
}

void cpu_channel_copy_fwd(float *dst, int dC, int d0, const float *src, int sC, int s0, int C, int B, int HW) {
    check_copy(dC, d0, sC, s0, C, "channel_copy_fwd");
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++) {
        const int b = bc / C, c = bc % C;
        memcpy(dst + ((size_t)b * dC + d0 + c) * HW, src + ((size_t)b * sC + s0 + c) * HW, sizeof(float) * HW);
    }
}

void cpu_channel_copy_bwd(float *dsrc, int sC, int s0, const float *ddst, int dC, int d0, int C, int B, int HW) {
    check_copy(dC, d0, sC, s0, C, "channel_copy_bwd");
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++) {
        const int b = bc / C, c = bc % C;
        float *d = dsrc + ((size_t)b * sC + s0 + c) * HW;
        const float *g = ddst + ((size_t)b * dC + d0 + c) * HW;
        for (int p = 0; p < HW; p++) d[p] += g[p];
    }
}

// ---------------------------------------------------------------------------------------------
// Per-channel modulation and gated residual: one task per (b, c) plane

void cpu_modulate2d_fwd(float *out, const float *x, const float *shift, const float *scale, int B, int C, int HW,
                        int ms) {
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++) {
        const size_t j = (size_t)(bc / C) * ms + bc % C;
        const float s1 = 1.0f + scale[j], sh = shift[j];
        const float *xr = x + (size_t)bc * HW;
        float *o = out + (size_t)bc * HW;
        for (int p = 0; p < HW; p++) o[p] = xr[p] * s1 + sh;
    }
}

void cpu_modulate2d_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                        const float *scale, int B, int C, int HW, int ms) {
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++) {
        const size_t j = (size_t)(bc / C) * ms + bc % C;
        const float s1 = 1.0f + scale[j];
        const float *g = dout + (size_t)bc * HW, *xr = x + (size_t)bc * HW;
        double ssh = 0.0, ssc = 0.0;
        for (int p = 0; p < HW; p++) {
            ssh += g[p];
            ssc += (double)g[p] * xr[p];
        }
        if (dx) {
            float *d = dx + (size_t)bc * HW;
            for (int p = 0; p < HW; p++) d[p] += g[p] * s1;
        }
        if (dshift) dshift[j] += (float)ssh;
        if (dscale) dscale[j] += (float)ssc;
    }
}

void cpu_gate_residual2d_fwd(float *x, const float *y, const float *gate, int B, int C, int HW, int ms) {
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++) {
        const float g = gate[(size_t)(bc / C) * ms + bc % C];
        float *xr = x + (size_t)bc * HW;
        const float *yr = y + (size_t)bc * HW;
        for (int p = 0; p < HW; p++) xr[p] += g * yr[p];
    }
}

void cpu_gate_residual2d_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate, int B,
                             int C, int HW, int ms) {
    #pragma omp parallel for schedule(static) if ((size_t)B * C * HW >= PAR_MIN)
    for (int bc = 0; bc < B * C; bc++) {
        const size_t j = (size_t)(bc / C) * ms + bc % C;
        const float *g = dx + (size_t)bc * HW, *yr = y + (size_t)bc * HW;
        if (dy) {
            float *d = dy + (size_t)bc * HW;
            for (int p = 0; p < HW; p++) d[p] += gate[j] * g[p];
        }
        if (dgate) {
            double s = 0.0;
            for (int p = 0; p < HW; p++) s += (double)g[p] * yr[p];
            dgate[j] += (float)s;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Transposes: per image, src [R, Q] -> dst [Q, R] (dst[q*R + r] = or += src[r*Q + q]), in
// TR x TR tiles so both sides are read and written along cache lines.
#define TR 32

static void transpose_batched(float *dst, const float *src, int B, int R, int Q, int add) {
    const int tr = (R + TR - 1) / TR, tq = (Q + TR - 1) / TR;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * R * Q >= PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < tr * tq; t++) {
            const int r0 = t / tq * TR, q0 = t % tq * TR;
            const int r1 = r0 + TR < R ? r0 + TR : R, q1 = q0 + TR < Q ? q0 + TR : Q;
            const float *s = src + (size_t)b * R * Q;
            float *d = dst + (size_t)b * R * Q;
            for (int q = q0; q < q1; q++)
                for (int r = r0; r < r1; r++) {
                    const float v = s[(size_t)r * Q + q];
                    d[(size_t)q * R + r] = add ? d[(size_t)q * R + r] + v : v;
                }
        }
}

void cpu_nchw_to_tokens_fwd(float *tokens, const float *x, int B, int C, int HW) {
    transpose_batched(tokens, x, B, C, HW, 0);
}
void cpu_nchw_to_tokens_bwd(float *dx, const float *dtokens, int B, int C, int HW) {
    transpose_batched(dx, dtokens, B, HW, C, 1);
}
void cpu_tokens_to_nchw_fwd(float *x, const float *tokens, int B, int C, int HW) {
    transpose_batched(x, tokens, B, HW, C, 0);
}
void cpu_tokens_to_nchw_bwd(float *dtokens, const float *dx, int B, int C, int HW) {
    transpose_batched(dtokens, dx, B, C, HW, 1);
}

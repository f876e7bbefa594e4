// CPU ReLU, pooling and bilinear resize on NCHW maps (contracts in backend.h, index math in
// pool_math.h). One task per (image, channel) plane; every output is computed on its own, in a
// fixed order, so results do not depend on the thread count.
// defines: cpu_relu_fwd, cpu_relu_bwd, cpu_maxpool2d_fwd, cpu_avgpool2d_fwd, cpu_mean_hw_fwd,
//          cpu_resize_bilinear_fwd
#include <float.h>
#include <stdlib.h>

#include "core/common.h"
#include "cpu/ops_cpu.h"
#include "core/pool_math.h"

#define PAR_MIN ((size_t)1 << 15)  // below this many outputs a loop stays on one thread

void cpu_relu_fwd(float *out, const float *x, size_t n) {
    #pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void cpu_relu_bwd(float *dx, const float *dout, const float *out, size_t n) {
    #pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) dx[i] += out[i] > 0.0f ? dout[i] : 0.0f;
}

static void check_pool(const char *op, int B, int C, int H, int W, int k, int s, int p) {
    CHECK(B >= 0 && C > 0 && H > 0 && W > 0 && k > 0 && s > 0 && p >= 0 && 2 * p <= k && H + 2 * p >= k &&
              W + 2 * p >= k,
          "%s: bad shape B%d C%d %dx%d k%d stride %d pad %d", op, B, C, H, W, k, s, p);
}

// One window row of 3 cells folded into outputs [a, b) (inlined, so a constant s specialises it).
static inline __attribute__((always_inline)) void row3(float *o, const float *r, int a, int b, int s, int is_max,
                                                       int first) {
    if (is_max) {
        #pragma omp simd
        for (int ox = a; ox < b; ox++) {
            const float *q = r + ox * s;
            float t = q[0] > q[1] ? q[0] : q[1];
            t = q[2] > t ? q[2] : t;
            o[ox] = first || t > o[ox] ? t : o[ox];
        }
    } else {
        #pragma omp simd
        for (int ox = a; ox < b; ox++) {
            const float *q = r + ox * s;
            const float t = (q[0] + q[1]) + q[2];
            o[ox] = first ? t : o[ox] + t;
        }
    }
}

// One output row oy of a plane. Outputs whose window lies inside the row span, [a, b), take a
// loop over ox innermost (it vectorises); the few at the borders take their clipped windows.
// An average sums each window row, then adds the row sums in order (the CUDA kernel alike).
static void pool_row(float *o, const float *xp, int H, int W, int Wo, int oy, int k, int s, int p, int is_max) {
    int y0, y1;
    pool_window(oy, H, k, s, p, &y0, &y1);
    int a = (p + s - 1) / s, b = W + p - k < 0 ? 0 : (W + p - k) / s + 1;  // ox*s - p >= 0, ox*s - p + k <= W
    if (b > Wo) b = Wo;
    if (a > b) a = b;
    for (int ox = 0; ox < Wo; ox++) {
        if (ox == a) ox = b;
        if (ox >= Wo) break;
        int x0, x1;
        pool_window(ox, W, k, s, p, &x0, &x1);
        float m = -FLT_MAX, sum = 0.0f;
        for (int iy = y0; iy < y1; iy++) {
            float rs = 0.0f;
            for (int ix = x0; ix < x1; ix++) {
                const float v = xp[(size_t)iy * W + ix];
                m = v > m ? v : m;
                rs += v;
            }
            sum = iy == y0 ? rs : sum + rs;
        }
        o[ox] = is_max ? m : sum / (float)((y1 - y0) * (x1 - x0));
    }
    if (a >= b) return;
    // Per window row: the k cells reduced in registers, then folded into the output (rows in
    // order, columns in order within a row, as the border path adds them up to rounding).
    for (int iy = y0; iy < y1; iy++) {
        const float *r = xp + (size_t)iy * W - p;
        const int first = iy == y0;
        if (k == 3 && s == 1) row3(o, r, a, b, 1, is_max, first);  // a constant stride: plain vector loads
        else if (k == 3) row3(o, r, a, b, s, is_max, first);
        else {
            for (int ox = a; ox < b; ox++) {
                const float *q = r + ox * s;
                float t = q[0];
                for (int kx = 1; kx < k; kx++) t = is_max ? (q[kx] > t ? q[kx] : t) : t + q[kx];
                o[ox] = first ? t : is_max ? (t > o[ox] ? t : o[ox]) : o[ox] + t;
            }
        }
    }
    if (!is_max) {
        const float cnt = (float)((y1 - y0) * k);
        for (int ox = a; ox < b; ox++) o[ox] /= cnt;
    }
}

static void pool(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p, int is_max) {
    const int Ho = pool_out(H, k, s, p), Wo = pool_out(W, k, s, p);
    const size_t planes = (size_t)B * C;
    #pragma omp parallel for schedule(static) if (planes * Ho * Wo >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++)
        for (int oy = 0; oy < Ho; oy++)
            pool_row(out + (pl * Ho + oy) * Wo, x + pl * H * W, H, W, Wo, oy, k, s, p, is_max);
}

void cpu_maxpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p) {
    check_pool("maxpool2d_fwd", B, C, H, W, k, s, p);
    pool(out, x, B, C, H, W, k, s, p, 1);
}

void cpu_avgpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p) {
    check_pool("avgpool2d_fwd", B, C, H, W, k, s, p);
    pool(out, x, B, C, H, W, k, s, p, 0);
}

void cpu_mean_hw_fwd(float *out, const float *x, int B, int C, int HW) {
    CHECK(B >= 0 && C > 0 && HW > 0, "mean_hw_fwd: bad shape B%d C%d HW%d", B, C, HW);
    const size_t planes = (size_t)B * C;
    #pragma omp parallel for schedule(static) if (planes * HW >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * HW;
        double t = 0.0;
        for (int i = 0; i < HW; i++) t += xp[i];
        out[pl] = (float)(t / HW);
    }
}

void cpu_resize_bilinear_fwd(float *out, const float *x, int B, int C, int H, int W, int Ho, int Wo) {
    CHECK(B >= 0 && C > 0 && H > 0 && W > 0 && Ho > 0 && Wo > 0, "resize_bilinear_fwd: bad shape B%d C%d %dx%d -> %dx%d",
          B, C, H, W, Ho, Wo);
    LinTap *ty = xmalloc((size_t)Ho * sizeof *ty), *tx = xmalloc((size_t)Wo * sizeof *tx);
    for (int o = 0; o < Ho; o++) ty[o] = linear_tap(o, H, Ho);
    for (int o = 0; o < Wo; o++) tx[o] = linear_tap(o, W, Wo);
    const size_t planes = (size_t)B * C;
    #pragma omp parallel for collapse(2) schedule(static) if (planes * Ho * Wo >= PAR_MIN)
    for (size_t pl = 0; pl < planes; pl++)
        for (int oy = 0; oy < Ho; oy++) {
            const LinTap a = ty[oy];
            const float *r0 = x + (pl * H + a.i0) * W, *r1 = x + (pl * H + a.i1) * W;
            float *o = out + (pl * Ho + oy) * Wo;
            for (int ox = 0; ox < Wo; ox++) {
                const LinTap b = tx[ox];
                const float t0 = r0[b.i0] * b.l0 + r0[b.i1] * b.l1, t1 = r1[b.i0] * b.l0 + r1[b.i1] * b.l1;
                o[ox] = t0 * a.l0 + t1 * a.l1;
            }
        }
    free(ty);
    free(tx);
}

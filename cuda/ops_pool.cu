// ReLU, pooling and bilinear resize on NCHW maps (contracts in backend.h; the window and tap
// math is pool_math.h, shared with the CPU). One thread per output element, each summing its
// window in the CPU's order (each row's cells, then the row sums); mean_hw sums a plane in double.
// defines: cuda_relu_fwd, cuda_relu_bwd, cuda_maxpool2d_fwd, cuda_avgpool2d_fwd, cuda_mean_hw_fwd,
//          cuda_resize_bilinear_fwd
#include <cfloat>

#include "cuda/cuda_common.cuh"
#include "core/pool_math.h"

__global__ void k_relu_fwd(float *out, const float *x, size_t n) {
    GRID_STRIDE(i, n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
__global__ void k_relu_bwd(float *dx, const float *dout, const float *out, size_t n) {
    GRID_STRIDE(i, n) dx[i] += out[i] > 0.0f ? dout[i] : 0.0f;
}

void cuda_relu_fwd(float *out, const float *x, size_t n) {
    if (!n) return;
    k_relu_fwd<<<grid1d(n), CU_BLOCK>>>(out, x, n);
    KERNEL_CHECK();
}
void cuda_relu_bwd(float *dx, const float *dout, const float *out, size_t n) {
    if (!n) return;
    k_relu_bwd<<<grid1d(n), CU_BLOCK>>>(dx, dout, out, n);
    KERNEL_CHECK();
}

__global__ void k_pool(float *out, const float *x, int H, int W, int Ho, int Wo, int k, int s, int p, int is_max,
                       size_t total) {
    GRID_STRIDE(t, total) {
        const int ox = (int)(t % (size_t)Wo);
        const size_t u = t / (size_t)Wo;
        const int oy = (int)(u % (size_t)Ho);
        const float *xp = x + (u / (size_t)Ho) * H * W;
        int y0, y1, x0, x1;
        pool_window(oy, H, k, s, p, &y0, &y1);
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
        out[t] = is_max ? m : sum / (float)((y1 - y0) * (x1 - x0));
    }
}

static void pool(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p, int is_max,
                 const char *op) {
    CU_REQUIRE(B >= 0 && C > 0 && H > 0 && W > 0 && k > 0 && s > 0 && p >= 0 && 2 * p <= k && H + 2 * p >= k &&
                   W + 2 * p >= k,
               "%s: bad shape B%d C%d %dx%d k%d stride %d pad %d", op, B, C, H, W, k, s, p);
    const int Ho = pool_out(H, k, s, p), Wo = pool_out(W, k, s, p);
    const size_t total = (size_t)B * C * Ho * Wo;
    if (!total) return;
    k_pool<<<grid1d(total), CU_BLOCK>>>(out, x, H, W, Ho, Wo, k, s, p, is_max, total);
    KERNEL_CHECK();
}

void cuda_maxpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p) {
    pool(out, x, B, C, H, W, k, s, p, 1, "maxpool2d_fwd");
}
void cuda_avgpool2d_fwd(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p) {
    pool(out, x, B, C, H, W, k, s, p, 0, "avgpool2d_fwd");
}

__global__ void k_mean_hw(float *out, const float *x, int HW, size_t planes) {
    GRID_STRIDE(pl, planes) {
        const float *xp = x + pl * HW;
        double t = 0.0;
        for (int i = 0; i < HW; i++) t += xp[i];
        out[pl] = (float)(t / HW);
    }
}

void cuda_mean_hw_fwd(float *out, const float *x, int B, int C, int HW) {
    CU_REQUIRE(B >= 0 && C > 0 && HW > 0, "mean_hw_fwd: bad shape B%d C%d HW%d", B, C, HW);
    const size_t planes = (size_t)B * C;
    if (!planes) return;
    k_mean_hw<<<grid1d(planes), CU_BLOCK>>>(out, x, HW, planes);
    KERNEL_CHECK();
}

__global__ void k_resize_bilinear(float *out, const float *x, int H, int W, int Ho, int Wo, size_t total) {
    GRID_STRIDE(t, total) {
        const int ox = (int)(t % (size_t)Wo);
        const size_t u = t / (size_t)Wo;
        const int oy = (int)(u % (size_t)Ho);
        const size_t pl = u / (size_t)Ho;
        const LinTap a = linear_tap(oy, H, Ho), b = linear_tap(ox, W, Wo);
        const float *r0 = x + (pl * H + a.i0) * W, *r1 = x + (pl * H + a.i1) * W;
        const float t0 = r0[b.i0] * b.l0 + r0[b.i1] * b.l1, t1 = r1[b.i0] * b.l0 + r1[b.i1] * b.l1;
        out[t] = t0 * a.l0 + t1 * a.l1;
    }
}

void cuda_resize_bilinear_fwd(float *out, const float *x, int B, int C, int H, int W, int Ho, int Wo) {
    CU_REQUIRE(B >= 0 && C > 0 && H > 0 && W > 0 && Ho > 0 && Wo > 0,
               "resize_bilinear_fwd: bad shape B%d C%d %dx%d -> %dx%d", B, C, H, W, Ho, Wo);
    const size_t total = (size_t)B * C * Ho * Wo;
    if (!total) return;
    k_resize_bilinear<<<grid1d(total), CU_BLOCK>>>(out, x, H, W, Ho, Wo, total);
    KERNEL_CHECK();
}

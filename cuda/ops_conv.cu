// conv2d on NCHW maps: im2col into the caller's scratch one chunk at a time (conv_plan.h: whole
// images, or row blocks of one image), cuBLAS for the products (a chunk's images in one strided
// batched GEMM), col2im for the backward's dx. Every sum is fixed-order: col2im gathers each dx
// element's taps in order, dw accumulates image after image in cuBLAS, db is a block tree.
// defines: cuda_conv2d_workspace_floats, cuda_conv2d_fwd, cuda_conv2d_bwd
#include "cuda/cuda_common.cuh"

#include "core/conv_plan.h"

// 2^23 floats (32 MiB) of columns per chunk: GEMMs wide enough to fill the GPU.
#define CUDA_CONV_TARGET ((size_t)1 << 23)

size_t cuda_conv2d_workspace_floats(ConvShape s) {
    CU_REQUIRE(conv_shape_ok(s), "conv2d_workspace_floats: bad shape");
    return conv_workspace_floats(s, CUDA_CONV_TARGET);
}

static ConvPlan plan_or_die(ConvShape s, size_t work_floats, const float *work, const char *op) {
    CU_REQUIRE(conv_shape_ok(s), "%s: bad shape B%d Cin%d %dx%d Cout%d k%dx%d stride %d pad %d,%d,%d,%d", op, s.B,
               s.Cin, s.H, s.W, s.Cout, s.kh, s.kw, s.stride, s.pt, s.pb, s.pl, s.pr);
    ConvPlan p;
    CU_REQUIRE(conv_plan(s, work_floats, &p), "%s: %zu floats of workspace, below one output row's %zu", op,
               work_floats, conv_min_work(s));
    CU_REQUIRE(p.direct || work, "%s: no workspace", op);
    return p;
}

// The column matrices of images b0 .. b0+nimg-1, output rows r0 .. r0+nr-1 (conv_plan.h), one
// thread per entry: col[(i*K + k)*n + j], n = nr*Wo.
__global__ void k_im2col(float *col, const float *x, ConvShape s, int Wo, int K, int b0, int r0, int nr,
                         size_t total) {
    const size_t n = (size_t)nr * Wo;
    GRID_STRIDE(t, total) {
        const size_t j = t % n, ik = t / n;
        const int k = (int)(ik % (size_t)K), i = (int)(ik / (size_t)K);
        const int ci = k / (s.kh * s.kw), ky = k / s.kw % s.kh, kx = k % s.kw;
        const int oy = r0 + (int)(j / (size_t)Wo), ox = (int)(j % (size_t)Wo);
        const int iy = oy * s.stride - s.pt + ky, ix = ox * s.stride - s.pl + kx;
        col[t] = iy >= 0 && iy < s.H && ix >= 0 && ix < s.W
                     ? x[(((size_t)(b0 + i) * s.Cin + ci) * s.H + iy) * s.W + ix]
                     : 0.0f;
    }
}

// dx[b0+i, ci, iy, ix] += the column entries that read it, gathered over (ky, kx) in order; one
// thread per input element of rows iy0 .. iy0+niy-1 (those the chunk's output rows read).
__global__ void k_col2im(float *dx, const float *col, ConvShape s, int Wo, int K, int b0, int r0, int nr, int iy0,
                         int niy, size_t total) {
    const size_t n = (size_t)nr * Wo;
    GRID_STRIDE(t, total) {
        const int ix = (int)(t % (size_t)s.W);
        size_t u = t / (size_t)s.W;
        const int iy = iy0 + (int)(u % (size_t)niy);
        u /= (size_t)niy;
        const int ci = (int)(u % (size_t)s.Cin), i = (int)(u / (size_t)s.Cin);
        float acc = 0.0f;
        for (int ky = 0; ky < s.kh; ky++) {
            const int ny = iy + s.pt - ky;  // = oy * stride
            if (ny < 0 || ny % s.stride) continue;
            const int oy = ny / s.stride;
            if (oy < r0 || oy >= r0 + nr) continue;
            for (int kx = 0; kx < s.kw; kx++) {
                const int nx = ix + s.pl - kx;
                if (nx < 0 || nx % s.stride || nx / s.stride >= Wo) continue;
                acc += col[((size_t)i * K + ((size_t)ci * s.kh + ky) * s.kw + kx) * n + (size_t)(oy - r0) * Wo +
                           nx / s.stride];
            }
        }
        dx[(((size_t)(b0 + i) * s.Cin + ci) * s.H + iy) * s.W + ix] += acc;
    }
}

// out[i, co, j] = bias[co] for the chunk's columns j < n of each image (row stride HWo, image
// stride Cout*HWo), before the GEMM adds the product.
__global__ void k_bias_fill(float *out, const float *bias, int Cout, size_t HWo, size_t n, size_t total) {
    GRID_STRIDE(t, total) {
        const size_t j = t % n, ic = t / n;
        out[(ic / Cout) * Cout * HWo + (ic % Cout) * HWo + j] = bias[ic % Cout];
    }
}

// db[c] += sum over b, p of dout[b, c, p]: one block per channel, a fixed-order tree.
__global__ void k_channel_sum(float *db, const float *dout, int B, int C, size_t HW) {
    __shared__ float red[33];
    const int c = blockIdx.x;
    const size_t n = (size_t)B * HW;
    float acc = 0.0f;
    for (size_t q = threadIdx.x; q < n; q += blockDim.x) acc += dout[((q / HW) * C + c) * HW + q % HW];
    const float t = block_sum(acc, red);
    if (threadIdx.x == 0) db[c] += t;
}

void cuda_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s, float *work,
                     size_t work_floats) {
    const ConvPlan p = plan_or_die(s, work_floats, work, "conv2d_fwd");
    const size_t HWi = (size_t)s.H * s.W, HWo = (size_t)p.Ho * p.Wo;
    for (int b0 = 0; b0 < s.B; b0 += p.imgs) {
        const int nimg = s.B - b0 < p.imgs ? s.B - b0 : p.imgs;
        for (int r0 = 0; r0 < p.Ho; r0 += p.rows) {
            const int nr = p.Ho - r0 < p.rows ? p.Ho - r0 : p.rows;
            const size_t n = (size_t)nr * p.Wo;
            const float *col = x + (size_t)b0 * s.Cin * HWi;
            long long ldb = (long long)HWi, sB = (long long)(s.Cin * HWi);
            if (!p.direct) {
                const size_t total = (size_t)nimg * p.K * n;
                k_im2col<<<grid1d(total), CU_BLOCK>>>(work, x, s, p.Wo, p.K, b0, r0, nr, total);
                KERNEL_CHECK();
                col = work;
                ldb = (long long)n;
                sB = (long long)(p.K * n);
            }
            float *o = out + (size_t)b0 * s.Cout * HWo + (size_t)r0 * p.Wo;
            if (bias) {
                const size_t total = (size_t)nimg * s.Cout * n;
                k_bias_fill<<<grid1d(total), CU_BLOCK>>>(o, bias, s.Cout, HWo, n, total);
                KERNEL_CHECK();
            }
            gemm_rm(false, false, s.Cout, (int)n, p.K, 1.0f, w, p.K, 0, col, (int)ldb, sB, bias ? 1.0f : 0.0f, o,
                    (int)HWo, (long long)(s.Cout * HWo), nimg);
        }
    }
}

void cuda_conv2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                     ConvShape s, float *work, size_t work_floats) {
    const ConvPlan p = plan_or_die(s, work_floats, work, "conv2d_bwd");
    const size_t HWi = (size_t)s.H * s.W, HWo = (size_t)p.Ho * p.Wo;
    if (dx || dw)
        for (int b0 = 0; b0 < s.B; b0 += p.imgs) {
            const int nimg = s.B - b0 < p.imgs ? s.B - b0 : p.imgs;
            for (int r0 = 0; r0 < p.Ho; r0 += p.rows) {
                const int nr = p.Ho - r0 < p.rows ? p.Ho - r0 : p.rows;
                const size_t n = (size_t)nr * p.Wo;
                const float *g = dout + (size_t)b0 * s.Cout * HWo + (size_t)r0 * p.Wo;
                // dw[Cout, K] += dout_i[Cout, n] col_i^T, image after image
                if (dw) {
                    const float *col = x + (size_t)b0 * s.Cin * HWi;
                    size_t ldb = HWi, sB = s.Cin * HWi;
                    if (!p.direct) {
                        const size_t total = (size_t)nimg * p.K * n;
                        k_im2col<<<grid1d(total), CU_BLOCK>>>(work, x, s, p.Wo, p.K, b0, r0, nr, total);
                        KERNEL_CHECK();
                        col = work;
                        ldb = n;
                        sB = (size_t)p.K * n;
                    }
                    for (int i = 0; i < nimg; i++)
                        gemm_rm(false, true, s.Cout, p.K, (int)n, 1.0f, g + (size_t)i * s.Cout * HWo, (int)HWo, 0,
                                col + (size_t)i * sB, (int)ldb, 0, 1.0f, dw, p.K, 0, 1);
                }
                // col = W^T dout_chunk, then col2im (direct: the product goes straight into dx)
                if (dx) {
                    if (p.direct) {
                        gemm_rm(true, false, p.K, (int)n, s.Cout, 1.0f, w, p.K, 0, g, (int)HWo,
                                (long long)(s.Cout * HWo), 1.0f, dx + (size_t)b0 * s.Cin * HWi, (int)HWi,
                                (long long)(s.Cin * HWi), nimg);
                    } else {
                        gemm_rm(true, false, p.K, (int)n, s.Cout, 1.0f, w, p.K, 0, g, (int)HWo,
                                (long long)(s.Cout * HWo), 0.0f, work, (int)n, (long long)(p.K * n), nimg);
                        int iy0 = r0 * s.stride - s.pt, iy1 = (r0 + nr - 1) * s.stride - s.pt + s.kh - 1;
                        if (iy0 < 0) iy0 = 0;
                        if (iy1 > s.H - 1) iy1 = s.H - 1;
                        if (iy1 >= iy0) {
                            const size_t total = (size_t)nimg * s.Cin * (iy1 - iy0 + 1) * s.W;
                            k_col2im<<<grid1d(total), CU_BLOCK>>>(dx, work, s, p.Wo, p.K, b0, r0, nr, iy0,
                                                                  iy1 - iy0 + 1, total);
                            KERNEL_CHECK();
                        }
                    }
                }
            }
        }
    if (db) {
        k_channel_sum<<<s.Cout, CU_BLOCK>>>(db, dout, s.B, s.Cout, HWo);
        KERNEL_CHECK();
    }
}

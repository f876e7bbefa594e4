// CPU conv2d on NCHW maps: im2col into the caller's scratch, one chunk at a time (conv_plan.h),
// and OpenBLAS sgemm for the products; the backward's dx goes back through col2im. Contracts are
// in backend.h. Every sum runs in a fixed order: col2im adds one (image, channel) plane per
// task, db sums each channel in double in one task, and dw accumulates chunk after chunk.
// defines: cpu_conv2d_workspace_floats, cpu_conv2d_fwd, cpu_conv2d_bwd
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "common.h"
#include "conv_plan.h"
#include "ops_cpu.h"

#include <cblas.h>  // last: OpenBLAS defines a macro named like common parameters

// 2^20 floats (4 MiB) of columns per chunk: GEMMs wide enough for OpenBLAS, scratch that stays
// in the last-level cache.
#ifndef _OPENMP
static int omp_get_max_threads(void) { return 1; }
#endif
#define CPU_CONV_TARGET ((size_t)1 << 20)

size_t cpu_conv2d_workspace_floats(ConvShape s) {
    CHECK(conv_shape_ok(s), "conv2d_workspace_floats: bad shape");
    return conv_workspace_floats(s, CPU_CONV_TARGET);
}

static ConvPlan plan_or_die(ConvShape s, size_t work_floats, const float *work, const char *op) {
    CHECK(conv_shape_ok(s), "%s: bad shape B%d Cin%d %dx%d Cout%d k%dx%d stride %d pad %d,%d,%d,%d", op, s.B, s.Cin,
          s.H, s.W, s.Cout, s.kh, s.kw, s.stride, s.pt, s.pb, s.pl, s.pr);
    ConvPlan p;
    CHECK(conv_plan(s, work_floats, &p), "%s: %zu floats of workspace, below one output row's %zu", op,
          work_floats, conv_min_work(s));
    CHECK(p.direct || work, "%s: no workspace", op);
    return p;
}

// The output columns ox whose input column ox*stride - pl + kx lies in [0, W): [*o0, *o1).
static inline void valid_cols(ConvShape s, int Wo, int kx, int *o0, int *o1) {
    const int lo = s.pl - kx, hi = s.W - 1 + s.pl - kx;  // need lo <= ox*stride <= hi
    *o0 = lo <= 0 ? 0 : (lo + s.stride - 1) / s.stride;
    *o1 = hi < 0 ? 0 : hi / s.stride + 1;
    if (*o1 > Wo) *o1 = Wo;
    if (*o0 > *o1) *o0 = *o1;
}

// The column matrices of images b0 .. b0+nimg-1, output rows r0 .. r0+nr-1, one after another.
static void im2col(float *col, const float *x, ConvShape s, const ConvPlan *p, int b0, int nimg, int r0, int nr) {
    const int K = p->K, Wo = p->Wo, khw = s.kh * s.kw;
    const size_t n = (size_t)nr * Wo, HW = (size_t)s.H * s.W;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)nimg * K * n >= ((size_t)1 << 15))
    for (int i = 0; i < nimg; i++)
        for (int k = 0; k < K; k++) {
            const int ci = k / khw, ky = k % khw / s.kw, kx = k % s.kw;
            const float *xc = x + ((size_t)(b0 + i) * s.Cin + ci) * HW;
            float *row = col + ((size_t)i * K + k) * n;
            int o0, o1;
            valid_cols(s, Wo, kx, &o0, &o1);
            for (int oy = r0; oy < r0 + nr; oy++) {
                float *r = row + (size_t)(oy - r0) * Wo;
                const int iy = oy * s.stride - s.pt + ky;
                if (iy < 0 || iy >= s.H) {
                    memset(r, 0, sizeof(float) * Wo);
                    continue;
                }
                for (int ox = 0; ox < o0; ox++) r[ox] = 0.0f;
                const float *xr = xc + (size_t)iy * s.W;
                if (s.stride == 1) {
                    if (o1 > o0) memcpy(r + o0, xr + (o0 - s.pl + kx), sizeof(float) * (o1 - o0));
                } else {
                    for (int ox = o0; ox < o1; ox++) r[ox] = xr[ox * s.stride - s.pl + kx];
                }
                for (int ox = o1; ox < Wo; ox++) r[ox] = 0.0f;
            }
        }
}

// dx += the column matrices scattered back (im2col's adjoint). One task per (image, input
// channel) plane, adding its kh*kw rows in order.
static void col2im_add(float *dx, const float *col, ConvShape s, const ConvPlan *p, int b0, int nimg, int r0,
                       int nr) {
    const int K = p->K, Wo = p->Wo;
    const size_t n = (size_t)nr * Wo, HW = (size_t)s.H * s.W;
    #pragma omp parallel for collapse(2) schedule(static) if ((size_t)nimg * K * n >= ((size_t)1 << 15))
    for (int i = 0; i < nimg; i++)
        for (int ci = 0; ci < s.Cin; ci++) {
            float *dxc = dx + ((size_t)(b0 + i) * s.Cin + ci) * HW;
            for (int ky = 0; ky < s.kh; ky++)
                for (int kx = 0; kx < s.kw; kx++) {
                    const float *row = col + ((size_t)i * K + ((size_t)ci * s.kh + ky) * s.kw + kx) * n;
                    int o0, o1;
                    valid_cols(s, Wo, kx, &o0, &o1);
                    for (int oy = r0; oy < r0 + nr; oy++) {
                        const int iy = oy * s.stride - s.pt + ky;
                        if (iy < 0 || iy >= s.H) continue;
                        const float *r = row + (size_t)(oy - r0) * Wo;
                        float *d = dxc + (size_t)iy * s.W;
                        for (int ox = o0; ox < o1; ox++) d[ox * s.stride - s.pl + kx] += r[ox];
                    }
                }
        }
}

// out rows r0 .. of image b (its columns col, row stride ldc) = bias + W col. `inner` lets the
// bias fill and the product use threads of their own (called outside a parallel region).
static void fwd_image(float *out, const float *col, int ldc, const float *w, const float *bias, ConvShape s,
                      const ConvPlan *p, int b, int r0, size_t n, int inner) {
    const size_t HWo = (size_t)p->Ho * p->Wo;
    float *o = out + (size_t)b * s.Cout * HWo + (size_t)r0 * p->Wo;
    if (bias) {
        #pragma omp parallel for schedule(static) if (inner && (size_t)s.Cout * n >= ((size_t)1 << 15))
        for (int co = 0; co < s.Cout; co++)
            for (size_t j = 0; j < n; j++) o[(size_t)co * HWo + j] = bias[co];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.Cout, (int)n, p->K, 1.0f, w, p->K, col, ldc,
                bias ? 1.0f : 0.0f, o, (int)HWo);
}

void cpu_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s, float *work,
                    size_t work_floats) {
    const ConvPlan p = plan_or_die(s, work_floats, work, "conv2d_fwd");
    const size_t HWi = (size_t)s.H * s.W;
    for (int b0 = 0; b0 < s.B; b0 += p.imgs) {
        const int nimg = s.B - b0 < p.imgs ? s.B - b0 : p.imgs;
        for (int r0 = 0; r0 < p.Ho; r0 += p.rows) {
            const int nr = p.Ho - r0 < p.rows ? p.Ho - r0 : p.rows;
            const size_t n = (size_t)nr * p.Wo;
            const int ldc = p.direct ? (int)HWi : (int)n;
            if (!p.direct) im2col(work, x, s, &p, b0, nimg, r0, nr);
#define COL(i) (p.direct ? x + (size_t)(b0 + (i)) * s.Cin * HWi : work + (size_t)(i) * p.K * n)
            // A chunk of at least one image per thread: each thread multiplies whole images with
            // a single-threaded sgemm (OpenBLAS's OpenMP build runs so inside a parallel region),
            // which keeps the small per-image products of a batch at the sgemm rate; fewer
            // images: one product at a time on OpenBLAS's threads. (Two separate loops: a
            // parallel region inside an inactive one, `if` false, starts a fresh thread team.)
            if (nimg > 1 && nimg >= omp_get_max_threads()) {
                #pragma omp parallel for schedule(dynamic, 1)
                for (int i = 0; i < nimg; i++) fwd_image(out, COL(i), ldc, w, bias, s, &p, b0 + i, r0, n, 0);
            } else {
                for (int i = 0; i < nimg; i++) fwd_image(out, COL(i), ldc, w, bias, s, &p, b0 + i, r0, n, 1);
            }
#undef COL
        }
    }
}

void cpu_conv2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                    ConvShape s, float *work, size_t work_floats) {
    const ConvPlan p = plan_or_die(s, work_floats, work, "conv2d_bwd");
    const size_t HWi = (size_t)s.H * s.W, HWo = (size_t)p.Ho * p.Wo;
    if (dx || dw)
        for (int b0 = 0; b0 < s.B; b0 += p.imgs) {
            const int nimg = s.B - b0 < p.imgs ? s.B - b0 : p.imgs;
            for (int r0 = 0; r0 < p.Ho; r0 += p.rows) {
                const int nr = p.Ho - r0 < p.rows ? p.Ho - r0 : p.rows;
                const size_t n = (size_t)nr * p.Wo;
                // dw[Cout, K] += dout_chunk[Cout, n] col^T
                if (dw) {
                    if (!p.direct) im2col(work, x, s, &p, b0, nimg, r0, nr);
                    for (int i = 0; i < nimg; i++) {
                        const float *g = dout + (size_t)(b0 + i) * s.Cout * HWo + (size_t)r0 * p.Wo;
                        const float *col = p.direct ? x + (size_t)(b0 + i) * s.Cin * HWi : work + (size_t)i * p.K * n;
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.Cout, p.K, (int)n, 1.0f, g, (int)HWo,
                                    col, p.direct ? (int)HWi : (int)n, 1.0f, dw, p.K);
                    }
                }
                // col = W^T dout_chunk, then col2im (direct: straight into dx)
                if (dx) {
                    for (int i = 0; i < nimg; i++) {
                        const float *g = dout + (size_t)(b0 + i) * s.Cout * HWo + (size_t)r0 * p.Wo;
                        if (p.direct)
                            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.K, (int)n, s.Cout, 1.0f, w, p.K, g,
                                        (int)HWo, 1.0f, dx + (size_t)(b0 + i) * s.Cin * HWi, (int)HWi);
                        else
                            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p.K, (int)n, s.Cout, 1.0f, w, p.K, g,
                                        (int)HWo, 0.0f, work + (size_t)i * p.K * n, (int)n);
                    }
                    if (!p.direct) col2im_add(dx, work, s, &p, b0, nimg, r0, nr);
                }
            }
        }
    if (db) {
        #pragma omp parallel for schedule(static) if ((size_t)s.B * s.Cout * HWo >= ((size_t)1 << 15))
        for (int co = 0; co < s.Cout; co++) {
            double t = 0.0;
            for (int b = 0; b < s.B; b++) {
                const float *g = dout + ((size_t)b * s.Cout + co) * HWo;
                for (size_t j = 0; j < HWo; j++) t += g[j];
            }
            db[co] += (float)t;
        }
    }
}

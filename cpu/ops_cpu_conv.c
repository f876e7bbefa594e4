// CPU conv2d on NCHW maps: oneDNN's convolutions where cpu_conv_impl() says so (ops_cpu_conv_dnnl.c;
// the scratch is then unused; dw still by the fixed groups of images below, each group one
// single-threaded oneDNN call), otherwise im2col into the caller's scratch and cpu_sgemm for the
// products; the backward's dx goes back through col2im. Contracts are in backend.h.
//
// Where the scratch holds several images' columns (conv_plan.h), each thread takes whole images
// and runs, per image, im2col and a single-threaded sgemm back to back on its own slice of the
// scratch, so the columns are read while still in cache and the small per-image products keep the
// sgemm rate; otherwise (one image, or a block of its rows, at a time) the products use
// OpenBLAS's threads. Every sum runs in an order set by the shape and the scratch size (up to the
// query's; more is not used), not by the thread count: col2im adds one image's planes in one
// task, db sums each channel in double in one task, and dw is accumulated over fixed groups of
// images (dw_groups), each group's images in order into its own partial sum, the partials then
// added in group order. One exception: the row blocks' products take OpenBLAS's threaded path,
// whose bits matched one thread's at 2 threads but not at 3 (test_conv2d_oversized_scratch).
// defines: cpu_conv2d_workspace_floats, cpu_conv2d_fwd, cpu_conv2d_bwd
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/common.h"
#include "core/conv_plan.h"
#include "cpu/cpu_gemm.h"
#include "cpu/ops_cpu.h"

// 2^20 floats (4 MiB) of columns per thread: GEMMs wide enough for OpenBLAS, scratch that stays
// in the last-level cache.
#ifndef _OPENMP
static int omp_get_max_threads(void) { return 1; }
#endif
#define CPU_CONV_TARGET ((size_t)1 << 20)

// One image's columns per thread (each thread works on one image at a time) where one image's
// fit the target, else a block of one image's rows. The target is per thread, so that whether a
// shape is chunked by images or by rows, and with it every sum's order, does not depend on the
// thread count.
size_t cpu_conv2d_workspace_floats(ConvShape s) {
    CHECK(conv_shape_ok(s), "conv2d_workspace_floats: bad shape");
    const size_t per_img = conv_image_floats(s);
    if (!per_img || per_img > CPU_CONV_TARGET) return conv_workspace_floats(s, CPU_CONV_TARGET);
    const int t = omp_get_max_threads();
    return (size_t)(s.B < t ? s.B : t) * per_img;
}

static ConvPlan plan_or_die(ConvShape s, size_t work_floats, const float *work, const char *op) {
    CHECK(conv_shape_ok(s), "%s: bad shape B%d Cin%d %dx%d Cout%d k%dx%d stride %d pad %d,%d,%d,%d", op, s.B, s.Cin,
          s.H, s.W, s.Cout, s.kh, s.kw, s.stride, s.pt, s.pb, s.pl, s.pr);
    // Row blocks: scratch beyond the query would only make them longer, and change the sums'
    // order (a caller's shared buffer sized for another shape, or for more threads, must not).
    // Whole images sum alike however many fit.
    const size_t per_img = conv_image_floats(s);
    if (per_img > CPU_CONV_TARGET) {
        const size_t q = conv_workspace_floats(s, CPU_CONV_TARGET);
        if (work_floats > q) work_floats = q;
    }
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
// par: whether the loop may start threads (not when one thread handles one image).
static void im2col(float *col, const float *x, ConvShape s, const ConvPlan *p, int b0, int nimg, int r0, int nr,
                   int par) {
    const int K = p->K, Wo = p->Wo, khw = s.kh * s.kw;
    const size_t n = (size_t)nr * Wo, HW = (size_t)s.H * s.W;
    #pragma omp parallel for collapse(2) schedule(static) if (par && (size_t)nimg * K * n >= ((size_t)1 << 15))
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
                       int nr, int par) {
    const int K = p->K, Wo = p->Wo;
    const size_t n = (size_t)nr * Wo, HW = (size_t)s.H * s.W;
    #pragma omp parallel for collapse(2) schedule(static) if (par && (size_t)nimg * K * n >= ((size_t)1 << 15))
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

// The threads for a loop over `items` independent units whose scratch is one slice of the
// chunk each: at most one per slice (plan p's images), per unit and per core.
static int slice_threads(const ConvPlan *p, int items) {
    int t = omp_get_max_threads();
    if (p->rows == p->Ho && p->imgs < t) t = p->imgs;
    if (p->rows < p->Ho) t = 1;
    return items < t ? (items > 0 ? items : 1) : t;
}

// The scratch slice of the calling thread (work itself on one thread): one image's columns (or
// one block of rows); a direct conv has none (work may be NULL).
static float *my_slice(float *work, const ConvPlan *p) {
    if (p->direct) return work;
#ifdef _OPENMP
    const int tid = omp_get_thread_num();
#else
    const int tid = 0;
#endif
    return work + (size_t)tid * p->K * p->rows * p->Wo;
}

// out[b] = bias + W col(x[b]), row block after row block. `team`: one thread per image here
// (single-threaded im2col and sgemm); otherwise both use threads of their own.
static void fwd_one_image(float *out, const float *x, const float *w, const float *bias, ConvShape s,
                          const ConvPlan *p, float *col, int b, int team) {
    const size_t HWi = (size_t)s.H * s.W, HWo = (size_t)p->Ho * p->Wo;
    for (int r0 = 0; r0 < p->Ho; r0 += p->rows) {
        const int nr = p->Ho - r0 < p->rows ? p->Ho - r0 : p->rows;
        const size_t n = (size_t)nr * p->Wo;
        const float *c = p->direct ? x + (size_t)b * s.Cin * HWi : col;
        if (!p->direct) im2col(col, x, s, p, b, 1, r0, nr, !team);
        float *o = out + (size_t)b * s.Cout * HWo + (size_t)r0 * p->Wo;
        if (bias) {
            #pragma omp parallel for schedule(static) if (!team && (size_t)s.Cout * n >= ((size_t)1 << 15))
            for (int co = 0; co < s.Cout; co++)
                for (size_t j = 0; j < n; j++) o[(size_t)co * HWo + j] = bias[co];
        }
        cpu_sgemm(0, 0, s.Cout, (int)n, p->K, 1.0f, w, p->K, c, p->direct ? (int)HWi : (int)n, bias ? 1.0f : 0.0f, o,
                  (int)HWo);
    }
}

void cpu_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s, float *work,
                    size_t work_floats) {
    const ConvPlan p = plan_or_die(s, work_floats, work, "conv2d_fwd");
    if (cpu_conv_impl() == CONV_DNNL && cpu_dnnl_conv2d_fwd(out, x, w, bias, s)) return;
    const int nt = slice_threads(&p, s.B);
    #pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int b = 0; b < s.B; b++) fwd_one_image(out, x, w, bias, s, &p, my_slice(work, &p), b, nt > 1);
}

// dw is accumulated in dw_groups(s) groups of consecutive images, each into its own partial
// [Cout, K] (at most DW_PARTIAL_MAX floats in all), so that threads can take groups; one group
// (the plain sum over images in order) where the partials would not fit.
#define DW_GROUPS_MAX 8
#define DW_PARTIAL_MAX ((size_t)1 << 21)

static int dw_groups(ConvShape s) {
    int g = s.B < DW_GROUPS_MAX ? s.B : DW_GROUPS_MAX;
    const size_t one = (size_t)s.Cout * s.Cin * s.kh * s.kw;
    while (g > 1 && (size_t)g * one > DW_PARTIAL_MAX) g--;
    return g;
}

// The partial sums' memory: grown to the largest shape seen, then reused (one backward at a time).
static float *dw_partials(size_t floats) {
    static float *buf;
    static size_t cap;
    if (floats > cap) {
        free(buf);
        buf = xmalloc(floats * sizeof(float));
        cap = floats;
    }
    return buf;
}

// Images b0 .. b1-1 of the backward, row block after row block: dwp += dout col(x)^T (when dwp),
// then dx += col2im(W^T dout) (when dx), on the scratch slice col. `team` as in fwd_one_image.
static void bwd_images(float *dx, float *dwp, const float *dout, const float *x, const float *w, ConvShape s,
                       const ConvPlan *p, float *col, int b0, int b1, int team) {
    const size_t HWi = (size_t)s.H * s.W, HWo = (size_t)p->Ho * p->Wo;
    for (int b = b0; b < b1; b++)
        for (int r0 = 0; r0 < p->Ho; r0 += p->rows) {
            const int nr = p->Ho - r0 < p->rows ? p->Ho - r0 : p->rows;
            const size_t n = (size_t)nr * p->Wo;
            const float *g = dout + (size_t)b * s.Cout * HWo + (size_t)r0 * p->Wo;
            if (dwp) {
                if (!p->direct) im2col(col, x, s, p, b, 1, r0, nr, !team);
                const float *c = p->direct ? x + (size_t)b * s.Cin * HWi : col;
                cpu_sgemm(0, 1, s.Cout, p->K, (int)n, 1.0f, g, (int)HWo, c, p->direct ? (int)HWi : (int)n, 1.0f, dwp,
                          p->K);
            }
            if (dx) {
                if (p->direct) {
                    cpu_sgemm(1, 0, p->K, (int)n, s.Cout, 1.0f, w, p->K, g, (int)HWo, 1.0f,
                              dx + (size_t)b * s.Cin * HWi, (int)HWi);
                } else {
                    cpu_sgemm(1, 0, p->K, (int)n, s.Cout, 1.0f, w, p->K, g, (int)HWo, 0.0f, col, (int)n);
                    col2im_add(dx, col, s, p, b, 1, r0, nr, !team);
                }
            }
        }
}

// dwp += the dw of images b0 .. b1-1 through oneDNN (single-threaded inside the region over groups).
static void dw_group_dnnl(float *dwp, const float *dout, const float *x, ConvShape s, const ConvPlan *p, int b0,
                          int b1) {
    ConvShape g = s;
    g.B = b1 - b0;
    const size_t HWo = (size_t)p->Ho * p->Wo, HWi = (size_t)s.H * s.W;
    CHECK(cpu_dnnl_conv2d_dw(dwp, dout + (size_t)b0 * s.Cout * HWo, x + (size_t)b0 * s.Cin * HWi, g),
          "conv2d_bwd: oneDNN has no backward-weights convolution for this shape");
}

void cpu_conv2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                    ConvShape s, float *work, size_t work_floats) {
    const ConvPlan p = plan_or_die(s, work_floats, work, "conv2d_bwd");
    const size_t HWo = (size_t)p.Ho * p.Wo, nw = (size_t)s.Cout * p.K;
    const int dnnl = cpu_conv_impl() == CONV_DNNL;
    if (dnnl && dx && cpu_dnnl_conv2d_dx(dx, dout, w, s)) dx = NULL;
    if (dw) {
        // groups of images in parallel, dx alongside; then the partials added in group order. oneDNN
        // takes the groups where dx is done and there are several (one group: im2col's fixed order,
        // since oneDNN's own threads would split the sum by thread count).
        const int ng = dw_groups(s), dnnl_dw = dnnl && !dx && ng > 1;
        const int nt = dnnl_dw ? (ng < omp_get_max_threads() ? ng : omp_get_max_threads()) : slice_threads(&p, ng);
        float *part = ng > 1 ? dw_partials((size_t)ng * nw) : dw;
        if (ng > 1) memset(part, 0, (size_t)ng * nw * sizeof(float));
        #pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (int gi = 0; gi < ng; gi++) {
            const int b0 = (int)((long long)s.B * gi / ng), b1 = (int)((long long)s.B * (gi + 1) / ng);
            float *dwp = ng > 1 ? part + (size_t)gi * nw : dw;
            if (dnnl_dw) dw_group_dnnl(dwp, dout, x, s, &p, b0, b1);
            else bwd_images(dx, dwp, dout, x, w, s, &p, my_slice(work, &p), b0, b1, nt > 1);
        }
        if (ng > 1) {
            #pragma omp parallel for schedule(static) if (nw >= ((size_t)1 << 15))
            for (size_t j = 0; j < nw; j++) {
                float t = part[j];
                for (int gi = 1; gi < ng; gi++) t += part[(size_t)gi * nw + j];
                dw[j] += t;
            }
        }
    } else if (dx) {
        const int nt = slice_threads(&p, s.B);
        #pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
        for (int b = 0; b < s.B; b++) bwd_images(dx, NULL, dout, x, w, s, &p, my_slice(work, &p), b, b + 1, nt > 1);
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

// How conv2d walks a batch through its im2col scratch, shared by the CPU and CUDA backends so
// that both chunk alike and conv2d_workspace_floats means the same on each.
//
// The column matrix of image b and output rows r0 .. r0+nr-1 is col[K, nr*Wo], K = Cin*kh*kw,
//   col[(ci*kh + ky)*kw + kx, (oy - r0)*Wo + ox] = x[b, ci, oy*stride - pt + ky, ox*stride - pl + kx]
// (0 outside the image), so that out[b, :, r0*Wo ..] = W[Cout, K] col. A chunk is `imgs` whole
// images (rows == Ho; their column matrices one after another) or, when one image's does not fit
// the scratch, `rows` output rows of one image. A 1x1 stride-1 unpadded conv is "direct": the
// image itself [Cin, HW] is its column matrix, and no scratch is used.
// defines: ConvPlan, conv_out_h, conv_out_w, conv_shape_ok, conv_is_direct, conv_min_work, conv_image_floats,
//          conv_plan, conv_chunk_floats, conv_workspace_floats
#ifndef MALA_CONV_PLAN_H
#define MALA_CONV_PLAN_H

#include <stddef.h>

#include "core/backend.h"

typedef struct {
    int Ho, Wo, K;   // output size; K = Cin*kh*kw, the rows of a column matrix
    int direct;      // 1x1, stride 1, no padding: x is the column matrix
    int imgs, rows;  // one chunk: imgs whole images (rows == Ho), or rows output rows of one image
} ConvPlan;

static inline int conv_out_h(ConvShape s) { return (s.H + s.pt + s.pb - s.kh) / s.stride + 1; }
static inline int conv_out_w(ConvShape s) { return (s.W + s.pl + s.pr - s.kw) / s.stride + 1; }

// Whether s is a valid geometry (positive sizes, stride >= 1, padding >= 0, output at least 1x1).
static inline int conv_shape_ok(ConvShape s) {
    return s.B > 0 && s.Cin > 0 && s.H > 0 && s.W > 0 && s.Cout > 0 && s.kh > 0 && s.kw > 0 && s.stride > 0 &&
           s.pt >= 0 && s.pb >= 0 && s.pl >= 0 && s.pr >= 0 && s.H + s.pt + s.pb >= s.kh && s.W + s.pl + s.pr >= s.kw;
}

static inline int conv_is_direct(ConvShape s) {
    return s.kh == 1 && s.kw == 1 && s.stride == 1 && !s.pt && !s.pb && !s.pl && !s.pr;
}

// The least scratch a call accepts: one output row's columns (0 when direct).
static inline size_t conv_min_work(ConvShape s) {
    return conv_is_direct(s) ? 0 : (size_t)s.Cin * s.kh * s.kw * (size_t)conv_out_w(s);
}

// One whole image's columns (0 when direct).
static inline size_t conv_image_floats(ConvShape s) { return conv_min_work(s) * (size_t)conv_out_h(s); }

// The chunking for work_floats floats of scratch; 0 when that is below conv_min_work(s).
static inline int conv_plan(ConvShape s, size_t work_floats, ConvPlan *p) {
    p->Ho = conv_out_h(s);
    p->Wo = conv_out_w(s);
    p->K = s.Cin * s.kh * s.kw;
    p->direct = conv_is_direct(s);
    p->imgs = s.B;
    p->rows = p->Ho;
    if (p->direct) return 1;
    const size_t per_row = (size_t)p->K * p->Wo, per_img = per_row * p->Ho;
    if (work_floats < per_row) return 0;
    if (work_floats >= per_img) {
        const size_t n = work_floats / per_img;
        p->imgs = n < (size_t)s.B ? (int)n : s.B;
    } else {
        const size_t n = work_floats / per_row;
        p->imgs = 1;
        p->rows = n < (size_t)p->Ho ? (int)n : p->Ho;
    }
    return 1;
}

// The scratch one chunk of plan p fills: imgs column matrices of K x rows*Wo.
static inline size_t conv_chunk_floats(const ConvPlan *p) {
    return p->direct ? 0 : (size_t)p->imgs * p->K * p->rows * p->Wo;
}

// A backend's conv2d_workspace_floats: the chunk that `target` floats of scratch make (one output
// row where that is more), so the answer never exceeds max(target, one row) and does not grow
// with the batch beyond it.
static inline size_t conv_workspace_floats(ConvShape s, size_t target) {
    const size_t min = conv_min_work(s);
    ConvPlan p;
    if (!conv_plan(s, min > target ? min : target, &p)) return 0;
    return conv_chunk_floats(&p);
}

#endif

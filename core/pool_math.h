// Index math of the pooling and resize ops (backend.h: maxpool2d_fwd, avgpool2d_fwd,
// resize_bilinear_fwd), shared by the CPU and CUDA backends so both read the same cells with the
// same weights.
// defines: LinTap, linear_tap, pool_out, pool_window
#ifndef MALA_POOL_MATH_H
#define MALA_POOL_MATH_H

#include "core/ops_math.h"  // defines: MALA_HD

// One output coordinate of a linear resize: the two source indices and their weights.
typedef struct { int i0, i1; float l0, l1; } LinTap;

// ATen's CPU upsample (align_corners = False) for float input: ratio = in / out in float, the
// source position ratio (o + 0.5) - 0.5 in double (its acc_type), clamped at 0.
MALA_HD LinTap linear_tap(int o, int in, int out) {
    LinTap t;
    if (in == out) {
        t.i0 = t.i1 = o; t.l0 = 1.0f; t.l1 = 0.0f;
        return t;
    }
    const float ratio = (float)in / (float)out;
    double r = (double)ratio * ((double)o + 0.5) - 0.5;
    if (r < 0) r = 0;
    t.i0 = (int)r;
    t.i1 = t.i0 + (t.i0 < in - 1 ? 1 : 0);
    t.l1 = (float)(r - t.i0);
    t.l0 = 1.0f - t.l1;
    return t;
}

// Output size of k-wide pooling with stride s and padding p over n cells (floor).
MALA_HD int pool_out(int n, int k, int s, int p) { return (n + 2 * p - k) / s + 1; }

// The cells [*lo, *hi) of window o inside [0, n).
MALA_HD void pool_window(int o, int n, int k, int s, int p, int *lo, int *hi) {
    int a = o * s - p, b = a + k;
    *lo = a < 0 ? 0 : a;
    *hi = b > n ? n : b;
}

#endif

// The double-precision reference of a 2-D convolution (the backend's conv2d contract, ConvShape)
// for the suites that test convolutions: test_cpu_gemm (fp32 routes) and test_bf16. Header-only.
#ifndef MALA_TEST_CONV_REF_H
#define MALA_TEST_CONV_REF_H

#include <math.h>
#include <stddef.h>

#include "core/backend.h"
#include "core/conv_plan.h"  // defines: conv_out_h, conv_out_w

// out, dx, dw of s (dout = G) in double with their sums of |terms| (the bound a float result is
// held to); dx and dw start from dx0, dw0 (NULL: from zero).
static void conv_ref(ConvShape s, const float *x, const float *w, const float *bias, const float *G,
                     const float *dx0, const float *dw0, double *out, double *mo, double *dx, double *mx, double *dw,
                     double *mw) __attribute__((unused));
static void conv_ref(ConvShape s, const float *x, const float *w, const float *bias, const float *G,
                     const float *dx0, const float *dw0, double *out, double *mo, double *dx, double *mx, double *dw,
                     double *mw) {
    const int Ho = conv_out_h(s), Wo = conv_out_w(s);
    const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * s.kh * s.kw;
    for (size_t i = 0; i < nx; i++) dx[i] = dx0 ? dx0[i] : 0, mx[i] = dx0 ? fabs(dx0[i]) : 0;
    for (size_t i = 0; i < nw; i++) dw[i] = dw0 ? dw0[i] : 0, mw[i] = dw0 ? fabs(dw0[i]) : 0;
    for (int b = 0; b < s.B; b++)
        for (int co = 0; co < s.Cout; co++)
            for (int oy = 0; oy < Ho; oy++)
                for (int ox = 0; ox < Wo; ox++) {
                    const size_t o = (((size_t)b * s.Cout + co) * Ho + oy) * Wo + ox;
                    double acc = bias ? bias[co] : 0, m = bias ? fabs(bias[co]) : 0;
                    for (int ci = 0; ci < s.Cin; ci++)
                        for (int ky = 0; ky < s.kh; ky++)
                            for (int kx = 0; kx < s.kw; kx++) {
                                const int iy = oy * s.stride - s.pt + ky, ix = ox * s.stride - s.pl + kx;
                                if (iy < 0 || iy >= s.H || ix < 0 || ix >= s.W) continue;
                                const size_t xi = (((size_t)b * s.Cin + ci) * s.H + iy) * s.W + ix;
                                const size_t wi = (((size_t)co * s.Cin + ci) * s.kh + ky) * s.kw + kx;
                                acc += (double)w[wi] * x[xi], m += fabs((double)w[wi] * x[xi]);
                                dx[xi] += (double)w[wi] * G[o], mx[xi] += fabs((double)w[wi] * G[o]);
                                dw[wi] += (double)G[o] * x[xi], mw[wi] += fabs((double)G[o] * x[xi]);
                            }
                    out[o] = acc, mo[o] = m;
                }
}

#endif

// The few ops the FID Inception-v3 forward needs, as a table of function pointers (CPU now; a
// CUDA table can plug in later without touching eval/inception.c). Pointers passed to these ops
// live in the table's memory (alloc / to_device / to_host move data in and out).
//
// Layout: activations are NHWC ([N, H, W, C], channels fastest). An op that writes "into a
// channel slice" gets the output pointer already advanced to the slice's first channel and the
// full row width `ldo` (channels per pixel of the concatenated tensor), so Inception's branch
// concatenation costs nothing.
#ifndef MALA_INCEPTION_OPS_H
#define MALA_INCEPTION_OPS_H

#include <stddef.h>

// One BasicConv2d with its BatchNorm folded in: y = relu(conv(x, w) + b).
typedef struct {
    int cin, cout;
    int kh, kw, sh, sw, ph, pw;
} ConvGeom;

typedef struct EvalOps {
    const char *name;
    int host_memory;  // 1 when buffers are plain host memory (callers' arrays can be used directly)

    // ---- memory ----
    void *(*alloc)(size_t bytes);  // zero-filled; aborts on failure
    void (*release)(void *p);
    void (*to_device)(void *dst, const void *src, size_t bytes);
    void (*to_host)(void *dst, const void *src, size_t bytes);

    // ---- a forward pass runs between begin() and end() (thread setup; may be NULL) ----
    void (*begin)(void);
    void (*end)(void);

    // ---- ops ----
    // in: N images [C, H, W] (NCHW, values in [0, 1], C = 1 (replicated to RGB) or 3);
    // out: [N, S, S, 3] = 2 * bilinear_resize(in) - 1 with align_corners = False, as
    // F.interpolate(x, size=(S, S), mode='bilinear', align_corners=False) then pytorch-fid's
    // normalize_input.
    void (*resize_input)(float *out, const float *in, int N, int C, int H, int W, int S);
    // out[N, Ho, Wo, ldo] (channel slice of cout) = relu(conv(in[N, H, W, cin]) + b), with
    // w [cout, kh, kw, cin]. `work` holds work_floats floats of scratch (im2col), at least
    // kh*kw*cin of them; Ho = (H + 2 ph - kh) / sh + 1, likewise Wo.
    void (*conv_relu)(float *out, int ldo, const float *in, const float *w, const float *b, const ConvGeom *g,
                      int N, int H, int W, float *work, size_t work_floats);
    // 3x3 pooling over in[N, H, W, C] into a channel slice of out with row width ldo.
    // max: stride s, padding p (padded cells are ignored); avg: stride 1, padding 1,
    // count_include_pad = False (the divisor is the number of cells inside the image).
    void (*maxpool3)(float *out, int ldo, const float *in, int N, int H, int W, int C, int s, int p);
    void (*avgpool3)(float *out, const float *in, int N, int H, int W, int C);
    // out[N, C] = mean over H*W of in[N, HW, C]  (global average pool)
    void (*mean_hw)(float *out, const float *in, int N, int HW, int C);
    // out[N, O] = in[N, K] w[O, K]^T  (no bias)
    void (*linear_nt)(float *out, const float *in, const float *w, int N, int K, int O);
} EvalOps;

const EvalOps *eval_ops_cpu(void);

#endif

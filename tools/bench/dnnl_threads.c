// Does a product or convolution give the same bits at 1 and at 2 threads? (
// docs/performance.md, "Determinism"). Prints one line per op: its name and a hash (FNV-1a) of the
// output's bytes, on fixed seeded inputs, in the precision given, through the CPU backend (the
// products: cpu_sgemm, oneDNN or OpenBLAS as MALA_GEMM picks; the convolutions: the backend's
// conv2d, oneDNN or im2col as MALA_CONV picks). Run it at two thread counts and compare the lines:
//
//   make build/dnnl_threads
//   for p in fp32 bf16; do for t in 1 2; do OMP_NUM_THREADS=$t ./build/dnnl_threads $p > /tmp/dt.$p.$t; done;
//     diff /tmp/dt.$p.1 /tmp/dt.$p.2 && echo "$p: equal"; done
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/common.h"
#include "cpu/cpu_gemm.h"

static uint64_t fnv(const float *x, size_t n) {
    const unsigned char *p = (const unsigned char *)x;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static float *filled(size_t n, uint64_t seed) {
    float *x = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {  // splitmix64 to [-1, 1)
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        x[i] = (float)((z ^ (z >> 31)) >> 40) / (float)(1 << 23) - 1.0f;
    }
    return x;
}

// C = op(A) op(B) for a linear layer's three products on N tokens, Din -> Dout.
static void products(int N, int Din, int Dout) {
    float *x = filled((size_t)N * Din, 1), *w = filled((size_t)Dout * Din, 2), *dy = filled((size_t)N * Dout, 3);
    float *y = xmalloc((size_t)N * Dout * sizeof(float)), *dx = xmalloc((size_t)N * Din * sizeof(float));
    float *dw = xmalloc((size_t)Dout * Din * sizeof(float));
    cpu_sgemm(0, 1, N, Dout, Din, 1.0f, x, Din, w, Din, 0.0f, y, Dout);    // y = x W^T
    cpu_sgemm(0, 0, N, Din, Dout, 1.0f, dy, Dout, w, Din, 0.0f, dx, Din);  // dx = dy W
    cpu_sgemm(1, 0, Dout, Din, N, 1.0f, dy, Dout, x, Din, 0.0f, dw, Din);  // dw = dy^T x (sum over N)
    printf("matmul %dx%dx%d fwd %016llx dx %016llx dw %016llx\n", N, Din, Dout,
           (unsigned long long)fnv(y, (size_t)N * Dout), (unsigned long long)fnv(dx, (size_t)N * Din),
           (unsigned long long)fnv(dw, (size_t)Dout * Din));
    free(x), free(w), free(dy), free(y), free(dx), free(dw);
}

static void conv(const Backend *be, ConvShape s) {
    const int Ho = (s.H + s.pt + s.pb - s.kh) / s.stride + 1, Wo = (s.W + s.pl + s.pr - s.kw) / s.stride + 1;
    const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * s.kh * s.kw;
    const size_t ny = (size_t)s.B * s.Cout * Ho * Wo, nwork = be->conv2d_workspace_floats(s);
    float *x = filled(nx, 4), *w = filled(nw, 5), *dy = filled(ny, 6), *b = filled((size_t)s.Cout, 7);
    float *y = xmalloc(ny * sizeof(float)), *dx = calloc(nx, sizeof(float)), *dw = calloc(nw, sizeof(float));
    float *db = calloc((size_t)s.Cout, sizeof(float)), *work = xmalloc((nwork ? nwork : 1) * sizeof(float));
    be->weights_changed();
    be->conv2d_fwd(y, x, w, b, s, work, nwork);
    be->conv2d_bwd(dx, dw, db, dy, x, w, s, work, nwork);
    printf("conv B%d %d->%d %dx%d k%d fwd %016llx dx %016llx dw %016llx db %016llx\n", s.B, s.Cin, s.Cout, s.H, s.W,
           s.kh, (unsigned long long)fnv(y, ny), (unsigned long long)fnv(dx, nx), (unsigned long long)fnv(dw, nw),
           (unsigned long long)fnv(db, (size_t)s.Cout));
    free(x), free(w), free(dy), free(b), free(y), free(dx), free(dw), free(db), free(work);
}

int main(int argc, char **argv) {
    const char *prec = argc > 1 ? argv[1] : "fp32";
    const Backend *be = backend_select("cpu", prec);
    printf("precision %s, products %s, convolutions %s\n", be->precision(), cpu_gemm_name(), cpu_conv_name());
    products(1024, 384, 1152);  // DiT-S/2 on 4 images of 16x16 tokens: qkv
    products(1024, 1536, 384);  // its MLP's second layer
    products(256, 128, 384);    // DiT-T's small ones
    products(16384, 128, 384);  // DiT-T/4 at batch 256 (64 tokens an image)
    products(16384, 32, 32);    // a long reduction onto a small output (dw: K = 16384), where splitting K pays
    conv(be, (ConvShape){8, 64, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1});   // a DiC-S 3x3 block
    conv(be, (ConvShape){8, 4, 32, 32, 128, 2, 2, 2, 0, 0, 0, 0});  // a patch embedding
    return 0;
}

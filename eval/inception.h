// pytorch-fid's FID Inception-v3 (docs/design.md §4): torchvision's Inception3 with 1008 classes and the
// FID blocks (Mixed_5b..5d, 6b..6e, 7b pool branch = avg-pool 3x3 s1 p1 count_include_pad=False;
// Mixed_7c pool branch = max-pool 3x3 s1 p1), BatchNorm (eps 0.001) folded into the convolutions at
// load time. Input: images in [0, 1] of any size, resized to 299x299 (bilinear, align_corners =
// False), then 2x - 1; grayscale is replicated to RGB. Outputs: the 2048-d pool3 features (FID)
// and the 1008 logits pool3 . fc.weight^T without bias (IS, as torch-fidelity); on request the
// 2023 sFID features (below). Runs on any backend (core/backend.h: NCHW conv2d, ReLU, pools,
// bilinear resize, channel copies).
//
// Weights: pt_inception-2015-12-05-6726825d.pth (legacy torch format, formats/torch_legacy.h) or the
// same tensor names in a .safetensors file.
#ifndef MALA_INCEPTION_H
#define MALA_INCEPTION_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"           // defines: MalaErr
#include "core/backend.h"          // defines: Backend

#define INCEPTION_DIM 2048
#define INCEPTION_CLASSES 1008
#define INCEPTION_SIZE 299
#define INCEPTION_NTENSORS 472   // 94 BasicConv2d x (conv.weight + 4 bn) + fc.weight + fc.bias
#define INCEPTION_WEIGHTS_FILE "pt_inception-2015-12-05-6726825d.pth"
#define INCEPTION_WEIGHTS_URL \
    "https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/pt_inception-2015-12-05-6726825d.pth"
#define INCEPTION_DEFAULT_BATCH 16
// The sFID features of the ADM evaluator (guided-diffusion evaluations/evaluator.py): its TF
// graph's mixed_6/conv, first 7 channels, flattened in NHWC order (17 x 17 x 7). In the ported
// pytorch-fid network that tensor is Mixed_6d.branch1x1 after BN and ReLU (TF's mixed, mixed_1,
// ... mixed_10 are Mixed_5b .. Mixed_7c, and a block's "conv" is its 1x1 branch).
#define INCEPTION_SPATIAL_DIM (17 * 17 * 7)

typedef struct Inception Inception;

// One weight source: fills out[numel] with tensor `name` of the given shape (row-major as PyTorch
// reports it, e.g. conv weights OIHW). Returns 0, or -1 with err set.
typedef int (*InceptionTensorFn)(void *ctx, const char *name, int ndim, const int64_t *shape, float *out,
                                 MalaErr *err);

// Builds the network from a weight source on backend `be` (NULL = CPU). max_batch: images per internal batch
// (the workspace is sized for it once; 0 = INCEPTION_DEFAULT_BATCH).
Inception *inception_build(InceptionTensorFn fn, void *ctx, const Backend *be, int max_batch, MalaErr *err);
// Loads weights from a legacy torch file (the standard .pth) or a .safetensors file with the same
// tensor names. Errors name the file and where the standard weights come from.
Inception *inception_load(const char *path, const Backend *be, int max_batch, MalaErr *err);
// Random weights from the shared generator below (tests and benchmarks; not meaningful features).
Inception *inception_random(const Backend *be, int max_batch);
void inception_free(Inception *m);

// imgs: N images [C, H, W] (NCHW float in [0, 1], host memory), C = 1 or 3, any H, W >= 1.
// pool3: [N, 2048]; logits: [N, 1008] or NULL. Host memory. Returns 0, or -1 for bad arguments.
int inception_forward(Inception *m, const float *imgs, int N, int C, int H, int W, float *pool3, float *logits,
                      MalaErr *err);
// The same plus spatial: [N, INCEPTION_SPATIAL_DIM] sFID features, or NULL (not computed).
int inception_forward_all(Inception *m, const float *imgs, int N, int C, int H, int W, float *pool3, float *logits,
                          float *spatial, MalaErr *err);
int inception_max_batch(const Inception *m);
// FLOPs (2 x multiply-adds of the convolutions and the fc product) of all forwards so far.
double inception_flops(const Inception *m);

// The state-dict tensors the network needs, in torchvision's order (INCEPTION_NTENSORS of them).
typedef struct {
    char name[64];
    int ndim;
    int64_t shape[4];
} InceptionTensor;
int inception_tensors(InceptionTensor *out);  // fills out[INCEPTION_NTENSORS]; returns the count

// ---- the shared deterministic generator (tools/ref/make_inception_fixtures.py: gen_uniform) ----
// seed = FNV-1a 64 of a name; u_i = (splitmix64(seed + (i + 1) * 0x9E3779B97F4A7C15) >> 40) * 2^-24.
uint64_t eval_rand_seed(const char *name);
double eval_rand_u(uint64_t seed, uint64_t i);
// out[i] = float(lo + (hi - lo) * u_i), computed in double, i = 0..n-1.
void eval_rand_fill(float *out, size_t n, const char *name, double lo, double hi);
// The random FID Inception weights: the range by tensor kind (conv He-uniform, BN stats near 1/0).
void inception_random_tensor(const char *name, int ndim, const int64_t *shape, float *out);

#endif

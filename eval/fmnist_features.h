// The Fashion-MNIST feature classifier of `mala eval --features fmnist` (trained by
// tools/ref/train_fmnist_classifier.py, shipped as assets/fmnist_classifier.safetensors): a metric
// that needs no download. Input: 1 x 32 x 32 images in [-1, 1] (the 28 x 28 pictures padded by 2
// with black, as data/dataset.c feeds the diffusion models). The network, in PyTorch terms:
//
//   4 x [Conv2d(3x3, padding 1, stride 1, 2, 2, 2) -> GroupNorm(8, eps 1e-5) -> GELU (exact)]
//       with 32, 64, 96, 128 channels (32x32 -> 16x16 -> 8x8 -> 4x4)
//   features = the mean over the 4 x 4 map              [N, 128]  (FD, precision/recall, KID)
//   logits   = Linear(128, 10)(features)                [N, 10]   (class accuracy)
//
// It runs on the op table (conv2d_fwd, groupnorm_fwd, gelu_erf_fwd; the mean as a GEMM with a
// 1/16 vector; linear_fwd), so on the CPU and on CUDA, in one activation block sized at load.
//
// Two parts: the weight table (fmnist_weights_read: checks and reads the file into host floats,
// no backend, what the fuzz harness runs) and the network on a backend.
#ifndef MALA_FMNIST_FEATURES_H
#define MALA_FMNIST_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/common.h"        // defines: MalaErr
#include "formats/safetensors.h"   // defines: StFile

#define FMNIST_FEAT_DIM 128
#define FMNIST_FEAT_CLASSES 10
#define FMNIST_FEAT_SIZE 32
#define FMNIST_FEAT_BLOCKS 4
#define FMNIST_FEAT_GROUPS 8
#define FMNIST_FEAT_EPS 1e-5f
#define FMNIST_FEAT_FILE "fmnist_classifier.safetensors"   // looked for in ./assets/ and ./
#define FMNIST_FEAT_DEFAULT_BATCH 100

// One tensor of the file: its state_dict name, shape and where its floats sit in the weight buffer.
typedef struct {
    char name[40];
    int ndim;
    int64_t shape[4];
    size_t offset, numel;
} FmnistParam;

#define FMNIST_FEAT_NPARAMS (4 * FMNIST_FEAT_BLOCKS + 2)

// The parameter table (FMNIST_FEAT_NPARAMS entries, state_dict order); returns the weight floats.
size_t fmnist_params(FmnistParam *p);
// Checks every tensor of the open file against the table (present, shape, finite; no extra
// tensor) and reads them into host[fmnist_params floats]. Errors name the file and the first bad
// tensor.
int fmnist_weights_read(const StFile *f, float *host, MalaErr *err);

typedef struct FmnistNet FmnistNet;

// Loads the weights onto backend be (NULL: the CPU); max_batch images per forward (chunks beyond).
FmnistNet *fmnist_net_load(const char *path, const Backend *be, int max_batch, MalaErr *err);
void fmnist_net_free(FmnistNet *m);
// Whether class accuracy means anything for labelled images: 1 when their classes are the
// classifier's Fashion-MNIST classes, by name (names: k class names; NULL, or the default "0".."9",
// when the model has none) or, without names, by a count of 10 at 28 or 32 px and 1 channel
// (k < 0: count unknown, as in an .npz). Else 0 and why gets the reason, for a note.
int fmnist_labels_match(char *const *names, int k, int size, int channels, char *why, size_t cap);
// The file's metadata test_accuracy (NAN when absent).
double fmnist_net_test_accuracy(const FmnistNet *m);

// x: N images [1, 32, 32] in [-1, 1] (host). feats [N, 128] and logits [N, 10] (host; either NULL).
void fmnist_net_forward(FmnistNet *m, const float *x, int N, float *feats, float *logits);
// The same from images as eval reads them: N images [C, H, W] in [0, 1] (ToTensor), C = 1 or 3
// (RGB averaged), 32 x 32 or 28 x 28 (padded by 2 with black). Returns 0, or -1 with err set for
// another size.
int fmnist_net_forward_u01(FmnistNet *m, const float *imgs, int N, int C, int H, int W, float *feats, float *logits,
                           MalaErr *err);

#endif

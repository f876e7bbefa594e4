// Training data (docs/design.md §5): Fashion-MNIST from Debian's IDX files and ImageNet-layout image
// folders, plus a deterministic, double-buffered batch loader with exact resume.
//
// Dataset specs for dataset_open:
//   "fashion-mnist"            the 60,000 training images (/usr/share/datasets/fashion-mnist, or
//                              $MALA_FASHION_MNIST_DIR); 28x28 padded to 32x32 with background 0
//                              (-1 after scaling); 1 channel; 10 named classes
//   "fashion-mnist-test"       the 10,000 t10k images
//   "fashion-mnist:DIR", "fashion-mnist-test:DIR"   the same files from DIR
//   "DIR" (anything else)      root/<class>/<image...>: classes are the sorted sub-folder names;
//                              each class folder is walked recursively, files sorted by path;
//                              images decoded with stb_image on demand and cropped like ADM's
//                              center_crop_arr (PIL BOX halving, PIL BICUBIC resize, centre crop)
//   "LATENTS" (a folder with latents.json)   a latent set of `mala encode` (train/latents.h):
//                              samples are scaled latents C x h x h (h = w), drawn afresh at
//                              every use (see the loader); image_size and channels must be 0 or
//                              the set's
// image_size 0 picks the default (32 for Fashion-MNIST, 256 for folders); channels 0 takes the
// data's (Fashion-MNIST 1; a folder 3 when any image header has colour, 1 when all are gray).
// Folder images become RGB (channels 3) or gray with PIL's "L" weights (channels 1).
// Files that are not readable images (header or end marker missing) are reported once on
// stderr by path and skipped; a missing directory, an empty class or no images at all is an
// error. Pixels map to [-1, 1] as x / 127.5 - 1.
#ifndef MALA_DATA_H
#define MALA_DATA_H

#include <stdint.h>

#include "core/common.h"

typedef struct DatasetPriv DatasetPriv;

typedef struct {
    int64_t n;              // samples
    int channels;           // C
    int image_size;         // S (samples are C x S x S)
    int num_classes;
    char **class_names;     // [num_classes]
    char *source;           // what was opened (directory or IDX file path), for messages
    int views;              // latent sets: views per image (2: encoded with flips); 0 for images
    float latent_scale;     // latent sets: the VAE's scaling factor; 0 for images
    DatasetPriv *priv;
} Dataset;

Dataset *dataset_open(const char *spec, int image_size, int channels, MalaErr *err);
// Every file under a folder (hidden entries skipped, at most 32 levels deep) in torchvision's
// order: directories sorted as path strings, files sorted by name within each. *files and its
// strings are malloc'd. The one folder walker of the program (datasets, eval's image folders).
int folder_walk(const char *root, char ***files, size_t *n, MalaErr *err);
void dataset_close(Dataset *d);

// Keeps n samples spread evenly over the current order (indices floor(i * N / n)), so a small
// subset of a class-sorted folder still covers every class. n >= the current size is a no-op.
// Call before loader_new. Returns 0 or -1 (n < 1).
int dataset_limit(Dataset *d, int64_t n, MalaErr *err);

int32_t dataset_label(const Dataset *d, int64_t i);
// Path of a folder sample, or NULL for Fashion-MNIST.
const char *dataset_path(const Dataset *d, int64_t i);
// Sample i as uint8 S x S x C (HWC), the layout of ADM's reference batches (arr_0).
int dataset_get_u8(const Dataset *d, int64_t i, uint8_t *hwc, MalaErr *err);
// Sample i as float C x S x S in [-1, 1], optionally mirrored left-right (a latent set: the
// posterior mean times the scale, of view 1 when hflip and the set has two).
int dataset_get(const Dataset *d, int64_t i, int hflip, float *chw, MalaErr *err);

// ---- loader ----
// The sample stream is a sequence of epochs; epoch e visits every sample once in a permutation
// drawn from (seed, e) (Fisher-Yates over splitmix64). Stream position p = e * n + j holds
// sample perm_e[j]; batch k holds positions k*B .. k*B+B-1 (batches run across epoch ends, no
// sample is dropped). With hflip, position p is mirrored when a hash of (seed, p) says so.
// A latent set's position p is z = (mean + exp(logvar / 2) * eps) * scale of its sample, eps the
// Philox normals of stream p under seed ^ LOADER_LATENT_KEY, of view 1 when flipped and the set
// has two views: a fresh z for every use, a function of (seed, p) only, so resume is exact.
// Batches are produced by a background thread one batch ahead of the consumer (folder images
// are decoded with up to $MALA_LOADER_THREADS OpenMP threads, default min(4, cores)). A folder
// image that fails to decode later (it passed the open-time check) is reported once on stderr
// and replaced by the next decodable sample in index order (with that sample's label), so batch contents stay
// deterministic.
typedef struct Loader Loader;
#define LOADER_LATENT_KEY 0x3c6ef372fe94f82bull

Loader *loader_new(Dataset *d, int batch, uint64_t seed, int hflip, MalaErr *err);
// Copies the next batch: x [B, C, S, S] in [-1, 1], y [B] (either may be NULL to skip it).
void loader_next(Loader *l, float *x, int32_t *y);
// Positions the stream so that the next loader_next returns batch `batches_consumed`, exactly
// as a fresh loader would after that many calls (resume).
void loader_seek(Loader *l, uint64_t batches_consumed);
uint64_t loader_position(const Loader *l);     // index of the batch the next loader_next returns
// Data parallelism: this loader's batches become slices of a global batch, positions
// k*global_batch + offset .. + B-1 of the stream for batch k (rank r of a job: offset r*B).
void loader_shard(Loader *l, int global_batch, int offset);
// Sample index and flip of stream position p (what loader_next puts there). Recomputes the
// epoch's permutation: O(n), meant for tests and checks.
int64_t loader_sample_at(const Loader *l, uint64_t p, int *flip);
void loader_free(Loader *l);

#endif

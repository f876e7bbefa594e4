// Datasets (docs/design.md §5): Fashion-MNIST from Debian's IDX files, ImageNet-layout image
// folders and latent sets, read by training (train/loader.h) and evaluation alike.
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
//   "LATENTS" (a folder with latents.json)   a latent set of `mala encode` (data/latents.h):
//                              samples are scaled latents C x h x h (h = w), drawn afresh at
//                              every use (see train/loader.h); image_size and channels must be 0 or
//                              the set's
// image_size 0 picks the default (32 for Fashion-MNIST, 256 for folders); channels 0 takes the
// data's (Fashion-MNIST 1; a folder 3 when any image header has colour, 1 when all are gray).
// Folder images become RGB (channels 3) or gray with PIL's "L" weights (channels 1).
// Files that are not readable images (header or end marker missing) are reported once on
// stderr by path and skipped; a missing directory, an empty class or no images at all is an
// error. Pixels map to [-1, 1] as x / 127.5 - 1.
#ifndef MALA_DATASET_H
#define MALA_DATASET_H

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

// What the loader needs beyond the samples: whether samples are decoded from files (worth
// threads); 1 the first time sample i's late decode failure is reported (thread-safe), so it is
// said once; a latent set's fresh draw of sample i (z = (mean + exp(logvar / 2) * eps) * scale,
// eps the Philox normals of `stream` under `seed`; view 1 when hflip and the set has two).
int dataset_is_image_folder(const Dataset *d);
int dataset_report_once(Dataset *d, int64_t i);
void dataset_draw_latent(const Dataset *d, int64_t i, int hflip, uint64_t seed, uint64_t stream, float *z);

#endif

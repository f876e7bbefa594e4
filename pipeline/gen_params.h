// How an image was made, as the text of a PNG's tEXt chunk "parameters" in AUTOMATIC1111's
// style (its infotext): the prompt on the first line (here: the class names), then one line of
// "Key: value" pairs joined by ", ", a value holding ',', ':' or a newline JSON-quoted as A1111's
// quote() does. A1111's keys where ours mean the same (Steps, Sampler, CFG scale, Seed, Size, Model
// hash, Model, VAE hash, VAE, Denoising strength, Version), our own for the rest (Class, Labels,
// Images (a grid), Seed index (one image: its index in the seed's noise stream), Eta, Clip x0, Channels,
// Init image, Mask, Resample, Blend ("A,B,w": class numbers and weight)). docs/sample.md shows one. `mala sample --out` /
// `--out-dir` and the viewer's saves write it; `mala info FILE.png` prints it.
#ifndef MALA_GEN_PARAMS_H
#define MALA_GEN_PARAMS_H

#include <stdint.h>

#include "pipeline/generate.h"

#define MALA_PROGRAM_VERSION "mala-dit 0.1"  // "Version: ..." in the parameters
#define GEN_PARAMS_KEYWORD "parameters"     // the tEXt keyword (A1111's)

typedef struct {
    const char *model_path;       // the model file: "Model" is its name without folder and extension,
                                  // "Model hash" the first 10 hex digits of its SHA-256 (A1111's AutoV2)
    const char *vae_path;         // latent models: the VAE file (NULL: none; the keys are left out)
    const ClassNames *classes;
    const int32_t *labels;        // the classes of the n images in the PNG (a grid: n > 1)
    int n;
    uint64_t seed;                // --seed
    int64_t first;                // the first image's index in the seed's noise stream (--out-dir's i)
    const GenOpts *opts;
    int channels, width, height;  // one image's
    float strength;               // image-to-image strength; 0 (plain generation): the key is left out
    const char *init_path;        // image-to-image: the input file or folder ("Init image": its name), or NULL
    const char *mask_path;        // inpainting: the mask file ("Mask": its name), or NULL
    int resample;                 // inpainting: RePaint jumps ("Resample", with a mask)
} GenParams;

// The text (malloc'd); NULL with err when a file to hash cannot be read.
char *gen_params_text(const GenParams *p, MalaErr *err);
// The first 10 hex digits of path's SHA-256 (cached by path, size and mtime: a viewer saving many
// images hashes its model once). Not thread-safe.
int gen_params_file_hash(const char *path, char out[11], MalaErr *err);

#endif

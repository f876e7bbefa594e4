// How an image was made, as the text of a PNG's tEXt chunk "parameters" in AUTOMATIC1111's
// style (its infotext): the prompt on the first line (here: the class names; a blend "A,B,w";
// "(unconditional)" for a model without classes), then one line of
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
// The settings a parameters text names, read back (pipeline/gen_params_parse.c; the viewer's PNG
// drop): the keys gen_params_text writes on the text's last line, a value JSON-unquoted when
// quoted; each taken only when well formed and in range (have: its GP_* bit). Other keys, and the
// prompt line, are ignored. Any bytes are safe (fuzzed: tests/fuzz/fuzz_gen_params.c).
enum {
    GP_STEPS = 1 << 0, GP_SAMPLER = 1 << 1, GP_CFG = 1 << 2, GP_ETA = 1 << 3, GP_SEED = 1 << 4, GP_CLASS = 1 << 5,
    GP_STRENGTH = 1 << 6, GP_BLEND = 1 << 7, GP_RESAMPLE = 1 << 8,
    GP_GRID = 1 << 9  // "Images" > 1 and "Size": the PNG is a grid of images of that size
};
typedef struct {
    unsigned have;
    int steps, cls, resample;       // 1..1000; >= 0; 0..100
    char sampler[16];               // as written (a sampler_kind_name when it came from us)
    float cfg_scale, eta, strength; // 0..100; 0..10; (0, 1]
    uint64_t seed;
    int blend_a, blend_b;           // >= 0
    float blend_w;                  // [0, 1]
    int grid_n, cell_w, cell_h;     // GP_GRID: 2..4096 images of 1..8192 x 1..8192
} GenParsed;
// Returns how many keys were taken.
int gen_params_parse(const char *text, GenParsed *p);
// The first 10 hex digits of path's SHA-256 (cached by path, size and mtime: a viewer saving many
// images hashes its model once). Not thread-safe.
int gen_params_file_hash(const char *path, char out[11], MalaErr *err);

#endif

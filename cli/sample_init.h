// mala sample's inputs for image-to-image, inpainting and class blends (--init-image, --strength,
// --mask, --resample, --blend): parsed, loaded and put into the model's space for generator_run_init.
#ifndef MALA_SAMPLE_INIT_H
#define MALA_SAMPLE_INIT_H

#include "pipeline/generate.h"

typedef struct {
    const char *init, *mask;   // the flags' values (NULL: not given)
    char **paths;              // the input files: --init-image's file, or its folder's images
    int npaths;
    float *image, *grid_mask;  // [n, C, S, S] model space; [n, 1, S, S] (NULL without --mask)
    GenInit gi;
} SampleInit;

// Lists --init-image (a file or a folder); exits with an error naming the flag on failure.
void sample_init_list(SampleInit *si, const char *init, const char *mask);
// Reads the inputs for n images (a folder: image i is file i; a file: every image) into the
// model's space: decoded, channel-matched and cropped to the output size, encoded through g's
// VAE for a latent model; the mask read once and brought to the model's grid. Sets si->gi.
void sample_init_load(SampleInit *si, Generator *g, int n, float strength, int resample);
void sample_init_free(SampleInit *si);
// "--blend A,B,w" (classes by name or number) into o; exits on a bad value.
void sample_parse_blend(const char *s, const ClassNames *cn, GenOpts *o);

#endif

// Input images and masks for image-to-image and inpainting (GenInit, pipeline/generate.h), read
// from files (or their bytes) with formats/image_io: `mala sample --init-image / --mask` and the viewer.
//   Images: decoded as RGB or gray to match the model's output channels (gray replicated to RGB,
//   RGB to gray by PIL's convert("L")), then ADM's center_crop_arr to the output size (the rule
//   the training data went through; an image of exactly that size is taken as it is), mapped to
//   [-1, 1] as x / 127.5 - 1.
//   Masks: read as gray, the same crop, then binarised: a pixel >= 128 (white) is regenerated
//   (1), darker is kept (0). Alpha is dropped (the colour channels alone are read); an all-black
//   mask (nothing to regenerate) is an error.
#ifndef MALA_GEN_INPUTS_H
#define MALA_GEN_INPUTS_H

#include "pipeline/generate.h"

// out [C, S, S] for C = 1 or 3.
int gen_load_image(const char *path, int C, int S, float *out, MalaErr *err);
// The same from an image file held in memory (name: for messages).
int gen_decode_image(const void *buf, size_t len, const char *name, int C, int S, float *out, MalaErr *err);
// The same from one cell of a grid PNG (torchvision's make_grid: pad pixels around cells of
// cw x ch, as many to a row as the width holds): cell k (row-major), cut out before the crop.
int gen_load_grid_cell(const char *path, int C, int S, int k, int cw, int ch, int pad, float *out, MalaErr *err);
// out [S, S] of 0 and 1.
int gen_load_mask(const char *path, int S, float *out, MalaErr *err);
// The same from a file held in memory; invert 1: dark pixels are regenerated (A1111's
// inpainting_mask_invert).
int gen_decode_mask(const void *buf, size_t len, const char *name, int S, int invert, float *out, MalaErr *err);
// 1 when path is a PNG with an alpha channel (gray + alpha or RGBA), from its IHDR; else 0.
int gen_png_has_alpha(const char *path);
// The image files of a folder (names ending .png .jpg .jpeg .bmp .pgm .ppm, any case), sorted by
// name, as malloc'd full paths; *n their count. -1 when the folder cannot be read or has none.
int gen_list_images(const char *dir, char ***paths, int *n, MalaErr *err);
void gen_free_list(char **paths, int n);
#endif

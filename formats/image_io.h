// Image files (stb_image / stb_image_write) and the two pixel pipelines the project shares with
// Python: PIL's resize (BOX / BILINEAR / BICUBIC, 8-bit fixed point, as in Pillow's Resample.c)
// with ADM's center_crop_arr, and torchvision.utils.save_image(normalize=True,
// value_range=(-1, 1)) for sample grids. Pixels are interleaved HWC uint8 unless stated.
// Every function that touches a file returns 0 or -1 with a one-line message in err.
// formats/image_io.c is the only file that defines STB_IMAGE_IMPLEMENTATION and
// STB_IMAGE_WRITE_IMPLEMENTATION; include <stb_image.h> elsewhere only for declarations.
#ifndef MALA_IMAGE_IO_H
#define MALA_IMAGE_IO_H

#include <stdint.h>

#include "core/common.h"

// Formats read (anything else is refused by name before a decoder sees it): PNG (1, 2, 4, 8 or
// 16 bits per sample; gray, gray + alpha, RGB, RGBA, palette), JPEG (baseline, progressive), BMP
// (stb_image for these three), and binary PGM / PPM (P5 / P6, maxval 1..65535, read here: samples
// rescaled to 0..255 as round(v * 255 / maxval)). 16-bit PNG samples keep their high byte.
// Before anything is decoded the header is checked against limits a dataset could need:
#define IMAGE_MAX_SIDE       32768           // pixels per side
#define IMAGE_MAX_PIXELS     89478485        // width * height: PIL's Image.MAX_IMAGE_PIXELS
#define IMAGE_MAX_FILE_BYTES (256ll << 20)   // bytes of the file
typedef struct { int max_side; int64_t max_pixels, max_file_bytes; } ImageLimits;
ImageLimits image_limits_default(void);

// Decodes an image file held in memory as RGB (channels 3; gray replicated, alpha dropped like
// PIL's convert("RGB")) or gray (channels 1; PIL's convert("L") weights applied to the RGB
// pixels). *pixels is malloc'd HWC. lim NULL means image_limits_default(). `name` is used in
// messages. A PNG without its IEND chunk or a JPEG without its end marker is refused (truncated).
int image_decode(const void *buf, size_t len, const char *name, int channels, const ImageLimits *lim,
                 uint8_t **pixels, int *w, int *h, MalaErr *err);
// The checks of image_decode without decoding the pixels.
int image_probe(const void *buf, size_t len, const char *name, const ImageLimits *lim, int *w, int *h, MalaErr *err);
// Reads a file (at most IMAGE_MAX_FILE_BYTES) and decodes it with the default limits.
int image_load(const char *path, int channels, uint8_t **pixels, int *w, int *h, MalaErr *err);
// Cheap validity check without decoding (reads the header, the PNG chunk headers and the last
// bytes): the format is supported, the header parses, the size is within the limits and, for
// PNG, JPEG and PGM / PPM, the file is complete (every chunk inside the file and IEND /
// end-of-image marker / all samples), which catches truncated downloads.
int image_check(const char *path, int *w, int *h, MalaErr *err);
// Writes an 8-bit PNG (channels 1, 2, 3 or 4) atomically.
int image_write_png(const char *path, const uint8_t *pixels, int w, int h, int channels, MalaErr *err);
// The same with a tEXt chunk (keyword, text) before IEND (formats/png_text.h); keyword NULL: none.
int image_write_png_text(const char *path, const uint8_t *pixels, int w, int h, int channels, const char *keyword,
                         const char *text, MalaErr *err);
// The PNG bytes image_write_png_text writes, in memory: *out malloc'd, *out_len bytes (name: for messages).
int image_encode_png_text(const uint8_t *pixels, int w, int h, int channels, const char *keyword, const char *text,
                          const char *name, uint8_t **out, size_t *out_len, MalaErr *err);

// PIL gray conversion of one RGB pixel: (r*19595 + g*38470 + b*7471 + 0x8000) >> 16.
static inline uint8_t image_rgb_to_l(const uint8_t *rgb) {
    return (uint8_t)((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

typedef enum { IMAGE_BOX = 0, IMAGE_BILINEAR = 1, IMAGE_BICUBIC = 2 } ImageFilter;

// PIL Image.resize((ow, oh), filter) on an 8-bit w x h x c image (separable, horizontal pass
// first, each pass rounded to uint8 with Pillow's 22-bit fixed-point coefficients).
// DiT's sample_ddp.py quantisation of a sample in [-1, 1]: clamp(127.5 x + 128, 0, 255), truncated
// (the ADM evaluator's .npz batches, and eval's on-the-fly samples that must equal them).
static inline uint8_t image_sample_to_u8(float x) {
    float v = 127.5f * x + 128.0f;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void image_resize(uint8_t *dst, int ow, int oh, const uint8_t *src, int w, int h, int c, ImageFilter filter);
// ADM/DiT center_crop_arr: while min(w, h) >= 2*size, BOX-resize to (w/2, h/2); then BICUBIC to
// (round(w*s), round(h*s)) with s = size / min(w, h) (Python round, half to even); then crop the
// centre size x size. dst holds size*size*c bytes. Returns 0, or -1 for a bad size.
int image_center_crop_arr(uint8_t *dst, int size, const uint8_t *src, int w, int h, int c);

// uint8 HWC -> float CHW in [-1, 1] as x / 127.5 - 1, optionally mirrored left-right.
void image_u8_to_float(float *chw, const uint8_t *hwc, int w, int h, int c, int hflip);

// torchvision.utils.make_grid(x, nrow, padding, normalize=True, value_range=(-1, 1), pad_value=0)
// followed by save_image's mul(255).add(0.5).clamp(0, 255).to(uint8). x is float NCHW with
// c = 1 or 3; the result is always RGB (1 channel is replicated, as torchvision does). A single
// image gets no padding (make_grid returns it as is). *rgb is malloc'd gh x gw x 3.
int image_grid_u8(uint8_t **rgb, int *gw, int *gh, const float *x, int n, int c, int h, int w,
                  int nrow, int padding, MalaErr *err);
// image_grid_u8 + image_write_png.
int image_save_grid(const char *path, const float *x, int n, int c, int h, int w, int nrow, int padding,
                    MalaErr *err);
// The same with a tEXt chunk (keyword, text) before IEND; keyword NULL: none.
int image_save_grid_text(const char *path, const float *x, int n, int c, int h, int w, int nrow, int padding,
                         const char *keyword, const char *text, MalaErr *err);

#endif

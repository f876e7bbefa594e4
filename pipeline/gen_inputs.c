// defines: gen_load_image, gen_decode_image, gen_load_mask, gen_decode_mask, gen_list_images, gen_free_list
#include "pipeline/gen_inputs.h"

#include <dirent.h>
#include <stdio.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/image_io.h"

// pixels (w x h x c) -> size x size x c by center_crop_arr, or as they are when already that size.
static int crop(uint8_t **pix, int w, int h, int c, int S, const char *path, MalaErr *err) {
    if (w == S && h == S) return 0;
    uint8_t *dst = xmalloc((size_t)S * S * c);
    if (image_center_crop_arr(dst, S, *pix, w, h, c)) {
        free(dst);
        return mala_errf(err, "%s: cannot crop %dx%d to %dx%d", path, w, h, S, S);
    }
    free(*pix);
    *pix = dst;
    return 0;
}

static int to_float(uint8_t *pix, int w, int h, int C, int S, const char *name, float *out, MalaErr *err) {
    if (crop(&pix, w, h, C, S, name, err)) { free(pix); return -1; }
    image_u8_to_float(out, pix, S, S, C, 0);
    free(pix);
    return 0;
}

int gen_load_image(const char *path, int C, int S, float *out, MalaErr *err) {
    if (C != 1 && C != 3) return mala_errf(err, "%s: the model makes %d-channel images; input images need 1 or 3", path, C);
    uint8_t *pix;
    int w, h;
    if (image_load(path, C, &pix, &w, &h, err)) return -1;
    return to_float(pix, w, h, C, S, path, out, err);
}

int gen_decode_image(const void *buf, size_t len, const char *name, int C, int S, float *out, MalaErr *err) {
    if (C != 1 && C != 3) return mala_errf(err, "%s: the model makes %d-channel images; input images need 1 or 3", name, C);
    uint8_t *pix;
    int w, h;
    if (image_decode(buf, len, name, C, NULL, &pix, &w, &h, err)) return -1;
    return to_float(pix, w, h, C, S, name, out, err);
}

int gen_load_grid_cell(const char *path, int C, int S, int k, int cw, int ch, int pad, float *out, MalaErr *err) {
    if (C != 1 && C != 3) return mala_errf(err, "%s: the model makes %d-channel images; input images need 1 or 3", path, C);
    uint8_t *pix;
    int w, h;
    if (image_load(path, C, &pix, &w, &h, err)) return -1;
    int cols = (w - pad) / (cw + pad);
    if (cols < 1) cols = 1;
    int x0 = pad + (k % cols) * (cw + pad), y0 = pad + (k / cols) * (ch + pad);
    if (k < 0 || x0 + cw > w || y0 + ch > h) {
        free(pix);
        return mala_errf(err, "%s: image %d of a grid of %dx%d cells does not fit its %dx%d pixels", path, k, cw, ch, w, h);
    }
    uint8_t *cell = xmalloc((size_t)cw * ch * C);
    for (int y = 0; y < ch; y++) memcpy(cell + (size_t)y * cw * C, pix + ((size_t)(y0 + y) * w + x0) * C, (size_t)cw * C);
    free(pix);
    if (crop(&cell, cw, ch, C, S, path, err)) { free(cell); return -1; }
    image_u8_to_float(out, cell, S, S, C, 0);
    free(cell);
    return 0;
}

static int to_mask(uint8_t *pix, int w, int h, int S, int invert, const char *name, float *out, MalaErr *err) {
    if (crop(&pix, w, h, 1, S, name, err)) { free(pix); return -1; }
    size_t white = 0;
    for (size_t i = 0; i < (size_t)S * S; i++) white += (out[i] = (pix[i] >= 128) != (invert != 0) ? 1.0f : 0.0f) > 0;
    free(pix);
    // no pixel to regenerate: every step would only put the input back (the run returns the input)
    if (!white) return mala_errf(err, "%s: the mask is all %s at %dx%d (no pixel %s 128 to regenerate): nothing to "
                                 "inpaint", name, invert ? "white" : "black", S, S, invert ? "<" : ">=");
    return 0;
}

int gen_load_mask(const char *path, int S, float *out, MalaErr *err) {
    uint8_t *pix;
    int w, h;
    if (image_load(path, 1, &pix, &w, &h, err)) return -1;
    return to_mask(pix, w, h, S, 0, path, out, err);
}

int gen_decode_mask(const void *buf, size_t len, const char *name, int S, int invert, float *out, MalaErr *err) {
    uint8_t *pix;
    int w, h;
    if (image_decode(buf, len, name, 1, NULL, &pix, &w, &h, err)) return -1;
    return to_mask(pix, w, h, S, invert, name, out, err);
}

int gen_png_has_alpha(const char *path) {
    uint8_t h[26];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    // PNG signature, then IHDR: colour type at byte 25 (4 gray + alpha, 6 RGBA; PNG spec 11.2.2)
    return got == sizeof h && !memcmp(h, "\x89PNG\r\n\x1a\n", 8) && (h[25] == 4 || h[25] == 6);
}

static int is_image_name(const char *name) {
    static const char *const ext[] = {".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm"};
    size_t n = strlen(name);
    for (size_t k = 0; k < sizeof ext / sizeof ext[0]; k++) {
        size_t e = strlen(ext[k]);
        if (n > e && !strcasecmp(name + n - e, ext[k])) return 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int gen_list_images(const char *dir, char ***paths, int *n, MalaErr *err) {
    DIR *d = opendir(dir);
    if (!d) return mala_errf(err, "%s: cannot read the folder: %s", dir, strerror(errno));
    int cap = 16, k = 0;
    char **p = xmalloc(cap * sizeof(char *));
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || !is_image_name(e->d_name)) continue;
        if (k == cap) p = realloc(p, (cap *= 2) * sizeof(char *));
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        p[k] = xmalloc(len);
        snprintf(p[k++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!k) {
        free(p);
        return mala_errf(err, "%s: no images in the folder (.png, .jpg, .jpeg, .bmp, .pgm, .ppm)", dir);
    }
    qsort(p, k, sizeof *p, cmp_str);
    *paths = p;
    *n = k;
    return 0;
}

void gen_free_list(char **paths, int n) {
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

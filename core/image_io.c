// defines: image_load, image_check, image_write_png, image_resize, image_center_crop_arr,
//          image_u8_to_float, image_grid_u8, image_save_grid
// The single translation unit holding the stb_image / stb_image_write implementations.
#include "image_io.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "atomic_file.h"  // defines: atomic_write_file

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_FAILURE_USERMSG
#include <stb_image.h>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#pragma GCC diagnostic pop

// ---------------------------------------------------------------------------------------------
// files

int image_load(const char *path, int channels, uint8_t **pixels, int *w, int *h, MalaErr *err) {
    *pixels = NULL;
    if (channels != 1 && channels != 3) return mala_errf(err, "%s: image_load wants 1 or 3 channels, got %d", path, channels);
    FILE *f = fopen(path, "rb");
    if (!f) return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    int comp = 0;
    uint8_t *rgb = stbi_load_from_file(f, w, h, &comp, 3);
    fclose(f);
    if (!rgb) {
        const char *why = stbi_failure_reason();
        return mala_errf(err, "%s: cannot decode image: %s", path, why ? why : "unknown error");
    }
    if (channels == 3) { *pixels = rgb; return 0; }
    size_t n = (size_t)*w * (size_t)*h;
    uint8_t *g = malloc(n ? n : 1);
    if (!g) { stbi_image_free(rgb); return mala_errf(err, "%s: out of memory", path); }
    for (size_t i = 0; i < n; i++) g[i] = image_rgb_to_l(rgb + 3 * i);
    stbi_image_free(rgb);
    *pixels = g;
    return 0;
}

int image_check(const char *path, int *w, int *h, MalaErr *err) {
    int ww = 0, hh = 0, comp = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    if (!stbi_info_from_file(f, &ww, &hh, &comp)) {
        const char *why = stbi_failure_reason();
        fclose(f);
        return mala_errf(err, "%s: not a readable image (%s)", path, why ? why : "unknown format");
    }
    unsigned char head[8] = {0}, tail[1024];
    long size = -1;
    if (fseek(f, 0, SEEK_SET) == 0 && fread(head, 1, 8, f) == 8 && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    size_t tl = 0;
    if (size > 0) {
        tl = size < (long)sizeof tail ? (size_t)size : sizeof tail;
        if (fseek(f, size - (long)tl, SEEK_SET) != 0 || fread(tail, 1, tl, f) != tl) tl = 0;
    }
    fclose(f);
    if (memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0) {
        size_t from = tl > 64 ? tl - 64 : 0;
        int ok = 0;
        for (size_t i = from; i + 4 <= tl; i++) if (memcmp(tail + i, "IEND", 4) == 0) { ok = 1; break; }
        if (!ok) return mala_errf(err, "%s: truncated PNG (no IEND chunk at the end)", path);
    } else if (head[0] == 0xFF && head[1] == 0xD8) {
        int ok = 0;
        for (size_t i = 0; i + 2 <= tl; i++) if (tail[i] == 0xFF && tail[i + 1] == 0xD9) { ok = 1; break; }
        if (!ok) return mala_errf(err, "%s: truncated JPEG (no end-of-image marker)", path);
    }
    if (w) *w = ww;
    if (h) *h = hh;
    return 0;
}

int image_write_png(const char *path, const uint8_t *pixels, int w, int h, int channels, MalaErr *err) {
    if (w <= 0 || h <= 0 || channels < 1 || channels > 4)
        return mala_errf(err, "%s: bad PNG geometry %dx%dx%d", path, w, h, channels);
    int len = 0;
    unsigned char *png = stbi_write_png_to_mem(pixels, w * channels, w, h, channels, &len);
    if (!png) return mala_errf(err, "%s: PNG encoding failed", path);
    int rc = atomic_write_file(path, png, (size_t)len, err);
    STBIW_FREE(png);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// PIL resampling (Pillow src/libImaging/Resample.c, 8 bits per channel)

#define PRECISION_BITS (32 - 8 - 2)

static double filter_box(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }
static double filter_bilinear(double x) { if (x < 0) x = -x; return x < 1.0 ? 1.0 - x : 0.0; }
static double filter_bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

// Returns ksize; fills bounds[2*out] (xmin, count) and integer coefficients kk[out*ksize].
static int precompute_coeffs(int in_size, int out_size, ImageFilter f, int **boundsp, int32_t **kkp) {
    double (*filter)(double) = f == IMAGE_BOX ? filter_box : f == IMAGE_BILINEAR ? filter_bilinear : filter_bicubic;
    double support0 = f == IMAGE_BOX ? 0.5 : f == IMAGE_BILINEAR ? 1.0 : 2.0;
    double scale = (double)((float)in_size - 0.0f) / out_size, filterscale = scale;
    if (filterscale < 1.0) filterscale = 1.0;
    double support = support0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    int *bounds = xmalloc(sizeof(int) * 2 * (size_t)out_size);
    double *kd = xmalloc(sizeof(double) * (size_t)out_size * (size_t)ksize);
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *k = kd + (size_t)xx * ksize;
        int x;
        for (x = 0; x < xmax; x++) { double wgt = filter((x + xmin - center + 0.5) * ss); k[x] = wgt; ww += wgt; }
        for (x = 0; x < xmax; x++) if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        bounds[2 * xx] = xmin; bounds[2 * xx + 1] = xmax;
    }
    int32_t *kk = xmalloc(sizeof(int32_t) * (size_t)out_size * (size_t)ksize);
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++)
        kk[i] = kd[i] < 0 ? (int32_t)(-0.5 + kd[i] * (1 << PRECISION_BITS)) : (int32_t)(0.5 + kd[i] * (1 << PRECISION_BITS));
    free(kd);
    *boundsp = bounds; *kkp = kk;
    return ksize;
}

static inline uint8_t clip8(int v) {
    if (v >= (1 << PRECISION_BITS << 8)) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PRECISION_BITS);
}

void image_resize(uint8_t *dst, int ow, int oh, const uint8_t *src, int w, int h, int c, ImageFilter filter) {
    int need_h = ow != w, need_v = oh != h;
    if (!need_h && !need_v) { memcpy(dst, src, (size_t)w * h * c); return; }
    int *bh = NULL, *bv = NULL;
    int32_t *kh = NULL, *kv = NULL;
    int ksh = precompute_coeffs(w, ow, filter, &bh, &kh);
    int ksv = precompute_coeffs(h, oh, filter, &bv, &kv);
    int yfirst = bv[0], ylast = bv[2 * oh - 2] + bv[2 * oh - 1];
    const uint8_t *vin = src;   // input of the vertical pass
    uint8_t *tmp = NULL;
    if (need_h) {
        for (int i = 0; i < oh; i++) bv[2 * i] -= yfirst;
        int rows = ylast - yfirst;
        uint8_t *out = need_v ? (tmp = xmalloc((size_t)ow * rows * c)) : dst;
        for (int yy = 0; yy < rows; yy++) {
            const uint8_t *row = src + (size_t)(yy + yfirst) * w * c;
            uint8_t *orow = out + (size_t)yy * ow * c;
            for (int xx = 0; xx < ow; xx++) {
                int xmin = bh[2 * xx], xmax = bh[2 * xx + 1];
                const int32_t *k = kh + (size_t)xx * ksh;
                for (int ch = 0; ch < c; ch++) {
                    int ss = 1 << (PRECISION_BITS - 1);
                    for (int x = 0; x < xmax; x++) ss += row[(size_t)(x + xmin) * c + ch] * k[x];
                    orow[(size_t)xx * c + ch] = clip8(ss);
                }
            }
        }
        vin = tmp;
    }
    if (need_v) {
        int iw = ow;   // after the horizontal pass (or unchanged width)
        for (int yy = 0; yy < oh; yy++) {
            int ymin = bv[2 * yy], ymax = bv[2 * yy + 1];
            const int32_t *k = kv + (size_t)yy * ksv;
            uint8_t *orow = dst + (size_t)yy * ow * c;
            for (int xx = 0; xx < iw * c; xx++) {
                int ss = 1 << (PRECISION_BITS - 1);
                for (int y = 0; y < ymax; y++) ss += vin[(size_t)(y + ymin) * iw * c + xx] * k[y];
                orow[xx] = clip8(ss);
            }
        }
    }
    free(tmp); free(bh); free(bv); free(kh); free(kv);
}

int image_center_crop_arr(uint8_t *dst, int size, const uint8_t *src, int w, int h, int c) {
    if (size <= 0 || w <= 0 || h <= 0 || c <= 0) return -1;
    const uint8_t *cur = src;
    uint8_t *own = NULL;
    while ((w < h ? w : h) >= 2 * size) {
        int nw = w / 2, nh = h / 2;
        uint8_t *next = xmalloc((size_t)nw * nh * c);
        image_resize(next, nw, nh, cur, w, h, c, IMAGE_BOX);
        free(own);
        own = next; cur = next; w = nw; h = nh;
    }
    double scale = (double)size / (w < h ? w : h);
    int nw = (int)nearbyint(w * scale), nh = (int)nearbyint(h * scale);   // half to even, as Python's round
    if (nw < size || nh < size) { free(own); return -1; }
    uint8_t *res = xmalloc((size_t)nw * nh * c);
    image_resize(res, nw, nh, cur, w, h, c, IMAGE_BICUBIC);
    free(own);
    int cy = (nh - size) / 2, cx = (nw - size) / 2;
    for (int y = 0; y < size; y++)
        memcpy(dst + (size_t)y * size * c, res + ((size_t)(y + cy) * nw + cx) * c, (size_t)size * c);
    free(res);
    return 0;
}

void image_u8_to_float(float *chw, const uint8_t *hwc, int w, int h, int c, int hflip) {
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int sx = hflip ? w - 1 - x : x;
                chw[((size_t)ch * h + y) * w + x] = (float)hwc[((size_t)y * w + sx) * c + ch] / 127.5f - 1.0f;
            }
}

// ---------------------------------------------------------------------------------------------
// sample grids (torchvision.utils.make_grid + save_image)

static inline uint8_t to_u8_torchvision(float v) {
    if (v != v) return 0;                     // NaN
    v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    v = (v + 1.0f) / 2.0f;                    // sub_(low).div_(high - low)
    v = v * 255.0f + 0.5f;                    // mul(255).add_(0.5)
    v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    return (uint8_t)v;                        // to(uint8) truncates
}

int image_grid_u8(uint8_t **rgb, int *gw, int *gh, const float *x, int n, int c, int h, int w,
                  int nrow, int padding, MalaErr *err) {
    *rgb = NULL;
    if (n <= 0 || (c != 1 && c != 3) || h <= 0 || w <= 0 || nrow <= 0 || padding < 0)
        return mala_errf(err, "image grid: bad geometry n=%d c=%d h=%d w=%d nrow=%d padding=%d", n, c, h, w, nrow, padding);
    int pad = n == 1 ? 0 : padding;
    int xmaps = nrow < n ? nrow : n, ymaps = (n + xmaps - 1) / xmaps;
    int W = n == 1 ? w : xmaps * (w + pad) + pad, H = n == 1 ? h : ymaps * (h + pad) + pad;
    uint8_t *g = calloc((size_t)W * H * 3, 1);
    if (!g) return mala_errf(err, "image grid: out of memory (%dx%d)", W, H);
    for (int k = 0; k < n; k++) {
        int oy = (k / xmaps) * (h + pad) + pad, ox = (k % xmaps) * (w + pad) + pad;
        const float *img = x + (size_t)k * c * h * w;
        for (int y = 0; y < h; y++)
            for (int xx = 0; xx < w; xx++)
                for (int ch = 0; ch < 3; ch++) {
                    float v = img[((size_t)(c == 1 ? 0 : ch) * h + y) * w + xx];
                    g[((size_t)(oy + y) * W + ox + xx) * 3 + ch] = to_u8_torchvision(v);
                }
    }
    *rgb = g; *gw = W; *gh = H;
    return 0;
}

int image_save_grid(const char *path, const float *x, int n, int c, int h, int w, int nrow, int padding,
                    MalaErr *err) {
    uint8_t *g; int W, H;
    if (image_grid_u8(&g, &W, &H, x, n, c, h, w, nrow, padding, err)) {
        char msg[MALA_ERR_LEN];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        return mala_errf(err, "%s: %s", path, msg);
    }
    int rc = image_write_png(path, g, W, H, 3, err);
    free(g);
    return rc;
}

// defines: loss_plot_png
#include "loss_plot.h"

#include <math.h>
#include <string.h>

#include "image_io.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-braces"
#include <stb_easy_font.h>  // defines: stb_easy_font_print (quads for a small bitmap font)
#pragma GCC diagnostic pop

enum { W = 640, H = 360, ML = 44, MR = 12, MT = 16, MB = 24 };

static void put(uint8_t *img, int x, int y, const uint8_t rgb[3]) {
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    memcpy(img + ((size_t)y * W + x) * 3, rgb, 3);
}

static void line(uint8_t *img, int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {  // Bresenham
        put(img, x0, y0, rgb);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) { e += dy; x0 += sx; }
        if (e2 <= dx) { e += dx; y0 += sy; }
    }
}

// Draws text with stb_easy_font's axis-aligned quads (4 vertices of 16 bytes each).
static void text(uint8_t *img, int x, int y, const char *s, const uint8_t rgb[3]) {
    static char buf[64 * 1024];
    int quads = stb_easy_font_print((float)x, (float)y, (char *)s, NULL, buf, sizeof buf);
    for (int q = 0; q < quads; q++) {
        const float *v0 = (const float *)(buf + q * 64), *v2 = (const float *)(buf + q * 64 + 32);
        for (int yy = (int)v0[1]; yy < (int)v2[1]; yy++)
            for (int xx = (int)v0[0]; xx < (int)v2[0]; xx++) put(img, xx, yy, rgb);
    }
}

int loss_plot_png(const char *path, const uint64_t *steps, const double *loss, int n, MalaErr *err) {
    static const uint8_t axis[3] = {90, 90, 90}, grid[3] = {225, 225, 225}, curve[3] = {31, 119, 180};
    uint8_t *img = xmalloc((size_t)W * H * 3);
    memset(img, 255, (size_t)W * H * 3);
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (loss[i] > 0 && isfinite(loss[i])) { lo = fmin(lo, log10(loss[i])); hi = fmax(hi, log10(loss[i])); }
    if (!(hi >= lo)) { lo = -2; hi = 0; }
    lo = floor(lo * 4) / 4; hi = ceil(hi * 4) / 4;
    if (hi - lo < 0.25) hi = lo + 0.25;
    // horizontal grid lines at quarter decades, labelled with the loss
    for (double v = lo; v <= hi + 1e-9; v += 0.25) {
        int y = MT + (int)((hi - v) / (hi - lo) * (H - MT - MB));
        line(img, ML, y, W - MR, y, grid);
        char lab[16];
        snprintf(lab, sizeof lab, "%.3g", pow(10.0, v));
        text(img, 2, y - 3, lab, axis);
    }
    line(img, ML, MT, ML, H - MB, axis);
    line(img, ML, H - MB, W - MR, H - MB, axis);
    double s0 = n ? (double)steps[0] : 0, s1 = n ? (double)steps[n - 1] : 1;
    int single = s1 <= s0;  // one logged point (or all at one step): put it in the middle
    if (single) { s0 -= 1; s1 += 1; }
    int px = -1, py = -1, shown = 0;
    double last = NAN;
    for (int i = 0; i < n; i++) {
        if (!(loss[i] > 0 && isfinite(loss[i]))) continue;
        int x = ML + (int)((steps[i] - s0) / (s1 - s0) * (W - ML - MR));
        int y = MT + (int)((hi - log10(loss[i])) / (hi - lo) * (H - MT - MB));
        if (px >= 0) line(img, px, py, x, y, curve);
        if (n <= 60)  // few points: a dot on each, so a short run shows something
            for (int dy = -2; dy <= 2; dy++)
                for (int dx = -2; dx <= 2; dx++) put(img, x + dx, y + dy, curve);
        px = x; py = y;
        last = loss[i];
        shown++;
    }
    if (single) { s0 += 1; s1 -= 1; }
    if (shown) {
        char now[64];
        snprintf(now, sizeof now, "loss %.4g at step %llu", last, (unsigned long long)steps[n - 1]);
        text(img, W - MR - 6 * (int)strlen(now), 2, now, curve);
    }
    char lab[64];
    snprintf(lab, sizeof lab, "step %llu", (unsigned long long)s0);
    text(img, ML, H - MB + 8, lab, axis);
    snprintf(lab, sizeof lab, "step %llu", (unsigned long long)s1);
    text(img, W - MR - 6 * (int)strlen(lab), H - MB + 8, lab, axis);
    text(img, ML + 4, 2, "training loss (log scale)", axis);
    int rc = image_write_png(path, img, W, H, 3, err);
    free(img);
    return rc;
}

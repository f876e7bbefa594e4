// defines: line_plot_png, loss_plot_png
#include "line_plot.h"

#include <math.h>
#include <string.h>

#include "image_io.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wmissing-braces"
#include <stb_easy_font.h>  // defines: stb_easy_font_print (quads for a small bitmap font)
#pragma GCC diagnostic pop

enum { W = 720, H = 420, ML = 64, MR = 150, MT = 22, MB = 34 };

// matplotlib's tab10 colours
static const uint8_t COLORS[10][3] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                                      {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127},
                                      {188, 189, 34},  {23, 190, 207}};

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

static void text(uint8_t *img, int x, int y, const char *s, const uint8_t rgb[3]) {
    static char buf[64 * 1024];
    int quads = stb_easy_font_print((float)x, (float)y, (char *)s, NULL, buf, sizeof buf);
    for (int q = 0; q < quads; q++) {
        const float *v0 = (const float *)(buf + q * 64), *v2 = (const float *)(buf + q * 64 + 32);
        for (int yy = (int)v0[1]; yy < (int)v2[1]; yy++)
            for (int xx = (int)v0[0]; xx < (int)v2[0]; xx++) put(img, xx, yy, rgb);
    }
}

static int usable(double x, double y, int log_y) { return isfinite(x) && isfinite(y) && (!log_y || y > 0); }

static void label_number(char *buf, size_t n, double v) {
    double a = fabs(v);
    if (a >= 1e6) snprintf(buf, n, "%.3gM", v / 1e6);
    else if (a >= 1e4) snprintf(buf, n, "%.3gK", v / 1e3);
    else snprintf(buf, n, "%.4g", v);
}

int line_plot_png(const char *path, const PlotSeries *s, int nseries, const PlotStyle *st, MalaErr *err) {
    static const uint8_t axis[3] = {90, 90, 90}, grid[3] = {228, 228, 228};
    uint8_t *img = xmalloc((size_t)W * H * 3);
    memset(img, 255, (size_t)W * H * 3);
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < nseries; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (!usable(s[k].x[i], s[k].y[i], st->log_y)) continue;
            double y = st->log_y ? log10(s[k].y[i]) : s[k].y[i];
            x0 = fmin(x0, s[k].x[i]); x1 = fmax(x1, s[k].x[i]);
            y0 = fmin(y0, y); y1 = fmax(y1, y);
        }
    if (!(x1 >= x0)) { x0 = 0; x1 = 1; y0 = 0; y1 = 1; }
    if (x1 <= x0) { x0 -= 1; x1 += 1; }
    if (y1 <= y0) { double d = fabs(y0) > 0 ? fabs(y0) * 0.1 : 0.5; y0 -= d; y1 += d; }
    double pad = (y1 - y0) * 0.05;
    y0 -= pad; y1 += pad;
    int pw = W - ML - MR, ph = H - MT - MB;
    // five horizontal grid lines with their values
    for (int g = 0; g <= 4; g++) {
        double v = y0 + (y1 - y0) * g / 4;
        int y = MT + (int)((y1 - v) / (y1 - y0) * ph);
        line(img, ML, y, ML + pw, y, grid);
        char lab[32];
        label_number(lab, sizeof lab, st->log_y ? pow(10, v) : v);
        text(img, 4, y - 3, lab, axis);
    }
    line(img, ML, MT, ML, MT + ph, axis);
    line(img, ML, MT + ph, ML + pw, MT + ph, axis);
    for (int k = 0; k < nseries; k++) {
        const uint8_t *col = COLORS[k % 10];
        int px = -1, py = -1;
        for (int i = 0; i < s[k].n; i++) {
            if (!usable(s[k].x[i], s[k].y[i], st->log_y)) continue;
            double yv = st->log_y ? log10(s[k].y[i]) : s[k].y[i];
            int x = ML + (int)((s[k].x[i] - x0) / (x1 - x0) * pw), y = MT + (int)((y1 - yv) / (y1 - y0) * ph);
            if (px >= 0) line(img, px, py, x, y, col);
            if (s[k].n <= 60)
                for (int dy = -2; dy <= 2; dy++)
                    for (int dx = -2; dx <= 2; dx++) put(img, x + dx, y + dy, col);
            px = x; py = y;
        }
        int ly = MT + 6 + 14 * k;  // the legend, right of the plot
        for (int dy = -1; dy <= 1; dy++) line(img, ML + pw + 10, ly + 3 + dy, ML + pw + 28, ly + 3 + dy, col);
        text(img, ML + pw + 32, ly, s[k].name ? s[k].name : "?", col);
    }
    char lab[64];
    label_number(lab, sizeof lab, x0);
    text(img, ML, MT + ph + 6, lab, axis);
    label_number(lab, sizeof lab, x1);
    text(img, ML + pw - 6 * (int)strlen(lab), MT + ph + 6, lab, axis);
    if (st->xlabel) text(img, ML + pw / 2 - 3 * (int)strlen(st->xlabel), MT + ph + 20, st->xlabel, axis);
    char title[256];
    snprintf(title, sizeof title, "%s%s%s%s", st->title ? st->title : "", st->ylabel ? " (" : "",
             st->ylabel ? st->ylabel : "", st->ylabel ? (st->log_y ? ", log scale)" : ")") : "");
    text(img, ML, 6, title, axis);
    int rc = image_write_png(path, img, W, H, 3, err);
    free(img);
    return rc;
}

int loss_plot_png(const char *path, const uint64_t *steps, const double *loss, int n, MalaErr *err) {
    double *x = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int i = 0; i < n; i++) x[i] = (double)steps[i];
    const PlotSeries s = {"loss", x, loss, n};
    const PlotStyle st = {"training loss", "step", "loss", 1};
    const int rc = line_plot_png(path, &s, 1, &st, err);
    free(x);
    return rc;
}

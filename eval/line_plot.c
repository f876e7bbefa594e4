// defines: line_plot_png, loss_plot_png, plot_ticks, plot_tick_label, plot_text, plot_text_width
#include "eval/line_plot.h"

#include <math.h>
#include <string.h>

#include "formats/image_io.h"
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

void plot_text(uint8_t *img, int w, int h, int x, int y, const char *s, const uint8_t rgb[3]) {
    static char buf[64 * 1024];
    int quads = stb_easy_font_print((float)x, (float)y, (char *)s, NULL, buf, sizeof buf);
    for (int q = 0; q < quads; q++) {
        const float *v0 = (const float *)(buf + q * 64), *v2 = (const float *)(buf + q * 64 + 32);
        for (int yy = (int)v0[1]; yy < (int)v2[1]; yy++)
            for (int xx = (int)v0[0]; xx < (int)v2[0]; xx++)
                if (xx >= 0 && yy >= 0 && xx < w && yy < h) memcpy(img + ((size_t)yy * w + xx) * 3, rgb, 3);
    }
}

int plot_text_width(const char *s) { return stb_easy_font_width((char *)s); }

static void text(uint8_t *img, int x, int y, const char *s, const uint8_t rgb[3]) {
    plot_text(img, W, H, x, y, s, rgb);
}

static int usable(double x, double y, int log_y) { return isfinite(x) && isfinite(y) && (!log_y || y > 0); }

// 1, 2 or 5 times a power of ten, the smallest such >= x (x > 0).
static double nice_step(double x) {
    double p = pow(10, floor(log10(x))), m = x / p;
    return (m <= 1 + 1e-9 ? 1 : m <= 2 + 1e-9 ? 2 : m <= 5 + 1e-9 ? 5 : 10) * p;
}

int plot_ticks(double lo, double hi, double *ticks, double *step) {
    *step = nice_step((hi - lo) / 5);  // 2 to 6 ticks inside [lo, hi]
    int n = 0;
    for (double k = ceil(lo / *step - 1e-9); n < PLOT_MAX_TICKS && k * *step <= hi + 1e-9 * *step; k++)
        ticks[n++] = fabs(k) < 0.5 ? 0 : k * *step;  // k * step, not a running sum: no drift, no "-0"
    return n;
}

void plot_tick_label(char *buf, size_t n, double v, double step) {
    if (v == 0) { snprintf(buf, n, "0"); return; }
    double a = fmax(fabs(v), step), scale = a >= 1e6 ? 1e6 : a >= 1e4 ? 1e3 : 1;
    int dec = (int)ceil(-log10(step / scale) - 1e-9);  // enough decimals that neighbours differ
    dec = dec < 0 ? 0 : dec > 12 ? 12 : dec;
    snprintf(buf, n, "%.*f%s", dec, v / scale, scale == 1e6 ? "M" : scale == 1e3 ? "K" : "");
}

// Widens [*lo, *hi] to at least a thousandth of the values' magnitude (1 when they are all 0):
// a spread far below the printed precision draws flat, not as a full-height zigzag.
static void min_span(double *lo, double *hi) {
    double mag = fmax(fabs(*lo), fabs(*hi)), want = mag > 0 ? 1e-3 * mag : 1;
    if (*hi - *lo >= want) return;
    double mid = 0.5 * (*lo + *hi);
    *lo = mid - want / 2;
    *hi = mid + want / 2;
}

// The y tick values (as plotted: log10 of the value on a log axis) and their labels. A log axis
// spanning more than 3 decades gets powers of ten; one holding two gets 1, 2 and 5 times them;
// a narrower one round values of its range.
static int y_ticks(double y0, double y1, int log_y, double *at, char lab[][32]) {
    double t[PLOT_MAX_TICKS], step;
    int n, m = 0;
    if (!log_y) {
        n = plot_ticks(y0, y1, t, &step);
        for (int i = 0; i < n; i++) at[i] = t[i], plot_tick_label(lab[i], 32, t[i], step);
        return n;
    }
    if (y1 - y0 > 3) {
        double dstep = nice_step((y1 - y0) / 5);
        for (double k = ceil(y0 / dstep) * dstep; k <= y1 && m < PLOT_MAX_TICKS; k += dstep)
            at[m] = k, snprintf(lab[m++], 32, "%g", pow(10, k));
        return m;
    }
    if (floor(y1) - ceil(y0) >= 1) {  // 1, 2 and 5 times the powers of ten
        static const double MANT[3] = {1, 2, 5};
        for (double d = floor(y0); d <= y1; d++)
            for (int i = 0; i < 3 && m < PLOT_MAX_TICKS; i++) {
                double v = log10(MANT[i]) + d;
                if (v >= y0 && v <= y1) at[m] = v, snprintf(lab[m++], 32, "%g", MANT[i] * pow(10, d));
            }
        return m;
    }
    n = plot_ticks(pow(10, y0), pow(10, y1), t, &step);
    for (int i = 0; i < n; i++)
        if (t[i] > 0) at[m] = log10(t[i]), plot_tick_label(lab[m++], 32, t[i], step);
    return m;
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
    if (st->log_y) {  // the minimum span of the values, not of their logarithms
        double lo = pow(10, y0), hi = pow(10, y1);
        min_span(&lo, &hi);
        if (lo > 0) y0 = log10(lo), y1 = log10(hi);
    } else {
        min_span(&y0, &y1);
    }
    double pad = (y1 - y0) * 0.05;
    y0 -= pad; y1 += pad;
    int pw = W - ML - MR, ph = H - MT - MB;
    // horizontal grid lines at round values, labelled with enough digits to tell them apart
    double at[PLOT_MAX_TICKS];
    char lab[PLOT_MAX_TICKS][32];
    int nt = y_ticks(y0, y1, st->log_y, at, lab);
    for (int g = 0; g < nt; g++) {
        int y = MT + (int)((y1 - at[g]) / (y1 - y0) * ph);
        line(img, ML, y, ML + pw, y, grid);
        text(img, ML - 4 - plot_text_width(lab[g]), y - 3, lab[g], axis);
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
    double xt[PLOT_MAX_TICKS], xstep;
    int nx = plot_ticks(x0, x1, xt, &xstep);
    for (int g = 0; g < nx; g++) {  // round x values with a tick mark each
        int x = ML + (int)((xt[g] - x0) / (x1 - x0) * pw);
        char xl[32];
        plot_tick_label(xl, sizeof xl, xt[g], xstep);
        line(img, x, MT + ph, x, MT + ph + 3, axis);
        text(img, x - plot_text_width(xl) / 2, MT + ph + 6, xl, axis);
    }
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

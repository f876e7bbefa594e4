// A small line chart as a PNG: several named series of (x, y) points, a legend, axis labels and
// round tick values on each axis; linear axes, or a log-scale y. Points that are not finite (or
// not positive on a log axis) are left out. A y spread below a thousandth of the values draws flat.
#ifndef MALA_LINE_PLOT_H
#define MALA_LINE_PLOT_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

typedef struct {
    const char *name;
    const double *x, *y;
    int n;
} PlotSeries;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int log_y;
} PlotStyle;

#define PLOT_MAX_TICKS 8

// Round tick values inside [lo, hi] (lo < hi): multiples of *step, a 1, 2 or 5 times a power of
// ten giving 2 to 6 of them. Returns their number.
int plot_ticks(double lo, double hi, double *ticks, double *step);
// A tick's label with the decimals its step needs (neighbours differ), large values as 640K, 1.2M.
void plot_tick_label(char *buf, size_t n, double v, double step);
// Text in the built-in bitmap font (about 7 pixels high) into an RGB image of w x h; its width.
void plot_text(uint8_t *rgb, int w, int h, int x, int y, const char *s, const uint8_t color[3]);
int plot_text_width(const char *s);

int line_plot_png(const char *path, const PlotSeries *s, int nseries, const PlotStyle *style, MalaErr *err);

// A training run's loss curve (log-scale loss against step): one series of line_plot_png.
int loss_plot_png(const char *path, const uint64_t *steps, const double *loss, int n, MalaErr *err);

#endif

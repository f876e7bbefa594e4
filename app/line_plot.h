// A small line chart as a PNG: several named series of (x, y) points, a legend, axis labels and
// the value range on each axis; linear axes, or a log-scale y. Points that are not finite (or
// not positive on a log axis) are left out.
#ifndef MALA_LINE_PLOT_H
#define MALA_LINE_PLOT_H

#include <stdint.h>

#include "common.h"

typedef struct {
    const char *name;
    const double *x, *y;
    int n;
} PlotSeries;

typedef struct {
    const char *title, *xlabel, *ylabel;
    int log_y;
} PlotStyle;

int line_plot_png(const char *path, const PlotSeries *s, int nseries, const PlotStyle *style, MalaErr *err);

// A training run's loss curve (log-scale loss against step): one series of line_plot_png.
int loss_plot_png(const char *path, const uint64_t *steps, const double *loss, int n, MalaErr *err);

#endif

// The loss curve of a run as a small PNG (log-scale loss against step), redrawn as training goes.
#ifndef MALA_LOSS_PLOT_H
#define MALA_LOSS_PLOT_H

#include <stdint.h>

#include "common.h"

int loss_plot_png(const char *path, const uint64_t *steps, const double *loss, int n, MalaErr *err);

#endif

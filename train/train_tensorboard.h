// mala train's TensorBoard log (--tensorboard): the log.csv row as scalars and the sample grids as
// images, in the run directory's event file (formats/tfevents.h). Rank 0 only, like log.csv.
#ifndef MALA_TRAIN_TENSORBOARD_H
#define MALA_TRAIN_TENSORBOARD_H

#include <stdint.h>

#include "formats/tfevents.h"

// One log line: the mean loss terms, grad norm and throughput since the last line, the lr and the
// non-finite steps skipped so far. Tags: train/<log.csv column>.
typedef struct {
    double loss, mse, vb, grad_norm, img_per_s, lr;
    uint64_t skipped;
} TbRow;

int tb_log_row(TfEvents *w, uint64_t step, const TbRow *r, MalaErr *err);
// The sample grid PNG just written at png_path, as the image "samples" at step (its bytes as they are).
int tb_log_grid(TfEvents *w, uint64_t step, const char *png_path, MalaErr *err);

#endif

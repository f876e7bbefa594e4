// The trainer's settings in a training checkpoint's metadata (DESIGN 2): written by
// trainer_save, read back by trainer_peek for --resume. Reading checks every value against the
// range its flag accepts, so a damaged file is refused with its name and the key.
#ifndef MALA_TRAIN_META_H
#define MALA_TRAIN_META_H

#include "safetensors.h"
#include "trainer.h"

void train_meta_write(StWriter *w, const TrainOpts *o, int global_batch);
int train_meta_read(const StFile *f, TrainOpts *o, int *global_batch, MalaErr *err);

#endif

// The trainer's settings in a training checkpoint's metadata (docs/design.md §2): written by
// trainer_save, read back by trainer_peek for --resume. Reading checks every value against the
// range its flag accepts, so a damaged file is refused with its name and the key.
#ifndef MALA_TRAIN_META_H
#define MALA_TRAIN_META_H

#include "formats/safetensors.h"
#include "train/trainer.h"

void train_meta_write(StWriter *w, const TrainOpts *o, int global_batch);
// A key every training checkpoint has, within [lo, hi] (the range of its flag).
int train_meta_need_u64(const StFile *f, const char *key, uint64_t lo, uint64_t hi, uint64_t *out, MalaErr *err);
// An optional key (a later mala's, such as the run's target run.iters): 1 when absent (*out
// untouched), else as train_meta_need_u64.
int train_meta_opt_u64(const StFile *f, const char *key, uint64_t lo, uint64_t hi, uint64_t *out, MalaErr *err);
int train_meta_read(const StFile *f, TrainOpts *o, int *global_batch, MalaErr *err);

#endif

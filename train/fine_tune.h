// A fine-tuned run's start (mala train --init FILE): FILE's configuration, the check that a model of
// the run's configuration can take its weights, and the weights loaded into the fresh trainer with
// where the run started (run.init*, train/run_settings.h). FILE may be ours (safetensors) or a
// PyTorch .pt (a DiT state dict or training checkpoint); the weights' rules are train/trainer_init.h's.
// defines: fine_tune_peek, fine_tune_check, fine_tune_load
#ifndef MALA_FINE_TUNE_H
#define MALA_FINE_TUNE_H

#include "core/common.h"
#include "model/net.h"
#include "train/run_settings.h"  // defines: InitMeta
#include "train/trainer.h"

// FILE's configuration into ic (a PyTorch .pt's inferred from its tensors, model/torch_config.h;
// heads > 0: --heads). 0, or -1 with err naming --init when it is no model file.
int fine_tune_peek(const char *path, int heads, NetConfig *ic, MalaErr *err);
// 0, or -1 with err naming the first tensor of FILE that does not fit a model of configuration c
// (before anything is allocated for it).
int fine_tune_check(const NetConfig *c, const char *path, int online, MalaErr *err);
// Loads FILE's weights into the fresh trainer, prints what was carried over and what is new (when
// lead), and fills im. 0, or -1 with err naming the first tensor that does not fit.
int fine_tune_load(Trainer *tr, const char *path, int online, int lead, InitMeta *im, MalaErr *err);

#endif

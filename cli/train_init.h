// mala train --init FILE (fine-tuning): the run's model from FILE's configuration, its weights
// from FILE (train/trainer_init.h), and where it started recorded in every checkpoint of the run:
// run.init (the file's absolute path), run.init_sha256 (as sha256sum prints it), run.init_weights
// (ema, online, or model: a model file's one set) and run.init_step (FILE's step, when it records one).
// FILE may be ours (safetensors) or a PyTorch .pt (a DiT state dict or training checkpoint).
#ifndef MALA_TRAIN_INIT_H
#define MALA_TRAIN_INIT_H

#include "cli/commands.h"
#include "formats/safetensors.h"
#include "train/run_settings.h"  // defines: InitMeta
#include "train/trainer.h"


// FILE's configuration; exits with one line naming --init when it is no model file. A PyTorch .pt's
// is inferred from its tensors (model/torch_config.h; heads > 0: --heads).
void train_init_peek(const char *path, int heads, NetConfig *ic);
// The new run's configuration: FILE's, with the model flags given applied (opts: model_opts_table's),
// and the data's channels, classes and image size (mo after the data shaped it).
void train_init_config(const ModelOpts *mo, const Opt *opts, const NetConfig *ic, NetConfig *c);
// Exits naming the first tensor of FILE that does not fit a model of configuration c (before anything
// is allocated for it).
void train_init_check(const NetConfig *c, const char *path, int online);
// Loads FILE's weights into the fresh trainer (exits naming the first tensor that does not fit),
// prints what was carried over and what is new (when lead), and fills im.
void train_init_load(Trainer *tr, const char *path, int online, int lead, InitMeta *im);
#endif

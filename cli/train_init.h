// mala train --init FILE (fine-tuning): the run's model is FILE's configuration with the model flags
// given applied. The rest of a fine-tuned start (FILE read, checked and loaded, run.init*) is
// train/fine_tune.h's.
#ifndef MALA_TRAIN_INIT_H
#define MALA_TRAIN_INIT_H

#include "cli/commands.h"
#include "model/net.h"

// The new run's configuration: FILE's (ic), with the model flags given applied (opts: model_opts_table's),
// and the data's channels, classes and image size (mo after the data shaped it).
void train_init_config(const ModelOpts *mo, const Opt *opts, const NetConfig *ic, NetConfig *c);
#endif

// Fine-tuning (mala train --init FILE): a new run's weights from a model file or from a training
// checkpoint's EMA or online weights, ours or a PyTorch .pt (train/init_file.h). The trainer is built for the new run's configuration (its
// data's classes and image size) and initialised as a fresh run (trainer_init_weights); then every
// tensor whose name and shape the file shares is carried over exactly, into the weights and the EMA.
// Two kinds may differ, and keep the fresh run's values: a label table with another row count
// (y_embedder.embedding_table.weight, DiC's y_embedder_ls.*: another class count; every row new,
// the null-class row included, DiT's init N(0, 0.02)) and pos_embed with another token count
// (another image size: the fixed 2-D sin-cos table of the new grid). Any other tensor that is
// missing, misshapen or extra refuses the file, naming the first (another backbone, width, depth,
// patch size or channel count). The optimiser's moments stay zero and the step 0.
#ifndef MALA_TRAINER_INIT_H
#define MALA_TRAINER_INIT_H

#include "train/trainer.h"

enum { INIT_LIST = 8 };  // the new tensors named in a report

typedef struct {
    char prefix[24];              // how the file names the set's tensors: "ema.", "model." or "" (init_file.h)
    const char *weights;          // the set: "ema", "online" or "model" (a file's one set)
    int carried, fresh, recomputed;
    size_t carried_floats;
    char fresh_names[INIT_LIST][200];     // "name [rows, cols] (why)"
    char recomputed_name[200];            // pos_embed's, when recomputed
} InitReport;

// online: a training checkpoint's online weights instead of its EMA (refused for a model file).
// -1 with err naming the file and the first tensor that does not fit.
int trainer_init_from(Trainer *tr, const char *path, int online, InitReport *rep, MalaErr *err);
// The same checks for a model of configuration c, before anything is allocated for it.
int trainer_init_check(const NetConfig *c, const char *path, int online, InitReport *rep, MalaErr *err);

#endif

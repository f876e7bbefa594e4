// The file a fine-tuned run starts from (mala train --init FILE), read the same way whatever wrote
// it: a model file or training checkpoint of ours (safetensors; a checkpoint's set is its ema.<name>
// tensors or its online <name> ones), or a file torch.save wrote (model/torch_load.h: a bare state
// dict, or a {model, ema, opt, args} training checkpoint whose `ema` or `model` sub-dict is the
// set). Tensors are asked for by their model name; the set's prefix is added here.
#ifndef MALA_INIT_FILE_H
#define MALA_INIT_FILE_H

#include "formats/safetensors.h"
#include "formats/torch_legacy.h"

typedef struct {
    const char *path;
    StFile st;            // ours, when pt is NULL
    TorchLegacy *pt;      // a PyTorch file
    char prefix[24];      // the set's tensors are prefix + name: "ema." or "" (ours); a .pt's sub-dict, "ema." or
                          // "model.", names them in messages only
    const char *weights;  // the set: "ema", "online" (a training checkpoint's), or "model" (a file's one set)
} InitFile;

// online: a training checkpoint's online weights (DiT's `model`) instead of its EMA; refused for a
// file that holds one set. -1 with err (one line naming the file) when it cannot be read.
int init_file_open(InitFile *f, const char *path, int online, MalaErr *err);
void init_file_close(InitFile *f);
// The dimensions of the set's tensor `name` into shape; -1 when the set has no such tensor.
int init_file_shape(const InitFile *f, const char *name, int64_t *shape);
int init_file_read(const InitFile *f, const char *name, float *dst, MalaErr *err);
// The file's tensors in order: the model name of the i-th (i < init_file_count), or NULL when it is
// not of the set (a training checkpoint's other set, optimiser moments, trainer state).
int init_file_count(const InitFile *f);
const char *init_file_name(const InitFile *f, int i);

#endif

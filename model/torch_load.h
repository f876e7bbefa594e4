// A network from a PyTorch file (either torch.save format): the configuration inferred from the
// tensors (model/torch_config.h), class names (torch_class_names), every tensor of the parameter table read
// as float32 with its shape checked. `weights` picks a training checkpoint's sub-dict (NULL: ema,
// as DiT's find_model); `heads` > 0 overrides the inferred head count. Tensors the model does not
// know, missing tensors and wrong shapes are refused naming the first offending tensor.
#ifndef MALA_TORCH_LOAD_H
#define MALA_TORCH_LOAD_H

#include "model/checkpoint.h"

// 1 when the file starts as a torch.save file (a zip archive or a pickle), not a safetensors file.
int torch_file_sniff(const char *path);
// The class names a PyTorch file gets (it has none): ImageNet's for 1000 classes (DiT's released
// models; model/imagenet_classes.h), else numbers.
void torch_class_names(ClassNames *cn, int n);
// The configuration and class names of a PyTorch file without reading its weights. `what`, when
// not NULL, gets one line for `mala info`: the format and which sub-dict holds the weights.
int torch_read_config(const char *path, const char *weights, int heads, NetConfig *c, ClassNames *cn, char *what,
                      size_t what_len, MalaErr *err);
Net *torch_load_model(const char *path, const char *weights, int heads, const Backend *be, int max_batch, int mode,
                      ClassNames *cn, MalaErr *err);

#endif

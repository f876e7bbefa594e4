// The weights of a VAE as `--vae PATH` names them (vae_config_read's layouts, model/vae.h): the
// file resolved, config.json read, the configuration derived and checked, tensors read by name.
#ifndef MALA_VAE_FILE_H
#define MALA_VAE_FILE_H

#include "formats/safetensors.h"
#include "formats/torch_legacy.h"
#include "model/vae.h"

typedef struct {
    char path[4200];   // the weights file
    StFile st;         // a safetensors file, when pt is NULL
    TorchLegacy *pt;   // a torch.save file (diffusion_pytorch_model.bin)
    VaeConfig c;
} VaeFile;

int vae_file_open(VaeFile *f, const char *path, MalaErr *err);
// Tensor `name` of the table as float32 (shape checked at open).
int vae_file_read(const VaeFile *f, const char *name, float *dst, MalaErr *err);
void vae_file_close(VaeFile *f);

#endif

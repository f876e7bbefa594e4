// A model file of a preset's shape with DiT's initialisation (seed 0), F32: for figures on shapes no
// trained file is at hand for (docs/performance.md, "int8 sampling": DiT-XL/2's sampling memory).
// `mala export --type q8` makes its q8 form.
//
//   make build/random_model && ./build/random_model PRESET IMAGE_SIZE CHANNELS CLASSES OUT.safetensors
//   (e.g. DiT-XL/2 32 4 1000: DiT-XL/2's 32x32x4 latents of 256x256 images, written as a model of
//   4-channel images, so that sampling it needs no VAE)
#include <stdio.h>
#include <stdlib.h>

#include "core/backend.h"
#include "core/common.h"
#include "model/checkpoint.h"
#include "model/net.h"

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: random_model PRESET IMAGE_SIZE CHANNELS CLASSES OUT.safetensors\n");
        return 2;
    }
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    if (net_config_preset(&c, argv[1], &err)) FATAL("%s", err.msg);
    c.image_size = atoi(argv[2]);
    c.in_channels = atoi(argv[3]);
    c.num_classes = atoi(argv[4]);
    if (net_config_validate(&c, &err)) FATAL("%s", err.msg);
    ClassNames cn;
    class_names_default(&cn, c.num_classes);
    Net *n = net_create(&c, backend_host(), 1, NET_INFER);
    net_init_weights(n, 0);
    if (ckpt_save_weights(n, &cn, n->w, ST_F32, argv[5], &err)) FATAL("%s", err.msg);
    char desc[256];
    net_config_describe(&c, desc, sizeof desc);
    printf("%s: %s, %zu parameters, F32\n", argv[5], desc, n->n_floats);
    net_free(n);
    class_names_free(&cn);
    return 0;
}

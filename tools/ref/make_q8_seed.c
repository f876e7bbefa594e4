// Writes tests/fuzz/seeds/checkpoint/dit_q8.safetensors: a q8 model file (model/checkpoint.h's CKPT_Q8)
// of a DiT small enough for fuzz_checkpoint to build and load, random weights (seed 1).
//   cc -std=c11 -D_GNU_SOURCE -fopenmp -I. tools/ref/make_q8_seed.c build/libmala.a -o build/make_q8_seed \
//      $(LDLIBS of the Makefile) && ./build/make_q8_seed tests/fuzz/seeds/checkpoint/dit_q8.safetensors
#include "core/backend.h"
#include "model/checkpoint.h"
#include "model/net.h"
#include "core/rng.h"
int main(int argc, char **argv) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 1; c.dit.hidden = 8; c.dit.heads = 2; c.dit.patch = 8;
    dit_config_attn_defaults(&c.dit, ATTN_MALA);
    c.dit.gate = 1;
    c.image_size = 32; c.in_channels = 1; c.num_classes = 3; c.learn_sigma = 1;
    ClassNames cn; class_names_default(&cn, 3);
    Net *n = net_create(&c, backend_cpu(), 1, NET_INFER);
    Rng r; rng_seed(&r, 1);
    for (size_t i = 0; i < n->n_floats; i++) n->w[i] = (float)(rng_uniform(&r) - 0.5);
    MalaErr err;
    if (ckpt_save_weights(n, &cn, n->w, CKPT_Q8, argv[1], &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    return 0;
}

// Small model files the command-line tests write for themselves. Header-only, like testutil.h.
#ifndef MALA_TESTMODELS_H
#define MALA_TESTMODELS_H

#include "model/checkpoint.h"
#include "testutil.h"

// A latent DiT (4x4x4 latents of tests/fixtures/vae_tiny.safetensors) whose file records run.vae.
static void make_latent_model(const char *path, const char *vae) __attribute__((unused));
static void make_latent_model(const char *path, const char *vae) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 1; c.dit.hidden = 32; c.dit.heads = 2; c.dit.patch = 2;
    c.image_size = 4; c.in_channels = 4; c.num_classes = 2; c.latent_scale = 0.18215f;
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    net_init_weights(m, 1);
    ClassNames cn;
    class_names_default(&cn, 2);
    const char *kv[] = {"step", "7", "run.vae", vae};
    MalaErr err;
    ck_assert_msg(ckpt_save_weights_meta(m, &cn, m->w, ST_F32, kv, 2, path, &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    net_free(m);
}

#endif

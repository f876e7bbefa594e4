// defines: train_init_config
#include "cli/train_init.h"

void train_init_config(const ModelOpts *mo, const Opt *opts, const NetConfig *ic, NetConfig *c) {
    model_opts_apply_given(mo, opts, ic, c, "--init");
    c->in_channels = mo->channels;
    c->num_classes = mo->classes;
    c->image_size = mo->image_size;
    c->latent_scale = 0;  // the data's, set by the caller
    MalaErr err;
    if (net_config_validate(c, &err)) FATAL("--init: %s", err.msg);
}

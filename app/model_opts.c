// defines: model_opts_default, model_opts_table, model_opts_config, model_opts_check_resumed,
//          model_check_learnable, model_batch_bytes, default_model_path
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

void model_opts_default(ModelOpts *mo, const char *preset) {
    mo->preset = preset;
    mo->attn = "mala";
    mo->rope = mo->lepe = mo->gate = -1;
    mo->image_size = 32;
    mo->channels = 1;
    mo->classes = 10;
    mo->learn_sigma = 1;
}

void model_opts_table(ModelOpts *mo, Opt *o) {
    o[0] = (Opt){"--model", OPT_STR, &mo->preset, "PRESET", "DiT-{T,XS,S,B,L,XL}/{2,4,8}"};
    o[1] = (Opt){"--attn", OPT_STR, &mo->attn, "KIND", "mala, softmax or linear"};
    o[2] = (Opt){"--rope", OPT_INT, &mo->rope, "0|1", "2-D RoPE (default: on for mala and linear)", ARG_MIN(-1), ARG_MAX(1)};
    o[3] = (Opt){"--lepe", OPT_INT, &mo->lepe, "K", "LePE kernel, 0 = off (default: 5 for mala and linear)", ARG_MIN(-1),
                 ARG_MAX(31)};
    o[4] = (Opt){"--gate", OPT_INT, &mo->gate, "0|1", "output gate (default: off)", ARG_MIN(-1), ARG_MAX(1)};
    o[5] = (Opt){"--image-size", OPT_INT, &mo->image_size, "S", "image side", ARG_MIN(1), ARG_MAX(8192)};
    o[6] = (Opt){"--channels", OPT_INT, &mo->channels, "C", "image channels", ARG_MIN(1), ARG_MAX(64)};
    o[7] = (Opt){"--classes", OPT_INT, &mo->classes, "K", "number of classes", ARG_MIN(1), ARG_MAX(1000000),
                 ARG_ALIAS("--num-classes")};
    o[8] = (Opt){"--learn-sigma", OPT_BOOL, &mo->learn_sigma, "BOOL", "learned variance (2C outputs)"};
}

void model_opts_config(const ModelOpts *mo, DitConfig *c) {
    MalaErr err;
    dit_config_default(c);
    if (dit_config_preset(c, mo->preset, &err)) FATAL("%s", err.msg);
    AttnKind k;
    if (attn_kind_parse(mo->attn, &k)) FATAL("--attn %s: expected mala, softmax or linear", mo->attn);
    dit_config_attn_defaults(c, k);
    if (mo->rope >= 0) c->rope = mo->rope != 0;
    if (mo->lepe >= 0) c->lepe = mo->lepe;
    if (mo->gate >= 0) c->gate = mo->gate != 0;
    c->image_size = mo->image_size;
    c->in_channels = mo->channels;
    c->num_classes = mo->classes;
    c->learn_sigma = mo->learn_sigma;
    if (dit_config_validate(c, &err)) FATAL("%s", err.msg);
}

void model_opts_check_resumed(const ModelOpts *mo, const Opt *o, const DitConfig *c) {
    char desc[256];
    dit_config_describe(c, desc, sizeof desc);
    DitConfig g = *c;  // the checkpoint's configuration with the given flags applied
    MalaErr err;
    if (o[0].given && dit_config_preset(&g, mo->preset, &err)) FATAL("%s", err.msg);
    if (o[1].given) {
        AttnKind k;
        if (attn_kind_parse(mo->attn, &k)) FATAL("--attn %s: expected mala, softmax or linear", mo->attn);
        g.attn = k;
    }
    if (o[2].given && mo->rope >= 0) g.rope = mo->rope != 0;
    if (o[3].given && mo->lepe >= 0) g.lepe = mo->lepe;
    if (o[4].given && mo->gate >= 0) g.gate = mo->gate != 0;
    if (o[5].given) g.image_size = mo->image_size;
    if (o[6].given) g.in_channels = mo->channels;
    if (o[7].given) g.num_classes = mo->classes;
    if (o[8].given) g.learn_sigma = mo->learn_sigma;
    if (memcmp(&g, c, sizeof g))
        FATAL("--resume: the model flags given contradict the checkpoint's model (%s); a resumed run keeps its model: "
              "drop them, or train into a fresh --out", desc);
}

void model_check_learnable(const DitConfig *c, const char *preset) {
    int values = c->patch * c->patch * c->in_channels;  // what one token carries in and must predict
    if (c->hidden < values)
        FATAL("%s on %dx%dx%d images: hidden %d is smaller than a patch's %d values (%dx%dx%d), so the model cannot "
              "represent its output and will not learn; use a smaller patch or a wider model",
              preset, c->image_size, c->image_size, c->in_channels, c->hidden, values, c->patch, c->patch,
              c->in_channels);
}

double model_batch_bytes(const DitConfig *c, double images, int train) {
    // a lower bound: each transformer block keeps at least 11 hidden-sized rows per token
    // (LayerNorm, qkv, attention output, MLP 4x, residuals); training keeps every block's
    double L = (double)(c->image_size / c->patch) * (c->image_size / c->patch);
    double per_block = 11.0 * L * c->hidden * sizeof(float);
    return images * per_block * (train ? c->depth : 1);
}

const char *default_model_path(void) {
    static char path[PATH_MAX + 64];
    const char *rel = "assets/mala-dit-fmnist.safetensors";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(path, sizeof path, "%s/%s", exe, rel);
            if (access(path, R_OK) == 0) return path;
        }
    }
    return rel;
}

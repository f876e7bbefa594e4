// defines: model_opts_default, model_opts_table, model_opts_config, model_opts_check_resumed,
//          model_check_learnable, default_model_path
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/dist.h"

void model_opts_default(ModelOpts *mo, const char *preset) {
    mo->preset = mo->default_preset = preset;
    mo->backbone = NULL;
    mo->attn = "mala";
    mo->rope = mo->lepe = mo->gate = mo->cpe = mo->ffn_dwconv = -1;
    mo->image_size = 32;
    mo->channels = 1;
    mo->classes = 10;
    mo->learn_sigma = 1;
}

void model_opts_table(ModelOpts *mo, Opt *o) {
    o[0] = (Opt){"--model", OPT_STR, &mo->preset, "PRESET", backbone_presets()};
    o[1] = (Opt){"--attn", OPT_STR, &mo->attn, "KIND", "DiT's attention: " DIT_ATTN_SETTINGS
                 " (MALA with every part of its authors' block: gate 1, cpe 3, ffn-dwconv 3)"};
    o[2] = (Opt){"--rope", OPT_INT, &mo->rope, "0|1", "2-D RoPE (default: on for mala and linear)", ARG_MIN(-1), ARG_MAX(1)};
    o[3] = (Opt){"--lepe", OPT_INT, &mo->lepe, "K", "LePE kernel, 0 = off (default: 5 for mala and linear)", ARG_MIN(-1),
                 ARG_MAX(31)};
    o[4] = (Opt){"--gate", OPT_INT, &mo->gate, "0|1", "output gate (default: off)", ARG_MIN(-1), ARG_MAX(1)};
    o[5] = (Opt){"--image-size", OPT_INT, &mo->image_size, "S", "image side", ARG_MIN(1), ARG_MAX(8192)};
    o[6] = (Opt){"--channels", OPT_INT, &mo->channels, "C", "image channels", ARG_MIN(1), ARG_MAX(64)};
    o[7] = (Opt){"--classes", OPT_INT, &mo->classes, "K", "number of classes (0: unconditional)", ARG_MIN(0), ARG_MAX(1000000),
                 ARG_ALIAS("--num-classes")};
    o[8] = (Opt){"--learn-sigma", OPT_BOOL, &mo->learn_sigma, "BOOL", "learned variance (2C outputs)"};
    o[9] = (Opt){"--backbone", OPT_STR, &mo->backbone, backbone_names(), "backbone (default: the --model preset's)"};
    o[10] = (Opt){"--cpe", OPT_INT, &mo->cpe, "K", "conditional position encoding x + dwconv(x) before each attention, "
                  "kernel K, 0 = off (default: off; 3 for mala-authors)", ARG_MIN(-1), ARG_MAX(31)};
    o[11] = (Opt){"--ffn-dwconv", OPT_INT, &mo->ffn_dwconv, "K", "depthwise conv h + dwconv(h) inside the MLP, kernel K, "
                  "0 = off (default: off; 3 for mala-authors)", ARG_MIN(-1), ARG_MAX(31)};
}

void model_opts_config(ModelOpts *mo, NetConfig *c) {
    MalaErr err;
    BackboneKind bk = BACKBONE_DIT;
    if (mo->backbone && backbone_parse(mo->backbone, &bk)) FATAL("--backbone %s: unknown backbone", mo->backbone);
    net_config_default(c, bk);
    // --backbone alone (the parser left the default preset's string in place): that backbone's S/2,
    // or its S where its presets have no patch size (DiC-S)
    if (mo->backbone && mo->preset == mo->default_preset) {
        NetConfig probe = *c;
        snprintf(mo->preset_buf, sizeof mo->preset_buf, "%s-S/2", net_backbone(bk)->family);
        if (net_config_preset(&probe, mo->preset_buf, &err))
            snprintf(mo->preset_buf, sizeof mo->preset_buf, "%s-S", net_backbone(bk)->family);
        mo->preset = mo->preset_buf;
    }
    if (net_config_preset(c, mo->preset, &err)) FATAL("%s", err.msg);
    char canon[64];
    if (strcmp(net_preset_canonical(mo->preset, canon, sizeof canon), mo->preset)) {  // "dit-t/4" names DiT-T/4
        if (dist_rank() == 0) fprintf(stderr, "note: --model %s is %s\n", mo->preset, canon);
        snprintf(mo->preset_buf, sizeof mo->preset_buf, "%s", canon);
        mo->preset = mo->preset_buf;
    }
    if (mo->backbone && bk != c->backbone)
        FATAL("--backbone %s contradicts --model %s (a %s preset)", mo->backbone, mo->preset, backbone_name(c->backbone));
    if (c->backbone == BACKBONE_DIT) {
        DitConfig *d = &c->dit;
        if (dit_config_attn_setting(d, mo->attn)) FATAL("--attn %s: expected " DIT_ATTN_SETTINGS, mo->attn);
        if (mo->rope >= 0) d->rope = mo->rope != 0;
        if (mo->lepe >= 0) d->lepe = mo->lepe;
        if (mo->gate >= 0) d->gate = mo->gate != 0;
        if (mo->cpe >= 0) d->cpe = mo->cpe;
        if (mo->ffn_dwconv >= 0) d->ffn_dwconv = mo->ffn_dwconv;
    } else if (strcmp(mo->attn, "mala") || mo->rope >= 0 || mo->lepe >= 0 || mo->gate >= 0 || mo->cpe >= 0 ||
               mo->ffn_dwconv >= 0) {
        FATAL("--attn, --rope, --lepe, --gate, --cpe and --ffn-dwconv set DiT's attention block; --model %s is a %s model",
              mo->preset, backbone_name(c->backbone));
    }
    c->image_size = mo->image_size;
    c->in_channels = mo->channels;
    c->num_classes = mo->classes;
    c->learn_sigma = mo->learn_sigma;
    if (net_config_validate(c, &err)) FATAL("%s", err.msg);
}

void model_opts_check_resumed(const ModelOpts *mo, const Opt *o, const NetConfig *c) {
    char desc[256];
    net_config_describe(c, desc, sizeof desc);
    NetConfig g;  // the checkpoint's configuration with the given flags applied
    model_opts_apply_given(mo, o, c, &g, "--resume");
    if (memcmp(&g, c, sizeof g))
        FATAL("--resume: the model flags given contradict the checkpoint's model (%s); a resumed run keeps its model: "
              "drop them, or train into a fresh --out", desc);
}

void model_opts_apply_given(const ModelOpts *mo, const Opt *o, const NetConfig *c, NetConfig *out, const char *what) {
    char desc[256];
    net_config_describe(c, desc, sizeof desc);
    NetConfig g = *c;
    MalaErr err;
    if (o[0].given && net_config_preset(&g, mo->preset, &err)) FATAL("%s", err.msg);
    if (o[9].given && strcmp(mo->backbone, backbone_name(c->backbone)))
        FATAL("%s: --backbone %s contradicts the checkpoint's model (%s)", what, mo->backbone, desc);
    if (g.backbone == BACKBONE_DIT) {
        if (o[1].given) {
            DitConfig d = g.dit;
            if (dit_config_attn_setting(&d, mo->attn)) FATAL("--attn %s: expected " DIT_ATTN_SETTINGS, mo->attn);
            g.dit.attn = d.attn;
            if (!strcmp(mo->attn, "mala-authors"))  // the setting names the parts too
                g.dit.rope = d.rope, g.dit.lepe = d.lepe, g.dit.gate = d.gate, g.dit.cpe = d.cpe,
                g.dit.ffn_dwconv = d.ffn_dwconv;
        }
        if (o[2].given && mo->rope >= 0) g.dit.rope = mo->rope != 0;
        if (o[3].given && mo->lepe >= 0) g.dit.lepe = mo->lepe;
        if (o[4].given && mo->gate >= 0) g.dit.gate = mo->gate != 0;
        if (o[10].given && mo->cpe >= 0) g.dit.cpe = mo->cpe;
        if (o[11].given && mo->ffn_dwconv >= 0) g.dit.ffn_dwconv = mo->ffn_dwconv;
    } else if (o[1].given || o[2].given || o[3].given || o[4].given || o[10].given || o[11].given) {
        FATAL("%s: --attn, --rope, --lepe, --gate, --cpe and --ffn-dwconv set DiT's attention block; the checkpoint's "
              "model is %s", what, desc);
    }
    if (o[5].given) g.image_size = mo->image_size;
    if (o[6].given) g.in_channels = mo->channels;
    if (o[7].given) g.num_classes = mo->classes;
    if (o[8].given) g.learn_sigma = mo->learn_sigma;
    *out = g;
}

void model_check_learnable(const NetConfig *c, const char *preset) {
    MalaErr err;
    if (net_check_learnable(c, &err)) FATAL("%s: %s", preset, err.msg);
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
            // an installed mala (make install): PREFIX/bin/mala and PREFIX/share/mala/
            snprintf(path, sizeof path, "%s/../share/mala/%s", exe, rel + strlen("assets/"));
            if (access(path, R_OK) == 0) return path;
        }
    }
    return rel;
}

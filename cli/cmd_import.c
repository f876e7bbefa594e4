// mala import: a model file (safetensors with our metadata) from a file torch.save wrote: DiT's
// released state dicts, DiG's and DiC's, and DiT / fast-DiT training checkpoints ({model, ema, opt, args}), in
// either torch format. The configuration is inferred from the tensors (model/torch_config.h).
#include <strings.h>

#include "model/torch_load.h"
#include "cli/commands.h"
#include "cli/out_paths.h"

int cmd_import(int argc, char **argv) {
    const char *out = NULL, *dtype = "f32", *weights = NULL;
    int force = 0, heads = 0;
    Opt opts[] = {
        {"--out", OPT_STR, &out, "FILE", "model file to write (.safetensors)"},
        {"--dtype", OPT_STR, &dtype, "f16|bf16|f32|q8", "storage type (q8: the transformer blocks' linear weights as int8 "
         "with per-row F32 scales, the rest F16; docs/formats.md)", ARG_ALIAS("--type")},
        {"--weights", OPT_STR, &weights, "ema|online", "a training checkpoint's EMA or online weights (DiT's `model`; "
         "default: ema, as DiT)"},
        {"--heads", OPT_INT, &heads, "N", "attention heads (default: args.model, else DiT's preset for the width)",
         ARG_MIN(1), ARG_MAX(4096)},
        OPT_FORCE(&force),
    };
    const char *path = argc >= 2 && argv[1][0] != '-' ? argv[1] : NULL;
    args_parse("usage: mala import FILE.pt --out MODEL.safetensors [--dtype f16|bf16|f32|q8] [--weights ema|online] "
               "[--heads N]\n\nConverts a file torch.save wrote (a DiT, DiG or DiC state dict or training checkpoint) into a "
               "model file;\nan existing file at --out needs --force.",
               opts, sizeof opts / sizeof opts[0], argc, argv, path ? 2 : 1);
    if (!path || !out) FATAL("mala import needs FILE and --out (see --help)");
    StDtype dt;
    if (!strcasecmp(dtype, "f16")) dt = ST_F16;
    else if (!strcasecmp(dtype, "bf16")) dt = ST_BF16;
    else if (!strcasecmp(dtype, "f32")) dt = ST_F32;
    else if (!strcasecmp(dtype, "q8")) dt = CKPT_Q8;
    else FATAL("--dtype %s: expected f16, bf16, f32 or q8", dtype);
    const int online = weights && weights_online("--weights", weights);
    out_check_file("--out", out, force, NULL);
    MalaErr err;
    ClassNames cn;
    // online: DiT's `model` sub-dict; ema: the `ema` one of a training checkpoint, a bare state dict's own
    Net *m = torch_load_model(path, online ? "model" : NULL, heads, backend_cpu(), 1, NET_INFER, &cn, &err);
    if (!m) FATAL("%s", err.msg);
    const char *kv[] = {"imported_from", path, "imported_weights", !weights ? "default" : online ? "online" : "ema"};
    if (ckpt_save_weights_meta(m, &cn, m->w, dt, kv, 2, out, &err)) FATAL("%s", err.msg);
    char desc[256];
    net_config_describe(&m->cfg, desc, sizeof desc);
    fprintf(stderr, "wrote %s (%s, %zu parameters, %s)\n", out, desc, m->n_trainable, dtype);
    class_names_free(&cn);
    net_free(m);
    return 0;
}

// mala export: the weights a sampler needs (EMA when present) from a training checkpoint, as a
// small model file (F16 by default), with the configuration and class names.
#include <string.h>
#include <strings.h>

#include "checkpoint.h"
#include "commands.h"

int cmd_export(int argc, char **argv) {
    const char *ckpt = NULL, *out = NULL, *dtype = "f16";
    Opt opts[] = {
        {"--ckpt", OPT_STR, &ckpt, "FILE", "training checkpoint or model file"},
        {"--out", OPT_STR, &out, "FILE", "model file to write (.safetensors)"},
        {"--dtype", OPT_STR, &dtype, "f16|bf16|f32", "storage type"},
    };
    args_parse("usage: mala export --ckpt CHECKPOINT --out MODEL.safetensors [--dtype f16]\n\n"
               "Writes the EMA weights (the plain ones when the file has no EMA) for sampling.",
               opts, sizeof opts / sizeof opts[0], argc, argv, 1);
    if (!ckpt || !out) FATAL("mala export needs --ckpt and --out (see --help)");
    StDtype dt;
    if (!strcasecmp(dtype, "f16")) dt = ST_F16;
    else if (!strcasecmp(dtype, "bf16")) dt = ST_BF16;
    else if (!strcasecmp(dtype, "f32")) dt = ST_F32;
    else FATAL("--dtype %s: expected f16, bf16 or f32", dtype);
    MalaErr err;
    ClassNames cn;
    Net *m = ckpt_load_model(ckpt, backend_cpu(), 1, &cn, &err);
    if (!m) FATAL("%s", err.msg);
    if (ckpt_save_weights(m, &cn, m->w, dt, out, &err)) FATAL("%s", err.msg);
    fprintf(stderr, "wrote %s (%zu parameters, %s)\n", out, m->n_trainable, dtype);
    class_names_free(&cn);
    net_free(m);
    return 0;
}

// mala export: the weights a sampler needs (EMA when present) from a training checkpoint, as a
// small model file (F16 by default), with the configuration and class names.
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "commands.h"
#include "out_paths.h"

// An earlier export's output may be replaced: a model file (configuration, no training state).
// Anything else at --out (a training checkpoint, a file of another kind) needs --force.
static int is_exported_model(const char *path) {
    MalaErr err;
    StFile f;
    if (st_open(&f, path, &err)) return 0;
    NetConfig c;
    ClassNames cn;
    int ok = ckpt_read_config(&f, &c, &cn, &err) == 0;
    if (ok) class_names_free(&cn);
    for (int i = 0; ok && i < f.n; i++)
        if (!strncmp(f.tensors[i].name, "ema.", 4) || !strncmp(f.tensors[i].name, "opt.", 4)) ok = 0;
    st_close(&f);
    return ok;
}

int cmd_export(int argc, char **argv) {
    const char *ckpt = NULL, *out = NULL, *dtype = "f16";
    int force = 0;
    Opt opts[] = {
        {"--ckpt", OPT_STR, &ckpt, "FILE", "training checkpoint or model file"},
        {"--out", OPT_STR, &out, "FILE", "model file to write (.safetensors)"},
        {"--dtype", OPT_STR, &dtype, "f16|bf16|f32", "storage type"},
        OPT_FORCE(&force),
    };
    args_parse("usage: mala export --ckpt CHECKPOINT --out MODEL.safetensors [--dtype f16]\n\n"
               "Writes the EMA weights (the plain ones when the file has no EMA) for sampling. An earlier\n"
               "exported model at --out is replaced; any other existing file needs --force.",
               opts, sizeof opts / sizeof opts[0], argc, argv, 1);
    if (!ckpt || !out) FATAL("mala export needs --ckpt and --out (see --help)");
    StDtype dt;
    if (!strcasecmp(dtype, "f16")) dt = ST_F16;
    else if (!strcasecmp(dtype, "bf16")) dt = ST_BF16;
    else if (!strcasecmp(dtype, "f32")) dt = ST_F32;
    else FATAL("--dtype %s: expected f16, bf16 or f32", dtype);
    struct stat a, b;
    if (!stat(ckpt, &a) && !stat(out, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        FATAL("--out %s: the same file as --ckpt; choose another name", out);
    out_check_file("--out", out, force, is_exported_model);
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

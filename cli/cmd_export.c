// mala export: the weights a sampler needs (EMA when present) from a training checkpoint, as a
// small model file (F16 by default), with the configuration, class names and provenance (the
// training step, the checkpoint exported, the run's run.* settings such as its VAE).
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "model/checkpoint.h"
#include "cli/commands.h"
#include "cli/out_paths.h"

// An earlier export's output may be replaced: a model file (configuration, no training state).
// Any other file at --out needs --force, except a training checkpoint, which is never replaced.
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

// A training checkpoint (a file holding ema.* or opt.* tensors) is never replaced by export,
// --force or not: it is the one copy of the optimiser state a run resumes from.
static int is_training_checkpoint(const char *path) {
    MalaErr err;
    StFile f;
    if (st_open(&f, path, &err)) return 0;
    int yes = 0;
    for (int i = 0; !yes && i < f.n; i++)
        yes = !strncmp(f.tensors[i].name, "ema.", 4) || !strncmp(f.tensors[i].name, "opt.", 4);
    st_close(&f);
    return yes;
}

enum { PROVENANCE_MAX = 64 };

// The metadata that says where the weights come from (kv: key, value, ...); returns the entries.
// A model file exported again keeps its source's step and original checkpoint.
static int provenance(const char *ckpt, const StFile *f, const char **kv) {
    int n = 0;
    const char *step = st_meta(f, "step"), *from = st_meta(f, "exported_from");
    if (step) { kv[2 * n] = "step"; kv[2 * n + 1] = step; n++; }
    kv[2 * n] = "exported_from";
    kv[2 * n + 1] = from ? from : ckpt;
    n++;
    for (int i = 0; i < f->nmeta && n < PROVENANCE_MAX; i++)
        if (!strncmp(f->meta_keys[i], "run.", 4)) { kv[2 * n] = f->meta_keys[i]; kv[2 * n + 1] = f->meta_vals[i]; n++; }
    return n;
}

int cmd_export(int argc, char **argv) {
    const char *ckpt = NULL, *out = NULL, *dtype = "f16", *weights = "ema";
    int force = 0, heads = 0;
    Opt opts[] = {
        {"--ckpt", OPT_STR, &ckpt, "FILE", "training checkpoint or model file"},
        {"--out", OPT_STR, &out, "FILE", "model file to write (.safetensors)"},
        {"--dtype", OPT_STR, &dtype, "f16|bf16|f32|q8", "storage type (q8: the transformer blocks' linear weights as int8 "
         "with per-row F32 scales, the rest F16; docs/formats.md)", ARG_ALIAS("--type")},
        {"--weights", OPT_STR, &weights, "ema|online", "a training checkpoint's EMA (default) or online weights"},
        {"--heads", OPT_INT, &heads, "N", "a PyTorch .pt: attention heads (default: its args, else DiT's preset)",
         ARG_MIN(1), ARG_MAX(1024)},
        OPT_FORCE(&force),
    };
    args_parse("usage: mala export --ckpt CHECKPOINT --out MODEL.safetensors [--dtype f16] [--weights ema|online]\n\n"
               "Writes the EMA weights (the plain ones when the file has no EMA; --weights online: the\n"
               "online ones) for sampling. An earlier\n"
               "exported model at --out is replaced; a training checkpoint never is; any other existing\n"
               "file needs --force.",
               opts, sizeof opts / sizeof opts[0], argc, argv, 1);
    if (!ckpt || !out) FATAL("mala export needs --ckpt and --out (see --help)");
    const int online = weights_online("--weights", weights);
    ckpt_torch_options(online, heads);
    StDtype dt;
    if (!strcasecmp(dtype, "f16")) dt = ST_F16;
    else if (!strcasecmp(dtype, "bf16")) dt = ST_BF16;
    else if (!strcasecmp(dtype, "f32")) dt = ST_F32;
    else if (!strcasecmp(dtype, "q8")) dt = CKPT_Q8;
    else FATAL("--dtype %s: expected f16, bf16, f32 or q8", dtype);
    struct stat a, b;
    if (!stat(ckpt, &a) && !stat(out, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        FATAL("--out %s: the same file as --ckpt; choose another name", out);
    if (is_training_checkpoint(out))
        FATAL("--out %s: is a training checkpoint (it holds ema./opt. tensors); export never replaces one, "
              "even with --force; choose another name", out);
    out_check_file("--out", out, force, is_exported_model);
    MalaErr err;
    ClassNames cn;
    Net *m = ckpt_load_model(ckpt, backend_cpu(), 1, &cn, &err);
    if (!m) FATAL("%s", err.msg);
    StFile f;
    const char *kv[2 * PROVENANCE_MAX];
    int nkv, meta = st_open(&f, ckpt, &err) == 0;  // a PyTorch file (it loaded) has no metadata of ours
    if (meta) {
        nkv = provenance(ckpt, &f, kv);
    } else {
        kv[0] = "exported_from";
        kv[1] = ckpt;
        nkv = 1;
    }
    if (online && nkv < PROVENANCE_MAX) {  // the EMA ones are the default, unrecorded as before
        kv[2 * nkv] = "exported_weights";
        kv[2 * nkv + 1] = "online";
        nkv++;
    }
    if (ckpt_save_weights_meta(m, &cn, m->w, dt, kv, nkv, out, &err)) FATAL("%s", err.msg);
    if (meta) st_close(&f);
    fprintf(stderr, "wrote %s (%zu parameters, %s)\n", out, m->n_trainable, dtype);
    class_names_free(&cn);
    net_free(m);
    return 0;
}

// mala info FILE: the configuration, class names, parameter count, training state and run
// settings of a model or training file, and optionally its tensor table; for an .npz / .npy
// result, its arrays and its manifest (how it was made).
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "commands.h"
#include "manifest.h"
#include "npy.h"

// 1234567 -> "1,234,567"
static void grouped(char *buf, size_t n, long long v) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", v), o = 0;
    for (int i = 0; i < len && o + 2 < (int)n; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
}

// A model file: the training step and checkpoint it was exported from (mala export records them).
static void model_provenance(const StFile *f) {
    const char *step = st_meta(f, "step"), *from = st_meta(f, "exported_from");
    printf("  model file (one set of weights), %d tensors\n", f->n);
    if (step) printf("  training step %s%s%s\n", step, from ? ", exported from " : "", from ? from : "");
    else printf("  training step: not recorded (exported before mala export kept it, or written by another tool)\n");
}

// The run.* settings: empty ones (no VAE) left out, -1 (the data's default) said in words.
static void run_settings(const StFile *f) {
    int run = 0;
    for (int i = 0; i < f->nmeta; i++) {
        const char *k = f->meta_keys[i], *v = f->meta_vals[i];
        if (strncmp(k, "run.", 4) || !*v) continue;
        printf("%s %s %s", run++ ? "," : "  run:", k + 4, strcmp(v, "-1") ? v : "the data's default");
    }
    if (run) printf("\n");
}

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n > k && !strcmp(s + n - k, suf);
}

// A result file (an .npz or .npy of mala sample, a statistics .npz of mala eval) and the manifest
// beside it, PATH.json: how it was made (issue 36 item 4).
static int info_result(const char *path) {
    MalaErr err;
    printf("%s\n", path);
    char **keys;
    int nk;
    if (has_suffix(path, ".npz")) {
        if (npz_keys(path, &keys, &nk, &err)) FATAL("%s", err.msg);
        printf("  arrays:");
        for (int i = 0; i < nk; i++) printf(" %s%s", keys[i], i + 1 < nk ? "," : "");
        printf("\n");
        npz_keys_free(keys, nk);
    }
    char mp[4200];
    snprintf(mp, sizeof mp, "%s.json", path);
    Manifest *m = xcalloc(1, sizeof *m);
    if (access(mp, F_OK)) {
        printf("  no manifest (%s): written by another program, or by mala before it recorded one\n", mp);
    } else if (manifest_read(m, mp, &err)) {
        FATAL("%s", err.msg);
    } else {
        printf("  manifest (%s):\n", mp);
        for (int i = 0; i < m->n; i++) printf("    %-18s %s\n", m->key[i], m->val[i]);
    }
    free(m);
    return 0;
}

int cmd_info(int argc, char **argv) {
    int tensors = 0;
    Opt opts[] = {{"--tensors", OPT_FLAG, &tensors, NULL, "also list every tensor"}};
    const char *path = argc >= 2 && argv[1][0] != '-' ? argv[1] : NULL;
    args_parse("usage: mala info FILE.safetensors [--tensors]\n       mala info FILE.npz|FILE.npy   (its arrays, and "
               "how it was made: FILE.npz.json)", opts, 1, argc, argv, path ? 2 : 1);
    if (!path) FATAL("mala info: give a model file (mala info FILE.safetensors)");
    if (has_suffix(path, ".npz") || has_suffix(path, ".npy")) return info_result(path);
    MalaErr err;
    StFile f;
    if (st_open(&f, path, &err)) FATAL("%s", err.msg);
    NetConfig c;
    ClassNames cn;
    if (ckpt_read_config(&f, &c, &cn, &err)) FATAL("%s", err.msg);
    char desc[256];
    net_config_describe(&c, desc, sizeof desc);
    printf("%s\n  %s\n  classes:", path, desc);
    for (int i = 0; i < cn.n; i++) printf(" %s%s", cn.names[i], i + 1 < cn.n ? "," : "\n");
    long long params = 0, fixed = 0;  // the model's own tensors (not ema.*, opt.*); pos_embed is not trained
    for (int i = 0; i < f.n; i++) {
        const char *name = f.tensors[i].name;
        if (!strncmp(name, "ema.", 4) || !strncmp(name, "opt.", 4)) continue;
        if (!strcmp(name, "pos_embed")) fixed += st_numel(&f.tensors[i]);
        else params += st_numel(&f.tensors[i]);
    }
    char pbuf[32], fbuf[32];
    grouped(pbuf, sizeof pbuf, params);
    grouped(fbuf, sizeof fbuf, fixed);
    printf("  %s trainable parameters (%.2fM) + %s fixed (pos_embed)\n", pbuf, params / 1e6, fbuf);
    const char *step = st_meta(&f, "step");
    int training = st_find(&f, "ema.pos_embed") != NULL;
    if (training) printf("  training checkpoint at step %s (online and EMA weights, AdamW moments), %d tensors\n",
                         step ? step : "?", f.n);
    else model_provenance(&f);
    if (training) {
        static const char *const hyper[] = {"batch",      "lr",        "warmup",    "decay_start", "decay_end",
                                            "lr_end",     "weight_decay", "grad_clip", "ema_decay",  "label_drop",
                                            "seed",       "batches",   "skipped"};
        printf("  trainer:");
        for (size_t i = 0; i < sizeof hyper / sizeof *hyper; i++) {
            const char *v = st_meta(&f, hyper[i]);
            char *end;
            double x = v ? strtod(v, &end) : 0;
            if (v && *v && !*end && strpbrk(v, ".e")) printf(" %s %g", hyper[i], x);  // floats: stored with 9 digits
            else if (v) printf(" %s %s", hyper[i], v);
        }
        printf("\n");
    }
    run_settings(&f);
    for (int i = 0; tensors && i < f.n; i++) {
        const StTensor *t = &f.tensors[i];
        printf("  %-48s %-4s [", t->name, st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
        printf("]\n");
    }
    class_names_free(&cn);
    st_close(&f);
    return 0;
}

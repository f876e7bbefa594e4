// mala info FILE: the configuration, class names, parameter count, training state and run
// settings of a model or training file, and optionally its tensor table; of a PNG, the generation
// parameters we wrote into it (tEXt "parameters", pipeline/gen_params.h); for an .npz / .npy
// result, its arrays and its manifest (how it was made).
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "model/torch_load.h"  // defines: torch_file_sniff, torch_read_config
#include "cli/commands.h"
#include "pipeline/gen_params.h"  // defines: GEN_PARAMS_KEYWORD
#include "pipeline/manifest.h"
#include "formats/image_io.h"    // defines: IMAGE_MAX_FILE_BYTES
#include "formats/npy.h"
#include "formats/png_text.h"
#include "formats/torch_legacy.h"  // defines: torch_file_open

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

// The storage type of the weights and the file's size: q8 where some are I8 (the blocks' linear
// weights, with F32 row scales, the rest F16; docs/formats.md), else the one float type, or "mixed".
static void storage(const StFile *f) {
    int q8 = 0, mixed = 0;
    StDtype first = ST_F32;
    for (int i = 0; i < f->n; i++) {
        const StDtype d = f->tensors[i].dtype;
        if (d == ST_I8) q8 = 1;
        else if (i && d != first) mixed = 1;
        if (!i) first = d;
    }
    char size[32];
    grouped(size, sizeof size, (long long)f->map_len);
    if (q8) printf("  type q8 (the blocks' linear weights I8 with F32 scales per output row, the rest F16), "
                   "file %s bytes (%.1f MB)\n", size, f->map_len / 1e6);
    else printf("  type %s, file %s bytes (%.1f MB)\n", mixed ? "mixed" : st_dtype_name(first), size,
                f->map_len / 1e6);
}

// The run.* settings: empty ones (no VAE) left out, -1 (the data's default) said in words.
static void run_settings(const StFile *f) {
    int run = 0;
    for (int i = 0; i < f->nmeta; i++) {
        const char *k = f->meta_keys[i], *v = f->meta_vals[i];
        if (strncmp(k, "run.", 4) || !*v || !strncmp(k, "run.init", 8)) continue;  // run.init*: fine_tuned_from
        printf("%s %s %s", run++ ? "," : "  run:", k + 4, strcmp(v, "-1") ? v : "the data's default");
    }
    if (run) printf("\n");
}

// The whole file (at most IMAGE_MAX_FILE_BYTES), malloc'd.
static uint8_t *read_whole(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) FATAL("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16;
    uint8_t *b = xmalloc(cap);
    *n = 0;
    size_t got;
    while ((got = fread(b + *n, 1, cap - *n, f)) > 0) {
        *n += got;
        if (*n > (size_t)IMAGE_MAX_FILE_BYTES) FATAL("%s: larger than %lld bytes", path, (long long)IMAGE_MAX_FILE_BYTES);
        if (*n == cap) b = realloc(b, cap *= 2);
        if (!b) FATAL("%s: out of memory", path);
    }
    if (ferror(f)) FATAL("%s: read error", path);
    fclose(f);
    return b;
}

// A PNG: its size, and the generation parameters when it has them (control bytes other than
// newlines shown as \xNN: the text is untrusted).
static int png_info(const char *path) {
    size_t n;
    uint8_t *b = read_whole(path, &n);
    MalaErr err;
    char *text;
    int rc = png_text_find(b, n, path, GEN_PARAMS_KEYWORD, &text, &err);
    if (rc < 0) FATAL("%s", err.msg);
    int w = 0, h = 0;
    if (image_probe(b, n, path, NULL, &w, &h, &err)) FATAL("%s", err.msg);
    printf("%s: PNG %dx%d\n", path, w, h);
    if (!rc) printf("  no generation parameters (no tEXt chunk '%s'; mala sample and the viewer write one)\n",
                    GEN_PARAMS_KEYWORD);
    else {
        printf("  parameters:\n    ");
        for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
            if (*c == '\n') printf("\n    ");
            else if (*c < 32 || *c == 127) printf("\\x%02x", *c);
            else putchar(*c);
        }
        printf("\n");
    }
    free(text);
    free(b);
    return 0;
}

static int is_png_name(const char *path) {
    size_t l = strlen(path);
    return l >= 4 && !strcasecmp(path + l - 4, ".png");
}

// A fine-tuned run's origin (mala train --init: run.init*).
static void fine_tuned_from(const StFile *f) {
    const char *p = st_meta(f, "run.init"), *h = st_meta(f, "run.init_sha256"), *w = st_meta(f, "run.init_weights");
    const char *s = st_meta(f, "run.init_step");
    if (!p) return;
    printf("  fine-tuned from %s (%s weights%s%s), sha256 %s\n", p, w && !strcmp(w, "model") ? "the model file's"
           : w ? w : "?", s && *s ? ", step " : "", s && *s ? s : "", h ? h : "?");
}


static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n > k && !strcmp(s + n - k, suf);
}

// A result file (an .npz or .npy of mala sample, a statistics .npz of mala eval) and the manifest
// beside it, PATH.json: how it was made.
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

// What a file is by its first bytes, for the formats info does not read as a model file: NULL for
// a PNG (read here whatever its name) and for anything unrecognised (tried as safetensors).
static const char *other_format(const char *path, int *is_png) {
    unsigned char b[16] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    *is_png = n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8);
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return "a JPEG image";
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return "a GIF image";
    if (n >= 2 && !memcmp(b, "BM", 2)) return "a BMP image";
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return "a WebP image";
    if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4))) return "a TIFF image";
    if (n >= 3 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7' && (b[2] == '\n' || b[2] == ' ' || b[2] == '\r'))
        return "a PNM (PBM/PGM/PPM) image";
    if (n >= 6 && !memcmp(b, "\x93NUMPY", 6)) return "a NumPy .npy array (info reads it when named .npy)";
    if (n >= 4 && !memcmp(b, "PK\x03\x04", 4)) return "a ZIP archive (an .npz? info reads it when named .npz)";
    if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return "a Python pickle (a PyTorch .pt/.pth?)";
    return NULL;
}

// A PyTorch .pt (DiT's released models, training checkpoints): what sample/view infer from it.
// A long class list (ImageNet's 1000) shows its first names and one familiar entry, not all.
// kind: what the magic bytes say (other_format), named when the file does not read as a .pt.
static int torch_info(const char *path, const char *sub, int heads, const char *kind) {
    MalaErr err;
    NetConfig c;
    ClassNames cn;
    char what[256], desc[256];
    TorchLegacy *t = torch_file_open(path, sub, &err);  // bytes that read as a .pt: its configuration's error alone
    if (!t && kind) FATAL("%s: %s, not a file mala info reads (as a PyTorch .pt/.pth: %s)", path, kind, err.msg);
    torch_legacy_close(t);
    if (torch_read_config(path, sub, heads, &c, &cn, what, sizeof what, &err)) FATAL("%s", err.msg);
    net_config_describe(&c, desc, sizeof desc);
    printf("%s\n  %s\n  configuration inferred from the tensors: %s\n  classes:", path, what, desc);
    if (cn.n > 16)
        printf(" %d (0 %s, 1 %s, 2 %s, ..., %d %s, ..., %d %s)\n", cn.n, cn.names[0], cn.names[1], cn.names[2],
               cn.n > 207 ? 207 : cn.n / 2, cn.names[cn.n > 207 ? 207 : cn.n / 2], cn.n - 1, cn.names[cn.n - 1]);
    else
        for (int i = 0; i < cn.n; i++) printf(" %s%s", cn.names[i], i + 1 < cn.n ? "," : "\n");
    if (!cn.n) printf(" none (an unconditional model)\n");
    class_names_free(&cn);
    return 0;
}

int cmd_info(int argc, char **argv) {
    int tensors = 0, heads = 0;
    const char *weights = "ema";
    Opt opts[] = {{"--tensors", OPT_FLAG, &tensors, NULL, "also list every tensor"},
                  {"--weights", OPT_STR, &weights, "ema|online", "a PyTorch checkpoint's ema or online (model) sub-dict"},
                  {"--heads", OPT_INT, &heads, "N", "attention heads of a PyTorch .pt (default: its args, else "
                   "DiT's preset)", ARG_MIN(1), ARG_MAX(1024)}};
    const char *path = argc >= 2 && argv[1][0] != '-' ? argv[1] : NULL;
    args_parse("usage: mala info FILE.safetensors|FILE.pt [--tensors]\n       mala info FILE.png   (the generation parameters "
               "mala sample / the viewer wrote)\n       mala info FILE.npz|FILE.npy   (its arrays, and how it was made: "
               "FILE.npz.json)", opts, 3, argc, argv, path ? 2 : 1);
    if (!path) FATAL("mala info: give a model file (mala info FILE.safetensors)");
    if (is_png_name(path)) return png_info(path);
    if (has_suffix(path, ".npz") || has_suffix(path, ".npy")) return info_result(path);
    weights = weights_online("--weights", weights) ? "online" : "ema";  // "model" is DiT's "online"
    int png;
    const char *kind = other_format(path, &png);
    if (torch_file_sniff(path)) return torch_info(path, !strcmp(weights, "online") ? "model" : NULL, heads, kind);
    if (png) return png_info(path);
    if (kind)
        FATAL("%s: %s, not a file mala info reads (it reads model and checkpoint .safetensors files, the "
              "generation parameters of PNGs mala wrote, and .npz/.npy results)", path, kind);
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
    if (!cn.n) printf(" none (num_classes 0: an unconditional model; sampled without --class or guidance)\n");
    long long params = 0, fixed = 0;  // the model's own tensors (not ema.*, opt.*); pos_embed is not trained
    for (int i = 0; i < f.n; i++) {
        const char *name = f.tensors[i].name;
        const size_t len = strlen(name);
        if (!strncmp(name, "ema.", 4) || !strncmp(name, "opt.", 4)) continue;
        if (len > 9 && !strcmp(name + len - 9, ".q8_scale")) continue;  // (a q8 file's scales)
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
    storage(&f);
    if (training) {
        static const char *const hyper[] = {"batch",      "accum",     "lr",        "warmup",    "decay_start", "decay_end",
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
    fine_tuned_from(&f);
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

// Generation parameters in AUTOMATIC1111's infotext style (pipeline/gen_params.h).
#include "pipeline/gen_params.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/sha256.h"
#include "core/version.h"
#include "model/vae.h"  // defines: vae_weights_file

typedef struct { char *b; size_t n, cap; } Text;

static void text_add(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(Text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n + need + 1 > t->cap) {
        while (t->n + need + 1 > t->cap) t->cap = t->cap ? 2 * t->cap : 512;
        t->b = realloc(t->b, t->cap);
        if (!t->b) FATAL("out of memory (%zu bytes of generation parameters)", t->cap);
    }
    va_start(ap, fmt);
    vsnprintf(t->b + t->n, t->cap - t->n, fmt, ap);
    va_end(ap);
    t->n += need;
}

// ", Key: value" (no comma before the first pair); value JSON-quoted when it holds ',', ':' or a
// newline (A1111's infotext_utils.quote).
static void pair(Text *t, const char *key, const char *value) {
    text_add(t, "%s%s: ", t->b && t->b[t->n - 1] != '\n' ? ", " : "", key);
    if (!strpbrk(value, ",:\n")) { text_add(t, "%s", value); return; }
    text_add(t, "\"");
    for (const char *c = value; *c; c++) {
        if (*c == '"' || *c == '\\') text_add(t, "\\%c", *c);
        else if (*c == '\n') text_add(t, "\\n");
        else text_add(t, "%c", *c);
    }
    text_add(t, "\"");
}

static void pairf(Text *t, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pairf(Text *t, const char *key, const char *fmt, ...) {
    char v[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    pair(t, key, v);
}

// The file's name without its folder and extension (A1111's model name).
static void stem(const char *path, char *out, size_t n) {
    const char *base = strrchr(path, '/');
    snprintf(out, n, "%s", base ? base + 1 : path);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = 0;
}

// The file's name without its folder (a trailing '/' of a folder dropped).
static void base_name(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') out[--len] = 0;
    const char *slash = strrchr(out, '/');
    if (slash) memmove(out, slash + 1, strlen(slash + 1) + 1);
}

int gen_params_file_hash(const char *path, char out[11], MalaErr *err) {
    static struct { char path[4096]; off_t size; struct timespec mtime; char hex[11]; } cache[4];
    static int next;
    struct stat st;
    if (stat(path, &st)) return mala_errf(err, "%s: cannot read: %s", path, strerror(errno));
    for (int i = 0; i < 4; i++)
        if (!strcmp(cache[i].path, path) && cache[i].size == st.st_size && cache[i].mtime.tv_sec == st.st_mtim.tv_sec &&
            cache[i].mtime.tv_nsec == st.st_mtim.tv_nsec) {
            memcpy(out, cache[i].hex, 11);
            return 0;
        }
    char hex[65];
    if (sha256_file(path, hex, err)) return -1;
    memcpy(out, hex, 10);  // A1111's "Model hash": the first 10 hex digits
    out[10] = 0;
    int k = next++ % 4;
    snprintf(cache[k].path, sizeof cache[k].path, "%s", path);
    cache[k].size = st.st_size;
    cache[k].mtime = st.st_mtim;
    memcpy(cache[k].hex, out, 11);
    return 0;
}

static void text_name(Text *t, const ClassNames *cn, int k) {
    const char *name = k >= 0 && k < cn->n ? cn->names[k] : "?";
    for (const char *c = name; *c; c++) text_add(t, "%c", *c == '\n' ? ' ' : *c);
}

// The prompt line: the images' class names, each once, in order of first appearance; a blend as
// `--blend` takes it ("A,B,w"); an unconditional model's "(unconditional)", as it has no classes.
static void prompt(Text *t, const GenParams *p) {
    if (!p->classes->n) { text_add(t, "(unconditional)\n"); return; }
    if (p->opts->blend) {
        text_name(t, p->classes, p->opts->blend_a);
        text_add(t, ",");
        text_name(t, p->classes, p->opts->blend_b);
        text_add(t, ",%g\n", (double)p->opts->blend_w);
        return;
    }
    for (int i = 0; i < p->n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = p->labels[j] == p->labels[i];
        if (seen) continue;
        text_add(t, "%s", i ? ", " : "");
        text_name(t, p->classes, p->labels[i]);
    }
    text_add(t, "\n");
}

static int all_one_class(const GenParams *p) {
    for (int i = 1; i < p->n; i++)
        if (p->labels[i] != p->labels[0]) return 0;
    return 1;
}

char *gen_params_text(const GenParams *p, MalaErr *err) {
    char hash[11], vae_hash[11] = "", name[256], vae_name[256] = "";
    if (gen_params_file_hash(p->model_path, hash, err)) return NULL;
    char vae_file[4200];  // a diffusers folder: its weights file
    if (p->vae_path && (vae_weights_file(p->vae_path, vae_file, sizeof vae_file, err) ||
                        gen_params_file_hash(vae_file, vae_hash, err)))
        return NULL;
    stem(p->model_path, name, sizeof name);
    if (p->vae_path) stem(p->vae_path, vae_name, sizeof vae_name);
    const GenOpts *o = p->opts;
    Text t = {0};
    prompt(&t, p);
    pairf(&t, "Steps", "%d", o->steps);
    pair(&t, "Sampler", sampler_kind_name(o->kind));
    pairf(&t, "CFG scale", "%g", o->cfg_scale);
    pairf(&t, "Seed", "%llu", (unsigned long long)p->seed);
    pairf(&t, "Size", "%dx%d", p->width, p->height);
    pair(&t, "Model hash", hash);
    pair(&t, "Model", name);
    if (p->vae_path) {
        pair(&t, "VAE hash", vae_hash);
        pair(&t, "VAE", vae_name);
    }
    if (p->strength > 0) pairf(&t, "Denoising strength", "%g", p->strength);
    char file[256];
    if (p->init_path) { base_name(p->init_path, file, sizeof file); pair(&t, "Init image", file); }
    if (p->mask_path) {
        base_name(p->mask_path, file, sizeof file);
        pair(&t, "Mask", file);
        pairf(&t, "Resample", "%d", p->resample);
    }
    if (o->blend) pairf(&t, "Blend", "%d,%d,%g", o->blend_a, o->blend_b, (double)o->blend_w);
    if (!p->classes->n || o->blend) {
        // no class to record: an unconditional model has none, a blend's label is "Blend"
    } else if (all_one_class(p)) pairf(&t, "Class", "%d", p->labels[0]);
    else {
        Text l = {0};
        for (int i = 0; i < p->n; i++) text_add(&l, "%s%d", i ? "," : "", p->labels[i]);
        pair(&t, "Labels", l.b);
        free(l.b);
    }
    if (p->n > 1) pairf(&t, "Images", "%d", p->n);
    if (p->n == 1) pairf(&t, "Seed index", "%lld", (long long)p->first);
    if (o->kind == SAMPLER_DDIM) pairf(&t, "Eta", "%g", o->eta);
    pair(&t, "Clip x0", o->clip ? "on" : "off");
    pairf(&t, "Channels", "%d", p->channels);
    if (o->cfg_scale != 1 && o->cfg_channels > 0 && o->cfg_channels < p->channels)
        pairf(&t, "CFG channels", "%d", o->cfg_channels);  // guided eps channels (DiT's 3); absent: all
    if (o->cfg_scale != 1 && o->cfg_hi > 0) {
        char iv[64];
        pair(&t, "CFG interval", gen_cfg_interval_str(o, iv, sizeof iv));
    }
    pairf(&t, "Version", "mala-dit %s", mala_version());
    return t.b;
}

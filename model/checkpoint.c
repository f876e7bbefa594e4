// Model files: configuration metadata, strict tensor loading, saving.
// defines: class_names_*, ckpt_read_config, ckpt_write_config, ckpt_load_tensors,
//          ckpt_add_tensors, ckpt_load_model, ckpt_save_weights
#include "checkpoint.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "json.h"

void class_names_default(ClassNames *cn, int n) {
    cn->n = n;
    cn->names = xcalloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%d", i);
        cn->names[i] = xstrdup(buf);
    }
}

void class_names_copy(ClassNames *dst, const ClassNames *src) {
    dst->n = src->n;
    dst->names = xcalloc((size_t)src->n, sizeof(char *));
    for (int i = 0; i < src->n; i++) dst->names[i] = xstrdup(src->names[i]);
}

void class_names_free(ClassNames *cn) {
    for (int i = 0; i < cn->n; i++) free(cn->names[i]);
    free(cn->names);
    cn->names = NULL;
    cn->n = 0;
}

int class_names_find(const ClassNames *cn, const char *s) {
    for (int i = 0; i < cn->n; i++)
        if (!strcasecmp(cn->names[i], s)) return i;
    char *end;
    errno = 0;
    long k = strtol(s, &end, 10);
    if (*s && !*end && !errno && k >= 0 && k < cn->n) return (int)k;
    return -1;
}

static int meta_int(const StFile *f, const char *key, int *out, int required, MalaErr *err) {
    const char *v = st_meta(f, key);
    if (!v) return required ? mala_errf(err, "%s: metadata '%s' is missing", f->path, key) : 1;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < 0 || x > 1000000)
        return mala_errf(err, "%s: metadata '%s' = '%s' is not a non-negative integer", f->path, key, v);
    *out = (int)x;
    return 0;
}

static int meta_bool(const StFile *f, const char *key, int *out, MalaErr *err) {
    const char *v = st_meta(f, key);
    if (!v) return 1;
    if (!strcasecmp(v, "true") || !strcmp(v, "1")) *out = 1;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0")) *out = 0;
    else return mala_errf(err, "%s: metadata '%s' = '%s' is not true or false", f->path, key, v);
    return 0;
}

static int read_class_names(const StFile *f, int k, ClassNames *cn, MalaErr *err) {
    const char *v = st_meta(f, "class_names");
    if (!v) { class_names_default(cn, k); return 0; }
    MalaErr jerr;
    JsonValue *j = json_parse(v, strlen(v), &jerr);
    if (!j) return mala_errf(err, "%s: metadata 'class_names' is not valid JSON: %s", f->path, jerr.msg);
    int ok = j->type == JSON_ARRAY && j->n == k;
    for (int i = 0; ok && i < j->n; i++) ok = j->items[i].type == JSON_STRING;
    if (!ok) {
        json_free(j);
        return mala_errf(err, "%s: metadata 'class_names' must be a JSON array of %d strings", f->path, k);
    }
    cn->n = k;
    cn->names = xcalloc((size_t)k, sizeof(char *));
    for (int i = 0; i < k; i++) cn->names[i] = xstrdup(j->items[i].str);
    json_free(j);
    return 0;
}

int ckpt_read_config(const StFile *f, DitConfig *c, ClassNames *cn, MalaErr *err) {
    dit_config_default(c);
    static const char *need[] = {"depth", "hidden", "heads", "patch", "image_size", "in_channels", "num_classes"};
    int *dst[] = {&c->depth, &c->hidden, &c->heads, &c->patch, &c->image_size, &c->in_channels, &c->num_classes};
    for (int i = 0; i < 7; i++)
        if (meta_int(f, need[i], dst[i], 1, err)) return -1;
    const char *attn = st_meta(f, "attn");
    AttnKind k = ATTN_SOFTMAX;  // a DiT file without the key is plain DiT
    if (attn && attn_kind_parse(attn, &k))
        return mala_errf(err, "%s: metadata 'attn' = '%s' (expected mala, softmax or linear)", f->path, attn);
    dit_config_attn_defaults(c, k);
    if (meta_bool(f, "learn_sigma", &c->learn_sigma, err) < 0 || meta_bool(f, "rope", &c->rope, err) < 0 ||
        meta_bool(f, "gate", &c->gate, err) < 0 || meta_int(f, "lepe", &c->lepe, 0, err) < 0)
        return -1;
    MalaErr verr;
    if (dit_config_validate(c, &verr)) return mala_errf(err, "%s: %s", f->path, verr.msg);
    return read_class_names(f, c->num_classes, cn, err);
}

void ckpt_write_config(StWriter *w, const DitConfig *c, const ClassNames *cn) {
    char buf[32];
#define META_INT(key, val) do { snprintf(buf, sizeof buf, "%d", (val)); st_writer_meta(w, key, buf); } while (0)
    META_INT("depth", c->depth);
    META_INT("hidden", c->hidden);
    META_INT("heads", c->heads);
    META_INT("patch", c->patch);
    META_INT("image_size", c->image_size);
    META_INT("in_channels", c->in_channels);
    META_INT("num_classes", c->num_classes);
    META_INT("lepe", c->lepe);
#undef META_INT
    st_writer_meta(w, "learn_sigma", c->learn_sigma ? "true" : "false");
    st_writer_meta(w, "rope", c->rope ? "true" : "false");
    st_writer_meta(w, "gate", c->gate ? "true" : "false");
    st_writer_meta(w, "attn", attn_kind_name(c->attn));
    JsonBuf jb = {0};
    json_buf_puts(&jb, "[");
    for (int i = 0; i < cn->n; i++) {
        if (i) json_buf_puts(&jb, ", ");
        json_buf_string(&jb, cn->names[i], strlen(cn->names[i]));
    }
    json_buf_puts(&jb, "]");
    st_writer_meta(w, "class_names", jb.buf);
    json_buf_free(&jb);
}

// A tensor name the model's files may hold besides the table: prefixed copies and trainer state.
static int known_name(const Dit *m, const char *name) {
    static const char *prefixes[] = {"", "ema.", "opt.m.", "opt.v."};
    if (!strncmp(name, "train.", 6)) return 1;
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(prefixes[i]);
        if (!strncmp(name, prefixes[i], n) && dit_find_param(m, name + n)) return 1;
    }
    return 0;
}

int ckpt_load_tensors(const Dit *m, const StFile *f, const char *prefix, float *dst, MalaErr *err) {
    for (int i = 0; i < f->n; i++)
        if (!known_name(m, f->tensors[i].name))
            return mala_errf(err, "%s: tensor '%s' does not belong to this model (%s attention, gate %s, lepe %d)",
                             f->path, f->tensors[i].name, attn_kind_name(m->cfg.attn), m->cfg.gate ? "on" : "off",
                             m->cfg.lepe);
    float *host = xmalloc(m->n_floats * sizeof(float));
    char name[128];
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        if (st_load_f32(f, name, p->shape, p->ndim, host + p->offset, err)) { free(host); return -1; }
    }
    m->be->to_device(dst, host, m->n_floats * sizeof(float));
    free(host);
    return 0;
}

void ckpt_add_tensors(StWriter *w, const Dit *m, const char *prefix, const float *host, StDtype dtype) {
    char name[128];
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        st_writer_add(w, name, dtype, p->shape, p->ndim, host + p->offset);
    }
}

Dit *ckpt_load_model(const char *path, const Backend *be, int max_batch, ClassNames *cn, MalaErr *err) {
    StFile f;
    if (st_open(&f, path, err)) return NULL;
    DitConfig c;
    if (ckpt_read_config(&f, &c, cn, err)) { st_close(&f); return NULL; }
    Dit *m = dit_create(&c, be, max_batch, DIT_INFER);
    const char *prefix = st_find(&f, "ema.pos_embed") || st_find(&f, "ema.final_layer.linear.weight") ? "ema." : "";
    if (ckpt_load_tensors(m, &f, prefix, m->w, err)) {
        dit_free(m);
        class_names_free(cn);
        st_close(&f);
        return NULL;
    }
    st_close(&f);
    return m;
}

int ckpt_save_weights(const Dit *m, const ClassNames *cn, const float *host, StDtype dtype, const char *path,
                      MalaErr *err) {
    StWriter *w = st_writer_new();
    ckpt_write_config(w, &m->cfg, cn);
    ckpt_add_tensors(w, m, "", host, dtype);
    int rc = st_writer_save(w, path, err);
    st_writer_free(w);
    return rc;
}

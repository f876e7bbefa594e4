// Model files: configuration metadata, strict tensor loading, saving.
// defines: class_names_*, ckpt_read_config, ckpt_write_config, ckpt_load_tensors,
//          ckpt_add_tensors, ckpt_load_model, ckpt_load_model_mode, ckpt_save_weights, ckpt_save_weights_meta
#include "model/checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/half.h"

#include "core/quant8.h"
#include "formats/json.h"
#include "model/torch_load.h"  // defines: torch_file_sniff, torch_load_model

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

int ckpt_read_config(const StFile *f, NetConfig *c, ClassNames *cn, MalaErr *err) {
    if (net_config_read(f, c, err)) return -1;
    return read_class_names(f, c->num_classes, cn, err);
}

void ckpt_write_config(StWriter *w, const NetConfig *c, const ClassNames *cn) {
    net_config_write(w, c);
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

#define Q8_SCALE ".q8_scale"

// A tensor name the model's files may hold besides the table: prefixed copies and trainer state.
static int known_name(const Net *m, const char *name) {
    static const char *prefixes[] = {"", "ema.", "opt.m.", "opt.v."};
    if (!strncmp(name, "train.", 6)) return 1;
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(prefixes[i]);
        if (!strncmp(name, prefixes[i], n) && net_find_param(m, name + n)) return 1;
    }
    // a q8 file's scales: NAME.q8_scale next to NAME
    const size_t len = strlen(name), sl = strlen(Q8_SCALE);
    if (len > sl && !strcmp(name + len - sl, Q8_SCALE)) {
        char base[160];
        snprintf(base, sizeof base, "%.*s", (int)(len - sl), name);
        return known_name(m, base);
    }
    return 0;
}

// A q8 tensor's scales, NAME.q8_scale: F32 [rows], each finite and >= 0, read into a new array
// (the caller frees it). NULL on an error (err).
static float *read_q8_scales(const StFile *f, const char *name, const ParamInfo *p, MalaErr *err) {
    char sname[160];
    snprintf(sname, sizeof sname, "%s%s", name, Q8_SCALE);
    const int64_t rows = p->shape[0];
    const StTensor *t = st_find(f, sname);
    if (!t) {
        mala_errf(err, "%s: tensor '%s' is I8 but its scales '%s' are missing", f->path, name, sname);
        return NULL;
    }
    if (t->dtype != ST_F32) {
        mala_errf(err, "%s: tensor '%s' is %s, expected F32", f->path, sname, st_dtype_name(t->dtype));
        return NULL;
    }
    float *scale = xmalloc((size_t)(rows ? rows : 1) * sizeof(float));
    if (st_load_f32(f, sname, &rows, 1, scale, err)) {
        free(scale);
        return NULL;
    }
    for (int64_t r = 0; r < rows; r++)
        if (!isfinite(scale[r]) || scale[r] < 0) {
            const double bad = scale[r];
            free(scale);
            mala_errf(err, "%s: tensor '%s' holds %g at %lld (scales are finite and >= 0)", f->path, sname, bad,
                      (long long)r);
            return NULL;
        }
    return scale;
}

// Drops the file pages of tensor t from the process once it is converted (the whole pages inside
// it; a mapping only: the data of a file read into memory is left alone).
static void release_pages(const StFile *f, const StTensor *t) {
    if (!f->map) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)(f->data + t->begin) + page - 1) & ~(page - 1), b = (uintptr_t)(f->data + t->end) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);  // read-only, private: the file stays as it is
}

// A quant8 tensor of a q8 network (net.h) from the file: I8 rows and their scales as they are (see
// net_put_param_q8), any other type through its floats. Cannot fail: t, its shape and scales are checked.
static void load_q8_tensor(const Net *m, const ParamInfo *p, const StFile *f, const StTensor *t, const char *name,
                           MalaErr *err) {
    Net *net = (Net *)m;  // (the caller's network, whose weights this fills)
    if (t->dtype == ST_I8) {
        float *scale = read_q8_scales(f, name, p, err);
        net_put_param_q8(net, p, st_data(f, t), scale);
        free(scale);
        return;
    }
    float *x = xmalloc(p->numel * sizeof(float));
    if (t->dtype == ST_F16) half_to_f32_n(st_data(f, t), x, (size_t)st_numel(t));
    else st_read_f32(f, t, x, err);
    net_put_param(net, p, x);
    free(x);
}

int ckpt_load_tensors(const Net *m, const StFile *f, const char *prefix, float *dst, MalaErr *err) {
    for (int i = 0; i < f->n; i++)
        if (!known_name(m, f->tensors[i].name)) {
            char desc[256];
            net_config_describe(&m->cfg, desc, sizeof desc);
            return mala_errf(err, "%s: tensor '%s' does not belong to this model (%s)", f->path, f->tensors[i].name,
                             desc);
        }
    char name[128];
    for (int i = 0; i < m->nparams; i++) {  // every name, shape and scale first: a refused file changes nothing
        snprintf(name, sizeof name, "%s%s", prefix, m->params[i].name);
        if (st_expect(f, name, m->params[i].shape, m->params[i].ndim, err)) return -1;
        float *scale = st_find(f, name)->dtype == ST_I8 ? read_q8_scales(f, name, &m->params[i], err) : NULL;
        if (st_find(f, name)->dtype == ST_I8 && !scale) return -1;
        free(scale);
    }
    // Host backends take the floats in place; a device's go through one host copy. Each tensor is
    // converted once, from the mapped file, whose pages are then let go, so a DiT-XL/2 F16 file
    // peaks near its float32 weights rather than weights + copy + file.
    // A q8 network's quant8 tensors go to its int8 weights instead: a q8 file's rows straight from the
    // file, any other tensor through one tensor's floats, quantised.
    CHECK(!m->q8 || dst == m->w, "ckpt_load_tensors: a q8 network's weights load only into the network");
    const int in_place = backend_on_host(m->be);
    float *host = in_place ? dst : xmalloc(m->n_floats * sizeof(float));
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        const StTensor *t = st_find(f, name);
        if (m->q8 && p->quant8) {
            load_q8_tensor(m, p, f, t, name, err);
            release_pages(f, t);
            continue;
        }
        float *to = host + p->offset;
        if (t->dtype == ST_F16) half_to_f32_n(st_data(f, t), to, (size_t)st_numel(t));
        else st_read_f32(f, t, to, err);  // cannot fail: t and its shape are checked
        if (t->dtype == ST_I8) {  // a q8 weight: row r of the int8 values times its scale (checked above)
            float *scale = read_q8_scales(f, name, p, err);
            const int64_t rows = p->shape[0], cols = (int64_t)p->numel / (rows ? rows : 1);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++) to[r * cols + c] *= scale[r];
            free(scale);
        }
        release_pages(f, t);
    }
    if (!in_place) {
        m->be->to_device(dst, host, m->n_floats * sizeof(float));
        free(host);
    }
    m->be->weights_changed();
    return 0;
}

// A quant8 parameter's int8 values (as floats, which the writer stores as I8 exactly) and its row
// scales, both copied into the writer.
static void add_q8_pair(StWriter *w, const char *name, const ParamInfo *p, const int8_t *q, const float *scale) {
    const int64_t rows = p->shape[0];
    float *qf = xmalloc(p->numel * sizeof(float));
    for (size_t i = 0; i < p->numel; i++) qf[i] = q[i];
    st_writer_add_copy(w, name, ST_I8, p->shape, p->ndim, qf);
    char sname[160];
    snprintf(sname, sizeof sname, "%s%s", name, Q8_SCALE);
    st_writer_add_copy(w, sname, ST_F32, &rows, 1, scale);
    free(qf);
}

// A quant8 parameter as q8, quantised from its floats x.
static void add_q8(StWriter *w, const char *name, const ParamInfo *p, const float *x) {
    const int64_t rows = p->shape[0];
    const int cols = (int)(p->numel / (size_t)rows);
    int8_t *q = xmalloc(p->numel);
    float *scale = xmalloc((size_t)rows * sizeof(float));
    for (int64_t r = 0; r < rows; r++) scale[r] = quant8_row(q + r * cols, x + r * cols, cols);
    add_q8_pair(w, name, p, q, scale);
    free(q), free(scale);
}

// A quant8 tensor of a q8 network (net.h), from its int8 weights: as they are (q8), else their values
// q * scale in dtype.
static void add_held_q8(StWriter *w, const char *name, const Net *m, const ParamInfo *p, StDtype dtype) {
    const int64_t rows = p->shape[0], cols = p->shape[1];
    int8_t *q = xmalloc(p->numel);
    float *scale = xmalloc((size_t)rows * sizeof(float));
    net_get_param_q8(m, p, q, scale);
    if (dtype == CKPT_Q8) {
        add_q8_pair(w, name, p, q, scale);
    } else {
        float *x = xmalloc(p->numel * sizeof(float));
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) x[r * cols + c] = q[r * cols + c] * scale[r];
        st_writer_add_copy(w, name, dtype, p->shape, p->ndim, x);
        free(x);
    }
    free(q), free(scale);
}

void ckpt_add_tensors(StWriter *w, const Net *m, const char *prefix, const float *host, StDtype dtype) {
    char name[128];
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        if (m->q8 && p->quant8) add_held_q8(w, name, m, p, dtype);
        else if (dtype == CKPT_Q8 && p->quant8) add_q8(w, name, p, host + p->offset);
        else st_writer_add(w, name, dtype == CKPT_Q8 ? ST_F16 : dtype, p->shape, p->ndim, host + p->offset);
    }
}

static int torch_online, torch_heads;

void ckpt_torch_options(int online, int heads) {
    torch_online = online;
    torch_heads = heads;
}

int ckpt_file_config(const char *path, NetConfig *c, ClassNames *cn, MalaErr *err) {
    if (torch_file_sniff(path))
        return torch_read_config(path, torch_online ? "model" : NULL, torch_heads, c, cn, NULL, 0, err);
    StFile f;
    if (st_open(&f, path, err)) return -1;
    int rc = ckpt_read_config(&f, c, cn, err);
    st_close(&f);
    return rc;
}

Net *ckpt_load_model(const char *path, const Backend *be, int max_batch, ClassNames *cn, MalaErr *err) {
    return ckpt_load_model_mode(path, be, max_batch, NET_INFER, cn, err);
}

Net *ckpt_load_model_mode(const char *path, const Backend *be, int max_batch, int mode, ClassNames *cn,
                          MalaErr *err) {
    if (torch_file_sniff(path))
        return torch_load_model(path, torch_online ? "model" : NULL, torch_heads, be, max_batch, mode, cn, err);
    StFile f;
    if (st_open(&f, path, err)) return NULL;
    NetConfig c;
    if (ckpt_read_config(&f, &c, cn, err)) { st_close(&f); return NULL; }
    Net *m = net_create(&c, be, max_batch, mode);
    const int ema = ckpt_has_ema(m, &f);
    if (torch_online && !ema) {  // a model file: its one set is the EMA one when it was exported
        mala_errf(err, "--weights online: %s holds one set of weights (a model file, EMA when exported); the online "
                  "weights are in training checkpoints (runs/NAME/checkpoints/)", path);
        net_free(m);
        class_names_free(cn);
        st_close(&f);
        return NULL;
    }
    const char *prefix = ema && !torch_online ? "ema." : "";  // a training checkpoint: online under plain names
    if (ckpt_load_tensors(m, &f, prefix, m->w, err)) {
        net_free(m);
        class_names_free(cn);
        st_close(&f);
        return NULL;
    }
    st_close(&f);
    return m;
}

int ckpt_has_ema(const Net *m, const StFile *f) {
    char name[128];
    snprintf(name, sizeof name, "ema.%s", m->params[0].name);
    return st_find(f, name) != NULL;
}

int ckpt_save_weights(const Net *m, const ClassNames *cn, const float *host, StDtype dtype, const char *path,
                      MalaErr *err) {
    return ckpt_save_weights_meta(m, cn, host, dtype, NULL, 0, path, err);
}

int ckpt_save_weights_meta(const Net *m, const ClassNames *cn, const float *host, StDtype dtype,
                           const char *const *kv, int nkv, const char *path, MalaErr *err) {
    StWriter *w = st_writer_new();
    ckpt_write_config(w, &m->cfg, cn);
    for (int i = 0; i < nkv; i++) st_writer_meta(w, kv[2 * i], kv[2 * i + 1]);
    ckpt_add_tensors(w, m, "", host, dtype);
    int rc = st_writer_save(w, path, err);
    st_writer_free(w);
    return rc;
}

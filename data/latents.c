// defines: latent_rows_ready, latent_row_values, latent_value_bytes, latent_is_set, latent_manifest_read,
//          latent_manifest_parse, latent_set_open, latent_set_close, latent_set_draw, latent_file_hash,
//          latent_writer_open, latent_writer_put, latent_writer_commit, latent_writer_close
//
// Top to bottom: the manifest (parse, write), reading a set (mmap), the draw, writing a set.
#include "data/latents.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/atomic_file.h"  // defines: atomic_write_file
#include "core/half.h"         // defines: half_to_f32, f32_to_half
#include "formats/json.h"         // defines: json_parse, json_get, JsonBuf
#include "formats/npy.h"          // defines: npy_parse_header, npy_header, npy_load, npy_save
#include "core/rng.h"          // defines: rng_seed_stream, rng_normal_fill

#define MANIFEST_MAX_BYTES (1 << 20)
#define NAMES_MAX_BYTES (64 << 20)
#define NPY_HEADER_PEEK ((1 << 20) + 16)  // npy.c refuses longer headers
#define LATENT_MAX_SIDE 4096
#define LATENT_MAX_CHANNELS 64

static const char *const ARRAYS[2] = {"mean.npy", "logvar.npy"};

int64_t latent_rows_ready(const LatentManifest *m) {
    if (m->complete) return m->count;
    int64_t cap = m->count / m->shard_images + 1;
    if (m->shards_done >= cap) return m->count;
    int64_t r = m->shards_done * m->shard_images;
    return r < m->count ? r : m->count;
}

size_t latent_row_values(const LatentManifest *m) { return (size_t)m->views * m->c * m->h * m->w; }
size_t latent_value_bytes(const LatentManifest *m) { return m->f16 ? 2 : 4; }

static char *path_in(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

int latent_is_set(const char *dir) {
    char *p = path_in(dir, LATENT_MANIFEST);
    struct stat st;
    int yes = stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return yes;
}

// A whole small file, NUL-terminated.
static char *read_small(const char *path, size_t cap, size_t *len, MalaErr *err) {
    FILE *f = fopen(path, "rb");
    if (!f) { mala_errf(err, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    char *buf = xmalloc(cap + 1);
    size_t n = fread(buf, 1, cap + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); mala_errf(err, "%s: read error", path); return NULL; }
    if (n > cap) { free(buf); mala_errf(err, "%s: larger than %zu bytes", path, cap); return NULL; }
    buf[n] = 0;
    *len = n;
    return buf;
}

// ---------------------------------------------------------------------------------------------
// the manifest

static int get_int(const JsonValue *o, const char *key, int64_t lo, int64_t hi, int64_t *out, const char *name,
                   MalaErr *err) {
    const JsonValue *v = json_get(o, key);
    if (!v) return mala_errf(err, "%s: '%s' is missing", name, key);
    int64_t x;
    if (json_get_i64(v, &x) || x < lo || x > hi)
        return mala_errf(err, "%s: '%s' must be an integer in %lld..%lld", name, key, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

static int get_str(const JsonValue *o, const char *key, char *out, size_t cap, const char *name, MalaErr *err) {
    const JsonValue *v = json_get(o, key);
    if (!v || v->type != JSON_STRING || v->len >= cap || strlen(v->str) != v->len)
        return mala_errf(err, "%s: '%s' must be a string (of fewer than %zu bytes)", name, key, cap);
    memcpy(out, v->str, v->len + 1);
    return 0;
}

static int get_hex(const JsonValue *o, const char *key, uint64_t *out, const char *name, MalaErr *err) {
    char s[32], *end;
    if (get_str(o, key, s, sizeof s, name, err)) return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 16);
    if (strlen(s) != 16 || *end || errno) return mala_errf(err, "%s: '%s' must be 16 hex digits", name, key);
    *out = x;
    return 0;
}

static int manifest_from_json(const JsonValue *j, const char *name, LatentManifest *m, MalaErr *err) {
    memset(m, 0, sizeof *m);
    if (j->type != JSON_OBJECT) return mala_errf(err, "%s: not a JSON object", name);
    char fmt[32], dtype[16];
    int64_t x;
    if (get_str(j, "format", fmt, sizeof fmt, name, err)) return -1;
    if (strcmp(fmt, "mala-latents")) return mala_errf(err, "%s: format '%s' is not mala-latents", name, fmt);
    if (get_int(j, "version", 1, 1, &x, name, err)) return -1;
    if (get_int(j, "count", 1, LATENT_MAX_COUNT, &m->count, name, err)) return -1;
    if (get_int(j, "views", 1, 2, &x, name, err)) return -1;
    m->views = (int)x;
    if (get_str(j, "dtype", dtype, sizeof dtype, name, err)) return -1;
    if (!strcmp(dtype, "float16")) m->f16 = 1;
    else if (strcmp(dtype, "float32")) return mala_errf(err, "%s: dtype '%s' is not float16 or float32", name, dtype);
    const JsonValue *ls = json_get(j, "latent_shape");
    int dims[3];
    if (!ls || ls->type != JSON_ARRAY || ls->n != 3)
        return mala_errf(err, "%s: 'latent_shape' must be [channels, height, width]", name);
    for (int i = 0; i < 3; i++) {
        int64_t d;
        if (json_get_i64(&ls->items[i], &d) || d < 1 || d > (i ? LATENT_MAX_SIDE : LATENT_MAX_CHANNELS))
            return mala_errf(err, "%s: 'latent_shape' entry %d is not an integer in 1..%d", name, i,
                             i ? LATENT_MAX_SIDE : LATENT_MAX_CHANNELS);
        dims[i] = (int)d;
    }
    m->c = dims[0], m->h = dims[1], m->w = dims[2];
    if (get_int(j, "image_size", 1, 8 * LATENT_MAX_SIDE, &x, name, err)) return -1;
    m->image_size = (int)x;
    const JsonValue *sc = json_get(j, "scale");
    if (!sc || sc->type != JSON_NUMBER || !(sc->number > 0) || sc->number > 1e6)
        return mala_errf(err, "%s: 'scale' must be a positive number", name);
    m->scale = (float)sc->number;
    if (get_int(j, "num_classes", 1, 1000000, &x, name, err)) return -1;
    m->num_classes = (int)x;
    if (get_int(j, "shard_images", 1, 1 << 24, &x, name, err)) return -1;
    m->shard_images = (int)x;
    if (get_int(j, "shards_done", 0, LATENT_MAX_COUNT, &m->shards_done, name, err)) return -1;
    const JsonValue *cp = json_get(j, "complete");
    if (!cp || cp->type != JSON_BOOL) return mala_errf(err, "%s: 'complete' must be true or false", name);
    m->complete = cp->boolean;
    if (get_str(j, "crop", m->crop, sizeof m->crop, name, err)) return -1;
    const JsonValue *vae = json_get(j, "vae"), *src = json_get(j, "source");
    if (!vae || vae->type != JSON_OBJECT) return mala_errf(err, "%s: 'vae' must be an object", name);
    if (!src || src->type != JSON_OBJECT) return mala_errf(err, "%s: 'source' must be an object", name);
    if (get_str(vae, "file", m->vae_file, sizeof m->vae_file, name, err) ||
        get_int(vae, "bytes", 0, INT64_MAX, &x, name, err))
        return -1;
    m->vae_bytes = (uint64_t)x;
    if (get_hex(vae, "hash64", &m->vae_hash, name, err)) return -1;
    if (get_str(src, "dir", m->source, sizeof m->source, name, err) ||
        get_int(src, "images", m->count, m->count, &x, name, err) || get_hex(src, "list_hash64", &m->list_hash, name, err))
        return -1;
    return 0;
}

int latent_manifest_parse(const char *text, size_t len, const char *name, LatentManifest *m, MalaErr *err) {
    MalaErr jerr;
    JsonValue *j = json_parse(text, len, &jerr);
    if (!j) return mala_errf(err, "%s: not valid JSON: %s", name, jerr.msg);
    int rc = manifest_from_json(j, name, m, err);
    json_free(j);
    return rc;
}

int latent_manifest_read(const char *dir, LatentManifest *m, MalaErr *err) {
    char *p = path_in(dir, LATENT_MANIFEST);
    size_t len;
    char *text = read_small(p, MANIFEST_MAX_BYTES, &len, err);
    int rc = text ? latent_manifest_parse(text, len, p, m, err) : -1;
    free(text);
    free(p);
    return rc;
}

static void manifest_json(const LatentManifest *m, JsonBuf *b) {
    json_buf_printf(b, "{\"format\": \"mala-latents\", \"version\": 1, \"count\": %lld, \"views\": %d, \"dtype\": \"%s\",\n",
                    (long long)m->count, m->views, m->f16 ? "float16" : "float32");
    json_buf_printf(b, " \"latent_shape\": [%d, %d, %d], \"image_size\": %d, \"scale\": %.9g, \"crop\": ", m->c, m->h, m->w,
                    m->image_size, m->scale);
    json_buf_string(b, m->crop, strlen(m->crop));
    json_buf_printf(b, ",\n \"num_classes\": %d, \"shard_images\": %d, \"shards_done\": %lld, \"complete\": %s,\n",
                    m->num_classes, m->shard_images, (long long)m->shards_done, m->complete ? "true" : "false");
    json_buf_puts(b, " \"vae\": {\"file\": ");
    json_buf_string(b, m->vae_file, strlen(m->vae_file));
    json_buf_printf(b, ", \"bytes\": %llu, \"hash64\": \"%016llx\"},\n \"source\": {\"dir\": ",
                    (unsigned long long)m->vae_bytes, (unsigned long long)m->vae_hash);
    json_buf_string(b, m->source, strlen(m->source));
    json_buf_printf(b, ", \"images\": %lld, \"list_hash64\": \"%016llx\"}}\n", (long long)m->count,
                    (unsigned long long)m->list_hash);
}

static int manifest_write(const char *dir, const LatentManifest *m, MalaErr *err) {
    JsonBuf b = {0};
    manifest_json(m, &b);
    char *p = path_in(dir, LATENT_MANIFEST);
    int rc = atomic_write_file(p, b.buf, b.len, err);
    free(p);
    json_buf_free(&b);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// reading

static int read_class_names(LatentSet *s, MalaErr *err) {
    char *p = path_in(s->dir, "class_names.json");
    size_t len;
    char *text = read_small(p, NAMES_MAX_BYTES, &len, err);
    int rc = -1;
    if (text) {
        MalaErr jerr;
        JsonValue *j = json_parse(text, len, &jerr);
        if (!j) mala_errf(err, "%s: not valid JSON: %s", p, jerr.msg);
        else if (j->type != JSON_ARRAY || j->n != s->m.num_classes)
            mala_errf(err, "%s: expected a JSON array of %d class names (num_classes of latents.json)", p, s->m.num_classes);
        else {
            s->class_names = xcalloc((size_t)j->n, sizeof(char *));
            rc = 0;
            for (int i = 0; i < j->n; i++) {
                const JsonValue *v = &j->items[i];
                if (v->type != JSON_STRING || !v->len || strlen(v->str) != v->len) {
                    rc = mala_errf(err, "%s: entry %d is not a non-empty string", p, i);
                    break;
                }
                s->class_names[i] = xstrdup(v->str);
            }
        }
        json_free(j);
    }
    free(text);
    free(p);
    return rc;
}

static int read_labels(LatentSet *s, MalaErr *err) {
    char *p = path_in(s->dir, "labels.npy");
    NpyArray a;
    int rc = npy_load(p, &a, err);
    if (rc == 0) {
        if (strcmp(a.dtype, "<i4") || a.ndim != 1 || a.shape[0] != s->m.count)
            rc = mala_errf(err, "%s: expected int32 [%lld] labels, got %s with %d dimensions", p, (long long)s->m.count,
                           a.dtype, a.ndim);
        else {
            s->labels = a.data;
            a.data = NULL;
            for (int64_t i = 0; i < s->rows && rc == 0; i++)
                if (s->labels[i] < 0 || s->labels[i] >= s->m.num_classes)
                    rc = mala_errf(err, "%s: label %d of image %lld is outside 0..%d", p, s->labels[i], (long long)i,
                                   s->m.num_classes - 1);
        }
        npy_free(&a);
    }
    free(p);
    return rc;
}

// Maps ARRAYS[k] after checking its header against the manifest.
static int map_array(LatentSet *s, int k, MalaErr *err) {
    char *p = path_in(s->dir, ARRAYS[k]);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    int rc = -1;
    struct stat st;
    if (fd < 0) { mala_errf(err, "%s: cannot open: %s", p, strerror(errno)); free(p); return -1; }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { mala_errf(err, "%s: not a regular file", p); goto done; }
    size_t peek = st.st_size < NPY_HEADER_PEEK ? (size_t)st.st_size : NPY_HEADER_PEEK;
    unsigned char *head = xmalloc(peek + 1);
    ssize_t got = pread(fd, head, peek, 0);
    NpyArray a;
    uint64_t off = 0;
    if (got != (ssize_t)peek) mala_errf(err, "%s: read error", p);
    else if (npy_parse_header(head, peek, (uint64_t)st.st_size, p, &a, &off, err) == 0) {
        const LatentManifest *m = &s->m;
        const int64_t want[5] = {m->count, m->views, m->c, m->h, m->w};
        int same = a.ndim == 5 && !strcmp(a.dtype, m->f16 ? "<f2" : "<f4");
        for (int d = 0; same && d < 5; d++) same = a.shape[d] == want[d];
        if (!same)
            mala_errf(err, "%s: expected %s [%lld, %d, %d, %d, %d] as latents.json says, got %s with %d dimensions", p,
                      m->f16 ? "float16" : "float32", (long long)m->count, m->views, m->c, m->h, m->w, a.dtype, a.ndim);
        else if (off % latent_value_bytes(m))
            mala_errf(err, "%s: data offset %llu is not aligned", p, (unsigned long long)off);
        else {
            void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
            if (map == MAP_FAILED) mala_errf(err, "%s: cannot map: %s", p, strerror(errno));
            else {
                s->map[k] = map;
                s->map_len[k] = (size_t)st.st_size;
                if (k == 0) s->mean = (const unsigned char *)map + off;
                else s->logvar = (const unsigned char *)map + off;
                rc = 0;
            }
        }
    }
    free(head);
done:
    close(fd);
    free(p);
    return rc;
}

int latent_set_open(LatentSet *s, const char *dir, MalaErr *err) {
    memset(s, 0, sizeof *s);
    s->dir = xstrdup(dir);
    if (latent_manifest_read(dir, &s->m, err)) goto fail;
    s->rows = latent_rows_ready(&s->m);
    if (s->rows < 1) {
        mala_errf(err, "%s: no images encoded yet (shards_done 0): let `mala encode` run", dir);
        goto fail;
    }
    if (read_class_names(s, err) || read_labels(s, err) || map_array(s, 0, err) || map_array(s, 1, err)) goto fail;
    return 0;
fail:
    latent_set_close(s);
    return -1;
}

void latent_set_close(LatentSet *s) {
    for (int k = 0; k < 2; k++)
        if (s->map[k]) munmap(s->map[k], s->map_len[k]);
    for (int i = 0; s->class_names && i < s->m.num_classes; i++) free(s->class_names[i]);
    free(s->class_names);
    free(s->labels);
    free(s->dir);
    memset(s, 0, sizeof *s);
}

static inline float stored(const LatentSet *s, const unsigned char *base, size_t i) {
    if (s->m.f16) {
        uint16_t h;
        memcpy(&h, base + 2 * i, 2);
        return half_to_f32(h);
    }
    float f;
    memcpy(&f, base + 4 * i, 4);
    return f;
}

void latent_set_draw(const LatentSet *s, int64_t row, int view, int sample, uint64_t seed, uint64_t stream, float *z) {
    const size_t per = (size_t)s->m.c * s->m.h * s->m.w;
    const size_t first = (size_t)row * latent_row_values(&s->m) + (size_t)view * per;
    const float scale = s->m.scale;
    if (sample) {
        Rng r;
        rng_seed_stream(&r, seed, stream);
        rng_normal_fill(&r, z, per);  // eps
    }
    for (size_t i = 0; i < per; i++) {
        float mean = stored(s, s->mean, first + i);
        float lv = stored(s, s->logvar, first + i);
        lv = lv < -30.0f ? -30.0f : lv > 20.0f ? 20.0f : lv;  // DiagonalGaussianDistribution's clamp
        z[i] = sample ? (mean + expf(0.5f * lv) * z[i]) * scale : mean * scale;
    }
}

int latent_file_hash(const char *path, uint64_t *hash, uint64_t *bytes, MalaErr *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = xmalloc(CHUNK + 8);
    uint64_t h = 0xcbf29ce484222325ull, total = 0;
    size_t n;
    while ((n = fread(buf, 1, CHUNK, f)) > 0) {
        memset(buf + n, 0, 8);
        for (size_t i = 0; i < n; i += 8) {
            uint64_t w = 0;
            for (int k = 7; k >= 0; k--) w = w << 8 | buf[i + k];
            h = (h ^ w) * 0x100000001b3ull;
        }
        total += n;
    }
    int bad = ferror(f);
    fclose(f);
    free(buf);
    if (bad) return mala_errf(err, "%s: read error", path);
    *hash = h ^ total;
    *bytes = total;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// writing

// The fields of a manifest that must agree for two runs to fill the same set.
static int manifest_mismatch(const LatentManifest *a, const LatentManifest *b, char *what, size_t cap) {
    if (a->count != b->count || a->list_hash != b->list_hash || a->image_size != b->image_size ||
        a->num_classes != b->num_classes)
        snprintf(what, cap, "the image list (%lld images at %d px, list hash %016llx; now %lld at %d px, %016llx)",
                 (long long)a->count, a->image_size, (unsigned long long)a->list_hash, (long long)b->count, b->image_size,
                 (unsigned long long)b->list_hash);
    else if (a->vae_hash != b->vae_hash || a->vae_bytes != b->vae_bytes)
        snprintf(what, cap, "the VAE (%.200s, hash %016llx; now %.200s, %016llx)", a->vae_file, (unsigned long long)a->vae_hash,
                 b->vae_file, (unsigned long long)b->vae_hash);
    else if (a->views != b->views)
        snprintf(what, cap, "the views (%d: encoded %s --hflip)", a->views, a->views == 2 ? "with" : "without");
    else if (a->f16 != b->f16) snprintf(what, cap, "the dtype (%s)", a->f16 ? "f16" : "f32");
    else if (a->c != b->c || a->h != b->h || a->w != b->w || a->shard_images != b->shard_images || a->scale != b->scale)
        snprintf(what, cap, "the latents or shards ([%d, %d, %d] in shards of %d images)", a->c, a->h, a->w,
                 a->shard_images);
    else return 0;
    return 1;
}

// Creates an array file of its full size with the header written (the data a hole until filled).
static int create_array(LatentWriter *w, int k, MalaErr *err) {
    const LatentManifest *m = &w->m;
    const int64_t shape[5] = {m->count, m->views, m->c, m->h, m->w};
    char hdr[512];
    size_t hl = npy_header(m->f16 ? "<f2" : "<f4", 5, shape, hdr, sizeof hdr);
    char *p = path_in(w->dir, ARRAYS[k]);
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = 0;
    uint64_t total = hl + (uint64_t)m->count * latent_row_values(m) * latent_value_bytes(m);
    if (fd < 0) rc = mala_errf(err, "%s: cannot create: %s", p, strerror(errno));
    else if (!hl || pwrite(fd, hdr, hl, 0) != (ssize_t)hl || ftruncate(fd, (off_t)total) || fsync(fd))
        rc = mala_errf(err, "%s: write failed: %s", p, strerror(errno ? errno : EIO));
    if (rc && fd >= 0) close(fd);
    if (!rc) { w->fd[k] = fd; w->off[k] = hl; }
    free(p);
    return rc;
}

// Reopens an array of an existing set for writing, its header checked.
static int reopen_array(LatentWriter *w, int k, MalaErr *err) {
    LatentSet probe = {0};
    probe.m = w->m;
    probe.dir = w->dir;
    if (map_array(&probe, k, err)) return -1;
    w->off[k] = (uint64_t)((k ? probe.logvar : probe.mean) - (const unsigned char *)probe.map[k]);
    munmap(probe.map[k], probe.map_len[k]);
    char *p = path_in(w->dir, ARRAYS[k]);
    w->fd[k] = open(p, O_RDWR | O_CLOEXEC);
    int rc = w->fd[k] < 0 ? mala_errf(err, "%s: cannot open for writing: %s", p, strerror(errno)) : 0;
    free(p);
    return rc;
}

int latent_writer_open(LatentWriter *w, const char *dir, const LatentManifest *m, char *const *class_names,
                       const int32_t *labels, MalaErr *err) {
    memset(w, 0, sizeof *w);
    w->fd[0] = w->fd[1] = -1;
    w->dir = xstrdup(dir);
    w->m = *m;
    if (latent_is_set(dir)) {
        LatentManifest old;
        char what[1400];
        if (latent_manifest_read(dir, &old, err)) goto fail;
        if (manifest_mismatch(&old, m, what, sizeof what)) {
            mala_errf(err, "%s/%s: this set differs from the command in %s; continue it with its own flags, or give a "
                      "fresh --out", dir, LATENT_MANIFEST, what);
            goto fail;
        }
        w->m.shards_done = old.shards_done;
        w->m.complete = old.complete;
        if (reopen_array(w, 0, err) || reopen_array(w, 1, err)) goto fail;
        return 0;
    }
    // class names, labels, the two arrays, then the manifest that makes them a set
    JsonBuf b = {0};
    json_buf_puts(&b, "[");
    for (int i = 0; i < m->num_classes; i++) {
        if (i) json_buf_puts(&b, ", ");
        json_buf_string(&b, class_names[i], strlen(class_names[i]));
    }
    json_buf_puts(&b, "]\n");
    char *p = path_in(dir, "class_names.json");
    int rc = atomic_write_file(p, b.buf, b.len, err);
    free(p);
    json_buf_free(&b);
    if (rc) goto fail;
    NpyArray a;
    npy_wrap(&a, "<i4", (void *)labels, 1, (int64_t[]){m->count});
    p = path_in(dir, "labels.npy");
    rc = npy_save(p, &a, err);
    free(p);
    w->m.shards_done = 0;
    w->m.complete = 0;
    if (rc || create_array(w, 0, err) || create_array(w, 1, err) || manifest_write(dir, &w->m, err)) goto fail;
    return 0;
fail:
    latent_writer_close(w);
    return -1;
}

int latent_writer_put(LatentWriter *w, int64_t first, int64_t n, const float *mean, const float *logvar, MalaErr *err) {
    const LatentManifest *m = &w->m;
    if (first < 0 || n < 0 || first + n > m->count)
        return mala_errf(err, "%s: rows %lld..%lld outside the set's %lld", w->dir, (long long)first,
                         (long long)(first + n - 1), (long long)m->count);
    const size_t vals = (size_t)n * latent_row_values(m), vb = latent_value_bytes(m), bytes = vals * vb;
    if (bytes > w->buf_cap) {
        free(w->buf);
        w->buf = xmalloc(bytes + 1);
        w->buf_cap = bytes;
    }
    for (int k = 0; k < 2; k++) {
        const float *src = k ? logvar : mean;
        if (m->f16) {
            uint16_t *h = w->buf;
            for (size_t i = 0; i < vals; i++) h[i] = f32_to_half(src[i]);
        } else {
            memcpy(w->buf, src, bytes);
        }
        uint64_t at = w->off[k] + (uint64_t)first * latent_row_values(m) * vb;
        for (size_t done = 0; done < bytes;) {
            ssize_t r = pwrite(w->fd[k], (char *)w->buf + done, bytes - done, (off_t)(at + done));
            if (r <= 0) {
                char *p = path_in(w->dir, ARRAYS[k]);
                mala_errf(err, "%s: write failed: %s", p, strerror(r < 0 ? errno : EIO));
                free(p);
                return -1;
            }
            done += (size_t)r;
        }
    }
    return 0;
}

int latent_writer_commit(LatentWriter *w, int64_t shards_done, MalaErr *err) {
    for (int k = 0; k < 2; k++)
        if (fsync(w->fd[k])) {
            char *p = path_in(w->dir, ARRAYS[k]);
            mala_errf(err, "%s: fsync failed: %s", p, strerror(errno));
            free(p);
            return -1;
        }
    w->m.shards_done = shards_done;
    w->m.complete = (int64_t)shards_done * w->m.shard_images >= w->m.count;
    return manifest_write(w->dir, &w->m, err);
}

void latent_writer_close(LatentWriter *w) {
    for (int k = 0; k < 2; k++)
        if (w->fd[k] >= 0) close(w->fd[k]);
    free(w->buf);
    free(w->dir);
    memset(w, 0, sizeof *w);
    w->fd[0] = w->fd[1] = -1;
}

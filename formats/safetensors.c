// defines: st_dtype_size, st_dtype_name, st_numel, st_open, st_close, st_find, st_meta, st_data,
//          st_read_f32, st_expect, st_load_f32, st_writer_new, st_writer_free, st_writer_meta, st_writer_add,
//          st_writer_add_copy, st_writer_save, st_writer_write
#include "formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/atomic_file.h"  // defines: atomic_open, atomic_commit, atomic_abort
#include "core/half.h"  // defines: half_to_f32, f32_to_half, bf16_to_f32, f32_to_bf16
#include "formats/json.h"  // defines: json_parse, JsonBuf

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

// rank: the order of the Python library's Dtype enum; files store higher ranks first.
static const struct { const char *name; size_t size; int rank; } DTYPES[] = {
    [ST_F32] = {"F32", 4, 5}, [ST_F16] = {"F16", 2, 2}, [ST_BF16] = {"BF16", 2, 3},
    [ST_F64] = {"F64", 8, 6}, [ST_I32] = {"I32", 4, 4}, [ST_I64] = {"I64", 8, 7},
    [ST_U8] = {"U8", 1, 0}, [ST_I8] = {"I8", 1, 1},
};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

size_t st_dtype_size(StDtype dtype) { return (unsigned)dtype < N_DTYPES ? DTYPES[dtype].size : 0; }
const char *st_dtype_name(StDtype dtype) { return (unsigned)dtype < N_DTYPES ? DTYPES[dtype].name : "?"; }

// A zero dimension is looked for first: the product of the other dimensions may overflow.
static int has_zero_dim(const int64_t *shape, int ndim) {
    for (int i = 0; i < ndim; i++) if (shape[i] == 0) return 1;
    return 0;
}

int64_t st_numel(const StTensor *t) {
    if (has_zero_dim(t->shape, t->ndim)) return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

// ---------------------------------------------------------------------------------------------
// Conversions between stored bytes and float32 (loads and stores go through memcpy: the data
// area of a mapped file need not be aligned).

static float load_f32(const uint8_t *src, StDtype dtype) {
    switch (dtype) {
    case ST_F32: { float v; memcpy(&v, src, 4); return v; }
    case ST_F16: { uint16_t v; memcpy(&v, src, 2); return half_to_f32(v); }
    case ST_BF16: { uint16_t v; memcpy(&v, src, 2); return bf16_to_f32(v); }
    case ST_F64: { double v; memcpy(&v, src, 8); return (float)v; }
    case ST_I32: { int32_t v; memcpy(&v, src, 4); return (float)v; }
    case ST_I64: { int64_t v; memcpy(&v, src, 8); return (float)v; }
    case ST_U8: return (float)src[0];
    case ST_I8: return (float)(int8_t)src[0];
    }
    return 0;
}

// Nearest integer, saturating at the int64 range; NaN gives 0.
static int64_t round_sat_i64(float x) {
    if (isnan(x)) return 0;
    double r = nearbyint((double)x);
    if (r >= 0x1p63) return INT64_MAX;
    if (r < -0x1p63) return INT64_MIN;
    return (int64_t)r;
}

static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static void store_f32(uint8_t *dst, float x, StDtype dtype) {
    switch (dtype) {
    case ST_F32: memcpy(dst, &x, 4); break;
    case ST_F16: { uint16_t v = f32_to_half(x); memcpy(dst, &v, 2); break; }
    case ST_BF16: { uint16_t v = f32_to_bf16(x); memcpy(dst, &v, 2); break; }
    case ST_F64: { double v = x; memcpy(dst, &v, 8); break; }
    case ST_I32: { int32_t v = (int32_t)clamp_i64(round_sat_i64(x), INT32_MIN, INT32_MAX); memcpy(dst, &v, 4); break; }
    case ST_I64: { int64_t v = round_sat_i64(x); memcpy(dst, &v, 8); break; }
    case ST_U8: dst[0] = (uint8_t)clamp_i64(round_sat_i64(x), 0, 255); break;
    case ST_I8: { int8_t v = (int8_t)clamp_i64(round_sat_i64(x), -128, 127); memcpy(dst, &v, 1); break; }
    }
}

// ---------------------------------------------------------------------------------------------
// Error helpers

// "path: <message>", one line.
static int fail_at(MalaErr *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(MalaErr *err, const char *path, const char *fmt, ...) {
    char what[MALA_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mala_errf(err, "%s: %s", path, what);
}

// A name from a file as it may appear in a one-line message: control bytes become '?' and
// long names are cut short.
#define SHOWN_LEN 80
static const char *shown(const char *s, char buf[SHOWN_LEN]) {
    size_t i = 0;
    for (; s[i] && i < SHOWN_LEN - 4; i++) buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (s[i]) { memcpy(buf + i, "...", 3); i += 3; }
    buf[i] = 0;
    return buf;
}

// "a number", "an object", ... for messages.
static const char *a_type(JsonType t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "a list";
    case JSON_OBJECT: return "an object";
    }
    return "unknown";
}

static const char *format_shape(char *buf, size_t cap, const int64_t *shape, int ndim) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

// ---------------------------------------------------------------------------------------------
// Reading

static int map_file(StFile *f, MalaErr *err) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail_at(err, f->path, "cannot open: %s", strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = fail_at(err, f->path, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = fail_at(err, f->path, "not a regular file");
    } else if (st.st_size < 8) {
        rc = fail_at(err, f->path, "file is %lld bytes, shorter than 8 bytes (the header length field)",
                     (long long)st.st_size);
    } else {
        void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) rc = fail_at(err, f->path, "cannot map the file: %s", strerror(errno));
        else { f->map = map; f->map_len = (size_t)st.st_size; }
    }
    close(fd);
    return rc;
}

static uint64_t load_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int parse_header(StFile *f, JsonValue **root, MalaErr *err) {
    const uint8_t *bytes = f->map;
    uint64_t n = load_le64(bytes);
    if (!memcmp(bytes, "PK\x03\x04", 4) || !memcmp(bytes, "\x93NUMPY", 6))
        return fail_at(err, f->path, "not a safetensors file (%s)",
                       bytes[0] == 'P' ? "a zip archive: .npz, or a PyTorch .pt/.pth" : "a .npy array");
    if (n > f->map_len - 8)
        return fail_at(err, f->path, "not a safetensors file: header length %llu runs past the end of the file (%zu bytes)",
                       (unsigned long long)n, f->map_len);
    if (n > ST_MAX_HEADER_LEN)
        return fail_at(err, f->path, "header length %llu exceeds the limit of %d bytes",
                       (unsigned long long)n, ST_MAX_HEADER_LEN);
    MalaErr jerr;
    *root = json_parse((const char *)bytes + 8, (size_t)n, &jerr);
    if (!*root) return fail_at(err, f->path, "header is not valid JSON (%s)", jerr.msg);
    if ((*root)->type != JSON_OBJECT)
        return fail_at(err, f->path, "header is %s, expected a JSON object", a_type((*root)->type));
    f->data = bytes + 8 + n;
    f->data_len = f->map_len - 8 - (size_t)n;
    return 0;
}

static int has_nul(const char *s, size_t len) { return strlen(s) != len; }
static int is_metadata_key(const JsonValue *m) { return strcmp(m->key, "__metadata__") == 0 && !has_nul(m->key, m->key_len); }

static int read_metadata(StFile *f, const JsonValue *m, MalaErr *err) {
    if (m->type != JSON_OBJECT)
        return fail_at(err, f->path, "__metadata__ is %s, expected an object of strings", a_type(m->type));
    f->meta_keys = xcalloc((size_t)m->n, sizeof *f->meta_keys);
    f->meta_vals = xcalloc((size_t)m->n, sizeof *f->meta_vals);
    for (int i = 0; i < m->n; i++) {
        const JsonValue *e = &m->items[i];
        char kb[SHOWN_LEN];
        if (has_nul(e->key, e->key_len)) return fail_at(err, f->path, "a __metadata__ key contains a NUL character");
        if (e->type != JSON_STRING)
            return fail_at(err, f->path, "__metadata__ value for key '%s' is %s, expected a string",
                           shown(e->key, kb), a_type(e->type));
        if (has_nul(e->str, e->len))
            return fail_at(err, f->path, "__metadata__ value for key '%s' contains a NUL character", shown(e->key, kb));
        f->meta_keys[f->nmeta] = xstrdup(e->key);
        f->meta_vals[f->nmeta] = xstrdup(e->str);
        f->nmeta++;
    }
    return 0;
}

// The one member `key` of a tensor entry, which must exist once and have the given type.
static int entry_field(const StFile *f, const char *name, const JsonValue *entry, const char *key,
                       JsonType type, const JsonValue **out, MalaErr *err) {
    const JsonValue *found = NULL;
    for (int i = 0; i < entry->n; i++) {
        const JsonValue *e = &entry->items[i];
        if (strcmp(e->key, key) != 0 || has_nul(e->key, e->key_len)) continue;
        if (found) return fail_at(err, f->path, "tensor '%s' has more than one '%s' field", name, key);
        found = e;
    }
    if (!found) return fail_at(err, f->path, "tensor '%s' is missing its '%s' field", name, key);
    if (found->type != type)
        return fail_at(err, f->path, "tensor '%s': '%s' is %s, expected %s", name, key,
                       a_type(found->type), a_type(type));
    *out = found;
    return 0;
}

static int parse_dtype(const StFile *f, const char *name, const JsonValue *v, StDtype *out, MalaErr *err) {
    for (int d = 0; d < N_DTYPES; d++)
        if (strcmp(v->str, DTYPES[d].name) == 0 && !has_nul(v->str, v->len)) { *out = (StDtype)d; return 0; }
    char db[SHOWN_LEN];
    return fail_at(err, f->path, "tensor '%s' has unsupported dtype '%s' (supported: F32, F16, BF16, F64, I32, I64, U8)",
                   name, shown(v->str, db));
}

static int parse_shape(const StFile *f, const char *name, const JsonValue *v, StTensor *t, MalaErr *err) {
    if (v->n > ST_MAX_DIMS)
        return fail_at(err, f->path, "tensor '%s' has %d dimensions, at most %d are supported", name, v->n, ST_MAX_DIMS);
    for (int i = 0; i < v->n; i++) {
        const JsonValue *e = &v->items[i];
        int64_t d;
        char eb[SHOWN_LEN];
        if (e->type != JSON_NUMBER)
            return fail_at(err, f->path, "tensor '%s': shape entry %d is %s, expected an integer",
                           name, i, a_type(e->type));
        if (json_get_i64(e, &d) != 0)
            return fail_at(err, f->path, "tensor '%s': shape entry %s is not an integer in range", name, shown(e->str, eb));
        if (d < 0) return fail_at(err, f->path, "tensor '%s' has a negative dimension (%lld)", name, (long long)d);
        t->shape[i] = d;
    }
    t->ndim = v->n;
    return 0;
}

// Byte count of t's elements; -1 (with a message) when it does not fit in 64 bits.
static int tensor_nbytes(const StFile *f, const char *name, const StTensor *t, uint64_t *out, MalaErr *err) {
    uint64_t n = DTYPES[t->dtype].size;
    int overflow = 0;
    for (int i = 0; i < t->ndim; i++) overflow |= __builtin_mul_overflow(n, (uint64_t)t->shape[i], &n);
    if (has_zero_dim(t->shape, t->ndim)) { n = 0; overflow = 0; }
    if (overflow || n > (uint64_t)INT64_MAX) {
        char sb[256];
        return fail_at(err, f->path, "tensor '%s': shape %s is too large (its byte count overflows)", name,
                       format_shape(sb, sizeof sb, t->shape, t->ndim));
    }
    *out = n;
    return 0;
}

static int parse_offsets(const StFile *f, const char *name, const JsonValue *v, StTensor *t, MalaErr *err) {
    uint64_t b = 0, e = 0, nbytes = 0;
    if (v->n != 2 || json_get_u64(&v->items[0], &b) != 0 || json_get_u64(&v->items[1], &e) != 0)
        return fail_at(err, f->path, "tensor '%s': data_offsets must be a list of two non-negative integers [begin, end]", name);
    if (e < b)
        return fail_at(err, f->path, "tensor '%s': data_offsets [%llu,%llu] end before they begin", name,
                       (unsigned long long)b, (unsigned long long)e);
    if (tensor_nbytes(f, name, t, &nbytes, err)) return -1;
    if (e - b != nbytes) {
        char sb[256];
        return fail_at(err, f->path, "tensor '%s': shape %s of %s needs %llu bytes but data_offsets [%llu,%llu] cover %llu",
                       name, format_shape(sb, sizeof sb, t->shape, t->ndim), DTYPES[t->dtype].name,
                       (unsigned long long)nbytes, (unsigned long long)b, (unsigned long long)e,
                       (unsigned long long)(e - b));
    }
    if (e > f->data_len)
        return fail_at(err, f->path, "tensor '%s': data_offsets [%llu,%llu] run past the end of the data area (%zu bytes)",
                       name, (unsigned long long)b, (unsigned long long)e, f->data_len);
    t->begin = (size_t)b;
    t->end = (size_t)e;
    return 0;
}

static int read_tensor(const StFile *f, const JsonValue *m, StTensor *t, MalaErr *err) {
    char nb[SHOWN_LEN];
    const char *name = shown(m->key, nb);
    const JsonValue *dtype, *shape, *offsets;
    t->name = xstrdup(m->key);
    if (has_nul(m->key, m->key_len)) return fail_at(err, f->path, "tensor name '%s' contains a NUL character", name);
    if (m->type != JSON_OBJECT)
        return fail_at(err, f->path, "tensor '%s': entry is %s, expected an object with dtype, shape and data_offsets",
                       name, a_type(m->type));
    if (entry_field(f, name, m, "dtype", JSON_STRING, &dtype, err) ||
        entry_field(f, name, m, "shape", JSON_ARRAY, &shape, err) ||
        entry_field(f, name, m, "data_offsets", JSON_ARRAY, &offsets, err))
        return -1;
    if (parse_dtype(f, name, dtype, &t->dtype, err) || parse_shape(f, name, shape, t, err)) return -1;
    return parse_offsets(f, name, offsets, t, err);
}

static int read_entries(StFile *f, const JsonValue *root, MalaErr *err) {
    int ntensors = 0, seen_meta = 0;
    for (int i = 0; i < root->n; i++) ntensors += !is_metadata_key(&root->items[i]);
    f->tensors = xcalloc((size_t)ntensors, sizeof *f->tensors);
    for (int i = 0; i < root->n; i++) {
        const JsonValue *m = &root->items[i];
        if (is_metadata_key(m)) {
            if (seen_meta++) return fail_at(err, f->path, "header has more than one __metadata__ entry");
            if (read_metadata(f, m, err)) return -1;
        } else {
            if (read_tensor(f, m, &f->tensors[f->n++], err)) return -1;
        }
    }
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const StTensor *)a)->name, ((const StTensor *)b)->name);
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Sorts the tensors by name (for st_find) and refuses repeated tensor names or metadata keys.
static int check_names(StFile *f, MalaErr *err) {
    char nb[SHOWN_LEN];
    qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, cmp_tensor_name);
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return fail_at(err, f->path, "duplicate tensor name '%s'", shown(f->tensors[i].name, nb));
    char **keys = xmalloc((size_t)f->nmeta * sizeof *keys);
    if (f->nmeta) memcpy(keys, f->meta_keys, (size_t)f->nmeta * sizeof *keys);
    qsort(keys, (size_t)f->nmeta, sizeof *keys, cmp_str_ptr);
    int rc = 0;
    for (int i = 1; i < f->nmeta && !rc; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) rc = fail_at(err, f->path, "duplicate __metadata__ key '%s'", shown(keys[i], nb));
    free(keys);
    return rc;
}

static int cmp_tensor_offsets(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

// As the Python library requires, the tensors must tile the data area exactly: no overlap, no
// gap, nothing after the last one.
static int check_layout(StFile *f, MalaErr *err) {
    const StTensor **by_offset = xmalloc((size_t)f->n * sizeof *by_offset);
    for (int i = 0; i < f->n; i++) by_offset[i] = &f->tensors[i];
    qsort(by_offset, (size_t)f->n, sizeof *by_offset, cmp_tensor_offsets);
    size_t covered = 0;
    int rc = 0;
    for (int i = 0; i < f->n && !rc; i++) {
        const StTensor *t = by_offset[i];
        char nb[SHOWN_LEN], pb[SHOWN_LEN];
        if (t->begin < covered)
            rc = fail_at(err, f->path, "tensors '%s' (data_offsets [%zu,%zu]) and '%s' (data_offsets [%zu,%zu]) overlap",
                         shown(by_offset[i - 1]->name, pb), by_offset[i - 1]->begin, by_offset[i - 1]->end,
                         shown(t->name, nb), t->begin, t->end);
        else if (t->begin > covered)
            rc = fail_at(err, f->path, "data bytes [%zu,%zu) belong to no tensor (a gap before tensor '%s')",
                         covered, t->begin, shown(t->name, nb));
        covered = t->end;
    }
    if (!rc && covered != f->data_len)
        rc = fail_at(err, f->path, "data bytes [%zu,%zu) belong to no tensor (the data area ends %zu bytes after the last tensor)",
                     covered, f->data_len, f->data_len - covered);
    free(by_offset);
    return rc;
}

int st_open(StFile *f, const char *path, MalaErr *err) {
    memset(f, 0, sizeof *f);
    f->path = xstrdup(path);
    JsonValue *root = NULL;
    int rc = map_file(f, err);
    if (!rc) rc = parse_header(f, &root, err);
    if (!rc) rc = read_entries(f, root, err);
    if (!rc) rc = check_names(f, err);
    if (!rc) rc = check_layout(f, err);
    json_free(root);
    if (rc) st_close(f);
    return rc;
}

void st_close(StFile *f) {
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (int i = 0; i < f->nmeta; i++) { free(f->meta_keys[i]); free(f->meta_vals[i]); }
    free(f->meta_keys);
    free(f->meta_vals);
    if (f->map) munmap(f->map, f->map_len);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const StTensor *st_find(const StFile *f, const char *name) {
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, f->tensors[mid].name);
        if (c == 0) return &f->tensors[mid];
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

const char *st_meta(const StFile *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}

const void *st_data(const StFile *f, const StTensor *t) { return f->data + t->begin; }

int st_read_f32(const StFile *f, const StTensor *t, float *dst, MalaErr *err) {
    if (!t) return fail_at(err, f->path, "st_read_f32 was given no tensor");
    const uint8_t *src = f->data + t->begin;
    size_t n = (size_t)st_numel(t), size = DTYPES[t->dtype].size;
    if (t->dtype == ST_F32) { if (n) memcpy(dst, src, n * 4); return 0; }
    for (size_t i = 0; i < n; i++) dst[i] = load_f32(src + i * size, t->dtype);
    return 0;
}

int st_expect(const StFile *f, const char *name, const int64_t *shape, int ndim, MalaErr *err) {
    const StTensor *t = st_find(f, name);
    if (!t) return fail_at(err, f->path, "tensor '%s' is missing", name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (same) return 0;
    char have[256], want[256];
    return fail_at(err, f->path, "tensor '%s' has shape %s, the model expects %s", name,
                   format_shape(have, sizeof have, t->shape, t->ndim), format_shape(want, sizeof want, shape, ndim));
}

int st_load_f32(const StFile *f, const char *name, const int64_t *shape, int ndim, float *dst, MalaErr *err) {
    if (st_expect(f, name, shape, ndim, err)) return -1;
    return st_read_f32(f, st_find(f, name), dst, err);
}

// ---------------------------------------------------------------------------------------------
// Writing

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;
    const float *src;
    float *owned;  // st_writer_add_copy's copy (src points into it)
} WEntry;

struct StWriter {
    WEntry *e;
    int n, cap;
    char **mkeys, **mvals;
    int nmeta, mcap;
    char *mistake;  // the first misuse seen while adding; the next save reports it
};

StWriter *st_writer_new(void) { return xcalloc(1, sizeof(StWriter)); }

void st_writer_free(StWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) { free(w->e[i].name); free(w->e[i].owned); }
    free(w->e);
    for (int i = 0; i < w->nmeta; i++) { free(w->mkeys[i]); free(w->mvals[i]); }
    free(w->mkeys);
    free(w->mvals);
    free(w->mistake);
    free(w);
}

static void writer_mistake(StWriter *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void writer_mistake(StWriter *w, const char *fmt, ...) {
    if (w->mistake) return;
    char msg[MALA_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->mistake = xstrdup(msg);
}

void st_writer_meta(StWriter *w, const char *key, const char *val) {
    char kb[SHOWN_LEN];
    if (!json_utf8_valid(key, strlen(key)) || !json_utf8_valid(val, strlen(val)))
        writer_mistake(w, "__metadata__ entry '%s' is not valid UTF-8", shown(key, kb));
    for (int i = 0; i < w->nmeta; i++)
        if (strcmp(w->mkeys[i], key) == 0) { free(w->mvals[i]); w->mvals[i] = xstrdup(val); return; }
    if (w->nmeta == w->mcap) {
        w->mcap = w->mcap ? 2 * w->mcap : 16;
        w->mkeys = realloc(w->mkeys, (size_t)w->mcap * sizeof *w->mkeys);
        w->mvals = realloc(w->mvals, (size_t)w->mcap * sizeof *w->mvals);
        if (!w->mkeys || !w->mvals) FATAL("out of memory adding safetensors metadata");
    }
    w->mkeys[w->nmeta] = xstrdup(key);
    w->mvals[w->nmeta] = xstrdup(val);
    w->nmeta++;
}

// Validates one st_writer_add call; fills e (except name and data) and returns 0, or records
// the mistake and returns -1.
static int check_add(StWriter *w, WEntry *e, const char *name, StDtype dtype, const int64_t *shape, int ndim,
                     const float *src) {
    char nb[SHOWN_LEN];
    if (!name) { writer_mistake(w, "a tensor was added without a name"); return -1; }
    if (!json_utf8_valid(name, strlen(name))) { writer_mistake(w, "tensor name '%s' is not valid UTF-8", shown(name, nb)); return -1; }
    if ((unsigned)dtype >= N_DTYPES) { writer_mistake(w, "tensor '%s' has an invalid dtype", shown(name, nb)); return -1; }
    if (ndim < 0 || ndim > ST_MAX_DIMS) {
        writer_mistake(w, "tensor '%s' has %d dimensions, at most %d are supported", shown(name, nb), ndim, ST_MAX_DIMS);
        return -1;
    }
    uint64_t numel = 1;
    int overflow = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) { writer_mistake(w, "tensor '%s' has a negative dimension", shown(name, nb)); return -1; }
        overflow |= __builtin_mul_overflow(numel, (uint64_t)shape[i], &numel);
        e->shape[i] = shape[i];
    }
    if (has_zero_dim(shape, ndim)) { numel = 0; overflow = 0; }
    if (overflow || numel > ((uint64_t)INT64_MAX) / 8) {
        writer_mistake(w, "tensor '%s' is too large", shown(name, nb));
        return -1;
    }
    if (numel && !src) { writer_mistake(w, "tensor '%s' was added without data", shown(name, nb)); return -1; }
    e->dtype = dtype;
    e->ndim = ndim;
    e->numel = (size_t)numel;
    e->src = src;
    return 0;
}

static WEntry *add_entry(StWriter *w, const char *name, StDtype dtype, const int64_t *shape, int ndim,
                         const float *src) {
    WEntry e = {0};
    if (check_add(w, &e, name, dtype, shape, ndim, src)) return NULL;
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->e = realloc(w->e, (size_t)w->cap * sizeof *w->e);
        if (!w->e) FATAL("out of memory adding a safetensors tensor");
    }
    e.name = xstrdup(name);
    w->e[w->n] = e;
    return &w->e[w->n++];
}

void st_writer_add(StWriter *w, const char *name, StDtype dtype, const int64_t *shape, int ndim, const float *src) {
    add_entry(w, name, dtype, shape, ndim, src);
}

void st_writer_add_copy(StWriter *w, const char *name, StDtype dtype, const int64_t *shape, int ndim,
                        const float *src) {
    WEntry *e = add_entry(w, name, dtype, shape, ndim, src);
    if (!e || !e->numel) return;
    e->owned = xmalloc(e->numel * sizeof(float));
    memcpy(e->owned, src, e->numel * sizeof(float));
    e->src = e->owned;
}

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp((*(const WEntry *const *)a)->name, (*(const WEntry *const *)b)->name);
}

// The Python library's order: descending dtype rank, then name.
static int cmp_entry_layout(const void *a, const void *b) {
    const WEntry *x = *(const WEntry *const *)a, *y = *(const WEntry *const *)b;
    if (DTYPES[x->dtype].rank != DTYPES[y->dtype].rank) return DTYPES[y->dtype].rank - DTYPES[x->dtype].rank;
    return strcmp(x->name, y->name);
}

// What a save writes: the tensors in file order and the padded header.
typedef struct { const WEntry **order; JsonBuf header; } Prepared;

static void build_header(const StWriter *w, Prepared *pp) {
    JsonBuf *b = &pp->header;
    json_buf_puts(b, "{");
    if (w->nmeta) {
        json_buf_puts(b, "\"__metadata__\":{");
        for (int i = 0; i < w->nmeta; i++) {
            if (i) json_buf_puts(b, ",");
            json_buf_string(b, w->mkeys[i], strlen(w->mkeys[i]));
            json_buf_puts(b, ":");
            json_buf_string(b, w->mvals[i], strlen(w->mvals[i]));
        }
        json_buf_puts(b, "}");
    }
    size_t offset = 0;
    for (int i = 0; i < w->n; i++) {
        const WEntry *e = pp->order[i];
        size_t nbytes = e->numel * DTYPES[e->dtype].size;
        if (i || w->nmeta) json_buf_puts(b, ",");
        json_buf_string(b, e->name, strlen(e->name));
        json_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", DTYPES[e->dtype].name);
        for (int d = 0; d < e->ndim; d++) json_buf_printf(b, "%s%lld", d ? "," : "", (long long)e->shape[d]);
        json_buf_printf(b, "],\"data_offsets\":[%zu,%zu]}", offset, offset + nbytes);
        offset += nbytes;
    }
    json_buf_puts(b, "}");
    while (b->len % 8) json_buf_puts(b, " ");
}

static int prepare(const StWriter *w, const char *name, Prepared *pp, MalaErr *err) {
    memset(pp, 0, sizeof *pp);
    if (w->mistake) return fail_at(err, name, "cannot save: %s", w->mistake);
    pp->order = xmalloc((size_t)w->n * sizeof *pp->order);
    for (int i = 0; i < w->n; i++) pp->order[i] = &w->e[i];
    qsort(pp->order, (size_t)w->n, sizeof *pp->order, cmp_entry_name);
    for (int i = 1; i < w->n; i++) {
        if (strcmp(pp->order[i - 1]->name, pp->order[i]->name) != 0) continue;
        char nb[SHOWN_LEN];
        fail_at(err, name, "cannot save: tensor '%s' was added twice", shown(pp->order[i]->name, nb));
        free(pp->order);
        return -1;
    }
    qsort(pp->order, (size_t)w->n, sizeof *pp->order, cmp_entry_layout);
    build_header(w, pp);
    if (pp->header.len > ST_MAX_HEADER_LEN) {
        fail_at(err, name, "cannot save: the header would be %zu bytes, over the limit of %d", pp->header.len,
                ST_MAX_HEADER_LEN);
        free(pp->order);
        json_buf_free(&pp->header);
        return -1;
    }
    return 0;
}

static void prepared_free(Prepared *pp) {
    free(pp->order);
    json_buf_free(&pp->header);
}

static int put(FILE *fp, const void *p, size_t n, const char *name, MalaErr *err) {
    errno = 0;
    if (n && fwrite(p, 1, n, fp) != n) return fail_at(err, name, "write failed: %s", strerror(errno ? errno : EIO));
    return 0;
}

static int put_tensor(FILE *fp, const WEntry *e, const char *name, MalaErr *err) {
    if (e->dtype == ST_F32) return put(fp, e->src, e->numel * 4, name, err);
    enum { CHUNK = 16384 };
    size_t size = DTYPES[e->dtype].size;
    uint8_t *buf = xmalloc(CHUNK * size);
    int rc = 0;
    for (size_t i = 0; i < e->numel && !rc; i += CHUNK) {
        size_t k = e->numel - i < CHUNK ? e->numel - i : CHUNK;
        for (size_t j = 0; j < k; j++) store_f32(buf + j * size, e->src[i + j], e->dtype);
        rc = put(fp, buf, k * size, name, err);
    }
    free(buf);
    return rc;
}

static int write_prepared(const StWriter *w, const Prepared *pp, FILE *fp, const char *name, MalaErr *err) {
    uint8_t len8[8];
    uint64_t n = pp->header.len;
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(n >> (8 * i));
    if (put(fp, len8, 8, name, err) || put(fp, pp->header.buf, pp->header.len, name, err)) return -1;
    for (int i = 0; i < w->n; i++)
        if (put_tensor(fp, pp->order[i], name, err)) return -1;
    errno = 0;
    if (fflush(fp) != 0 || ferror(fp)) return fail_at(err, name, "write failed: %s", strerror(errno ? errno : EIO));
    return 0;
}

int st_writer_write(StWriter *w, FILE *fp, const char *name, MalaErr *err) {
    Prepared pp;
    if (prepare(w, name, &pp, err)) return -1;
    int rc = write_prepared(w, &pp, fp, name, err);
    prepared_free(&pp);
    return rc;
}

int st_writer_save(StWriter *w, const char *path, MalaErr *err) {
    Prepared pp;
    if (prepare(w, path, &pp, err)) return -1;
    AtomicFile af;
    int rc = atomic_open(&af, path, err);
    if (!rc) {
        if (write_prepared(w, &pp, af.f, path, err)) { atomic_abort(&af); rc = -1; }
        else rc = atomic_commit(&af, err);
    }
    prepared_free(&pp);
    return rc;
}

// defines: npy_dtype_size, npy_numel, npy_wrap, npy_free, npy_load, npy_save, npy_parse, npy_parse_header, npy_header,
//          npz_load, npz_keys, npz_keys_free, npz_save, npy_to_f64, npy_to_f32
//
// Layout of this file, top to bottom:
//   1. dtype strings and the header dict ("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }")
//   2. a byte source (plain file range, deflate stream, or memory) that counts and CRCs what it gives
//   3. reading one .npy from a source (header checks happen before any large allocation)
//   4. .npz members (the zip directory itself is formats/zip_dir.c)
//   5. .npy and stored .npz writers (through formats/atomic_file)
#include "formats/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "formats/atomic_file.h"  // defines: atomic_open, atomic_put, atomic_commit
#include "core/half.h"         // defines: half_to_f32
#include "formats/zip_dir.h"   // defines: zip_open, zip_entry_data, zip_close

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1u << 20)        // larger headers are refused as malformed
#ifndef NPY_ZIP64_LIMIT                     // sizes/offsets from here on use zip64 records;
#define NPY_ZIP64_LIMIT 0xFFFFFFFFu         // -DNPY_ZIP64_LIMIT=64 exercises them on tiny files
#endif

// ---------------------------------------------------------------------------------------------
// 1. dtypes and the header dict

// Parses a descr ("<f4", "|u1", "=i8", "b1") into the normalised spelling. Returns 0 or -1
// with a message describing why the dtype is not supported.
static int dtype_normalise(const char *descr, char out[8], char *why, size_t why_len) {
    const char *p = descr;
    char order = '|';
    if (*p == '<' || *p == '>' || *p == '|' || *p == '=') order = *p++;
    char kind = *p++;
    if (!kind) { snprintf(why, why_len, "empty dtype"); return -1; }
    char *end;
    long size = strtol(p, &end, 10);
    if (end == p || *end != '\0') {
        snprintf(why, why_len, "unsupported dtype '%s' (numeric b/i/u/f types only)", descr); return -1;
    }
    int ok = 0;
    switch (kind) {
    case 'b': ok = size == 1; break;
    case 'i': case 'u': ok = size == 1 || size == 2 || size == 4 || size == 8; break;
    case 'f': ok = size == 2 || size == 4 || size == 8; break;
    default: ok = 0;
    }
    if (!ok) { snprintf(why, why_len, "unsupported dtype '%s' (numeric b/i/u/f types only)", descr); return -1; }
    if (order == '>' && size > 1) {
        snprintf(why, why_len, "big-endian dtype '%s' not supported (convert with arr.astype('<%c%ld'))",
                 descr, kind, size);
        return -1;
    }
    snprintf(out, 8, "%c%c%ld", size == 1 ? '|' : '<', kind, size);
    return 0;
}

size_t npy_dtype_size(const char *dtype) {
    char norm[8], why[128];
    if (!dtype || dtype_normalise(dtype, norm, why, sizeof why)) return 0;
    return (size_t)atoi(norm + 2);
}

int64_t npy_numel(const NpyArray *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++) n *= a->shape[i];
    return n;
}

// numel * itemsize with overflow checks; returns -1 on overflow.
static int checked_nbytes(int ndim, const int64_t *shape, size_t itemsize, uint64_t *out) {
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        uint64_t d = (uint64_t)shape[i];
        if (d && n > (UINT64_MAX >> 2) / d) return -1;
        n *= d;
    }
    if (n && n > (UINT64_MAX >> 2) / itemsize) return -1;
    *out = n * itemsize;
    return 0;
}

int npy_wrap(NpyArray *a, const char *dtype, void *data, int ndim, const int64_t *shape) {
    memset(a, 0, sizeof *a);
    char why[128];
    if (!dtype || dtype_normalise(dtype, a->dtype, why, sizeof why)) return -1;
    if (ndim < 0 || ndim > NPY_MAX_DIMS) return -1;
    a->ndim = ndim;
    for (int i = 0; i < ndim; i++) a->shape[i] = shape[i];
    uint64_t nb;
    if (checked_nbytes(ndim, a->shape, npy_dtype_size(a->dtype), &nb) || nb > SIZE_MAX) return -1;
    a->nbytes = (size_t)nb;
    a->data = data;
    return 0;
}

void npy_free(NpyArray *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

typedef struct { const char *p, *end; } Lex;

static void lex_ws(Lex *l) { while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r')) l->p++; }
static int lex_eat(Lex *l, char c) { lex_ws(l); if (l->p < l->end && *l->p == c) { l->p++; return 1; } return 0; }
static int lex_word(Lex *l, const char *w) {
    lex_ws(l);
    size_t n = strlen(w);
    if ((size_t)(l->end - l->p) >= n && memcmp(l->p, w, n) == 0) { l->p += n; return 1; }
    return 0;
}
static int lex_str(Lex *l, char *out, size_t cap) {
    lex_ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return -1;
    char q = *l->p++;
    size_t n = 0;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || n + 1 >= cap) return -1;
        out[n++] = *l->p++;
    }
    if (l->p >= l->end) return -1;
    l->p++;
    out[n] = 0;
    return 0;
}

// Parses the header dict. On failure writes a reason into why.
static int parse_header_dict(const char *h, size_t len, NpyArray *a, char *why, size_t why_len) {
    Lex l = { h, h + len };
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
    char descr[64];
    if (!lex_eat(&l, '{')) { snprintf(why, why_len, "header is not a dict"); return -1; }
    for (;;) {
        if (lex_eat(&l, '}')) break;
        char key[32];
        if (lex_str(&l, key, sizeof key)) { snprintf(why, why_len, "bad header dict (expected a quoted key)"); return -1; }
        if (!lex_eat(&l, ':')) { snprintf(why, why_len, "bad header dict (expected ':' after '%s')", key); return -1; }
        if (strcmp(key, "descr") == 0) {
            lex_ws(&l);
            if (l.p < l.end && *l.p == '[') { snprintf(why, why_len, "structured dtypes are not supported"); return -1; }
            if (lex_str(&l, descr, sizeof descr)) { snprintf(why, why_len, "bad 'descr' value"); return -1; }
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (lex_word(&l, "True")) fortran = 1;
            else if (lex_word(&l, "False")) fortran = 0;
            else { snprintf(why, why_len, "bad 'fortran_order' value"); return -1; }
            have_fortran = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (!lex_eat(&l, '(')) { snprintf(why, why_len, "bad 'shape' value (expected a tuple)"); return -1; }
            a->ndim = 0;
            for (;;) {
                if (lex_eat(&l, ')')) break;
                lex_ws(&l);
                if (l.p >= l.end || *l.p < '0' || *l.p > '9') { snprintf(why, why_len, "bad 'shape' value"); return -1; }
                int64_t v = 0;
                while (l.p < l.end && *l.p >= '0' && *l.p <= '9') {
                    if (v > (INT64_MAX - 9) / 10) { snprintf(why, why_len, "shape dimension too large"); return -1; }
                    v = v * 10 + (*l.p++ - '0');
                }
                if (l.p < l.end && *l.p == 'L') l.p++;   // Python 2 longs
                if (a->ndim >= NPY_MAX_DIMS) { snprintf(why, why_len, "more than %d dimensions", NPY_MAX_DIMS); return -1; }
                a->shape[a->ndim++] = v;
                if (lex_eat(&l, ',')) continue;
                if (lex_eat(&l, ')')) break;
                snprintf(why, why_len, "bad 'shape' value"); return -1;
            }
            have_shape = 1;
        } else {
            snprintf(why, why_len, "unexpected key '%s' in header", key); return -1;
        }
        if (lex_eat(&l, ',')) continue;
        if (lex_eat(&l, '}')) break;
        snprintf(why, why_len, "bad header dict (expected ',' or '}')"); return -1;
    }
    lex_ws(&l);
    if (l.p != l.end) { snprintf(why, why_len, "junk after header dict"); return -1; }
    if (!have_descr || !have_fortran || !have_shape) {
        snprintf(why, why_len, "header dict lacks '%s'", !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
        return -1;
    }
    if (dtype_normalise(descr, a->dtype, why, why_len)) return -1;
    if (fortran) {
        snprintf(why, why_len, "fortran_order=True arrays are not supported (save with np.ascontiguousarray)");
        return -1;
    }
    return 0;
}

// Builds numpy's header (the dict padded with spaces and '\n'), including the magic and
// length prefix. Returns the total header length, or 0 if it does not fit.
static size_t build_header(const NpyArray *a, char *buf, size_t cap) {
    char dict[512], shape[320];
    size_t n = 0;
    n += snprintf(shape + n, sizeof shape - n, "(");
    for (int i = 0; i < a->ndim; i++)
        n += snprintf(shape + n, sizeof shape - n, i ? ", %lld" : "%lld", (long long)a->shape[i]);
    snprintf(shape + n, sizeof shape - n, a->ndim == 1 ? ",)" : ")");
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", a->dtype, shape);
    // numpy >= 1.23 leaves room for the first axis to grow to 21 digits
    if (a->ndim > 0) {
        char d0[32];
        int l0 = snprintf(d0, sizeof d0, "%lld", (long long)a->shape[0]);
        for (int i = l0; i < 21; i++) dict[dl++] = ' ';
        dict[dl] = 0;
    }
    size_t hlen = (size_t)dl + 1, prefix = 6 + 2 + 2;
    int v2 = 0;
    size_t pad = 64 - ((prefix + hlen) % 64);
    if (hlen + pad > 65535) { v2 = 1; prefix = 6 + 2 + 4; pad = 64 - ((prefix + hlen) % 64); }
    size_t total = prefix + hlen + pad;
    if (total > cap) return 0;
    memcpy(buf, NPY_MAGIC, 6);
    buf[6] = v2 ? 2 : 1; buf[7] = 0;
    uint32_t body = (uint32_t)(hlen + pad);
    if (v2) { buf[8] = body & 255; buf[9] = (body >> 8) & 255; buf[10] = (body >> 16) & 255; buf[11] = (char)(body >> 24); }
    else    { buf[8] = body & 255; buf[9] = (body >> 8) & 255; }
    memcpy(buf + prefix, dict, (size_t)dl);
    memset(buf + prefix + dl, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

// ---------------------------------------------------------------------------------------------
// 2. byte sources

typedef struct {
    const char *name;              // for messages
    FILE *f;                       // file source (stored or deflate)
    const unsigned char *mem;      // memory source
    int deflate;
    uint64_t in_left;              // source bytes left (file range or memory)
    uint64_t out_total;            // bytes delivered so far
    uint64_t expect;               // expected delivered total (UINT64_MAX: the source range decides)
    z_stream zs;
    int zinit, zend;
    unsigned char *inbuf;
    uint32_t crc;
} Src;

#define INBUF 65536

static int src_fill(Src *s, unsigned char *dst, size_t n, MalaErr *err) {
    if (s->mem) {
        memcpy(dst, s->mem, n); s->mem += n; s->in_left -= n; return 0;
    }
    size_t got = fread(dst, 1, n, s->f);
    if (got != n) {
        if (ferror(s->f)) return mala_errf(err, "%s: read error: %s", s->name, strerror(errno));
        return mala_errf(err, "%s: truncated file", s->name);
    }
    s->in_left -= n;
    return 0;
}

// Reads exactly n bytes; "truncated" when the source ends first.
static int src_read(Src *s, void *dst_, size_t n, MalaErr *err) {
    unsigned char *dst = dst_;
    if (!s->deflate) {
        if (n > s->in_left) return mala_errf(err, "%s: truncated (needs %zu more bytes, %llu left)", s->name, n,
                                             (unsigned long long)s->in_left);
        while (n) {
            size_t c = n > (1u << 30) ? (1u << 30) : n;
            if (src_fill(s, dst, c, err)) return -1;
            s->crc = (uint32_t)crc32(s->crc, dst, (uInt)c);
            s->out_total += c; dst += c; n -= c;
        }
        return 0;
    }
    while (n) {
        size_t c = n > (1u << 30) ? (1u << 30) : n;
        s->zs.next_out = dst; s->zs.avail_out = (uInt)c;
        while (s->zs.avail_out) {
            if (s->zend) return mala_errf(err, "%s: truncated (deflate stream ended early)", s->name);
            if (s->zs.avail_in == 0 && s->in_left) {
                size_t r = s->in_left > INBUF ? INBUF : (size_t)s->in_left;
                if (src_fill(s, s->inbuf, r, err)) return -1;
                s->zs.next_in = s->inbuf; s->zs.avail_in = (uInt)r;
            }
            int ret = inflate(&s->zs, Z_NO_FLUSH);
            if (ret == Z_STREAM_END) s->zend = 1;
            else if (ret == Z_BUF_ERROR && s->zs.avail_in == 0 && s->in_left == 0)
                return mala_errf(err, "%s: truncated deflate data", s->name);
            else if (ret != Z_OK && ret != Z_BUF_ERROR)
                return mala_errf(err, "%s: corrupt deflate data (%s)", s->name, s->zs.msg ? s->zs.msg : zError(ret));
        }
        s->crc = (uint32_t)crc32(s->crc, dst, (uInt)c);
        s->out_total += c; dst += c; n -= c;
    }
    return 0;
}

// After the array data: the source must be exactly used up.
static int src_finish(Src *s, MalaErr *err) {
    if (!s->deflate) {
        if (s->in_left) return mala_errf(err, "%s: %llu unexpected bytes after the array data", s->name,
                                         (unsigned long long)s->in_left);
        return 0;
    }
    unsigned char extra;
    while (!s->zend) {
        if (s->zs.avail_in == 0 && s->in_left) {
            size_t r = s->in_left > INBUF ? INBUF : (size_t)s->in_left;
            if (src_fill(s, s->inbuf, r, err)) return -1;
            s->zs.next_in = s->inbuf; s->zs.avail_in = (uInt)r;
        }
        s->zs.next_out = &extra; s->zs.avail_out = 1;
        int ret = inflate(&s->zs, Z_NO_FLUSH);
        if (s->zs.avail_out == 0) return mala_errf(err, "%s: unexpected bytes after the array data", s->name);
        if (ret == Z_STREAM_END) s->zend = 1;
        else if (ret == Z_BUF_ERROR && s->zs.avail_in == 0 && s->in_left == 0)
            return mala_errf(err, "%s: truncated deflate data", s->name);
        else if (ret != Z_OK && ret != Z_BUF_ERROR)
            return mala_errf(err, "%s: corrupt deflate data (%s)", s->name, s->zs.msg ? s->zs.msg : zError(ret));
    }
    return 0;
}

static void src_close(Src *s) {
    if (s->zinit) inflateEnd(&s->zs);
    free(s->inbuf);
    s->zinit = 0; s->inbuf = NULL;
}

// ---------------------------------------------------------------------------------------------
// 3. one .npy from a source

static uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }

// The magic, version and header dict from a source; *head = the bytes before the data. `total` is
// the entry's full length when known (else UINT64_MAX) so a header cannot make us allocate more
// than the file holds; with it, the data must fill the rest exactly.
static int npy_read_header(Src *s, uint64_t total, NpyArray *a, uint64_t *head, MalaErr *err) {
    memset(a, 0, sizeof *a);
    unsigned char pre[12];
    if (total < 10 || src_read(s, pre, 8, err))
        return mala_errf(err, "%s: not a .npy file (too short)", s->name);
    if (memcmp(pre, NPY_MAGIC, 6) != 0) {
        if (memcmp(pre, "PK\3\4", 4) == 0) return mala_errf(err, "%s: not a .npy file (it is a zip/.npz archive)", s->name);
        return mala_errf(err, "%s: not a .npy file (bad magic)", s->name);
    }
    int major = pre[6];
    uint64_t hlen;
    size_t prefix;
    if (major == 1) {
        if (src_read(s, pre + 8, 2, err)) return -1;
        hlen = rd16(pre + 8); prefix = 10;
    } else if (major == 2 || major == 3) {
        if (src_read(s, pre + 8, 4, err)) return -1;
        hlen = rd32(pre + 8); prefix = 12;
    } else {
        return mala_errf(err, "%s: unsupported .npy format version %d.%d", s->name, pre[6], pre[7]);
    }
    if (hlen > NPY_MAX_HEADER) return mala_errf(err, "%s: header length %llu is implausible", s->name, (unsigned long long)hlen);
    if (total != UINT64_MAX && prefix + hlen > total) return mala_errf(err, "%s: truncated header", s->name);
    char *h = malloc(hlen + 1);
    if (!h) return mala_errf(err, "%s: out of memory", s->name);
    if (src_read(s, h, (size_t)hlen, err)) { free(h); return -1; }
    h[hlen] = 0;
    if (memchr(h, 0, (size_t)hlen)) { free(h); return mala_errf(err, "%s: bad header (NUL byte)", s->name); }
    char why[200];
    if (parse_header_dict(h, (size_t)hlen, a, why, sizeof why)) {
        free(h);
        memset(a, 0, sizeof *a);
        return mala_errf(err, "%s: %s", s->name, why);
    }
    free(h);
    uint64_t nb;
    if (checked_nbytes(a->ndim, a->shape, npy_dtype_size(a->dtype), &nb) || nb > SIZE_MAX / 2) {
        memset(a, 0, sizeof *a);
        return mala_errf(err, "%s: array size overflows", s->name);
    }
    if (total != UINT64_MAX && prefix + hlen + nb != total) {
        uint64_t have = total - prefix - hlen;
        memset(a, 0, sizeof *a);
        return mala_errf(err, "%s: shape/size mismatch: header says %llu data bytes, file has %llu", s->name,
                         (unsigned long long)nb, (unsigned long long)have);
    }
    a->nbytes = (size_t)nb;
    *head = prefix + hlen;
    return 0;
}

static int npy_read_src(Src *s, uint64_t total, NpyArray *a, MalaErr *err) {
    uint64_t head;
    if (npy_read_header(s, total, a, &head, err)) return -1;
    a->data = malloc(a->nbytes ? a->nbytes : 1);
    if (!a->data) {
        size_t want = a->nbytes;
        memset(a, 0, sizeof *a);
        return mala_errf(err, "%s: out of memory for %zu bytes", s->name, want);
    }
    if (src_read(s, a->data, a->nbytes, err) || src_finish(s, err)) { npy_free(a); return -1; }
    return 0;
}

int npy_parse_header(const void *buf, size_t len, uint64_t file_size, const char *name, NpyArray *a,
                     uint64_t *data_offset, MalaErr *err) {
    Src s = { .name = name ? name : "<memory>", .mem = buf, .in_left = len, .expect = UINT64_MAX };
    int rc = npy_read_header(&s, file_size, a, data_offset, err);
    a->data = NULL;
    return rc;
}

static int open_read(const char *path, FILE **f, uint64_t *size, MalaErr *err) {
    *f = fopen(path, "rb");
    if (!*f) return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(*f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(*f); *f = NULL;
        return mala_errf(err, "%s: not a regular file", path);
    }
    *size = (uint64_t)st.st_size;
    return 0;
}

int npy_load(const char *path, NpyArray *a, MalaErr *err) {
    memset(a, 0, sizeof *a);
    FILE *f; uint64_t size = 0;
    if (open_read(path, &f, &size, err)) return -1;
    Src s = { .name = path, .f = f, .in_left = size, .expect = UINT64_MAX };
    int rc = npy_read_src(&s, size, a, err);
    src_close(&s);
    fclose(f);
    return rc;
}

int npy_parse(const void *buf, size_t len, const char *name, NpyArray *a, MalaErr *err) {
    memset(a, 0, sizeof *a);
    Src s = { .name = name ? name : "<memory>", .mem = buf, .in_left = len, .expect = UINT64_MAX };
    return npy_read_src(&s, len, a, err);
}

// ---------------------------------------------------------------------------------------------
// 4. .npz members

// Opens entry e as a source positioned at its data.
static int zip_entry_src(Zip *z, const char *path, ZipEntry *e, Src *s, const char *name, MalaErr *err) {
    if (e->flags & 1) return mala_errf(err, "%s: encrypted zip entries are not supported", name);
    if (e->method != 0 && e->method != 8)
        return mala_errf(err, "%s: zip compression method %d not supported (stored or deflate only)", name, e->method);
    uint64_t data;
    if (zip_entry_data(z, e, &data, name, err)) return -1;
    if (e->method == 8 && e->usize > e->csize * 1100 + 4096)
        return mala_errf(err, "%s: implausible deflate sizes (corrupt archive)", name);
    if (fseeko(z->f, (off_t)data, SEEK_SET) != 0) return mala_errf(err, "%s: seek failed", name);
    memset(s, 0, sizeof *s);
    s->name = name; s->f = z->f; s->in_left = e->csize; s->expect = e->usize;
    if (e->method == 8) {
        s->deflate = 1;
        s->inbuf = malloc(INBUF);
        if (!s->inbuf) return mala_errf(err, "%s: out of memory", name);
        if (inflateInit2(&s->zs, -MAX_WBITS) != Z_OK) return mala_errf(err, "%s: inflateInit2 failed", name);
        s->zinit = 1;
    }
    (void)path;
    return 0;
}

// A zip directory, refusing a bare .npy with a hint.
static int npz_open(const char *path, Zip *z, MalaErr *err) {
    FILE *f = fopen(path, "rb");
    unsigned char head[6] = {0};
    int is_npy = f && fread(head, 1, 6, f) == 6 && memcmp(head, NPY_MAGIC, 6) == 0;
    if (f) fclose(f);
    if (is_npy) return mala_errf(err, "%s: not a .npz archive (it is a .npy file; use npy_load)", path);
    return zip_open(path, z, err);
}

static int key_matches(const char *entry, const char *key) {
    size_t kl = strlen(key), el = strlen(entry);
    if (el == kl + 4 && strncmp(entry, key, kl) == 0 && strcmp(entry + kl, ".npy") == 0) return 1;
    return strcmp(entry, key) == 0;
}

int npz_load(const char *path, const char *key, NpyArray *a, MalaErr *err) {
    memset(a, 0, sizeof *a);
    Zip z;
    if (npz_open(path, &z, err)) return -1;
    ZipEntry *e = NULL;
    for (int i = 0; i < z.n && !e; i++) if (strcmp(z.e[i].name, key) == 0) e = &z.e[i];
    for (int i = 0; i < z.n && !e; i++) if (key_matches(z.e[i].name, key)) e = &z.e[i];
    if (!e) {
        char list[360]; size_t n = 0; list[0] = 0;
        for (int i = 0; i < z.n && n < sizeof list - 8; i++) {
            size_t l = strlen(z.e[i].name);
            if (l > 4 && strcmp(z.e[i].name + l - 4, ".npy") == 0) l -= 4;
            int w = snprintf(list + n, sizeof list - n, "%s%.*s", i ? ", " : "", (int)l, z.e[i].name);
            if (w < 0 || (size_t)w >= sizeof list - n) { snprintf(list + (sizeof list - 5), 5, "..."); n = sizeof list; break; }
            n += (size_t)w;
        }
        int none = z.n == 0;
        zip_close(&z);
        return mala_errf(err, "%s: no array '%s' (has: %s)", path, key, none ? "nothing" : list);
    }
    char name[MALA_ERR_LEN / 2];
    snprintf(name, sizeof name, "%s:%s", path, key);
    Src s;
    memset(&s, 0, sizeof s);
    int rc = zip_entry_src(&z, path, e, &s, name, err);
    if (rc == 0) rc = npy_read_src(&s, e->usize, a, err);
    if (rc == 0 && s.crc != e->crc) {
        npy_free(a);
        rc = mala_errf(err, "%s: CRC mismatch (corrupt archive): stored %08x, computed %08x", name, e->crc, s.crc);
    }
    src_close(&s);
    zip_close(&z);
    return rc;
}

int npz_keys(const char *path, char ***keys, int *n, MalaErr *err) {
    *keys = NULL; *n = 0;
    Zip z;
    if (npz_open(path, &z, err)) return -1;
    char **k = calloc(z.n ? (size_t)z.n : 1, sizeof *k);
    if (!k) { zip_close(&z); return mala_errf(err, "%s: out of memory", path); }
    for (int i = 0; i < z.n; i++) {
        size_t l = strlen(z.e[i].name);
        if (l > 4 && strcmp(z.e[i].name + l - 4, ".npy") == 0) l -= 4;
        k[i] = xmalloc(l + 1);
        memcpy(k[i], z.e[i].name, l); k[i][l] = 0;
    }
    *keys = k; *n = z.n;
    zip_close(&z);
    return 0;
}

void npz_keys_free(char **keys, int n) {
    for (int i = 0; i < n; i++) free(keys[i]);
    free(keys);
}

// ---------------------------------------------------------------------------------------------
// 5. checked atomic writers

typedef struct {
    AtomicFile af;
    uint64_t off;       // bytes written so far
} Writer;

static int w_open(Writer *w, const char *path, MalaErr *err) {
    w->off = 0;
    return atomic_open(&w->af, path, err);
}

static void w_bytes(Writer *w, const void *p, size_t n) {
    atomic_put(&w->af, p, n);
    w->off += n;
}

static void w_u16(Writer *w, uint32_t v) { unsigned char b[2] = { v & 255, (v >> 8) & 255 }; w_bytes(w, b, 2); }
static void w_u32(Writer *w, uint32_t v) { w_u16(w, v & 0xFFFF); w_u16(w, v >> 16); }
static void w_u64(Writer *w, uint64_t v) { w_u32(w, (uint32_t)v); w_u32(w, (uint32_t)(v >> 32)); }

static int w_close(Writer *w, MalaErr *err) { return atomic_commit(&w->af, err); }

static int check_array(const char *path, const NpyArray *a, MalaErr *err) {
    char norm[8], why[128];
    if (!a) return mala_errf(err, "%s: NULL array", path);
    if (dtype_normalise(a->dtype, norm, why, sizeof why)) return mala_errf(err, "%s: %s", path, why);
    if (a->ndim < 0 || a->ndim > NPY_MAX_DIMS) return mala_errf(err, "%s: bad ndim %d", path, a->ndim);
    uint64_t nb;
    if (checked_nbytes(a->ndim, a->shape, npy_dtype_size(norm), &nb)) return mala_errf(err, "%s: bad shape", path);
    if (nb != a->nbytes) return mala_errf(err, "%s: nbytes %zu does not match shape (%llu)", path, a->nbytes, (unsigned long long)nb);
    if (nb && !a->data) return mala_errf(err, "%s: NULL data", path);
    return 0;
}

// Header of `a` with a normalised dtype.
static size_t header_for(const NpyArray *a, char *buf, size_t cap) {
    NpyArray c = *a;
    char why[128];
    dtype_normalise(a->dtype, c.dtype, why, sizeof why);
    return build_header(&c, buf, cap);
}

size_t npy_header(const char *dtype, int ndim, const int64_t *shape, char *buf, size_t cap) {
    NpyArray a = {0};
    char why[128];
    if (ndim < 0 || ndim > NPY_MAX_DIMS || dtype_normalise(dtype, a.dtype, why, sizeof why)) return 0;
    a.ndim = ndim;
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return build_header(&a, buf, cap);
}

int npy_save(const char *path, const NpyArray *a, MalaErr *err) {
    if (check_array(path, a, err)) return -1;
    char hdr[1024];
    size_t hl = header_for(a, hdr, sizeof hdr);
    if (!hl) return mala_errf(err, "%s: header too long", path);
    Writer w;
    if (w_open(&w, path, err)) return -1;
    w_bytes(&w, hdr, hl);
    w_bytes(&w, a->data, a->nbytes);
    return w_close(&w, err);
}

static uint32_t crc_big(uint32_t crc, const void *p, size_t n) {
    const unsigned char *c = p;
    while (n) { size_t k = n > (1u << 30) ? (1u << 30) : n; crc = (uint32_t)crc32(crc, c, (uInt)k); c += k; n -= k; }
    return crc;
}

int npz_save(const char *path, const char **keys, const NpyArray *arrays, int n, MalaErr *err) {
    if (n < 0 || (n > 0 && (!keys || !arrays))) return mala_errf(err, "%s: bad arguments", path);
    for (int i = 0; i < n; i++) {
        if (!keys[i] || !keys[i][0] || strlen(keys[i]) > 200) return mala_errf(err, "%s: bad key %d", path, i);
        for (int j = 0; j < i; j++)
            if (strcmp(keys[i], keys[j]) == 0) return mala_errf(err, "%s: duplicate key '%s'", path, keys[i]);
        if (check_array(path, &arrays[i], err)) return -1;
    }
    typedef struct { uint64_t off, size; uint32_t crc; } Rec;
    Rec *rec = calloc(n ? (size_t)n : 1, sizeof *rec);
    if (!rec) return mala_errf(err, "%s: out of memory", path);
    Writer w;
    if (w_open(&w, path, err)) { free(rec); return -1; }
    const uint32_t dos_time = 0, dos_date = (0 << 9) | (1 << 5) | 1;   // 1980-01-01 00:00
    for (int i = 0; i < n; i++) {
        char hdr[1024], name[256];
        size_t hl = header_for(&arrays[i], hdr, sizeof hdr);
        if (!hl) { atomic_abort(&w.af); free(rec); return mala_errf(err, "%s: header too long", path); }
        int nl = snprintf(name, sizeof name, "%s.npy", keys[i]);
        rec[i].off = w.off;
        rec[i].size = hl + arrays[i].nbytes;
        rec[i].crc = crc_big(crc_big((uint32_t)crc32(0, NULL, 0), hdr, hl), arrays[i].data, arrays[i].nbytes);
        int z64 = rec[i].size >= NPY_ZIP64_LIMIT;
        w_u32(&w, 0x04034b50);
        w_u16(&w, z64 ? 45 : 20); w_u16(&w, 0); w_u16(&w, 0);
        w_u16(&w, dos_time); w_u16(&w, dos_date);
        w_u32(&w, rec[i].crc);
        w_u32(&w, z64 ? 0xFFFFFFFFu : (uint32_t)rec[i].size);
        w_u32(&w, z64 ? 0xFFFFFFFFu : (uint32_t)rec[i].size);
        w_u16(&w, (uint32_t)nl); w_u16(&w, z64 ? 20 : 0);
        w_bytes(&w, name, (size_t)nl);
        if (z64) { w_u16(&w, 1); w_u16(&w, 16); w_u64(&w, rec[i].size); w_u64(&w, rec[i].size); }
        w_bytes(&w, hdr, hl);
        w_bytes(&w, arrays[i].data, arrays[i].nbytes);
    }
    uint64_t cd_off = w.off;
    for (int i = 0; i < n; i++) {
        char name[256];
        int nl = snprintf(name, sizeof name, "%s.npy", keys[i]);
        int zs = rec[i].size >= NPY_ZIP64_LIMIT, zo = rec[i].off >= NPY_ZIP64_LIMIT;
        uint32_t xl = (zs || zo) ? 4 + (zs ? 16 : 0) + (zo ? 8 : 0) : 0;
        w_u32(&w, 0x02014b50);
        w_u16(&w, (3 << 8) | ((zs || zo) ? 45 : 20));   // made by: unix
        w_u16(&w, (zs || zo) ? 45 : 20); w_u16(&w, 0); w_u16(&w, 0);
        w_u16(&w, dos_time); w_u16(&w, dos_date);
        w_u32(&w, rec[i].crc);
        w_u32(&w, zs ? 0xFFFFFFFFu : (uint32_t)rec[i].size);
        w_u32(&w, zs ? 0xFFFFFFFFu : (uint32_t)rec[i].size);
        w_u16(&w, (uint32_t)nl); w_u16(&w, xl); w_u16(&w, 0);
        w_u16(&w, 0); w_u16(&w, 0); w_u32(&w, 0100644u << 16);
        w_u32(&w, zo ? 0xFFFFFFFFu : (uint32_t)rec[i].off);
        w_bytes(&w, name, (size_t)nl);
        if (xl) {
            w_u16(&w, 1); w_u16(&w, xl - 4);
            if (zs) { w_u64(&w, rec[i].size); w_u64(&w, rec[i].size); }
            if (zo) w_u64(&w, rec[i].off);
        }
    }
    uint64_t cd_size = w.off - cd_off;
    int z64 = n >= 0xFFFF || cd_off >= NPY_ZIP64_LIMIT || cd_size >= NPY_ZIP64_LIMIT;
    if (z64) {
        uint64_t z64_off = w.off;
        w_u32(&w, 0x06064b50); w_u64(&w, 44);
        w_u16(&w, (3 << 8) | 45); w_u16(&w, 45);
        w_u32(&w, 0); w_u32(&w, 0);
        w_u64(&w, (uint64_t)n); w_u64(&w, (uint64_t)n);
        w_u64(&w, cd_size); w_u64(&w, cd_off);
        w_u32(&w, 0x07064b50); w_u32(&w, 0); w_u64(&w, z64_off); w_u32(&w, 1);
    }
    w_u32(&w, 0x06054b50);
    w_u16(&w, 0); w_u16(&w, 0);
    w_u16(&w, z64 ? 0xFFFF : (uint32_t)n); w_u16(&w, z64 ? 0xFFFF : (uint32_t)n);
    w_u32(&w, z64 ? 0xFFFFFFFFu : (uint32_t)cd_size);
    w_u32(&w, z64 ? 0xFFFFFFFFu : (uint32_t)cd_off);
    w_u16(&w, 0);
    free(rec);
    return w_close(&w, err);
}

// ---------------------------------------------------------------------------------------------
// conversions

#define CONVERT_LOOP(OUT_T)                                                                 \
    do {                                                                                   \
        const char *t = norm + 1;                                                          \
        const unsigned char *src = a->data;                                                \
        for (int64_t i = 0; i < n; i++) {                                                  \
            double v;                                                                      \
            if (!strcmp(t, "f4")) { float x; memcpy(&x, src + 4 * i, 4); v = x; }           \
            else if (!strcmp(t, "f8")) { memcpy(&v, src + 8 * i, 8); }                     \
            else if (!strcmp(t, "f2")) { uint16_t x; memcpy(&x, src + 2 * i, 2); v = half_to_f32(x); } \
            else if (!strcmp(t, "u1") || !strcmp(t, "b1")) v = src[i];                     \
            else if (!strcmp(t, "i1")) v = (int8_t)src[i];                                 \
            else if (!strcmp(t, "i2")) { int16_t x; memcpy(&x, src + 2 * i, 2); v = x; }    \
            else if (!strcmp(t, "u2")) { uint16_t x; memcpy(&x, src + 2 * i, 2); v = x; }   \
            else if (!strcmp(t, "i4")) { int32_t x; memcpy(&x, src + 4 * i, 4); v = x; }    \
            else if (!strcmp(t, "u4")) { uint32_t x; memcpy(&x, src + 4 * i, 4); v = x; }   \
            else if (!strcmp(t, "i8")) { int64_t x; memcpy(&x, src + 8 * i, 8); v = (double)x; } \
            else { uint64_t x; memcpy(&x, src + 8 * i, 8); v = (double)x; }                \
            o[i] = (OUT_T)v;                                                               \
        }                                                                                  \
    } while (0)

int npy_to_f64(const NpyArray *a, double **out, const char *what, MalaErr *err) {
    *out = NULL;
    char norm[8], why[128];
    if (dtype_normalise(a->dtype, norm, why, sizeof why)) return mala_errf(err, "%s: %s", what, why);
    int64_t n = npy_numel(a);
    double *o = malloc((size_t)(n ? n : 1) * sizeof *o);
    if (!o) return mala_errf(err, "%s: out of memory", what);
    CONVERT_LOOP(double);
    *out = o;
    return 0;
}

int npy_to_f32(const NpyArray *a, float **out, const char *what, MalaErr *err) {
    *out = NULL;
    char norm[8], why[128];
    if (dtype_normalise(a->dtype, norm, why, sizeof why)) return mala_errf(err, "%s: %s", what, why);
    int64_t n = npy_numel(a);
    float *o = malloc((size_t)(n ? n : 1) * sizeof *o);
    if (!o) return mala_errf(err, "%s: out of memory", what);
    CONVERT_LOOP(float);
    *out = o;
    return 0;
}

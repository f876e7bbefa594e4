// defines: idx_parse, idx_read
#include "formats/idx.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

// The decoded bytes of the file: the file itself, or its gzip stream inflated on demand.
typedef struct {
    const char *name;
    const unsigned char *in;   // input not yet handed to zlib (or not yet read, when plain)
    size_t in_left;
    int gzip, zinit, ended;
    z_stream zs;
} Bytes;

// Delivers up to n bytes into dst and returns how many (fewer only at the end of the data), or
// -1 with err set.
static int64_t bytes_read(Bytes *b, unsigned char *dst, size_t n, MalaErr *err) {
    if (!b->gzip) {
        size_t k = n < b->in_left ? n : b->in_left;
        memcpy(dst, b->in, k);
        b->in += k;
        b->in_left -= k;
        return (int64_t)k;
    }
    size_t got = 0;
    while (got < n && !b->ended) {
        if (b->zs.avail_in == 0 && b->in_left) {
            size_t k = b->in_left < (1u << 30) ? b->in_left : (1u << 30);
            b->zs.next_in = (unsigned char *)b->in;
            b->zs.avail_in = (uInt)k;
            b->in += k;
            b->in_left -= k;
        }
        size_t want = n - got < (1u << 30) ? n - got : (1u << 30);
        b->zs.next_out = dst + got;
        b->zs.avail_out = (uInt)want;
        int r = inflate(&b->zs, Z_NO_FLUSH);
        got += want - b->zs.avail_out;
        if (r == Z_STREAM_END) b->ended = 1;
        else if (r == Z_BUF_ERROR && b->zs.avail_in == 0 && b->in_left == 0)
            return mala_errf(err, "%s: truncated gzip stream (the file ends inside the compressed data or its "
                             "8-byte trailer; an incomplete download?)", b->name);
        else if (r != Z_OK)
            return mala_errf(err, "%s: corrupt gzip data (%s)", b->name,
                             r == Z_MEM_ERROR ? "out of memory" : b->zs.msg ? b->zs.msg : zError(r));
    }
    return (int64_t)got;
}

static int read_exact(Bytes *b, unsigned char *dst, size_t n, const char *what, MalaErr *err) {
    int64_t got = bytes_read(b, dst, n, err);
    if (got < 0) return -1;
    if ((size_t)got < n) return mala_errf(err, "%s: truncated: %s has %lld of %zu bytes", b->name, what, (long long)got, n);
    return 0;
}

// The data: the buffer grows with what was decoded, so a header cannot make us allocate.
static int read_data(Bytes *b, uint64_t total, const char *what, uint8_t **out, MalaErr *err) {
    size_t cap = total < (1u << 20) ? (size_t)total : (1u << 20), have = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return mala_errf(err, "%s: out of memory", b->name);
    while (have < total) {
        if (have == cap) {
            size_t next = (uint64_t)cap * 2 < total ? cap * 2 : (size_t)total;
            uint8_t *nb = realloc(buf, next);
            if (!nb) { free(buf); return mala_errf(err, "%s: out of memory for %zu bytes", b->name, next); }
            buf = nb;
            cap = next;
        }
        int64_t got = bytes_read(b, buf + have, cap - have, err);
        if (got < 0) { free(buf); return -1; }
        have += (size_t)got;
        if (have < cap) {
            free(buf);
            return mala_errf(err, "%s: truncated: %s has %zu of %llu bytes", b->name, what, have, (unsigned long long)total);
        }
    }
    *out = buf;
    return 0;
}

static int parse(Bytes *b, int ndims, uint32_t *dims, uint8_t **data, MalaErr *err) {
    unsigned char hdr[4 + 4 * IDX_MAX_DIMS];
    if (read_exact(b, hdr, 4 + 4 * (size_t)ndims, "the IDX header", err)) return -1;
    uint32_t magic = be32(hdr), want = 0x0800u | (uint32_t)ndims;
    if (magic != want)
        return mala_errf(err, "%s: not an IDX file of unsigned bytes with %d dimension%s (magic 0x%08x, expected 0x%08x)",
                         b->name, ndims, ndims > 1 ? "s" : "", magic, want);
    uint64_t total = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        total *= dims[i];                   // < 2^32 * IDX_MAX_BYTES: checked below per factor
        if (total > IDX_MAX_BYTES) return mala_errf(err, "%s: implausible IDX sizes (over %llu bytes of data)", b->name,
                                                    (unsigned long long)IDX_MAX_BYTES);
    }
    if (dims[0] == 0 || dims[0] > IDX_MAX_ITEMS) return mala_errf(err, "%s: implausible item count %u", b->name, dims[0]);
    if (total == 0) return mala_errf(err, "%s: an item size is 0", b->name);
    if (!b->gzip && b->in_left < total)
        return mala_errf(err, "%s: truncated: the data has %zu of %llu bytes", b->name, b->in_left, (unsigned long long)total);
    if (read_data(b, total, ndims == 3 ? "the image data" : "the item data", data, err)) return -1;
    unsigned char extra;
    int64_t more = bytes_read(b, &extra, 1, err);
    const char *why = more > 0 ? "unexpected data after %u items" : b->in_left || (b->gzip && b->zs.avail_in)
                    ? "unexpected bytes after the gzip stream of %u items" : NULL;
    if (more < 0 || why) {
        free(*data);
        *data = NULL;
        if (more < 0) return -1;
        char what[96];
        snprintf(what, sizeof what, why, dims[0]);
        return mala_errf(err, "%s: %s", b->name, what);
    }
    return 0;
}

int idx_parse(const void *buf, size_t len, const char *name, int ndims, uint32_t *dims, uint8_t **data,
              MalaErr *err) {
    *data = NULL;
    if (ndims < 1 || ndims > IDX_MAX_DIMS) return mala_errf(err, "%s: IDX files with %d dimensions are not supported", name, ndims);
    Bytes b = {.name = name, .in = buf, .in_left = len};
    b.gzip = len >= 2 && b.in[0] == 0x1f && b.in[1] == 0x8b;
    if (b.gzip) {
        if (inflateInit2(&b.zs, 16 + MAX_WBITS) != Z_OK) return mala_errf(err, "%s: cannot start zlib", name);
        b.zinit = 1;
    }
    int rc = parse(&b, ndims, dims, data, err);
    if (b.zinit) inflateEnd(&b.zs);
    return rc;
}

int idx_read(const char *path, int ndims, uint32_t *dims, uint8_t **data, MalaErr *err) {
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) { fclose(f); return mala_errf(err, "%s: not a regular file", path); }
    if ((uint64_t)st.st_size > IDX_MAX_BYTES) {
        fclose(f);
        return mala_errf(err, "%s: implausibly large for an IDX file (%lld bytes)", path, (long long)st.st_size);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) { fclose(f); return mala_errf(err, "%s: out of memory for %zu bytes", path, n); }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (got != n) { free(buf); return mala_errf(err, "%s: read error%s%s", path, bad ? ": " : " (file shrank)", bad ? strerror(errno) : ""); }
    int rc = idx_parse(buf, n, path, ndims, dims, data, err);
    free(buf);
    return rc;
}

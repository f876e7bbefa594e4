// defines: zip_open, zip_open_mem, zip_close, zip_read_at, zip_entry_data
#include "formats/zip_dir.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#define ZIP_MAX_CD ((uint64_t)1 << 28)  // central directory size limit (256 MiB)

static uint32_t rd16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const unsigned char *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

int zip_read_at(const Zip *z, uint64_t off, void *buf, size_t n) {
    if (off > z->size || n > z->size - off) return -1;
    if (z->mem) { memcpy(buf, z->mem + off, n); return 0; }
    if (fseeko(z->f, (off_t)off, SEEK_SET) != 0) return -1;
    return fread(buf, 1, n, z->f) == n ? 0 : -1;
}

// The end record, zip64 records and the central directory of z (z->f or z->mem and z->size set).
static int zip_parse(const char *path, Zip *z, MalaErr *err) {
    if (z->size < 22) { zip_close(z); return mala_errf(err, "%s: not a zip archive (too short)", path); }
    size_t tail_len = z->size < 22 + 65535 + 20 ? (size_t)z->size : 22 + 65535 + 20;
    uint64_t tail_off = z->size - tail_len;
    unsigned char *tail = malloc(tail_len);
    if (!tail || zip_read_at(z, tail_off, tail, tail_len)) {
        free(tail); zip_close(z);
        return mala_errf(err, "%s: read error", path);
    }
    long eocd = -1;
    for (long i = (long)tail_len - 22; i >= 0; i--) {
        if (memcmp(tail + i, "PK\5\6", 4) == 0 && (size_t)i + 22 + rd16(tail + i + 20) <= tail_len) { eocd = i; break; }
    }
    if (eocd < 0) {
        free(tail); zip_close(z);
        return mala_errf(err, "%s: not a zip archive (no end-of-central-directory record; truncated?)", path);
    }
    const unsigned char *E = tail + eocd;
    uint64_t entries = rd16(E + 10), cd_size = rd32(E + 12), cd_off = rd32(E + 16);
    uint64_t eocd_abs = tail_off + (uint64_t)eocd, cd_end_limit = eocd_abs;
    if (rd16(E + 4) != 0 || rd16(E + 6) != 0 || rd16(E + 8) != rd16(E + 10)) {
        free(tail); zip_close(z);
        return mala_errf(err, "%s: multi-disk zip archives are not supported", path);
    }
    if (eocd >= 20 && memcmp(E - 20, "PK\6\7", 4) == 0) {
        uint64_t z64off = rd64(E - 20 + 8);
        unsigned char r[56];
        if (z64off > z->size || z64off + 56 > eocd_abs - 20 || zip_read_at(z, z64off, r, 56) || memcmp(r, "PK\6\6", 4) != 0) {
            free(tail); zip_close(z);
            return mala_errf(err, "%s: bad zip64 end-of-central-directory record", path);
        }
        entries = rd64(r + 32); cd_size = rd64(r + 40); cd_off = rd64(r + 48);
        cd_end_limit = z64off;
    } else if (entries == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
        free(tail); zip_close(z);
        return mala_errf(err, "%s: zip64 archive without a zip64 locator", path);
    }
    free(tail);
    if (cd_off > cd_end_limit || cd_size > cd_end_limit - cd_off || cd_size > ZIP_MAX_CD || entries > cd_size / 46 + 1) {
        zip_close(z);
        return mala_errf(err, "%s: bad zip central directory (offset %llu size %llu, %llu entries)", path,
                         (unsigned long long)cd_off, (unsigned long long)cd_size, (unsigned long long)entries);
    }
    unsigned char *cd = malloc(cd_size ? (size_t)cd_size : 1);
    if (!cd || zip_read_at(z, cd_off, cd, (size_t)cd_size)) {
        free(cd); zip_close(z);
        return mala_errf(err, "%s: cannot read the zip central directory", path);
    }
    z->e = calloc(entries ? (size_t)entries : 1, sizeof *z->e);
    if (!z->e) { free(cd); zip_close(z); return mala_errf(err, "%s: out of memory", path); }
    size_t p = 0;
    for (uint64_t k = 0; k < entries; k++) {
        if (p + 46 > cd_size || memcmp(cd + p, "PK\1\2", 4) != 0) {
            free(cd); zip_close(z);
            return mala_errf(err, "%s: corrupt zip central directory (entry %llu)", path, (unsigned long long)k);
        }
        const unsigned char *c = cd + p;
        ZipEntry *e = &z->e[z->n];
        e->flags = (int)rd16(c + 8); e->method = (int)rd16(c + 10); e->crc = rd32(c + 16);
        e->csize = rd32(c + 20); e->usize = rd32(c + 24);
        size_t nl = rd16(c + 28), xl = rd16(c + 30), cl = rd16(c + 32);
        e->lho = rd32(c + 42);
        if (p + 46 + nl + xl + cl > cd_size) {
            free(cd); zip_close(z);
            return mala_errf(err, "%s: corrupt zip central directory (entry %llu overruns)", path, (unsigned long long)k);
        }
        e->name = malloc(nl + 1);
        if (!e->name) { free(cd); zip_close(z); return mala_errf(err, "%s: out of memory", path); }
        memcpy(e->name, c + 46, nl); e->name[nl] = 0;
        z->n++;
        const unsigned char *x = c + 46 + nl, *xe = x + xl;
        while (x + 4 <= xe) {
            unsigned id = rd16(x), sz = rd16(x + 2);
            const unsigned char *d = x + 4;
            if (d + sz > xe) break;
            if (id == 1) {
                const unsigned char *q = d, *qe = d + sz;
                int bad = 0;
                if (e->usize == 0xFFFFFFFFu) { if (q + 8 > qe) bad = 1; else { e->usize = rd64(q); q += 8; } }
                if (!bad && e->csize == 0xFFFFFFFFu) { if (q + 8 > qe) bad = 1; else { e->csize = rd64(q); q += 8; } }
                if (!bad && e->lho == 0xFFFFFFFFu) { if (q + 8 > qe) bad = 1; else { e->lho = rd64(q); q += 8; } }
                if (bad) {   // the message first: zip_close frees e->name
                    mala_errf(err, "%s: corrupt zip64 extra field for '%s'", path, e->name);
                    free(cd); zip_close(z);
                    return -1;
                }
            }
            x = d + sz;
        }
        if (memchr(e->name, 0, nl)) {
            free(cd); zip_close(z);
            return mala_errf(err, "%s: corrupt zip entry name", path);
        }
        p += 46 + nl + xl + cl;
    }
    free(cd);
    return 0;
}


int zip_open(const char *path, Zip *z, MalaErr *err) {
    memset(z, 0, sizeof *z);
    z->f = fopen(path, "rb");
    if (!z->f) return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(z->f), &st) != 0 || !S_ISREG(st.st_mode)) {
        zip_close(z);
        return mala_errf(err, "%s: not a regular file", path);
    }
    z->size = (uint64_t)st.st_size;
    return zip_parse(path, z, err);
}

int zip_open_mem(const void *buf, size_t len, const char *name, Zip *z, MalaErr *err) {
    memset(z, 0, sizeof *z);
    z->mem = buf;
    z->size = len;
    return zip_parse(name, z, err);
}

void zip_close(Zip *z) {
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    if (z->f) fclose(z->f);
    memset(z, 0, sizeof *z);
}

int zip_entry_data(const Zip *z, const ZipEntry *e, uint64_t *data_off, const char *name, MalaErr *err) {
    unsigned char lh[30];
    if (e->lho > z->size || z->size - e->lho < 30 || zip_read_at(z, e->lho, lh, 30) || memcmp(lh, "PK\3\4", 4) != 0)
        return mala_errf(err, "%s: bad zip local header (corrupt or truncated archive)", name);
    uint64_t nl = rd16(lh + 26), xl = rd16(lh + 28);
    uint64_t data = e->lho + 30 + nl + xl;
    if (data > z->size || e->csize > z->size - data)
        return mala_errf(err, "%s: zip entry data runs past the end of the file (truncated archive)", name);
    if (e->method == 0 && e->csize != e->usize)
        return mala_errf(err, "%s: stored zip entry with compressed size %llu != size %llu", name,
                         (unsigned long long)e->csize, (unsigned long long)e->usize);
    *data_off = data;
    return 0;
}

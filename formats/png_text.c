// PNG tEXt chunks in memory (formats/png_text.h).
#include "formats/png_text.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const uint8_t PNG_SIG[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static uint32_t be32(const uint8_t *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }

static void put_be32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24); b[1] = (uint8_t)(v >> 16); b[2] = (uint8_t)(v >> 8); b[3] = (uint8_t)v;
}

// PNG spec 11.3.4.3: 1-79 printable Latin-1 bytes (32-126, 161-255), no leading, trailing or
// consecutive spaces.
static int keyword_ok(const uint8_t *k, size_t n) {
    if (n < 1 || n > 79 || k[0] == ' ' || k[n - 1] == ' ') return 0;
    for (size_t i = 0; i < n; i++) {
        if (!((k[i] >= 32 && k[i] <= 126) || k[i] >= 161)) return 0;
        if (k[i] == ' ' && i + 1 < n && k[i + 1] == ' ') return 0;
    }
    return 1;
}

static uint32_t chunk_crc(const uint8_t *type_and_data, size_t n) {
    return (uint32_t)crc32(crc32(0, Z_NULL, 0), type_and_data, (uInt)n);
}

// The tEXt chunk's data d (n bytes) when its keyword is `keyword`: 1 with *text, 0 for another keyword.
static int text_chunk(const uint8_t *d, size_t n, size_t off, const char *name, const char *keyword, char **text,
                      MalaErr *err) {
    const uint8_t *nul = memchr(d, 0, n < 80 ? n : 80);
    if (!nul || !keyword_ok(d, (size_t)(nul - d)))
        return mala_errf(err, "%s: corrupt tEXt chunk at byte %zu: no valid keyword", name, off);
    size_t kn = (size_t)(nul - d), tn = n - kn - 1;
    if (memchr(nul + 1, 0, tn)) return mala_errf(err, "%s: corrupt tEXt chunk at byte %zu: a NUL in its text", name, off);
    if (kn != strlen(keyword) || memcmp(d, keyword, kn)) return 0;
    if (tn > PNG_TEXT_MAX_BYTES)
        return mala_errf(err, "%s: tEXt '%s' at byte %zu is longer than %d bytes", name, keyword, off, PNG_TEXT_MAX_BYTES);
    *text = malloc(tn + 1);
    if (!*text) return mala_errf(err, "%s: out of memory", name);
    memcpy(*text, nul + 1, tn);
    (*text)[tn] = 0;
    return 1;
}

// png_text_find, also giving the offset of the IEND chunk the walk stopped at.
static int walk(const uint8_t *png, size_t len, const char *name, const char *keyword, char **text, size_t *iend,
                MalaErr *err) {
    *text = NULL;
    if (len < 8 || memcmp(png, PNG_SIG, 8)) return mala_errf(err, "%s: not a PNG (no PNG signature)", name);
    char *found = NULL;
    size_t off = 8;
    for (int first = 1;; first = 0) {
        if (len - off < 12) {
            free(found);
            return mala_errf(err, "%s: truncated PNG: %s at byte %zu", name, off == len ? "no IEND chunk" : "a cut chunk",
                             off);
        }
        const uint8_t *c = png + off;
        uint32_t n = be32(c);
        if (n > 0x7fffffffu || n > len - off - 12) {
            free(found);
            return mala_errf(err, "%s: truncated or corrupt PNG: the chunk at byte %zu claims %u bytes, %zu remain", name, off, n,
                             len - off - 12);
        }
        char type[5] = {0};
        for (int i = 0; i < 4; i++) type[i] = (c[4 + i] >= 32 && c[4 + i] <= 126) ? (char)c[4 + i] : '?';
        if (chunk_crc(c + 4, 4 + (size_t)n) != be32(c + 8 + n)) {
            free(found);
            return mala_errf(err, "%s: corrupt %s chunk at byte %zu: CRC mismatch", name, type, off);
        }
        if (first && memcmp(type, "IHDR", 4)) return mala_errf(err, "%s: corrupt PNG: the first chunk is %s, not IHDR",
                                                            name, type);
        if (!memcmp(c + 4, "IEND", 4)) break;
        if (!memcmp(c + 4, "tEXt", 4)) {  // every one is checked; the first with the keyword is kept
            char *t = NULL;
            int rc = text_chunk(c + 8, n, off, name, keyword, &t, err);
            if (rc < 0) { free(found); return -1; }
            if (rc > 0 && !found) found = t;
            else free(t);
        }
        off += 12 + (size_t)n;
    }
    *text = found;
    *iend = off;
    return found != NULL;
}

int png_text_find(const uint8_t *png, size_t len, const char *name, const char *keyword, char **text,
                  MalaErr *err) {
    size_t iend;
    return walk(png, len, name, keyword, text, &iend, err);
}

int png_text_add(const uint8_t *png, size_t len, const char *name, const char *keyword, const char *text,
                 uint8_t **out, size_t *out_len, MalaErr *err) {
    size_t kn = strlen(keyword), tn = strlen(text);
    if (!keyword_ok((const uint8_t *)keyword, kn)) return mala_errf(err, "%s: '%s' is not a PNG tEXt keyword", name, keyword);
    if (tn > PNG_TEXT_MAX_BYTES) return mala_errf(err, "%s: tEXt '%s' is longer than %d bytes", name, keyword,
                                                  PNG_TEXT_MAX_BYTES);
    char *old;
    size_t at;
    if (walk(png, len, name, keyword, &old, &at, err) < 0) return -1;
    free(old);
    if (at != len - 12) return mala_errf(err, "%s: not a PNG ending in IEND (%zu bytes after it)", name, len - 12 - at);
    size_t dn = kn + 1 + tn;
    uint8_t *o = malloc(len + 12 + dn);
    if (!o) return mala_errf(err, "%s: out of memory", name);
    memcpy(o, png, at);
    uint8_t *c = o + at;
    put_be32(c, (uint32_t)dn);
    memcpy(c + 4, "tEXt", 4);
    memcpy(c + 8, keyword, kn + 1);  // with its NUL separator
    memcpy(c + 9 + kn, text, tn);
    put_be32(c + 8 + dn, chunk_crc(c + 4, 4 + dn));
    memcpy(c + 12 + dn, png + at, 12);  // IEND
    *out = o;
    *out_len = len + 12 + dn;
    return 0;
}


// A reader of TensorBoard event files for the tests (test-only: the program never reads them):
// TFRecord framing with both masked CRC-32Cs checked, and the Event / Summary fields
// formats/tfevents.h writes, decoded by a generic protocol-buffer walk that skips unknown fields.
// Header-only, like testutil.h.
#ifndef MALA_TFEVENTS_READ_H
#define MALA_TFEVENTS_READ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tfevents.h"

typedef struct {
    char tag[128];
    int has_simple, has_image;
    float simple;
    int64_t height, width, colorspace;
    const uint8_t *png;  // into TfeRecord.data
    size_t png_len;
} TfeValue;

typedef struct {
    uint8_t *data;  // the Event's bytes (malloc'd)
    size_t len;
    double wall_time;
    int64_t step;
    char file_version[64];
    int64_t session_status;  // 0 = no session_log
    int nvalues;
    TfeValue values[16];
} TfeRecord;

typedef struct { const uint8_t *p, *end; int bad; } TfeCur;

static uint64_t tfe_varint(TfeCur *c) {
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
        if (c->p >= c->end) { c->bad = 1; return 0; }
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return v;
    }
    c->bad = 1;
    return 0;
}

// The next field: its number, wire type, and for length-delimited ones a sub-cursor; 0 at the end.
static int tfe_field(TfeCur *c, int *field, int *wire, TfeCur *sub, uint64_t *num) {
    if (c->p >= c->end || c->bad) return 0;
    uint64_t key = tfe_varint(c);
    *field = (int)(key >> 3);
    *wire = (int)(key & 7);
    *num = 0;
    if (*wire == 0) *num = tfe_varint(c);
    else if (*wire == 1 || *wire == 5) {
        int n = *wire == 1 ? 8 : 4;
        if (c->end - c->p < n) { c->bad = 1; return 0; }
        for (int i = 0; i < n; i++) *num |= (uint64_t)c->p[i] << 8 * i;
        c->p += n;
    } else if (*wire == 2) {
        uint64_t n = tfe_varint(c);
        if (c->bad || n > (uint64_t)(c->end - c->p)) { c->bad = 1; return 0; }
        sub->p = c->p;
        sub->end = c->p + n;
        sub->bad = 0;
        c->p += n;
    } else {
        c->bad = 1;
        return 0;
    }
    return !c->bad;
}

static void tfe_value(TfeCur c, TfeValue *v) {
    int f, w;
    TfeCur s;
    uint64_t n;
    memset(v, 0, sizeof *v);
    while (tfe_field(&c, &f, &w, &s, &n)) {
        if (f == 1 && w == 2) snprintf(v->tag, sizeof v->tag, "%.*s", (int)(s.end - s.p), (const char *)s.p);
        if (f == 2 && w == 5) { uint32_t u = (uint32_t)n; memcpy(&v->simple, &u, 4); v->has_simple = 1; }
        if (f == 4 && w == 2) {
            v->has_image = 1;
            int g, x;
            TfeCur t;
            uint64_t m;
            while (tfe_field(&s, &g, &x, &t, &m)) {
                if (g == 1 && x == 0) v->height = (int64_t)m;
                if (g == 2 && x == 0) v->width = (int64_t)m;
                if (g == 3 && x == 0) v->colorspace = (int64_t)m;
                if (g == 4 && x == 2) { v->png = t.p; v->png_len = (size_t)(t.end - t.p); }
            }
        }
    }
}

// Decodes one Event into r (r->data / r->len set); -1 on malformed bytes.
static int tfe_event(TfeRecord *r) {
    TfeCur c = {r->data, r->data + r->len, 0}, s;
    int f, w;
    uint64_t n;
    while (tfe_field(&c, &f, &w, &s, &n)) {
        if (f == 1 && w == 1) memcpy(&r->wall_time, &n, 8);
        if (f == 2 && w == 0) r->step = (int64_t)n;
        if (f == 3 && w == 2)
            snprintf(r->file_version, sizeof r->file_version, "%.*s", (int)(s.end - s.p), (const char *)s.p);
        if (f == 5 && w == 2) {
            int g, x;
            TfeCur t;
            uint64_t m;
            while (tfe_field(&s, &g, &x, &t, &m))
                if (g == 1 && x == 2 && r->nvalues < 16) tfe_value(t, &r->values[r->nvalues++]);
            if (s.bad) return -1;
        }
        if (f == 7 && w == 2) {
            int g, x;
            TfeCur t;
            uint64_t m;
            while (tfe_field(&s, &g, &x, &t, &m))
                if (g == 1 && x == 0) r->session_status = (int64_t)m;
        }
    }
    return c.bad ? -1 : 0;
}

static uint32_t tfe_le32(const uint8_t *b) { return b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }

// Reads every record of path into *recs (malloc'd); returns the count, or -1 with why[] set
// (a CRC mismatch, a truncated record, a malformed Event).
static int tfe_read_file(const char *path, TfeRecord **recs, char *why, size_t why_n) {
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(why, why_n, "%s: cannot open", path); return -1; }
    int n = 0, cap = 16;
    TfeRecord *r = calloc(cap, sizeof *r);
    uint8_t head[12], tail[4];
    size_t got;
    while ((got = fread(head, 1, 12, f)) == 12) {
        uint64_t len = tfe_le32(head) | (uint64_t)tfe_le32(head + 4) << 32;
        if (tfe_le32(head + 8) != tfev_mask_crc(tfev_crc32c(head, 8))) {
            snprintf(why, why_n, "record %d: length CRC mismatch", n);
            goto fail;
        }
        if (n == cap) r = realloc(r, (cap *= 2) * sizeof *r);
        memset(&r[n], 0, sizeof *r);
        r[n].len = (size_t)len;
        r[n].data = malloc(len ? len : 1);
        if (fread(r[n].data, 1, len, f) != len || fread(tail, 1, 4, f) != 4) {
            snprintf(why, why_n, "record %d: truncated", n);
            free(r[n].data);
            goto fail;
        }
        n++;
        if (tfe_le32(tail) != tfev_mask_crc(tfev_crc32c(r[n - 1].data, len))) {
            snprintf(why, why_n, "record %d: data CRC mismatch", n - 1);
            goto fail;
        }
        if (tfe_event(&r[n - 1])) {
            snprintf(why, why_n, "record %d: malformed Event", n - 1);
            goto fail;
        }
    }
    if (got) { snprintf(why, why_n, "record %d: truncated header", n); goto fail; }
    fclose(f);
    *recs = r;
    return n;
fail:
    for (int i = 0; i < n; i++) free(r[i].data);
    free(r);
    fclose(f);
    return -1;
}

static void tfe_free(TfeRecord *r, int n) {
    for (int i = 0; i < n; i++) free(r[i].data);
    free(r);
}

#endif

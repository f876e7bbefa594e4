// defines: gen_params_parse
// The parameters text (pipeline/gen_params.h) read back. Plain C on a NUL-terminated string, no
// other project code, so the fuzz harness links it alone.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/gen_params.h"

// The value of `key` on the settings line (the text's last line) into buf: after "Key: " at the
// line's start or after ", ", up to the next ", " outside quotes; a quoted value unescaped
// (backslash-quote, backslash-backslash, backslash-n). 1 when present and it fits.
static int value_of(const char *text, const char *key, char *buf, size_t n) {
    const char *line = strrchr(text, '\n');
    line = line ? line + 1 : text;
    size_t klen = strlen(key);
    for (const char *p = line; *p;) {
        if (!strncmp(p, key, klen) && p[klen] == ':' && p[klen + 1] == ' ') {
            const char *v = p + klen + 2;
            size_t k = 0;
            if (*v == '"') {
                for (v++; *v && *v != '"'; v++) {
                    char c = *v;
                    if (c == '\\' && v[1]) c = *++v == 'n' ? '\n' : *v;
                    if (k + 1 >= n) return 0;
                    buf[k++] = c;
                }
                if (*v != '"') return 0;
            } else {
                for (; *v && !(v[0] == ',' && v[1] == ' '); v++) {
                    if (k + 1 >= n) return 0;
                    buf[k++] = *v;
                }
            }
            buf[k] = 0;
            return 1;
        }
        // the next pair: after ", " outside quotes
        int quoted = 0;
        for (; *p; p++) {
            if (*p == '"') quoted = !quoted;
            else if (*p == '\\' && quoted && p[1]) p++;
            else if (!quoted && p[0] == ',' && p[1] == ' ') { p += 2; break; }
        }
    }
    return 0;
}

static int to_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int to_float(const char *s, double lo, double hi, int open_lo, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < lo || v > hi || (open_lo && v == lo)) return 0;
    *out = (float)v;
    return 1;
}

int gen_params_parse(const char *text, GenParsed *p) {
    memset(p, 0, sizeof *p);
    char b[256];
    long v;
    if (value_of(text, "Steps", b, sizeof b) && to_long(b, 1, 1000, &v)) { p->steps = (int)v; p->have |= GP_STEPS; }
    if (value_of(text, "Sampler", b, sizeof b) && strlen(b) < sizeof p->sampler) {
        strcpy(p->sampler, b);
        p->have |= GP_SAMPLER;
    }
    if (value_of(text, "CFG scale", b, sizeof b) && to_float(b, 0, 100, 0, &p->cfg_scale)) p->have |= GP_CFG;
    if (value_of(text, "Eta", b, sizeof b) && to_float(b, 0, 10, 0, &p->eta)) p->have |= GP_ETA;
    if (value_of(text, "Seed", b, sizeof b) && b[0] >= '0' && b[0] <= '9') {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(b, &end, 10);
        if (!*end && !errno) { p->seed = s; p->have |= GP_SEED; }
    }
    if (value_of(text, "Class", b, sizeof b) && to_long(b, 0, 1 << 24, &v)) { p->cls = (int)v; p->have |= GP_CLASS; }
    if (value_of(text, "Denoising strength", b, sizeof b) && to_float(b, 0, 1, 1, &p->strength)) p->have |= GP_STRENGTH;
    if (value_of(text, "Resample", b, sizeof b) && to_long(b, 0, 100, &v)) { p->resample = (int)v; p->have |= GP_RESAMPLE; }
    if (value_of(text, "Blend", b, sizeof b)) {
        char *c1 = strchr(b, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        long a, bb;
        if (c1 && c2) {
            *c1 = *c2 = 0;
            if (to_long(b, 0, 1 << 24, &a) && to_long(c1 + 1, 0, 1 << 24, &bb) && to_float(c2 + 1, 0, 1, 0, &p->blend_w)) {
                p->blend_a = (int)a;
                p->blend_b = (int)bb;
                p->have |= GP_BLEND;
            }
        }
    }
    long gn, cw, ch;
    if (value_of(text, "Images", b, sizeof b) && to_long(b, 2, 4096, &gn) && value_of(text, "Size", b, sizeof b)) {
        char *x = strchr(b, 'x');
        if (x) {
            *x = 0;
            if (to_long(b, 1, 8192, &cw) && to_long(x + 1, 1, 8192, &ch)) {
                p->grid_n = (int)gn;
                p->cell_w = (int)cw;
                p->cell_h = (int)ch;
                p->have |= GP_GRID;
            }
        }
    }
    int count = 0;
    for (unsigned h = p->have; h; h &= h - 1) count++;
    return count;
}

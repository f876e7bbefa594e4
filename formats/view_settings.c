// defines: view_settings_parse, view_settings_format, view_settings_load, view_settings_save,
//          view_settings_default_path
// The viewer's settings file (view_settings.h): a strict line parser, so a damaged file is
// refused whole rather than half applied.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "formats/atomic_file.h"
#include "formats/view_settings.h"

#define MAX_FILE 65536  // far more than the dozen lines the viewer writes
#define MAX_LINE 256

static int parse_num(const char *v, double lo, double hi, int integer, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < lo || x > hi || (integer && x != floor(x))) return -1;
    *out = x;
    return 0;
}

static int parse_onoff(const char *v, int *out) {
    if (!strcmp(v, "on")) *out = 1;
    else if (!strcmp(v, "off")) *out = 0;
    else return -1;
    return 0;
}

// One "key=value" line into s; a message fragment in why on failure.
static int parse_line(char *key, char *val, ViewSettings *s, const char **why) {
    double x;
    *why = "bad value";
    if (!strcmp(key, "class")) {
        if (!*val || strlen(val) >= sizeof s->cls) return -1;
        snprintf(s->cls, sizeof s->cls, "%s", val);
        s->have |= VS_CLASS;
    } else if (!strcmp(key, "sampler")) {
        if (!*val || strlen(val) >= sizeof s->sampler || strspn(val, "abcdefghijklmnopqrstuvwxyz0123456789+") != strlen(val))
            return -1;
        snprintf(s->sampler, sizeof s->sampler, "%s", val);
        s->have |= VS_SAMPLER;
    } else if (!strcmp(key, "cfg")) {
        if (parse_num(val, 0, 100, 0, &x)) return -1;
        s->cfg = (float)x, s->have |= VS_CFG;
    } else if (!strcmp(key, "eta")) {
        if (parse_num(val, 0, 1, 0, &x)) return -1;
        s->eta = (float)x, s->have |= VS_ETA;
    } else if (!strcmp(key, "scale")) {
        if (parse_num(val, 0.25, 8, 0, &x)) return -1;
        s->scale = (float)x, s->have |= VS_SCALE;
    } else if (!strcmp(key, "steps")) {
        if (parse_num(val, 1, 1000, 1, &x)) return -1;
        s->steps = (int)x, s->have |= VS_STEPS;
    } else if (!strcmp(key, "images")) {
        if (parse_num(val, 1, 16, 1, &x)) return -1;
        s->images = (int)x, s->have |= VS_IMAGES;
    } else if (!strcmp(key, "block")) {
        if (parse_num(val, 0, 1000, 1, &x)) return -1;
        s->block = (int)x, s->have |= VS_BLOCK;
    } else if (!strcmp(key, "head")) {
        if (!strcmp(val, "mean")) s->head = -1;
        else if (parse_num(val, 0, 1000, 1, &x)) return -1;
        else s->head = (int)x;
        s->have |= VS_HEAD;
    } else if (!strcmp(key, "seed")) {
        char *end;
        errno = 0;
        unsigned long long u = strtoull(val, &end, 10);
        if (!*val || *val == '-' || *val == '+' || *end || errno) return -1;
        s->seed = u, s->have |= VS_SEED;
    } else if (!strcmp(key, "seed_mode")) {
        if (!strcmp(val, "fixed")) s->seed_random = 0;
        else if (!strcmp(val, "random")) s->seed_random = 1;
        else return -1;
        s->have |= VS_SEED_MODE;
    } else if (!strcmp(key, "attn")) {
        if (parse_onoff(val, &s->attn)) return -1;
        s->have |= VS_ATTN;
    } else {
        *why = "unknown key";
        return -1;
    }
    return 0;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = 0;
    return s;
}

int view_settings_parse(const char *text, size_t n, const char *path, ViewSettings *s, MalaErr *err) {
    memset(s, 0, sizeof *s);
    if (n > MAX_FILE) return mala_errf(err, "%s: %zu bytes, more than a settings file has (%d)", path, n, MAX_FILE);
    size_t pos = 0;
    for (int line = 1; pos < n; line++) {
        size_t end = pos;
        while (end < n && text[end] != '\n') end++;
        size_t len = end - pos;
        if (len >= MAX_LINE) return mala_errf(err, "%s: line %d: longer than %d characters", path, line, MAX_LINE - 1);
        char buf[MAX_LINE];
        memcpy(buf, text + pos, len);
        buf[len] = 0;
        pos = end + 1;
        if (strlen(buf) != len) return mala_errf(err, "%s: line %d: a NUL byte", path, line);
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)buf[i] < 32 && buf[i] != '\t' && buf[i] != '\r')
                return mala_errf(err, "%s: line %d: a control character", path, line);
        char *l = trim(buf);
        if (!*l || *l == '#') continue;
        char *eq = strchr(l, '=');
        if (!eq) return mala_errf(err, "%s: line %d: expected key=value", path, line);
        *eq = 0;
        char *key = trim(l), *val = trim(eq + 1);
        const char *why;
        if (parse_line(key, val, s, &why)) return mala_errf(err, "%s: line %d: %s '%.40s'", path, line, why, key);
    }
    return 0;
}

size_t view_settings_format(const ViewSettings *s, char *buf, size_t n) {
    size_t len = 0;
#define PUT(...) len += snprintf(buf + (len < n ? len : n), len < n ? n - len : 0, __VA_ARGS__)
    PUT("# mala view: the last settings (written by the viewer when it closes)\n");
    if (s->have & VS_CLASS) PUT("class=%s\n", s->cls);
    if (s->have & VS_CFG) PUT("cfg=%.9g\n", s->cfg);
    if (s->have & VS_STEPS) PUT("steps=%d\n", s->steps);
    if (s->have & VS_SAMPLER) PUT("sampler=%s\n", s->sampler);
    if (s->have & VS_ETA) PUT("eta=%.9g\n", s->eta);
    if (s->have & VS_SEED) PUT("seed=%llu\n", (unsigned long long)s->seed);
    if (s->have & VS_SEED_MODE) PUT("seed_mode=%s\n", s->seed_random ? "random" : "fixed");
    if (s->have & VS_IMAGES) PUT("images=%d\n", s->images);
    if (s->have & VS_ATTN) PUT("attn=%s\n", s->attn ? "on" : "off");
    if (s->have & VS_BLOCK) PUT("block=%d\n", s->block);
    if (s->have & VS_HEAD) {
        if (s->head < 0) PUT("head=mean\n");
        else PUT("head=%d\n", s->head);
    }
    if (s->have & VS_SCALE) PUT("scale=%.9g\n", s->scale);
#undef PUT
    return len;
}

int view_settings_load(const char *path, ViewSettings *s, MalaErr *err) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 1;
        return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    }
    char *buf = malloc(MAX_FILE + 1);
    size_t n = buf ? fread(buf, 1, MAX_FILE + 1, f) : 0;
    int bad = !buf || ferror(f);
    fclose(f);
    int rc = bad ? mala_errf(err, "%s: cannot read", path) : view_settings_parse(buf, n, path, s, err);
    free(buf);
    return rc;
}

// mkdir -p of path's folder (not of path itself).
static int make_parent(const char *path, MalaErr *err) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return mala_errf(err, "%s: path too long", path);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return mala_errf(err, "%s: cannot create directory: %s", p, strerror(errno));
        *c = '/';
    }
    return 0;
}

int view_settings_save(const char *path, const ViewSettings *s, MalaErr *err) {
    char buf[4096];
    size_t len = view_settings_format(s, buf, sizeof buf);
    if (len >= sizeof buf) return mala_errf(err, "%s: the settings do not fit %zu bytes", path, sizeof buf);
    if (make_parent(path, err)) return -1;
    return atomic_write_file(path, buf, len, err);
}

int view_settings_default_path(char *buf, size_t n) {
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int len;
    if (xdg && *xdg) len = snprintf(buf, n, "%s/mala/viewer.ini", xdg);
    else if (home && *home) len = snprintf(buf, n, "%s/.config/mala/viewer.ini", home);
    else return -1;
    return len > 0 && (size_t)len < n ? 0 : -1;
}

// defines: st_meta_int, st_meta_u64, st_meta_float, st_meta_bool, st_meta_need_int,
//          st_writer_meta_int, st_writer_meta_u64, st_writer_meta_float, st_writer_meta_bool
#include "formats/st_meta.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int st_meta_int(const StFile *f, const char *key, int *out, MalaErr *err) {
    const char *v = st_meta(f, key);
    if (!v) return 1;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < 0 || x > 1000000)
        return mala_errf(err, "%s: metadata '%s' = '%s' is not a non-negative integer", f->path, key, v);
    *out = (int)x;
    return 0;
}

int st_meta_need_int(const StFile *f, const char *key, int *out, MalaErr *err) {
    int rc = st_meta_int(f, key, out, err);
    return rc == 1 ? mala_errf(err, "%s: metadata '%s' is missing", f->path, key) : rc;
}

int st_meta_u64(const StFile *f, const char *key, uint64_t *out, MalaErr *err) {
    const char *v = st_meta(f, key);
    if (!v) return 1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *end || errno)
        return mala_errf(err, "%s: metadata '%s' = '%s' is not an integer", f->path, key, v);
    *out = x;
    return 0;
}

int st_meta_float(const StFile *f, const char *key, float *out, MalaErr *err) {
    const char *v = st_meta(f, key);
    if (!v) return 1;
    char *end;
    float x = strtof(v, &end);
    if (!*v || *end || !isfinite(x))
        return mala_errf(err, "%s: metadata '%s' = '%s' is not a finite number", f->path, key, v);
    *out = x;
    return 0;
}

int st_meta_bool(const StFile *f, const char *key, int *out, MalaErr *err) {
    const char *v = st_meta(f, key);
    if (!v) return 1;
    if (!strcasecmp(v, "true") || !strcmp(v, "1")) *out = 1;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0")) *out = 0;
    else return mala_errf(err, "%s: metadata '%s' = '%s' is not true or false", f->path, key, v);
    return 0;
}

void st_writer_meta_int(StWriter *w, const char *key, int v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%d", v);
    st_writer_meta(w, key, buf);
}

void st_writer_meta_u64(StWriter *w, const char *key, uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    st_writer_meta(w, key, buf);
}

void st_writer_meta_float(StWriter *w, const char *key, float v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", v);
    st_writer_meta(w, key, buf);
}

void st_writer_meta_bool(StWriter *w, const char *key, int v) { st_writer_meta(w, key, v ? "true" : "false"); }

// defines: manifest_str, manifest_lit, manifest_remove, manifest_value, manifest_members, manifest_write,
//          manifest_read, manifest_diff
#include "pipeline/manifest.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "formats/atomic_file.h"

static void set(Manifest *m, const char *key, int is_str, const char *fmt, va_list ap) {
    int i = 0;
    while (i < m->n && strcmp(m->key[i], key)) i++;
    CHECK(i < MANIFEST_MAX, "manifest: more than %d members", MANIFEST_MAX);
    if (i == m->n) snprintf(m->key[m->n++], sizeof m->key[0], "%s", key);
    vsnprintf(m->val[i], sizeof m->val[i], fmt, ap);
    m->is_str[i] = is_str;
}

void manifest_str(Manifest *m, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set(m, key, 1, fmt, ap);
    va_end(ap);
}

void manifest_lit(Manifest *m, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set(m, key, 0, fmt, ap);
    va_end(ap);
}

void manifest_remove(Manifest *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->key[i], key)) {
            for (int k = i + 1; k < m->n; k++) {
                memcpy(m->key[k - 1], m->key[k], sizeof m->key[k]);
                memcpy(m->val[k - 1], m->val[k], sizeof m->val[k]);
                m->is_str[k - 1] = m->is_str[k];
            }
            m->n--;
            return;
        }
}

const char *manifest_value(const Manifest *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->key[i], key)) return m->val[i];
    return NULL;
}

void manifest_members(const Manifest *m, JsonBuf *b) {
    for (int i = 0; i < m->n; i++) {
        json_buf_printf(b, ",\"%s\":", m->key[i]);
        if (m->is_str[i]) json_buf_string(b, m->val[i], strlen(m->val[i]));
        else json_buf_puts(b, m->val[i]);
    }
}

int manifest_write(const Manifest *m, const char *path, MalaErr *err) {
    JsonBuf b = {0};
    manifest_members(m, &b);
    if (b.len) b.buf[0] = '{';
    else json_buf_puts(&b, "{");
    json_buf_puts(&b, "}\n");
    int rc = atomic_write_file(path, b.buf, b.len, err);
    json_buf_free(&b);
    return rc;
}

int manifest_read(Manifest *m, const char *path, MalaErr *err) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) return mala_errf(err, "%s: cannot read", path);
    char text[MANIFEST_MAX * (MANIFEST_VAL + 64)];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    JsonValue *v = json_parse(text, n, err);
    if (!v) return -1;
    int rc = 0;
    if (v->type != JSON_OBJECT || v->n > MANIFEST_MAX) rc = mala_errf(err, "%s: not a manifest (a JSON object)", path);
    for (int i = 0; !rc && i < v->n; i++) {
        const JsonValue *e = &v->items[i];
        if (e->type == JSON_STRING || e->type == JSON_NUMBER) {
            snprintf(m->key[i], sizeof m->key[i], "%s", e->key);
            snprintf(m->val[i], sizeof m->val[i], "%s", e->str);
            m->is_str[i] = e->type == JSON_STRING;
        } else if (e->type == JSON_BOOL) {
            snprintf(m->key[i], sizeof m->key[i], "%s", e->key);
            snprintf(m->val[i], sizeof m->val[i], "%s", e->boolean ? "true" : "false");
        } else {
            rc = mala_errf(err, "%s: member %s is a %s", path, e->key, json_type_name(e->type));
        }
        m->n = i + 1;
    }
    json_free(v);
    return rc;
}

static void add_diff(char *out, size_t cap, int k, const char *key, const char *then, const char *now) {
    size_t len = strlen(out);
    snprintf(out + len, cap - len, "%s%s %s (then), %s (now)", k ? "; " : "", key, then ? then : "none",
             now ? now : "none");
}

int manifest_diff(const Manifest *then, const Manifest *now, char *out, size_t cap) {
    int k = 0;
    out[0] = 0;
    for (int i = 0; i < now->n; i++) {
        const char *t = manifest_value(then, now->key[i]);
        if (!t || strcmp(t, now->val[i])) add_diff(out, cap, k++, now->key[i], t, now->val[i]);
    }
    for (int i = 0; i < then->n; i++)
        if (!manifest_value(now, then->key[i])) add_diff(out, cap, k++, then->key[i], then->val[i], NULL);
    return k;
}

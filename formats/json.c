// defines: json_parse, json_free, json_get, json_type_name, json_get_u64, json_get_i64,
//          json_buf_append, json_buf_puts, json_buf_printf, json_buf_string, json_buf_free,
//          json_fput_string, json_utf8_valid, json_write_line, json_printf_line
#include "formats/json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Parser. Values are built in place inside their parent, so that at every moment the tree is
// consistent and a failure anywhere is cleaned up by freeing the root.

typedef struct {
    const unsigned char *s;
    size_t len, pos;
    MalaErr *err;
} Parser;

// Growable byte buffer whose allocation failures are reported instead of aborting.
typedef struct { char *buf; size_t len, cap; } Bytes;

static int fail(Parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(Parser *p, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return mala_errf(p->err, "byte %zu: %s", p->pos, what);
}

// Describes the byte at the cursor for error messages: 'x', or 0xNN when not printable.
static const char *describe_byte(const Parser *p, char buf[16]) {
    if (p->pos >= p->len) return "end of input";
    unsigned char c = p->s[p->pos];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, 16, "'%c'", c);
    else snprintf(buf, 16, "byte 0x%02x", c);
    return buf;
}

static int bytes_push(Bytes *b, const void *src, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16;
        while (cap < b->len + n + 1) cap *= 2;
        char *nb = realloc(b->buf, cap);
        if (!nb) return -1;
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, src, n);
    b->len += n;
    b->buf[b->len] = 0;
    return 0;
}

static void skip_ws(Parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

// Length of the valid UTF-8 sequence at s (at most avail bytes), or 0 if invalid: overlong
// forms, surrogates and code points past U+10FFFF are rejected.
static size_t utf8_len(const unsigned char *s, size_t avail) {
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c < 0x80) return 1;
    else if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) { n = 3; if (c == 0xe0) lo = 0xa0; if (c == 0xed) hi = 0x9f; }
    else if (c >= 0xf0 && c <= 0xf4) { n = 4; if (c == 0xf0) lo = 0x90; if (c == 0xf4) hi = 0x8f; }
    else return 0;
    if (avail < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return n;
}

int json_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = utf8_len(u + i, n - i))) return 0;
    return 1;
}

static size_t utf8_encode(uint32_t cp, unsigned char out[4]) {
    if (cp < 0x80) { out[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

// Reads the 4 hex digits after "\u" (the cursor is on the 'u').
static int parse_hex4(Parser *p, uint32_t *out) {
    if (p->len - p->pos < 5) { p->pos = p->len; return fail(p, "truncated \\u escape"); }
    uint32_t v = 0;
    for (size_t i = 1; i <= 4; i++) {
        unsigned char c = p->s[p->pos + i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) { p->pos += i; return fail(p, "invalid hex digit in \\u escape"); }
        v = v * 16 + (uint32_t)d;
    }
    p->pos += 5;
    *out = v;
    return 0;
}

// Decodes a \u escape (cursor on the 'u'), joining a surrogate pair into one code point.
static int parse_unicode_escape(Parser *p, uint32_t *cp) {
    size_t start = p->pos - 1;
    uint32_t hi = 0, lo = 0;
    if (parse_hex4(p, &hi)) return -1;
    if (hi >= 0xdc00 && hi <= 0xdfff) { p->pos = start; return fail(p, "unpaired low surrogate in \\u escape"); }
    if (hi < 0xd800 || hi > 0xdbff) { *cp = hi; return 0; }
    if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
        p->pos = start;
        return fail(p, "high surrogate in \\u escape is not followed by a low surrogate");
    }
    p->pos++;
    if (parse_hex4(p, &lo)) return -1;
    if (lo < 0xdc00 || lo > 0xdfff) {
        p->pos = start;
        return fail(p, "high surrogate in \\u escape is not followed by a low surrogate");
    }
    *cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    return 0;
}

// One escape sequence; the cursor is on the backslash.
static int parse_escape(Parser *p, Bytes *out) {
    p->pos++;
    if (p->pos >= p->len) return fail(p, "unterminated string");
    unsigned char c = p->s[p->pos], e;
    switch (c) {
    case '"': e = '"'; break;
    case '\\': e = '\\'; break;
    case '/': e = '/'; break;
    case 'b': e = '\b'; break;
    case 'f': e = '\f'; break;
    case 'n': e = '\n'; break;
    case 'r': e = '\r'; break;
    case 't': e = '\t'; break;
    case 'u': {
        uint32_t cp = 0;
        unsigned char enc[4];
        if (parse_unicode_escape(p, &cp)) return -1;
        if (bytes_push(out, enc, utf8_encode(cp, enc))) return fail(p, "out of memory");
        return 0;
    }
    default: {
        char d[16];
        return fail(p, "invalid escape \\%s in string", describe_byte(p, d));
    }
    }
    p->pos++;
    if (bytes_push(out, &e, 1)) return fail(p, "out of memory");
    return 0;
}

// A string; the cursor is on the opening quote. On success *str owns the decoded text.
static int parse_string(Parser *p, char **str, size_t *len) {
    size_t start = p->pos;
    Bytes b = {0};
    p->pos++;
    for (;;) {
        if (p->pos >= p->len) { p->pos = start; fail(p, "unterminated string"); goto error; }
        unsigned char c = p->s[p->pos];
        if (c == '"') break;
        if (c == '\\') { if (parse_escape(p, &b)) goto error; continue; }
        if (c < 0x20) { fail(p, "unescaped control character 0x%02x in string", c); goto error; }
        size_t n = utf8_len(p->s + p->pos, p->len - p->pos);
        if (n == 0) { fail(p, "invalid UTF-8 in string"); goto error; }
        if (bytes_push(&b, p->s + p->pos, n)) { fail(p, "out of memory"); goto error; }
        p->pos += n;
    }
    p->pos++;
    if (!b.buf && bytes_push(&b, "", 0)) { fail(p, "out of memory"); goto error; }
    *str = b.buf;
    *len = b.len;
    return 0;
error:
    free(b.buf);
    return -1;
}

static size_t skip_digits(Parser *p) {
    size_t n = 0;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') { p->pos++; n++; }
    return n;
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
static int parse_number(Parser *p, JsonValue *v) {
    size_t start = p->pos;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return fail(p, "expected a digit in number");
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            return fail(p, "leading zero in number");
    } else {
        skip_digits(p);
    }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        if (!skip_digits(p)) return fail(p, "expected a digit after the decimal point");
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (!skip_digits(p)) return fail(p, "expected a digit in the exponent");
    }
    size_t n = p->pos - start;
    v->str = malloc(n + 1);
    if (!v->str) return fail(p, "out of memory");
    memcpy(v->str, p->s + start, n);
    v->str[n] = 0;
    v->len = n;
    v->type = JSON_NUMBER;
    v->number = strtod(v->str, NULL);
    if (isinf(v->number)) { p->pos = start; return fail(p, "number out of range"); }
    return 0;
}

static int parse_literal(Parser *p, JsonValue *v, const char *word, JsonType type, int boolean) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) {
        char d[16];
        return fail(p, "unexpected %s", describe_byte(p, d));
    }
    p->pos += n;
    v->type = type;
    v->boolean = boolean;
    return 0;
}

static int parse_value(Parser *p, JsonValue *v, int depth);

// Appends a zeroed element to an array or object value; NULL when out of memory.
static JsonValue *push_item(JsonValue *v, int *cap) {
    if (v->n == *cap) {
        if (*cap > INT_MAX / 2) return NULL;
        int ncap = *cap ? *cap * 2 : 4;
        JsonValue *items = realloc(v->items, (size_t)ncap * sizeof *items);
        if (!items) return NULL;
        v->items = items;
        *cap = ncap;
    }
    JsonValue *it = &v->items[v->n++];
    memset(it, 0, sizeof *it);
    return it;
}

// Array or object; the cursor is on '[' or '{'.
static int parse_container(Parser *p, JsonValue *v, int depth) {
    int is_object = p->s[p->pos] == '{';
    char close = is_object ? '}' : ']';
    if (depth >= JSON_MAX_DEPTH) return fail(p, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    v->type = is_object ? JSON_OBJECT : JSON_ARRAY;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return 0; }
    int cap = 0;
    for (;;) {
        JsonValue *it = push_item(v, &cap);
        if (!it) return fail(p, "out of memory");
        skip_ws(p);
        if (is_object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                char d[16];
                return fail(p, "expected a string key in object, found %s", describe_byte(p, d));
            }
            if (parse_string(p, &it->key, &it->key_len)) return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                char d[16];
                return fail(p, "expected ':' after object key, found %s", describe_byte(p, d));
            }
            p->pos++;
        }
        if (parse_value(p, it, depth + 1)) return -1;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
        if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return 0; }
        char d[16];
        return fail(p, "expected ',' or '%c' in %s, found %s", close, is_object ? "object" : "array",
                    describe_byte(p, d));
    }
}

static int parse_value(Parser *p, JsonValue *v, int depth) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "unexpected end of input, expected a value");
    char d[16];
    switch (p->s[p->pos]) {
    case '{': case '[': return parse_container(p, v, depth);
    case '"':
        v->type = JSON_STRING;
        return parse_string(p, &v->str, &v->len);
    case 't': return parse_literal(p, v, "true", JSON_BOOL, 1);
    case 'f': return parse_literal(p, v, "false", JSON_BOOL, 0);
    case 'n': return parse_literal(p, v, "null", JSON_NULL, 0);
    case '-': case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return parse_number(p, v);
    default:
        return fail(p, "unexpected %s, expected a value", describe_byte(p, d));
    }
}

JsonValue *json_parse(const char *text, size_t len, MalaErr *err) {
    Parser p = {(const unsigned char *)text, text ? len : 0, 0, err};
    JsonValue *root = calloc(1, sizeof *root);
    if (!root) { mala_errf(err, "byte 0: out of memory"); return NULL; }
    if (parse_value(&p, root, 0)) goto error;
    skip_ws(&p);
    if (p.pos != p.len) {
        char d[16];
        fail(&p, "unexpected %s after the JSON value", describe_byte(&p, d));
        goto error;
    }
    return root;
error:
    json_free(root);
    return NULL;
}

static void free_contents(JsonValue *v) {
    for (int i = 0; i < v->n; i++) free_contents(&v->items[i]);
    free(v->items);
    free(v->str);
    free(v->key);
}

void json_free(JsonValue *v) {
    if (!v) return;
    free_contents(v);
    free(v);
}

// ---------------------------------------------------------------------------------------------
// Accessors

const JsonValue *json_get(const JsonValue *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (int i = 0; i < obj->n; i++)
        if (obj->items[i].key_len == n && memcmp(obj->items[i].key, key, n) == 0) return &obj->items[i];
    return NULL;
}

const char *json_type_name(JsonType t) {
    switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    case JSON_OBJECT: return "object";
    }
    return "unknown";
}

// Magnitude of a literal made only of digits (after an optional '-'); -1 on anything else.
static int digits_value(const char *s, uint64_t *out) {
    uint64_t v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int json_get_u64(const JsonValue *v, uint64_t *out) {
    if (!v || v->type != JSON_NUMBER || v->str[0] == '-') return -1;
    return digits_value(v->str, out);
}

int json_get_i64(const JsonValue *v, int64_t *out) {
    uint64_t m;
    if (!v || v->type != JSON_NUMBER) return -1;
    int neg = v->str[0] == '-';
    if (digits_value(v->str + neg, &m)) return -1;
    if (neg) {
        if (m > (uint64_t)INT64_MAX + 1) return -1;
        *out = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
    } else {
        if (m > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)m;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Writing

void json_buf_append(JsonBuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *nb = realloc(b->buf, cap);
        if (!nb) FATAL("out of memory growing a JSON buffer to %zu bytes", cap);
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

void json_buf_puts(JsonBuf *b, const char *s) { json_buf_append(b, s, strlen(s)); }

void json_buf_printf(JsonBuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        char *tmp = xmalloc((size_t)n + 1);
        vsnprintf(tmp, (size_t)n + 1, fmt, ap2);
        json_buf_append(b, tmp, (size_t)n);
        free(tmp);
    }
    va_end(ap2);
}

// The escape for byte c, written into esc; 0 when c passes through unchanged.
static size_t escape_byte(unsigned char c, char esc[8]) {
    switch (c) {
    case '"': memcpy(esc, "\\\"", 2); return 2;
    case '\\': memcpy(esc, "\\\\", 2); return 2;
    case '\b': memcpy(esc, "\\b", 2); return 2;
    case '\f': memcpy(esc, "\\f", 2); return 2;
    case '\n': memcpy(esc, "\\n", 2); return 2;
    case '\r': memcpy(esc, "\\r", 2); return 2;
    case '\t': memcpy(esc, "\\t", 2); return 2;
    default:
        if (c >= 0x20) return 0;
        snprintf(esc, 8, "\\u%04x", c);
        return 6;
    }
}

void json_buf_string(JsonBuf *b, const char *s, size_t n) {
    size_t run = 0;  // start of the pending run of bytes that need no escape
    json_buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        char esc[8];
        size_t k = escape_byte((unsigned char)s[i], esc);
        if (!k) continue;
        json_buf_append(b, s + run, i - run);
        json_buf_append(b, esc, k);
        run = i + 1;
    }
    json_buf_append(b, s + run, n - run);
    json_buf_append(b, "\"", 1);
}

void json_buf_free(JsonBuf *b) {
    free(b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}

void json_fput_string(FILE *fp, const char *s) {
    JsonBuf b = {0};
    json_buf_string(&b, s, strlen(s));
    fwrite(b.buf, 1, b.len, fp);
    json_buf_free(&b);
}

// The key of the first value of line that is a bare word other than true / false / null (printf
// writes non-finite doubles as inf, -inf, nan, -nan): 0 when there is none.
static int find_bare_word(const char *line, const char **key, size_t *key_len, const char **word, size_t *word_len) {
    const char *last = "", *p = line;
    size_t last_len = 0;
    *key = "";
    *key_len = 0;
    while (*p) {
        if (*p == '"') {
            const char *start = ++p;
            while (*p && *p != '"') p += p[0] == '\\' && p[1] ? 2 : 1;
            last = start;
            last_len = (size_t)(p - start);
            if (*p) p++;
        } else if (*p == ':') {
            *key = last;
            *key_len = last_len;
            p++;
        } else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
            const char *q = p;
            while ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')) q++;
            size_t n = (size_t)(q - p);
            int literal = (n == 4 && (!memcmp(p, "true", 4) || !memcmp(p, "null", 4))) || (n == 5 && !memcmp(p, "false", 5));
            if (!literal) {
                *word = p > line && p[-1] == '-' ? p - 1 : p;
                *word_len = (size_t)(q - *word);
                return 1;
            }
            p = q;
        } else {
            p++;
        }
    }
    return 0;
}

int json_write_line(FILE *fp, const char *line, MalaErr *err) {
    const char *key, *word;
    size_t key_len, word_len;
    if (find_bare_word(line, &key, &key_len, &word, &word_len))
        return mala_errf(err, "the result \"%.*s\" is %.*s, not a finite number (nothing written)", (int)key_len, key,
                         (int)word_len, word);
    errno = 0;
    if (fputs(line, fp) < 0 || fputc('\n', fp) < 0 || fflush(fp) != 0)
        return mala_errf(err, "cannot write the result line: %s", strerror(errno ? errno : EIO));
    return 0;
}

int json_printf_line(FILE *fp, MalaErr *err, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *line = xmalloc(n > 0 ? (size_t)n + 1 : 1);
    line[0] = 0;
    if (n > 0) vsnprintf(line, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    int rc = json_write_line(fp, line, err);
    free(line);
    return rc;
}

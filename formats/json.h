// A small strict JSON (RFC 8259) parser producing a tree, and helpers to write JSON text.
// The parser never crashes on any input: malformed text, invalid UTF-8, unpaired \u surrogates,
// nesting past JSON_MAX_DEPTH, numbers out of double range and trailing bytes are all errors
// reported as "byte N: <what>" (N counts from 0). Allocation failures while parsing are
// reported too, so a hostile header cannot abort the process.
#ifndef MALA_JSON_H
#define MALA_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/common.h"  // defines: MalaErr

#define JSON_MAX_DEPTH 64

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue {
    JsonType type;
    int boolean;              // JSON_BOOL: 0 or 1
    double number;            // JSON_NUMBER: value as a double
    char *str;                // JSON_STRING: decoded UTF-8; JSON_NUMBER: the literal as written.
    size_t len;               //   NUL-terminated; len excludes the terminator (a \u0000 escape
                              //   makes strlen(str) < len)
    struct JsonValue *items;  // JSON_ARRAY / JSON_OBJECT: elements or members, in input order
    int n;                    //   their count
    char *key;                // a member of a JSON_OBJECT: its key (decoded, NUL-terminated);
    size_t key_len;           //   NULL elsewhere
} JsonValue;

// Parses text[0..len) as one JSON value (surrounding whitespace allowed). Returns the tree, or
// NULL with err->msg set. Free the tree with json_free.
JsonValue *json_parse(const char *text, size_t len, MalaErr *err);
void json_free(JsonValue *v);

// First member of an object with this key, or NULL (also NULL when obj is not an object).
const JsonValue *json_get(const JsonValue *obj, const char *key);
// "null", "boolean", "number", "string", "array" or "object".
const char *json_type_name(JsonType t);
// Exact integer value of a number written without fraction or exponent; -1 when v is not such
// a number or the value does not fit.
int json_get_u64(const JsonValue *v, uint64_t *out);
int json_get_i64(const JsonValue *v, int64_t *out);

// 1 when s[0..n) is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
int json_utf8_valid(const char *s, size_t n);

// Growable text buffer for building JSON. buf is always NUL-terminated once anything is added.
typedef struct { char *buf; size_t len, cap; } JsonBuf;
void json_buf_append(JsonBuf *b, const char *s, size_t n);
void json_buf_puts(JsonBuf *b, const char *s);
void json_buf_printf(JsonBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Appends s[0..n) as a quoted JSON string. Escapes '"', '\\' and control characters
// (\b \f \n \r \t, others as \u00XX) and passes other bytes, including UTF-8, through, as
// serde_json (and so the safetensors library) does.
void json_buf_string(JsonBuf *b, const char *s, size_t n);
void json_buf_free(JsonBuf *b);

// Writes the NUL-terminated s to fp as a quoted JSON string, escaped as json_buf_string does.
void json_fput_string(FILE *fp, const char *s);

// Writes one JSON line (text, then '\n', flushed) to fp. JSON has no inf or nan: when printf has
// written a non-finite number into line, nothing is written and err names the key, e.g.
// 'the result "is_mean" is inf, not a finite number (nothing written)'. Every JSON line the
// program prints goes through here.
int json_write_line(FILE *fp, const char *line, MalaErr *err);
// Formats the line with printf's rules, then json_write_line.
int json_printf_line(FILE *fp, MalaErr *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif

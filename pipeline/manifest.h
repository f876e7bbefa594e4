// An ordered list of key -> JSON value (a string, or a number / true / false literal): how a result
// was made (the .json beside an .npz or statistics file, eval's JSON line) and the
// settings a partial sampling run was started with (batch_store.h), which a resumed run must match.
#ifndef MALA_MANIFEST_H
#define MALA_MANIFEST_H

#include <stddef.h>

#include "core/common.h"  // defines: MalaErr
#include "formats/json.h"    // defines: JsonBuf

#define MANIFEST_MAX 48
#define MANIFEST_VAL 600

typedef struct {
    int n;
    char key[MANIFEST_MAX][32];
    char val[MANIFEST_MAX][MANIFEST_VAL];  // the text of a string, or a number's literal
    int is_str[MANIFEST_MAX];
} Manifest;

// Sets key (replacing an earlier value of the same key) to a string, or to a literal written as is.
void manifest_str(Manifest *m, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void manifest_lit(Manifest *m, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Drops key (when present).
void manifest_remove(Manifest *m, const char *key);
// The value of key as text, or NULL.
const char *manifest_value(const Manifest *m, const char *key);
// ,"key":value for every member (to extend an open JSON object).
void manifest_members(const Manifest *m, JsonBuf *b);
// {"key":value,...} and a newline, written atomically.
int manifest_write(const Manifest *m, const char *path, MalaErr *err);
// Reads a file manifest_write wrote into m (string and literal members; others are refused).
int manifest_read(Manifest *m, const char *path, MalaErr *err);
// The members whose values differ between a and b, or that one lacks: "key A (then), B (now); ..."
// into out (a = then, b = now). Returns how many differ.
int manifest_diff(const Manifest *then, const Manifest *now, char *out, size_t cap);

#endif

// Typed access to safetensors __metadata__ (every value is a string there).
// Getters return 0 with *out set, 1 when the key is absent (*out untouched, no error), or -1 with
// err naming the file and the key when the value is malformed.
#ifndef MALA_ST_META_H
#define MALA_ST_META_H

#include <stdint.h>

#include "formats/safetensors.h"

int st_meta_int(const StFile *f, const char *key, int *out, MalaErr *err);  // 0 .. 1e6
int st_meta_u64(const StFile *f, const char *key, uint64_t *out, MalaErr *err);
int st_meta_float(const StFile *f, const char *key, float *out, MalaErr *err);  // finite
int st_meta_bool(const StFile *f, const char *key, int *out, MalaErr *err);     // true/false/1/0
// The key must be present: absent is an error "<file>: metadata '<key>' is missing".
int st_meta_need_int(const StFile *f, const char *key, int *out, MalaErr *err);

void st_writer_meta_int(StWriter *w, const char *key, int v);
void st_writer_meta_u64(StWriter *w, const char *key, uint64_t v);
void st_writer_meta_float(StWriter *w, const char *key, float v);  // %.9g: round-trips exactly
void st_writer_meta_bool(StWriter *w, const char *key, int v);

#endif

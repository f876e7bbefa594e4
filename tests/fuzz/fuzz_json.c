// libFuzzer harness: the strict JSON parser (safetensors headers, metadata values), the helpers
// that read numbers out of a tree, the string writer, and the result-line check.
#include <string.h>

#include "fuzz_util.h"
#include "formats/json.h"

static void walk(const JsonValue *v, JsonBuf *out, int depth) {
    uint64_t u;
    int64_t i;
    json_get_u64(v, &u);
    json_get_i64(v, &i);
    if (v->type == JSON_STRING) json_buf_string(out, v->str, v->len);
    if (v->type == JSON_OBJECT) json_get(v, "dtype");
    for (int k = 0; k < v->n; k++) {
        if (v->items[k].key) json_buf_string(out, v->items[k].key, v->items[k].key_len);
        walk(&v->items[k], out, depth + 1);
    }
    if (depth > JSON_MAX_DEPTH + 1) abort();  // the parser promises a bounded depth
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MalaErr err;
    json_utf8_valid((const char *)data, size);
    JsonValue *v = json_parse((const char *)data, size, &err);
    if (v) {
        JsonBuf out = {0};
        walk(v, &out, 0);
        // what json_buf_string writes parses back to the same bytes
        if (v->type == JSON_STRING) {
            JsonBuf s = {0};
            json_buf_string(&s, v->str, v->len);
            JsonValue *back = json_parse(s.buf, s.len, &err);
            if (!back || back->len != v->len || memcmp(back->str, v->str, v->len)) abort();
            json_free(back);
            json_buf_free(&s);
        }
        json_buf_free(&out);
        json_free(v);
    }
    static FILE *null;
    if (!null) null = fopen("/dev/null", "w");
    char *line = malloc(size + 1);
    memcpy(line, data, size);
    line[size] = 0;
    json_write_line(null, line, &err);
    free(line);
    return 0;
}

// Tests for formats/json.c and formats/safetensors.c: the JSON parser on valid, invalid and fuzzed
// input; F16/BF16 conversions (exhaustive, against the compiler's _Float16 and against PyTorch);
// writer/reader round trips; the PyTorch-written fixtures (tools/ref/make_safetensors_fixtures.py),
// including a byte-for-byte comparison of the writer with the library's layout; every malformed
// file the reader must refuse; st_expect messages; atomic saves and failing saves.
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "formats/atomic_file.h"  // defines: atomic_write_file, atomic_remove_stale, AtomicFile
#include "core/half.h"         // defines: half_to_f32, f32_to_half, bf16_to_f32, f32_to_bf16
#include "formats/json.h"         // defines: json_parse, JsonBuf
#include "formats/safetensors.h"  // defines: st_open, StWriter

#define FIX "tests/fixtures/"

// ---------------------------------------------------------------------------------------------
// Helpers: a temporary directory per test, error assertions, raw file writing.

static char tmpdir[64];

static void tmpdir_setup(void) {
    strcpy(tmpdir, "/tmp/st_test_XXXXXX");
    ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp: %s", strerror(errno));
}

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }
static void tmpdir_teardown(void) { nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

// tmpdir/name, in one of a few rotating buffers so that two can be used in one expression.
static const char *tpath(const char *name) {
    static char bufs[4][256];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, 256, "%s/%s", tmpdir, name);
    return b;
}

// The error names the file first, mentions phrase, and is one line.
static void assert_err(const MalaErr *e, const char *path, const char *phrase) {
    size_t n = strlen(path);
    ck_assert_msg(strncmp(e->msg, path, n) == 0 && e->msg[n] == ':', "error does not start with '%s:': %s", path, e->msg);
    ck_assert_msg(strstr(e->msg, phrase) != NULL, "error \"%s\" lacks \"%s\"", e->msg, phrase);
    ck_assert_msg(strchr(e->msg, '\n') == NULL, "error spans lines: %s", e->msg);
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    ck_assert_msg(fp != NULL, "cannot write %s", path);
    ck_assert(fwrite(data, 1, n, fp) == n);
    ck_assert(fclose(fp) == 0);
}

// A safetensors file: length field len_field, hlen header bytes, ndata data bytes (value 0x11).
static void write_st_raw(const char *path, uint64_t len_field, const char *header, size_t hlen, size_t ndata) {
    size_t n = 8 + hlen + ndata;
    uint8_t *buf = malloc(n);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(len_field >> (8 * i));
    memcpy(buf + 8, header, hlen);
    memset(buf + 8 + hlen, 0x11, ndata);
    write_bytes(path, buf, n);
    free(buf);
}

static void write_st(const char *path, const char *header, size_t ndata) {
    write_st_raw(path, strlen(header), header, strlen(header), ndata);
}

static uint32_t bits32(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
static float from_bits(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }

static float *read_all(const StFile *f, const char *name, int64_t numel) {
    const StTensor *t = st_find(f, name);
    ck_assert_msg(t != NULL, "tensor %s missing", name);
    ck_assert_int_eq(st_numel(t), numel);
    float *v = malloc((size_t)(numel ? numel : 1) * sizeof(float));
    MalaErr err;
    ck_assert_msg(st_read_f32(f, t, v, &err) == 0, "%s", err.msg);
    return v;
}

static void assert_shape(const StTensor *t, StDtype dtype, int ndim, const int64_t *shape) {
    ck_assert_msg(t != NULL, "tensor missing");
    ck_assert_msg(t->dtype == dtype, "%s: dtype %s, expected %s", t->name, st_dtype_name(t->dtype), st_dtype_name(dtype));
    ck_assert_int_eq(t->ndim, ndim);
    for (int i = 0; i < ndim; i++) ck_assert_int_eq(t->shape[i], shape[i]);
}

// ---------------------------------------------------------------------------------------------
// JSON

START_TEST(test_json_valid) {
    const char *doc = " {\"a\": [1, -2.5e3, true, false, null, \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u0000z\"],"
                      " \"b\": {}, \"c\": [], \"\\u6f22\": 0} \r\n\t";
    MalaErr err;
    JsonValue *v = json_parse(doc, strlen(doc), &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    ck_assert_int_eq(v->type, JSON_OBJECT);
    ck_assert_int_eq(v->n, 4);
    const JsonValue *a = json_get(v, "a");
    ck_assert(a && a->type == JSON_ARRAY && a->n == 6);
    ck_assert(a->items[0].type == JSON_NUMBER && a->items[0].number == 1.0);
    ck_assert(a->items[1].number == -2500.0);
    ck_assert(a->items[2].type == JSON_BOOL && a->items[2].boolean == 1);
    ck_assert(a->items[3].type == JSON_BOOL && a->items[3].boolean == 0);
    ck_assert(a->items[4].type == JSON_NULL);
    const char want[] = "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\0z";
    ck_assert_int_eq(a->items[5].len, sizeof want - 1);
    ck_assert(memcmp(a->items[5].str, want, sizeof want) == 0);
    ck_assert(json_get(v, "b")->type == JSON_OBJECT && json_get(v, "b")->n == 0);
    ck_assert(json_get(v, "c")->type == JSON_ARRAY && json_get(v, "c")->n == 0);
    ck_assert(json_get(v, "\xe6\xbc\xa2") != NULL);
    ck_assert(json_get(v, "missing") == NULL);
    ck_assert(json_get(a, "a") == NULL);
    json_free(v);
    ck_assert(json_utf8_valid("caf\xc3\xa9 \xf0\x9f\x98\x80", 10));
    ck_assert(!json_utf8_valid("caf\xc3", 4));
    ck_assert(!json_utf8_valid("\xed\xa0\x80", 3));
}
END_TEST

START_TEST(test_json_integers) {
    struct { const char *text; int u_ok; uint64_t u; int i_ok; int64_t i; } cases[] = {
        {"0", 1, 0, 1, 0},
        {"18446744073709551615", 1, UINT64_MAX, 0, 0},
        {"18446744073709551616", 0, 0, 0, 0},
        {"9223372036854775807", 1, INT64_MAX, 1, INT64_MAX},
        {"-9223372036854775808", 0, 0, 1, INT64_MIN},
        {"-9223372036854775809", 0, 0, 0, 0},
        {"-3", 0, 0, 1, -3},
        {"1.0", 0, 0, 0, 0},
        {"1e2", 0, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        MalaErr err;
        JsonValue *v = json_parse(cases[k].text, strlen(cases[k].text), &err);
        ck_assert_msg(v != NULL, "%s: %s", cases[k].text, err.msg);
        uint64_t u = 0;
        int64_t i = 0;
        ck_assert_msg((json_get_u64(v, &u) == 0) == cases[k].u_ok, "u64 %s", cases[k].text);
        ck_assert_msg((json_get_i64(v, &i) == 0) == cases[k].i_ok, "i64 %s", cases[k].text);
        if (cases[k].u_ok) ck_assert(u == cases[k].u);
        if (cases[k].i_ok) ck_assert(i == cases[k].i);
        json_free(v);
    }
}
END_TEST

START_TEST(test_json_invalid) {
    struct { const char *text; size_t len; const char *phrase; } cases[] = {
        {"", 0, "byte 0: unexpected end of input"},
        {"  ", 2, "byte 2: unexpected end of input"},
        {"{", 1, "expected a string key"},
        {"[1,]", 4, "byte 3: unexpected ']'"},
        {"{\"a\":1,}", 8, "byte 7: expected a string key in object, found '}'"},
        {"{\"a\" 1}", 7, "expected ':'"},
        {"{1:2}", 5, "expected a string key"},
        {"[1 2]", 5, "expected ',' or ']' in array"},
        {"01", 2, "leading zero"},
        {"1.", 2, "after the decimal point"},
        {".5", 2, "unexpected '.'"},
        {"-", 1, "expected a digit"},
        {"1e", 2, "in the exponent"},
        {"+1", 2, "unexpected '+'"},
        {"1e999", 5, "out of range"},
        {"NaN", 3, "unexpected 'N'"},
        {"tru", 3, "unexpected 't'"},
        {"nul", 3, "unexpected 'n'"},
        {"\"abc", 4, "byte 0: unterminated string"},
        {"\"\\x\"", 4, "invalid escape"},
        {"\"\\u12zz\"", 8, "invalid hex digit"},
        {"\"\\u12", 5, "truncated"},
        {"\"\\ud800\"", 8, "not followed by a low surrogate"},
        {"\"\\ud800\\u0041\"", 14, "not followed by a low surrogate"},
        {"\"\\udc00\"", 8, "unpaired low surrogate"},
        {"\"a\tb\"", 5, "control character"},
        {"\"\xc0\xaf\"", 4, "invalid UTF-8"},
        {"\"\xed\xa0\x80\"", 5, "invalid UTF-8"},
        {"\"\xf4\x90\x80\x80\"", 6, "invalid UTF-8"},
        {"\"\xe6\xbc\"", 4, "invalid UTF-8"},
        {"\xef\xbb\xbf{}", 5, "byte 0xef"},
        {"{} {}", 5, "byte 3: unexpected '{' after the JSON value"},
        {"{}\0", 3, "after the JSON value"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        MalaErr err = {{0}};
        JsonValue *v = json_parse(cases[k].text, cases[k].len, &err);
        ck_assert_msg(v == NULL, "case %zu parsed", k);
        ck_assert_msg(strncmp(err.msg, "byte ", 5) == 0 && strstr(err.msg, cases[k].phrase),
                      "case %zu: \"%s\" lacks \"%s\"", k, err.msg, cases[k].phrase);
    }
}
END_TEST

START_TEST(test_json_depth_limit) {
    char buf[2 * 100000];
    MalaErr err;
    for (int depth = JSON_MAX_DEPTH; depth <= JSON_MAX_DEPTH + 1; depth++) {
        memset(buf, '[', (size_t)depth);
        memset(buf + depth, ']', (size_t)depth);
        JsonValue *v = json_parse(buf, 2 * (size_t)depth, &err);
        if (depth == JSON_MAX_DEPTH) { ck_assert_msg(v != NULL, "%s", err.msg); json_free(v); }
        else ck_assert(v == NULL && strstr(err.msg, "nesting deeper than 64 levels"));
    }
    memset(buf, '[', sizeof buf);  // far deeper than the stack would allow without the limit
    ck_assert(json_parse(buf, sizeof buf, &err) == NULL);
}
END_TEST

START_TEST(test_json_writer_round_trip) {
    char raw[64];
    size_t n = 0;
    for (int c = 0; c < 0x20; c++) raw[n++] = (char)c;  // includes NUL
    const char *rest = "\"\\/\x7f\xc3\xa9\xe6\xbc\xa2\xf0\x9f\x98\x80 end";
    memcpy(raw + n, rest, strlen(rest));
    n += strlen(rest);
    JsonBuf b = {0};
    json_buf_string(&b, raw, n);
    ck_assert(strstr(b.buf, "\\u0000\\u0001") && strstr(b.buf, "\\b\\t\\n\\u000b\\f\\r") && strstr(b.buf, "\\\"\\\\/"));
    MalaErr err;
    JsonValue *v = json_parse(b.buf, b.len, &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    ck_assert(v->type == JSON_STRING && v->len == n && memcmp(v->str, raw, n) == 0);
    json_free(v);
    json_buf_free(&b);

    json_buf_printf(&b, "[%d,", 42);
    json_buf_string(&b, "x", 1);
    json_buf_puts(&b, "]");
    ck_assert_str_eq(b.buf, "[42,\"x\"]");
    json_buf_free(&b);

    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    json_fput_string(fp, "a\"b\n");
    fclose(fp);
    ck_assert_str_eq(text, "\"a\\\"b\\n\"");
    free(text);
}
END_TEST

// Random mutations of a valid document and random JSON-ish byte soup: every input must either
// parse or fail with a positioned message (ASan/UBSan builds check the memory side).
START_TEST(test_json_fuzz) {
    const char *seed = "{\"__metadata__\":{\"k\":\"v\\u00e9\"},\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                       "\"data_offsets\":[0,24]},\"a\":[true,false,null,-1.5e-3,\"\\ud83d\\ude00\"]}";
    const char alphabet[] = "{}[]:,\"\\u0123456789abcdefe.-+ \ttrueflsn\xc3\xa9\xff";
    size_t seed_len = strlen(seed);
    char buf[512];
    uint64_t s = 12345;
    int parsed = 0;
    for (int it = 0; it < 30000; it++) {
        size_t n;
        if (it % 3 == 2) {
            n = tu_next(&s) % 64;
            for (size_t i = 0; i < n; i++) buf[i] = alphabet[tu_next(&s) % (sizeof alphabet - 1)];
        } else {
            memcpy(buf, seed, seed_len);
            n = seed_len;
            int edits = 1 + (int)(tu_next(&s) % 4);
            for (int e = 0; e < edits && n > 0; e++) {
                size_t at = tu_next(&s) % n;
                switch (tu_next(&s) % 4) {
                case 0: buf[at] = (char)tu_next(&s); break;
                case 1: buf[at] = alphabet[tu_next(&s) % (sizeof alphabet - 1)]; break;
                case 2: memmove(buf + at, buf + at + 1, n - at - 1); n--; break;
                default: n = at; break;
                }
            }
        }
        MalaErr err = {{0}};
        JsonValue *v = json_parse(buf, n, &err);
        if (v) { parsed++; json_free(v); }
        else if (strncmp(err.msg, "byte ", 5) != 0) ck_abort_msg("unpositioned error: %s", err.msg);
    }
    ck_assert(parsed > 0);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// F16 / BF16 conversions

START_TEST(test_f16_exhaustive_round_trip) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = half_to_f32((uint16_t)h);
        uint16_t back = f32_to_half(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            if (!(isnan(f) && (back & 0x7c00) == 0x7c00 && (back & 0x3ff) && (back & 0x8000) == (h & 0x8000)))
                ck_abort_msg("NaN 0x%04x came back as 0x%04x", h, back);
        } else if (back != h) {
            ck_abort_msg("0x%04x -> %g -> 0x%04x", h, f, back);
        }
    }
    ck_assert(half_to_f32(0x0001) == 0x1p-24f);  // smallest subnormal
    ck_assert(half_to_f32(0x7bff) == 65504.0f);
    ck_assert(half_to_f32(0xfc00) == -INFINITY);
}
END_TEST

// The bulk widening (F16C where built with it) gives half_to_f32's bits for every half, from an
// unaligned source and a length that leaves a tail; a NaN stays a NaN of the same sign.
START_TEST(test_f16_bulk_matches_scalar) {
    const size_t n = 65536 + 5;
    uint8_t *raw = malloc(2 * n + 1);
    float *got = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) raw[1 + 2 * i] = (uint8_t)(i & 0xff), raw[2 + 2 * i] = (uint8_t)((i >> 8) & 0xff);
    half_to_f32_n(raw + 1, got, n);
    for (size_t i = 0; i < n; i++) {
        float want = half_to_f32((uint16_t)(i & 0xffff));
        if (isnan(want)) ck_assert_msg(isnan(got[i]) && signbit(got[i]) == signbit(want), "half 0x%04zx", i & 0xffff);
        else ck_assert_msg(!memcmp(&got[i], &want, 4), "half 0x%04zx: %a, want %a", i & 0xffff, got[i], want);
    }
    free(raw);
    free(got);
}
END_TEST

START_TEST(test_f16_rounding) {
    struct { float f; uint16_t h; } cases[] = {
        {1.0f + 0x1p-11f, 0x3c00},          // tie -> even (down)
        {1.0f + 3 * 0x1p-11f, 0x3c02},      // tie -> even (up)
        {65519.99f, 0x7bff}, {65520.0f, 0x7c00}, {-65520.0f, 0xfc00}, {1e30f, 0x7c00},
        {0x1p-25f, 0x0000}, {-0x1p-25f, 0x8000}, {0x1.000002p-25f, 0x0001},  // subnormal ties
        {3 * 0x1p-25f, 0x0002}, {0x1p-14f - 0x1p-25f, 0x0400}, {-0.0f, 0x8000},
        {INFINITY, 0x7c00}, {-INFINITY, 0xfc00},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        ck_assert_msg(f32_to_half(cases[k].f) == cases[k].h, "%a -> 0x%04x, expected 0x%04x", cases[k].f,
                      f32_to_half(cases[k].f), cases[k].h);
    ck_assert(isnan(half_to_f32(f32_to_half(NAN))));
#ifdef __FLT16_MAX__
    // Against the compiler's conversion (F16C or libgcc; both round to nearest even).
    uint64_t s = 99;
    for (int i = 0; i < 2000000; i++) {
        float f = from_bits((uint32_t)tu_next(&s));
        if (isnan(f)) continue;
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, 2);
        if (f32_to_half(f) != rb) ck_abort_msg("%a -> 0x%04x, _Float16 gives 0x%04x", f, f32_to_half(f), rb);
    }
#endif
}
END_TEST

// Independent bfloat16 reference: the nearer of the two candidates around |f| (computed in
// double), ties to the even one; past the largest finite value the upper candidate is 2^128 (inf).
static uint16_t bf16_reference(float f) {
    uint16_t lo = (uint16_t)(bits32(f) >> 16), hi = (uint16_t)(lo + 1);
    double a = fabs((double)f), lv = fabs((double)from_bits((uint32_t)lo << 16));
    double hv = (hi & 0x7fff) == 0x7f80 ? 0x1p128 : fabs((double)from_bits((uint32_t)hi << 16));
    double dl = a - lv, dh = hv - a;
    return dl < dh || (dl == dh && !(lo & 1)) ? lo : hi;
}

START_TEST(test_bf16_conversions) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        uint16_t back = f32_to_bf16(f);
        if (isnan(f) ? !isnan(bf16_to_f32(back)) || (back & 0x8000) != (h & 0x8000) : back != h)
            ck_abort_msg("0x%04x -> 0x%04x", h, back);
    }
    ck_assert_int_eq(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    ck_assert_int_eq(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    ck_assert_int_eq(f32_to_bf16(3.4e38f), 0x7f80);
    ck_assert_int_eq(f32_to_bf16(-INFINITY), 0xff80);
    uint64_t s = 5;
    for (int i = 0; i < 1000000; i++) {
        float f = from_bits((uint32_t)tu_next(&s));
        if (isnan(f) || isinf(f)) continue;
        if (f32_to_bf16(f) != bf16_reference(f))
            ck_abort_msg("%a -> 0x%04x, reference 0x%04x", f, f32_to_bf16(f), bf16_reference(f));
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Writer -> reader round trip

START_TEST(test_round_trip) {
    float w32[6], w16[12], wbf[8], w64[3];
    tu_fill(w32, 6, -3, 3, 1);
    tu_fill(w16, 12, -100, 100, 2);
    tu_fill(wbf, 8, -1e4f, 1e4f, 3);
    tu_fill(w64, 3, -1, 1, 4);
    w16[0] = INFINITY; w16[1] = -INFINITY; w16[2] = NAN; w16[3] = 1e6f; w16[4] = 1e-7f; w16[5] = -0.0f;
    wbf[0] = NAN; wbf[1] = 3.4e38f; wbf[2] = 1e-40f;
    float wi32[4] = {-2.5f, 3.7f, 1e10f, NAN}, wi64[3] = {-1e12f, 0.5f, 1.5f}, wu8[4] = {-5, 0.5f, 1.5f, 300};
    float wi8[4] = {-300, -1.5f, 2.5f, 127.4f};
    float scalar = 3.25f;
    int64_t s23[] = {2, 3}, s34[] = {3, 4}, s222[] = {2, 2, 2}, s3[] = {3}, s4[] = {4}, s04[] = {0, 4};
    StWriter *w = st_writer_new();
    st_writer_meta(w, "depth", "12");
    st_writer_meta(w, "class_names", "[\"T-shirt/top\",\"Trouser\"]");
    st_writer_meta(w, "note", "line1\nline2 \"q\" \xc3\xa9");
    st_writer_meta(w, "depth", "2");  // replaces, keeps the position
    st_writer_add(w, "blocks.0.attn.qkv.weight", ST_F32, s23, 2, w32);
    st_writer_add(w, "h", ST_F16, s34, 2, w16);
    st_writer_add_copy(w, "b", ST_BF16, s222, 3, wbf);
    wbf[0] = 0;  // the copy is unaffected
    st_writer_add(w, "d", ST_F64, s3, 1, w64);
    st_writer_add(w, "i32", ST_I32, s4, 1, wi32);
    st_writer_add(w, "i64", ST_I64, s3, 1, wi64);
    st_writer_add(w, "u8", ST_U8, s4, 1, wu8);
    st_writer_add(w, "i8", ST_I8, s4, 1, wi8);
    st_writer_add(w, "scalar", ST_F32, NULL, 0, &scalar);
    st_writer_add(w, "empty", ST_F16, s04, 2, NULL);
    const char *path = tpath("rt.safetensors");
    MalaErr err;
    ck_assert_msg(st_writer_save(w, path, &err) == 0, "%s", err.msg);
    st_writer_free(w);
    ck_assert(!exists(tpath("rt.safetensors.tmp")));

    StFile f;
    ck_assert_msg(st_open(&f, path, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(f.n, 10);
    ck_assert_int_eq(f.nmeta, 3);
    ck_assert_str_eq(f.meta_keys[0], "depth");
    ck_assert_str_eq(st_meta(&f, "depth"), "2");
    ck_assert_str_eq(st_meta(&f, "class_names"), "[\"T-shirt/top\",\"Trouser\"]");
    ck_assert_str_eq(st_meta(&f, "note"), "line1\nline2 \"q\" \xc3\xa9");
    ck_assert(st_meta(&f, "nope") == NULL);
    for (int i = 1; i < f.n; i++) ck_assert(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0);

    assert_shape(st_find(&f, "blocks.0.attn.qkv.weight"), ST_F32, 2, s23);
    float *v = read_all(&f, "blocks.0.attn.qkv.weight", 6);
    ck_assert(memcmp(v, w32, sizeof w32) == 0);
    free(v);

    assert_shape(st_find(&f, "h"), ST_F16, 2, s34);
    v = read_all(&f, "h", 12);
    for (int i = 0; i < 12; i++) {
        float want = half_to_f32(f32_to_half(w16[i]));
        ck_assert_msg(isnan(want) ? isnan(v[i]) : bits32(v[i]) == bits32(want), "h[%d]", i);
        if (i >= 6) ck_assert(fabsf(v[i] - w16[i]) <= fabsf(w16[i]) * 0x1p-11f);
    }
    ck_assert(v[0] == INFINITY && v[1] == -INFINITY && isnan(v[2]) && v[3] == INFINITY && v[4] > 0 && signbit(v[5]));
    free(v);

    assert_shape(st_find(&f, "b"), ST_BF16, 3, s222);
    v = read_all(&f, "b", 8);
    ck_assert(isnan(v[0]) && v[1] == INFINITY && v[2] > 0);
    for (int i = 3; i < 8; i++) ck_assert(fabsf(v[i] - wbf[i]) <= fabsf(wbf[i]) * 0x1p-8f);
    free(v);

    v = read_all(&f, "d", 3);
    ck_assert(memcmp(v, w64, sizeof w64) == 0);
    free(v);
    v = read_all(&f, "i32", 4);
    ck_assert(v[0] == -2 && v[1] == 4 && v[2] == 2147483647.0f && v[3] == 0);
    free(v);
    v = read_all(&f, "i64", 3);
    ck_assert(v[0] == -1e12f && v[1] == 0 && v[2] == 2);
    free(v);
    v = read_all(&f, "u8", 4);
    ck_assert(v[0] == 0 && v[1] == 0 && v[2] == 2 && v[3] == 255);
    free(v);
    v = read_all(&f, "i8", 4);  // (nearest, ties to even, saturating)
    ck_assert(v[0] == -128 && v[1] == -2 && v[2] == 2 && v[3] == 127);
    free(v);
    ck_assert_int_eq(st_find(&f, "i8")->end, st_find(&f, "u8")->begin);  // I8 just before U8
    ck_assert_int_eq(st_find(&f, "scalar")->ndim, 0);
    v = read_all(&f, "scalar", 1);
    ck_assert(v[0] == 3.25f);
    free(v);
    assert_shape(st_find(&f, "empty"), ST_F16, 2, s04);
    ck_assert_int_eq(st_numel(st_find(&f, "empty")), 0);

    // The library's layout: 8-aligned data, I64 first, then F64, F32 (by name), ... I8, U8 last.
    ck_assert_int_eq((f.data - (const uint8_t *)f.map) % 8, 0);
    ck_assert_int_eq(st_find(&f, "i64")->begin, 0);
    ck_assert_int_eq(st_find(&f, "d")->begin, 24);
    ck_assert_int_eq(st_find(&f, "blocks.0.attn.qkv.weight")->begin, 48);
    ck_assert_int_eq(st_find(&f, "u8")->end, f.data_len);
    st_close(&f);
    st_close(&f);  // closing twice is harmless
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Python-written fixtures

START_TEST(test_python_fixture) {
    const char *path = FIX "st_valid.safetensors";
    StFile f;
    MalaErr err;
    free(tu_read_file(path, NULL));  // a clear failure when the fixture is absent
    ck_assert_msg(st_open(&f, path, &err) == 0, "%s", err.msg);
    const char *meta[][2] = {{"depth", "2"}, {"hidden", "64"}, {"heads", "2"}, {"patch", "2"}, {"image_size", "32"},
                             {"in_channels", "1"}, {"num_classes", "10"}, {"learn_sigma", "true"}, {"rope", "true"},
                             {"gate", "false"}, {"lepe", "5"}, {"attn", "mala"}, {"step", "1234"}};
    for (size_t k = 0; k < sizeof meta / sizeof meta[0]; k++) {
        ck_assert_msg(st_meta(&f, meta[k][0]) != NULL, "metadata %s missing", meta[k][0]);
        ck_assert_str_eq(st_meta(&f, meta[k][0]), meta[k][1]);
    }
    ck_assert_str_eq(st_meta(&f, "note"), "quote \" backslash \\ newline \n tab \t e-acute \xc3\xa9 han \xe6\xbc\xa2 "
                                          "emoji \xf0\x9f\x98\x80");
    const char *names = st_meta(&f, "class_names");
    JsonValue *cn = json_parse(names, strlen(names), &err);
    ck_assert_msg(cn != NULL, "%s", err.msg);
    ck_assert(cn->type == JSON_ARRAY && cn->n == 10);
    ck_assert_str_eq(cn->items[0].str, "T-shirt/top");
    ck_assert_str_eq(cn->items[9].str, "Ankle boot");
    json_free(cn);

    int64_t s4122[] = {4, 1, 2, 2}, s03[] = {0, 3};
    assert_shape(st_find(&f, "x_embedder.proj.weight"), ST_F32, 4, s4122);
    float *v = read_all(&f, "x_embedder.proj.weight", 16);
    for (int i = 0; i < 16; i++) ck_assert(v[i] == i * 0.25f - 2);
    free(v);
    const char *pairs[][2] = {{"w.f16", "w.f16.ref"}, {"w.bf16", "w.bf16.ref"}, {"w.f64", "w.f64.ref"}};
    StDtype dtypes[] = {ST_F16, ST_BF16, ST_F64};
    for (int k = 0; k < 3; k++) {
        const StTensor *t = st_find(&f, pairs[k][0]);
        ck_assert(t && t->dtype == dtypes[k]);
        int64_t n = st_numel(t);
        float *got = read_all(&f, pairs[k][0], n), *ref = read_all(&f, pairs[k][1], n);
        ck_assert_msg(memcmp(got, ref, (size_t)n * 4) == 0, "%s differs from PyTorch's .float()", pairs[k][0]);
        free(got);
        free(ref);
    }
    v = read_all(&f, "labels", 3);
    ck_assert(st_find(&f, "labels")->dtype == ST_I64 && v[0] == 3 && v[1] == -1 && v[2] == 9);
    free(v);
    v = read_all(&f, "idx", 2);
    ck_assert(st_find(&f, "idx")->dtype == ST_I32 && v[0] == 7 && v[1] == -8);
    free(v);
    v = read_all(&f, "mask", 4);
    ck_assert(st_find(&f, "mask")->dtype == ST_U8 && v[0] == 0 && v[1] == 1 && v[2] == 255 && v[3] == 128);
    free(v);
    v = read_all(&f, "scalar", 1);
    ck_assert(st_find(&f, "scalar")->ndim == 0 && v[0] == 3.5f);
    free(v);
    assert_shape(st_find(&f, "empty"), ST_F32, 2, s03);

    // Our F16/BF16 rounding agrees with PyTorch's on ties, subnormals, overflow and random bits.
    const StTensor *src = st_find(&f, "conv.src"), *h = st_find(&f, "conv.f16"), *b = st_find(&f, "conv.bf16");
    ck_assert(src && h && b && h->dtype == ST_F16 && b->dtype == ST_BF16);
    int64_t n = st_numel(src);
    ck_assert(n > 200 && st_numel(h) == n && st_numel(b) == n);
    float *x = read_all(&f, "conv.src", n);
    for (int64_t i = 0; i < n; i++) {
        uint16_t th, tb;
        memcpy(&th, (const uint8_t *)st_data(&f, h) + 2 * i, 2);
        memcpy(&tb, (const uint8_t *)st_data(&f, b) + 2 * i, 2);
        if (isnan(x[i])) {
            ck_assert(isnan(half_to_f32(th)) && isnan(half_to_f32(f32_to_half(x[i]))));
            ck_assert(isnan(bf16_to_f32(tb)) && isnan(bf16_to_f32(f32_to_bf16(x[i]))));
        } else {
            ck_assert_msg(f32_to_half(x[i]) == th, "F16 of %a: 0x%04x, PyTorch 0x%04x", x[i], f32_to_half(x[i]), th);
            ck_assert_msg(f32_to_bf16(x[i]) == tb, "BF16 of %a: 0x%04x, PyTorch 0x%04x", x[i], f32_to_bf16(x[i]), tb);
        }
    }
    free(x);
    st_close(&f);
}
END_TEST

// The writer reproduces the library's layout byte for byte (fixture written by the Python tool).
START_TEST(test_writer_matches_python_layout) {
    size_t want_len, got_len;
    uint8_t *want = tu_read_file(FIX "st_layout.safetensors", &want_len);
    float ar[6];
    for (int i = 0; i < 6; i++) ar[i] = i * 0.5f - 1.25f;
    float e[] = {-3, 4}, fu[] = {0, 7, 255}, g[] = {-9}, s = 2.25f;
    int64_t s23[] = {2, 3}, s3[] = {3}, s22[] = {2, 2}, s2[] = {2}, s1[] = {1}, s20[] = {2, 0};
    StWriter *w = st_writer_new();
    st_writer_meta(w, "format", "pt");
    st_writer_meta(w, "note", "caf\xc3\xa9 \"x\"\n");
    st_writer_add(w, "z", ST_F32, s20, 2, NULL);  // added out of order on purpose
    st_writer_add(w, "s", ST_F32, NULL, 0, &s);
    st_writer_add(w, "g", ST_I32, s1, 1, g);
    st_writer_add(w, "f", ST_U8, s3, 1, fu);
    st_writer_add(w, "e", ST_I64, s2, 1, e);
    st_writer_add(w, "d", ST_F64, s2, 1, ar);
    st_writer_add(w, "c", ST_BF16, s22, 2, ar);
    st_writer_add(w, "b", ST_F32, s3, 1, ar);
    st_writer_add(w, "a", ST_F16, s23, 2, ar);
    MalaErr err;
    ck_assert_msg(st_writer_save(w, tpath("layout.safetensors"), &err) == 0, "%s", err.msg);
    st_writer_free(w);
    uint8_t *got = tu_read_file(tpath("layout.safetensors"), &got_len);
    size_t first = 0;
    while (first < want_len && first < got_len && want[first] == got[first]) first++;
    ck_assert_msg(got_len == want_len && first == want_len, "sizes %zu vs %zu, first difference at byte %zu", got_len,
                  want_len, first);
    free(want);
    free(got);
}
END_TEST

START_TEST(test_unordered_fixture) {
    StFile f;
    MalaErr err;
    free(tu_read_file(FIX "st_unordered.safetensors", NULL));
    ck_assert_msg(st_open(&f, FIX "st_unordered.safetensors", &err) == 0, "%s", err.msg);
    ck_assert_int_eq(f.n, 3);
    ck_assert_str_eq(f.tensors[0].name, "alpha");
    ck_assert_str_eq(st_meta(&f, "order"), "shuffled");
    float *a = read_all(&f, "alpha", 2), *b = read_all(&f, "beta", 3), *g = read_all(&f, "gamma", 1);
    ck_assert(a[0] == 1 && a[1] == 2 && b[0] == 3 && b[1] == 4 && b[2] == 5 && g[0] == 6);
    free(a);
    free(b);
    free(g);
    st_close(&f);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Malformed files

typedef struct { const char *name, *header; size_t ndata; const char *phrase; } BadCase;

#define T1(dtype, shape, offsets) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offsets "}"
static const BadCase BAD[] = {
    {"bad_json", "{\"a\":", 0, "header is not valid JSON (byte 5: unexpected end of input"},
    {"not_object", "[1,2]", 0, "header is a list, expected a JSON object"},
    {"entry_not_object", "{\"a\":3}", 0, "tensor 'a': entry is a number, expected an object"},
    {"missing_dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a' is missing its 'dtype' field"},
    {"missing_shape", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a' is missing its 'shape' field"},
    {"missing_offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a' is missing its 'data_offsets' field"},
    {"dtype_number", "{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "'dtype' is a number, expected a string"},
    {"shape_string", "{\"a\":" T1("F32", "\"1\"", "[0,4]") "}", 4, "'shape' is a string, expected a list"},
    {"offsets_object", "{\"a\":" T1("F32", "[1]", "{}") "}", 4, "'data_offsets' is an object, expected a list"},
    {"duplicate_field", "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     "tensor 'a' has more than one 'dtype' field"},
    {"unknown_dtype", "{\"a\":" T1("F128", "[1]", "[0,4]") "}", 4, "tensor 'a' has unsupported dtype 'F128'"},
    {"unsupported_dtype", "{\"a\":" T1("I16", "[2]", "[0,4]") "}", 4, "unsupported dtype 'I16'"},
    {"shape_float", "{\"a\":" T1("F32", "[2.5]", "[0,4]") "}", 4, "shape entry 2.5 is not an integer"},
    {"shape_exponent", "{\"a\":" T1("F32", "[1e0]", "[0,4]") "}", 4, "shape entry 1e0 is not an integer"},
    {"shape_entry_string", "{\"a\":" T1("F32", "[\"1\"]", "[0,4]") "}", 4, "shape entry 0 is a string"},
    {"shape_past_int64", "{\"a\":" T1("F32", "[9223372036854775808]", "[0,4]") "}", 4, "not an integer in range"},
    {"negative_dim", "{\"a\":" T1("F32", "[-1,3]", "[0,0]") "}", 0, "tensor 'a' has a negative dimension (-1)"},
    {"huge_dims", "{\"a\":" T1("F32", "[4294967296,4294967296,4294967296]", "[0,4]") "}", 4,
     "shape [4294967296,4294967296,4294967296] is too large"},
    {"huge_bytes", "{\"a\":" T1("F64", "[2305843009213693952]", "[0,8]") "}", 8, "is too large"},
    {"too_many_dims", "{\"a\":" T1("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, "9 dimensions, at most 8"},
    {"size_mismatch", "{\"a\":" T1("F32", "[2,3]", "[0,20]") "}", 20,
     "shape [2,3] of F32 needs 24 bytes but data_offsets [0,20] cover 20"},
    {"past_end", "{\"a\":" T1("F32", "[2,3]", "[0,24]") "}", 16, "run past the end of the data area (16 bytes)"},
    {"past_end_huge", "{\"a\":" T1("U8", "[15]", "[18446744073709551600,18446744073709551615]") "}", 16,
     "run past the end of the data area (16 bytes)"},
    {"offsets_past_u64", "{\"a\":" T1("U8", "[16]", "[18446744073709551600,18446744073709551616]") "}", 16,
     "data_offsets must be a list of two non-negative integers"},
    {"reversed", "{\"a\":" T1("F32", "[1]", "[8,4]") "}", 8, "data_offsets [8,4] end before they begin"},
    {"offsets_one", "{\"a\":" T1("F32", "[1]", "[4]") "}", 4, "data_offsets must be a list of two"},
    {"offsets_negative", "{\"a\":" T1("F32", "[1]", "[-4,0]") "}", 4, "data_offsets must be a list of two non-negative"},
    {"overlap", "{\"a\":" T1("F32", "[4]", "[0,16]") ",\"b\":" T1("F32", "[4]", "[8,24]") "}", 24,
     "tensors 'a' (data_offsets [0,16]) and 'b' (data_offsets [8,24]) overlap"},
    {"same_range", "{\"a\":" T1("F32", "[2]", "[0,8]") ",\"b\":" T1("I32", "[2]", "[0,8]") "}", 8, "overlap"},
    {"gap", "{\"a\":" T1("F32", "[2]", "[0,8]") ",\"b\":" T1("F32", "[2]", "[16,24]") "}", 24,
     "data bytes [8,16) belong to no tensor (a gap before tensor 'b')"},
    {"trailing_data", "{\"a\":" T1("F32", "[2]", "[0,8]") "}", 16, "data bytes [8,16) belong to no tensor"},
    {"meta_not_string", "{\"__metadata__\":{\"depth\":12}}", 0,
     "__metadata__ value for key 'depth' is a number, expected a string"},
    {"meta_not_object", "{\"__metadata__\":\"x\"}", 0, "__metadata__ is a string, expected an object"},
    {"meta_twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "more than one __metadata__"},
    {"meta_duplicate_key", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, "duplicate __metadata__ key 'k'"},
    {"meta_nul", "{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, "contains a NUL character"},
    {"duplicate_name", "{\"a\":" T1("F32", "[1]", "[0,4]") ",\"a\":" T1("F32", "[1]", "[4,8]") "}", 8,
     "duplicate tensor name 'a'"},
    {"nul_name", "{\"a\\u0000b\":" T1("F32", "[1]", "[0,4]") "}", 4, "contains a NUL character"},
    {"control_in_name", "{\"a\\nb\":" T1("X", "[1]", "[0,4]") "}", 4, "tensor 'a?b' has unsupported dtype 'X'"},
    {"bad_utf8", "{\"a\xff\":1}", 0, "invalid UTF-8"},
    {"lone_surrogate", "{\"\\ud800\":1}", 0, "surrogate"},
    {"trailing_comma", "{\"a\":" T1("F32", "[1]", "[0,4]") ",}", 4, "expected a string key"},
};

START_TEST(test_malformed_headers) {
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; k++) {
        char name[128];
        snprintf(name, sizeof name, "%s.safetensors", BAD[k].name);
        const char *path = tpath(name);
        write_st(path, BAD[k].header, BAD[k].ndata);
        StFile f;
        MalaErr err = {{0}};
        ck_assert_msg(st_open(&f, path, &err) != 0, "%s was accepted", BAD[k].name);
        assert_err(&err, path, BAD[k].phrase);
        ck_assert(f.map == NULL && f.tensors == NULL && f.path == NULL);
        st_close(&f);
    }
}
END_TEST

START_TEST(test_malformed_files) {
    StFile f;
    MalaErr err;
    const char *path = tpath("short.safetensors");
    write_bytes(path, "\x05\0\0\0\0", 5);
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "file is 5 bytes, shorter than 8 bytes");

    path = tpath("empty.safetensors");
    write_bytes(path, "", 0);
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "file is 0 bytes, shorter than 8 bytes");

    path = tpath("past_end.safetensors");
    write_st_raw(path, 99999, "{}      ", 8, 4);
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "header length 99999 runs past the end of the file (20 bytes)");

    path = tpath("past_end_u64.safetensors");
    write_st_raw(path, UINT64_MAX, "{}      ", 8, 0);
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "header length 18446744073709551615 runs past the end of the file");

    // Over the library's 100 MB header limit, in a sparse file that really is that long.
    path = tpath("huge_header.safetensors");
    write_st_raw(path, ST_MAX_HEADER_LEN + 8ull, "{}", 2, 0);
    ck_assert(truncate(path, 8 + ST_MAX_HEADER_LEN + 8) == 0);
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "header length 100000008 exceeds the limit of 100000000 bytes");

    path = tpath("nul_padding.safetensors");
    write_st_raw(path, 8, "{}\0\0\0\0\0\0", 8, 0);
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "after the JSON value");

    char deep[200];
    memset(deep, '[', sizeof deep);
    path = tpath("deep.safetensors");
    write_st_raw(path, sizeof deep, deep, sizeof deep, 0);
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "nesting deeper than 64 levels");

    path = tpath("missing.safetensors");
    ck_assert(st_open(&f, path, &err) != 0);
    assert_err(&err, path, "cannot open: No such file or directory");

    ck_assert(st_open(&f, tmpdir, &err) != 0);
    assert_err(&err, tmpdir, "not a regular file");

    // An empty file with only "{}" is valid: no tensors, no metadata.
    path = tpath("no_tensors.safetensors");
    write_st(path, "{}      ", 0);
    ck_assert_msg(st_open(&f, path, &err) == 0, "%s", err.msg);
    ck_assert(f.n == 0 && f.nmeta == 0 && st_find(&f, "x") == NULL);
    st_close(&f);
}
END_TEST

// Random corruption of a valid file: st_open must accept it (and then reading every tensor must
// be safe) or refuse it with an error naming the file.
START_TEST(test_open_fuzz) {
    size_t len;
    uint8_t *good = tu_read_file(FIX "st_layout.safetensors", &len);
    uint8_t *buf = malloc(len);
    float *dst = malloc(len * sizeof(float));
    const char *path = tpath("fuzz.safetensors");
    uint64_t s = 777;
    int accepted = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, good, len);
        size_t n = len;
        int edits = 1 + (int)(tu_next(&s) % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = tu_next(&s) % (it % 4 == 0 ? 8 : len);  // sometimes the length field
            if (tu_next(&s) % 8 == 0) n = at;
            else buf[at] = (uint8_t)tu_next(&s);
        }
        unlink(path);  // a fresh file: truncating one in place makes ext4 flush it on close
        write_bytes(path, buf, n);
        StFile f;
        MalaErr err = {{0}};
        if (st_open(&f, path, &err) == 0) {
            accepted++;
            for (int i = 0; i < f.n; i++)
                if ((size_t)st_numel(&f.tensors[i]) > len || st_read_f32(&f, &f.tensors[i], dst, &err) != 0)
                    ck_abort_msg("accepted tensor %d is unreadable", i);
            st_close(&f);
        } else if (strncmp(err.msg, path, strlen(path)) != 0 || strchr(err.msg, '\n')) {
            ck_abort_msg("bad error: %s", err.msg);
        }
    }
    ck_assert(accepted > 0);
    free(good);
    free(buf);
    free(dst);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// st_expect / st_load_f32

START_TEST(test_expect_messages) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t s23[] = {2, 3}, s32[] = {3, 2}, s6[] = {6};
    StWriter *w = st_writer_new();
    st_writer_add(w, "w", ST_F32, s23, 2, x);
    const char *path = tpath("expect.safetensors");
    MalaErr err;
    ck_assert_msg(st_writer_save(w, path, &err) == 0, "%s", err.msg);
    st_writer_free(w);
    StFile f;
    ck_assert_msg(st_open(&f, path, &err) == 0, "%s", err.msg);
    ck_assert(st_expect(&f, "w", s23, 2, &err) == 0);

    char want[512];
    ck_assert(st_expect(&f, "nope", s23, 2, &err) != 0);
    snprintf(want, sizeof want, "%s: tensor 'nope' is missing", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert(st_expect(&f, "w", s32, 2, &err) != 0);
    snprintf(want, sizeof want, "%s: tensor 'w' has shape [2,3], the model expects [3,2]", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert(st_expect(&f, "w", s6, 1, &err) != 0);
    snprintf(want, sizeof want, "%s: tensor 'w' has shape [2,3], the model expects [6]", path);
    ck_assert_str_eq(err.msg, want);

    float y[6] = {0};
    ck_assert(st_load_f32(&f, "w", s32, 2, y, &err) != 0);
    ck_assert(y[0] == 0);
    ck_assert_msg(st_load_f32(&f, "w", s23, 2, y, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(x, y, sizeof x) == 0);
    st_close(&f);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Saving: atomicity and failures

static StWriter *small_writer(const float *x, int64_t n) {
    StWriter *w = st_writer_new();
    st_writer_meta(w, "step", "1");
    st_writer_add(w, "x", ST_F32, &n, 1, x);
    return w;
}

START_TEST(test_save_missing_dir_and_directory_target) {
    float x[4] = {1, 2, 3, 4};
    StWriter *w = small_writer(x, 4);
    MalaErr err;
    const char *path = tpath("no/such/dir/ckpt.safetensors");
    ck_assert(st_writer_save(w, path, &err) != 0);
    assert_err(&err, path, "cannot create");
    assert_err(&err, path, "No such file or directory");

    ck_assert(mkdir(tpath("adir"), 0755) == 0);
    path = tpath("adir");
    ck_assert(st_writer_save(w, path, &err) != 0);
    assert_err(&err, path, "cannot rename");
    ck_assert(!exists(tpath("adir.tmp")));

    // A save over an existing file replaces it and leaves no temporary behind.
    path = tpath("ckpt.safetensors");
    ck_assert_msg(st_writer_save(w, path, &err) == 0, "%s", err.msg);
    x[0] = 42;
    ck_assert_msg(st_writer_save(w, path, &err) == 0, "%s", err.msg);
    ck_assert(!exists(tpath("ckpt.safetensors.tmp")));
    StFile f;
    ck_assert_msg(st_open(&f, path, &err) == 0, "%s", err.msg);
    float *v = read_all(&f, "x", 4);
    ck_assert(v[0] == 42);
    free(v);
    st_close(&f);
    st_writer_free(w);
}
END_TEST

// formats/atomic_file: the one writer behind every file this program saves.
START_TEST(test_atomic_file) {
    MalaErr err;
    const char *path = tpath("a.bin");
    ck_assert_msg(atomic_write_file(path, "hello", 5, &err) == 0, "%s", err.msg);
    ck_assert(!exists(tpath("a.bin.tmp")));
    size_t n;
    char *b = tu_read_file(path, &n);
    ck_assert(n == 5 && !memcmp(b, "hello", 5));
    free(b);
    // a stale temporary file of a killed writer is truncated by the next save of the same path
    FILE *f = fopen(tpath("a.bin.tmp"), "wb");
    ck_assert(f && fwrite("0123456789", 1, 10, f) == 10 && fclose(f) == 0);
    ck_assert_msg(atomic_write_file(path, "hi", 2, &err) == 0, "%s", err.msg);
    b = tu_read_file(path, &n);
    ck_assert(n == 2 && !memcmp(b, "hi", 2) && !exists(tpath("a.bin.tmp")));
    free(b);
    // an abort leaves the old file and no temporary file
    AtomicFile af;
    ck_assert_int_eq(atomic_open(&af, path, &err), 0);
    atomic_put(&af, "partial", 7);
    atomic_abort(&af);
    b = tu_read_file(path, &n);
    ck_assert(n == 2 && !exists(tpath("a.bin.tmp")));
    free(b);
    ck_assert_int_ne(atomic_write_file(tpath("none/a.bin"), "x", 1, &err), 0);
    assert_err(&err, tpath("none/a.bin"), "cannot create");
    // stale checkpoints: regular *.safetensors.tmp files go; other names, directories and FIFOs stay
    ck_assert(mkdir(tpath("ck"), 0755) == 0);
    const char *files[] = {"ck/0000001.safetensors.tmp", "ck/0000002.safetensors.tmp", "ck/0000003.safetensors",
                           "ck/x.npz.tmp", "ck/safetensors.tmp"};
    for (int i = 0; i < 5; i++) {
        f = fopen(tpath(files[i]), "wb");
        ck_assert(f && fclose(f) == 0);
    }
    ck_assert(mkdir(tpath("ck/d.safetensors.tmp"), 0755) == 0);
    ck_assert(mkfifo(tpath("ck/p.safetensors.tmp"), 0644) == 0);
    ck_assert_int_eq(atomic_remove_stale(tpath("ck"), ".safetensors", &err), 2);
    ck_assert(!exists(tpath(files[0])) && !exists(tpath(files[1])));
    for (int i = 2; i < 5; i++) ck_assert_msg(exists(tpath(files[i])), "%s was removed", files[i]);
    ck_assert(exists(tpath("ck/d.safetensors.tmp")) && exists(tpath("ck/p.safetensors.tmp")));
    ck_assert_int_eq(atomic_remove_stale(tpath("ck"), ".safetensors", &err), 0);
    ck_assert_int_eq(atomic_remove_stale(tpath("nowhere"), ".safetensors", &err), -1);
    assert_err(&err, tpath("nowhere"), "cannot read directory");
}
END_TEST

START_TEST(test_write_to_full_device) {
    FILE *fp = fopen("/dev/full", "wb");
    if (!fp) return;  // no /dev/full here; the RLIMIT_FSIZE test covers the save path
    enum { N = 100000 };
    float *x = calloc(N, sizeof(float));
    StWriter *w = small_writer(x, N);
    MalaErr err;
    ck_assert(st_writer_write(w, fp, "/dev/full", &err) != 0);
    assert_err(&err, "/dev/full", "write failed: No space left on device");
    fclose(fp);
    st_writer_free(w);
    free(x);
}
END_TEST

// A disk that fills up mid-save (simulated with RLIMIT_FSIZE): the save fails with a clear
// message, the previous checkpoint at the same path survives intact, no .tmp is left.
START_TEST(test_save_disk_full_keeps_old_file) {
    float old[4] = {7, 7, 7, 7};
    StWriter *w = small_writer(old, 4);
    const char *path = tpath("ckpt.safetensors");
    MalaErr err;
    ck_assert_msg(st_writer_save(w, path, &err) == 0, "%s", err.msg);
    st_writer_free(w);

    enum { N = 1 << 20 };
    float *big = calloc(N, sizeof(float));
    w = small_writer(big, N);
    struct rlimit saved, lim;
    getrlimit(RLIMIT_FSIZE, &saved);
    lim = saved;
    lim.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    int rc = st_writer_save(w, path, &err);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, prev);
    ck_assert(rc != 0);
    assert_err(&err, path, "write failed: File too large");
    ck_assert(!exists(tpath("ckpt.safetensors.tmp")));

    StFile f;
    ck_assert_msg(st_open(&f, path, &err) == 0, "%s", err.msg);
    float *v = read_all(&f, "x", 4);
    ck_assert(v[0] == 7 && v[3] == 7);
    free(v);
    st_close(&f);
    st_writer_free(w);
    free(big);
}
END_TEST

START_TEST(test_writer_mistakes) {
    float x[2] = {1, 2};
    int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 2}, sneg[] = {-2}, s2[] = {2};
    struct { const char *phrase; int kind; } cases[] = {
        {"cannot save: tensor 'x' has 9 dimensions, at most 8", 0},
        {"cannot save: tensor 'x' has a negative dimension", 1},
        {"cannot save: tensor 'x' was added twice", 2},
        {"cannot save: tensor 'x' was added without data", 3},
        {"cannot save: tensor name 'x\xff' is not valid UTF-8", 4},
        {"cannot save: __metadata__ entry 'k' is not valid UTF-8", 5},
    };
    for (int k = 0; k < 6; k++) {
        StWriter *w = st_writer_new();
        if (cases[k].kind == 0) st_writer_add(w, "x", ST_F32, s9, 9, x);
        if (cases[k].kind == 1) st_writer_add(w, "x", ST_F32, sneg, 1, x);
        if (cases[k].kind == 2) { st_writer_add(w, "x", ST_F32, s2, 1, x); st_writer_add(w, "x", ST_F16, s2, 1, x); }
        if (cases[k].kind == 3) st_writer_add(w, "x", ST_F32, s2, 1, NULL);
        if (cases[k].kind == 4) st_writer_add(w, "x\xff", ST_F32, s2, 1, x);
        if (cases[k].kind == 5) st_writer_meta(w, "k", "caf\xc3");
        const char *path = tpath("mistake.safetensors");
        MalaErr err;
        ck_assert(st_writer_save(w, path, &err) != 0);
        assert_err(&err, path, cases[k].phrase);
        ck_assert(!exists(path) && !exists(tpath("mistake.safetensors.tmp")));
        st_writer_free(w);
    }
}
END_TEST

static Suite *safetensors_suite(void) {
    Suite *s = suite_create("safetensors");
    TCase *json = tcase_create("json");
    tcase_add_test(json, test_json_valid);
    tcase_add_test(json, test_json_integers);
    tcase_add_test(json, test_json_invalid);
    tcase_add_test(json, test_json_depth_limit);
    tcase_add_test(json, test_json_writer_round_trip);
    tcase_add_test(json, test_json_fuzz);
    tcase_set_timeout(json, 60);
    suite_add_tcase(s, json);

    TCase *conv = tcase_create("conversions");
    tcase_add_test(conv, test_f16_exhaustive_round_trip);
    tcase_add_test(conv, test_f16_bulk_matches_scalar);
    tcase_add_test(conv, test_f16_rounding);
    tcase_add_test(conv, test_bf16_conversions);
    tcase_set_timeout(conv, 60);
    suite_add_tcase(s, conv);

    TCase *io = tcase_create("files");
    tcase_add_checked_fixture(io, tmpdir_setup, tmpdir_teardown);
    tcase_add_test(io, test_round_trip);
    tcase_add_test(io, test_python_fixture);
    tcase_add_test(io, test_writer_matches_python_layout);
    tcase_add_test(io, test_unordered_fixture);
    tcase_add_test(io, test_malformed_headers);
    tcase_add_test(io, test_malformed_files);
    tcase_add_test(io, test_open_fuzz);
    tcase_add_test(io, test_expect_messages);
    tcase_add_test(io, test_save_missing_dir_and_directory_target);
    tcase_add_test(io, test_write_to_full_device);
    tcase_add_test(io, test_atomic_file);
    tcase_add_test(io, test_save_disk_full_keeps_old_file);
    tcase_add_test(io, test_writer_mistakes);
    tcase_set_timeout(io, 60);
    suite_add_tcase(s, io);
    return s;
}

int main(void) { return tu_run(safetensors_suite()); }

// .npy / .npz: numpy-written fixtures (tools/ref/make_npy_fixtures.py), round trips, byte-identical
// headers, atomic and checked writes, and malformed files (every truncation, byte flips).
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "formats/npy.h"

#define FIX "tests/fixtures/"

static void tmp_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", tu_tmp, name); }

static void write_bytes(const char *p, const void *b, size_t n) {
    unlink(p);   // a fresh inode: ext4 flushes files truncated and rewritten in place (slow)
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static void load_ok(const char *p, NpyArray *a) {
    MalaErr err = {{0}};
    ck_assert_msg(npy_load(p, a, &err) == 0, "npy_load %s: %s", p, err.msg);
}
static void npz_ok(const char *p, const char *key, NpyArray *a) {
    MalaErr err = {{0}};
    ck_assert_msg(npz_load(p, key, a, &err) == 0, "npz_load %s %s: %s", p, key, err.msg);
}

// ---------------------------------------------------------------------------------------------
// numpy-written files

START_TEST(read_numpy_npy) {
    NpyArray a;
    load_ok(FIX "npy_f32.npy", &a);
    ck_assert_str_eq(a.dtype, "<f4");
    ck_assert_int_eq(a.ndim, 2); ck_assert_int_eq(a.shape[0], 3); ck_assert_int_eq(a.shape[1], 4);
    ck_assert_uint_eq(a.nbytes, 48);
    for (int i = 0; i < 12; i++) ck_assert_float_eq(((float *)a.data)[i], i * 0.25f - 1.0f);
    npy_free(&a);

    load_ok(FIX "npy_f64.npy", &a);
    ck_assert_str_eq(a.dtype, "<f8");
    ck_assert_int_eq(a.ndim, 3); ck_assert_int_eq(a.shape[2], 2);
    for (int i = 0; i < 12; i++) ck_assert_double_eq(((double *)a.data)[i], i / 3.0);
    npy_free(&a);

    load_ok(FIX "npy_i4.npy", &a);
    ck_assert_str_eq(a.dtype, "<i4");
    int32_t i4[] = { -5, 0, 7, 2147483647 };
    ck_assert_int_eq(a.shape[0], 4);
    ck_assert_mem_eq(a.data, i4, sizeof i4);
    npy_free(&a);

    load_ok(FIX "npy_i8.npy", &a);
    int64_t i8[] = { -(1LL << 40), 3, 1LL << 62 };
    ck_assert_str_eq(a.dtype, "<i8");
    ck_assert_mem_eq(a.data, i8, sizeof i8);
    npy_free(&a);

    load_ok(FIX "npy_u8.npy", &a);
    ck_assert_str_eq(a.dtype, "|u1");
    ck_assert_int_eq(a.ndim, 4);
    const uint8_t *u = a.data;
    for (int n = 0; n < 2; n++) for (int y = 0; y < 3; y++) for (int x = 0; x < 4; x++) for (int c = 0; c < 3; c++)
        ck_assert_int_eq(u[((n * 3 + y) * 4 + x) * 3 + c], (n * 7 + y * 5 + x * 3 + c) % 256);
    npy_free(&a);

    load_ok(FIX "npy_bool.npy", &a);
    ck_assert_str_eq(a.dtype, "|b1");
    uint8_t b[] = { 1, 0, 1 };
    ck_assert_mem_eq(a.data, b, 3);
    npy_free(&a);

    load_ok(FIX "npy_scalar.npy", &a);
    ck_assert_int_eq(a.ndim, 0);
    ck_assert_int_eq(npy_numel(&a), 1);
    ck_assert_double_eq(*(double *)a.data, 3.5);
    npy_free(&a);

    load_ok(FIX "npy_empty.npy", &a);
    ck_assert_int_eq(a.ndim, 2); ck_assert_int_eq(a.shape[0], 0); ck_assert_int_eq(a.shape[1], 3);
    ck_assert_uint_eq(a.nbytes, 0);
    npy_free(&a);

    load_ok(FIX "npy_v2.npy", &a);
    ck_assert_int_eq(a.shape[0], 5);
    for (int i = 0; i < 5; i++) ck_assert_float_eq(((float *)a.data)[i], (float)i);
    npy_free(&a);
}
END_TEST

START_TEST(refuse_fortran_bigendian) {
    NpyArray a;
    MalaErr err = {{0}};
    ck_assert_int_ne(npy_load(FIX "npy_fortran.npy", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, FIX "npy_fortran.npy") == err.msg && strstr(err.msg, "fortran_order"), "%s", err.msg);
    ck_assert_ptr_null(a.data);
    ck_assert_int_ne(npy_load(FIX "npy_bigendian.npy", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, "big-endian"), "%s", err.msg);
    ck_assert_int_ne(npy_load(FIX "does_not_exist.npy", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, "does_not_exist.npy") && strstr(err.msg, "No such file"), "%s", err.msg);
    ck_assert_int_ne(npy_load(FIX "npy_samples.npz", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, "zip"), "%s", err.msg);
    ck_assert_int_ne(npz_load(FIX "npy_f32.npy", "arr_0", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, "npy_load"), "%s", err.msg);
}
END_TEST

START_TEST(read_numpy_npz) {
    NpyArray a;
    npz_ok(FIX "npy_samples.npz", "arr_0", &a);
    ck_assert_str_eq(a.dtype, "|u1");
    ck_assert_int_eq(a.ndim, 4);
    int64_t sh[] = { 4, 8, 8, 3 };
    for (int i = 0; i < 4; i++) ck_assert_int_eq(a.shape[i], sh[i]);
    const uint8_t *u = a.data;
    for (int n = 0; n < 4; n++) for (int y = 0; y < 8; y++) for (int x = 0; x < 8; x++) for (int c = 0; c < 3; c++)
        ck_assert_int_eq(u[((n * 8 + y) * 8 + x) * 3 + c], (n * 7 + y * 5 + x * 3 + c) % 256);
    npy_free(&a);
    npz_ok(FIX "npy_samples.npz", "arr_1.npy", &a);   // the member name works too
    ck_assert_str_eq(a.dtype, "<i8");
    int64_t lab[] = { 0, 5, 9, 2 };
    ck_assert_mem_eq(a.data, lab, sizeof lab);
    npy_free(&a);

    char **keys; int nk;
    MalaErr err = {{0}};
    ck_assert_int_eq(npz_keys(FIX "npy_samples.npz", &keys, &nk, &err), 0);
    ck_assert_int_eq(nk, 2);
    ck_assert_str_eq(keys[0], "arr_0"); ck_assert_str_eq(keys[1], "arr_1");
    npz_keys_free(keys, nk);

    // FID statistics (pytorch-fid layout)
    npz_ok(FIX "npy_stats.npz", "mu", &a);
    ck_assert_str_eq(a.dtype, "<f8"); ck_assert_int_eq(a.ndim, 1); ck_assert_int_eq(a.shape[0], 16);
    for (int i = 0; i < 16; i++) ck_assert_double_eq_tol(((double *)a.data)[i], -1.0 + 2.0 * i / 15.0, 1e-15);
    npy_free(&a);
    npz_ok(FIX "npy_stats.npz", "sigma", &a);
    double *s;
    ck_assert_int_eq(npy_to_f64(&a, &s, "sigma", &err), 0);
    for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++)
        ck_assert_double_eq(s[i * 16 + j], 1.0 / (1.0 + abs(i - j)));
    free(s);
    npy_free(&a);

    // numpy.savez_compressed (deflate entries)
    npz_ok(FIX "npy_compressed.npz", "x", &a);
    ck_assert_str_eq(a.dtype, "<f4"); ck_assert_int_eq(a.shape[0], 10); ck_assert_int_eq(a.shape[1], 10);
    for (int i = 0; i < 100; i++) ck_assert_float_eq_tol(((float *)a.data)[i], (float)sin((double)i), 1e-7);
    npy_free(&a);
    npz_ok(FIX "npy_compressed.npz", "y", &a);
    float *yf;
    ck_assert_int_eq(npy_to_f32(&a, &yf, "y", &err), 0);
    for (int i = 0; i < 10; i++) ck_assert_float_eq(yf[i], (float)i);
    free(yf);
    npy_free(&a);

    // zip64 records everywhere (as numpy writes for arrays over 4 GiB)
    npz_ok(FIX "npy_zip64.npz", "a", &a);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(((float *)a.data)[i], (float)i);
    npy_free(&a);
    npz_ok(FIX "npy_zip64.npz", "b", &a);
    int64_t b3[] = { 1, 2, 3 };
    ck_assert_mem_eq(a.data, b3, sizeof b3);
    npy_free(&a);
}
END_TEST

START_TEST(missing_key_lists_keys) {
    NpyArray a;
    MalaErr err = {{0}};
    ck_assert_int_ne(npz_load(FIX "npy_stats.npz", "mean", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, FIX "npy_stats.npz") == err.msg, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "'mean'") && strstr(err.msg, "mu, sigma"), "%s", err.msg);
    ck_assert_ptr_null(a.data);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// writing

START_TEST(write_matches_numpy_bytes) {
    tu_make_tmpdir("npy");
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = i * 0.25f - 1.0f;
    NpyArray a;
    ck_assert_int_eq(npy_wrap(&a, "<f4", v, 2, (int64_t[]){ 3, 4 }), 0);
    char p[300];
    tmp_path(p, sizeof p, "f32.npy");
    MalaErr err = {{0}};
    ck_assert_msg(npy_save(p, &a, &err) == 0, "%s", err.msg);
    size_t n1, n2;
    void *mine = tu_read_file(p, &n1), *ref = tu_read_file(FIX "npy_f32.npy", &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_mem_eq(mine, ref, n1);   // header, padding and data identical to numpy 1.24's
    free(mine); free(ref);

    // same for int64 1-d, uint8 4-d, a scalar and an empty array
    int64_t i8[] = { -(1LL << 40), 3, 1LL << 62 };
    ck_assert_int_eq(npy_wrap(&a, "<i8", i8, 1, (int64_t[]){ 3 }), 0);
    tmp_path(p, sizeof p, "i8.npy");
    ck_assert_int_eq(npy_save(p, &a, &err), 0);
    mine = tu_read_file(p, &n1); ref = tu_read_file(FIX "npy_i8.npy", &n2);
    ck_assert_uint_eq(n1, n2); ck_assert_mem_eq(mine, ref, n1);
    free(mine); free(ref);

    double sc = 3.5;
    ck_assert_int_eq(npy_wrap(&a, "<f8", &sc, 0, NULL), 0);
    tmp_path(p, sizeof p, "scalar.npy");
    ck_assert_int_eq(npy_save(p, &a, &err), 0);
    mine = tu_read_file(p, &n1); ref = tu_read_file(FIX "npy_scalar.npy", &n2);
    ck_assert_uint_eq(n1, n2); ck_assert_mem_eq(mine, ref, n1);
    free(mine); free(ref);

    ck_assert_int_eq(npy_wrap(&a, "<f4", NULL, 2, (int64_t[]){ 0, 3 }), 0);
    tmp_path(p, sizeof p, "empty.npy");
    ck_assert_int_eq(npy_save(p, &a, &err), 0);
    mine = tu_read_file(p, &n1); ref = tu_read_file(FIX "npy_empty.npy", &n2);
    ck_assert_uint_eq(n1, n2); ck_assert_mem_eq(mine, ref, n1);
    free(mine); free(ref);

    ck_assert_int_ne(npy_wrap(&a, "<c8", v, 1, (int64_t[]){ 1 }), 0);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(npz_round_trip) {
    tu_make_tmpdir("npy");
    uint8_t img[2 * 4 * 4 * 3];
    for (size_t i = 0; i < sizeof img; i++) img[i] = (uint8_t)(i * 13);
    int64_t lab[2] = { 7, 1 };
    double mu[5], sigma[25];
    for (int i = 0; i < 5; i++) mu[i] = i * 0.1 - 0.3;
    for (int i = 0; i < 25; i++) sigma[i] = (i % 6 == 0) ? 2.0 : 0.01 * i;
    NpyArray arr[4];
    npy_wrap(&arr[0], "|u1", img, 4, (int64_t[]){ 2, 4, 4, 3 });
    npy_wrap(&arr[1], "<i8", lab, 1, (int64_t[]){ 2 });
    npy_wrap(&arr[2], "<f8", mu, 1, (int64_t[]){ 5 });
    npy_wrap(&arr[3], "<f8", sigma, 2, (int64_t[]){ 5, 5 });
    const char *keys[] = { "arr_0", "arr_1", "mu", "sigma" };
    char p[300];
    tmp_path(p, sizeof p, "batch.npz");
    MalaErr err = {{0}};
    ck_assert_msg(npz_save(p, keys, arr, 4, &err) == 0, "%s", err.msg);
    for (int k = 0; k < 4; k++) {
        NpyArray b;
        npz_ok(p, keys[k], &b);
        ck_assert_str_eq(b.dtype, arr[k].dtype);
        ck_assert_int_eq(b.ndim, arr[k].ndim);
        for (int d = 0; d < b.ndim; d++) ck_assert_int_eq(b.shape[d], arr[k].shape[d]);
        ck_assert_uint_eq(b.nbytes, arr[k].nbytes);
        ck_assert_mem_eq(b.data, arr[k].data, b.nbytes);
        npy_free(&b);
    }
    // each member is a plain .npy; the archive is stored (like numpy.savez): the first member's
    // bytes appear verbatim after its local header
    size_t n;
    unsigned char *z = tu_read_file(p, &n);
    ck_assert_mem_eq(z, "PK\3\4", 4);
    ck_assert_int_eq(z[8], 0);                       // method: stored
    ck_assert_mem_eq(z + 30, "arr_0.npy", 9);
    ck_assert_mem_eq(z + 39, "\x93NUMPY", 6);
    free(z);

    // empty archive and an overwrite of an existing file
    ck_assert_int_eq(npz_save(p, NULL, NULL, 0, &err), 0);
    char **ks; int nk;
    ck_assert_int_eq(npz_keys(p, &ks, &nk, &err), 0);
    ck_assert_int_eq(nk, 0);
    npz_keys_free(ks, nk);
    NpyArray b;
    ck_assert_int_ne(npz_load(p, "mu", &b, &err), 0);
    ck_assert_msg(strstr(err.msg, "has: nothing"), "%s", err.msg);

    // duplicate keys and mismatched nbytes are refused before anything is written
    const char *dup[] = { "mu", "mu" };
    NpyArray two[2] = { arr[2], arr[2] };
    ck_assert_int_ne(npz_save(p, dup, two, 2, &err), 0);
    ck_assert_msg(strstr(err.msg, "duplicate"), "%s", err.msg);
    NpyArray bad = arr[2];
    bad.nbytes = 7;
    ck_assert_int_ne(npy_save(p, &bad, &err), 0);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(write_errors_are_reported) {
    tu_make_tmpdir("npy");
    float v[4] = { 1, 2, 3, 4 };
    NpyArray a;
    npy_wrap(&a, "<f4", v, 1, (int64_t[]){ 4 });
    MalaErr err = {{0}};
    char p[300];
    tmp_path(p, sizeof p, "no/such/dir/x.npy");
    ck_assert_int_ne(npy_save(p, &a, &err), 0);
    ck_assert_msg(strstr(err.msg, p) == err.msg && strstr(err.msg, "No such file"), "%s", err.msg);

    // an existing file survives a failed write, and no temporary file is left behind
    tmp_path(p, sizeof p, "keep.npy");
    ck_assert_int_eq(npy_save(p, &a, &err), 0);
    size_t n0;
    void *before = tu_read_file(p, &n0);
    static float big[1 << 16];
    NpyArray large;
    npy_wrap(&large, "<f4", big, 1, (int64_t[]){ 1 << 16 });
    signal(SIGXFSZ, SIG_IGN);                        // this test runs in its own forked process
    struct rlimit rl = { 4096, 4096 };
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    ck_assert_int_ne(npy_save(p, &large, &err), 0);
    ck_assert_msg(strstr(err.msg, p) == err.msg && strstr(err.msg, "write failed"), "%s", err.msg);
    const char *keys[] = { "x" };
    ck_assert_int_ne(npz_save(p, keys, &large, 1, &err), 0);
    ck_assert_msg(strstr(err.msg, "write failed"), "%s", err.msg);
    size_t n1;
    void *after = tu_read_file(p, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_mem_eq(before, after, n0);
    free(before); free(after);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// malformed input never crashes and always explains itself

static void expect_npy_error(const char *p, const char *what, const char *needle) {
    NpyArray a;
    MalaErr err = {{0}};
    int rc = npy_load(p, &a, &err);
    ck_assert_msg(rc != 0, "%s: loaded a malformed file", what);
    ck_assert_msg(strstr(err.msg, p) == err.msg, "%s: message does not start with the path: %s", what, err.msg);
    if (needle) ck_assert_msg(strstr(err.msg, needle), "%s: expected '%s' in: %s", what, needle, err.msg);
    ck_assert_ptr_null(a.data);
}

static void write_npy_with_header(const char *p, const char *dict, size_t data_bytes) {
    char buf[1024];
    size_t hl = strlen(dict);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(hl & 255); buf[9] = (char)(hl >> 8);
    memcpy(buf + 10, dict, hl);
    memset(buf + 10 + hl, 0x3f, data_bytes);
    write_bytes(p, buf, 10 + hl + data_bytes);
}

START_TEST(malformed_npy) {
    tu_make_tmpdir("npy");
    char p[300];
    tmp_path(p, sizeof p, "bad.npy");
    size_t n;
    unsigned char *ref = tu_read_file(FIX "npy_f32.npy", &n);
    for (size_t len = 0; len < n; len++) {           // every truncation
        write_bytes(p, ref, len);
        char what[64]; snprintf(what, sizeof what, "truncated to %zu", len);
        expect_npy_error(p, what, NULL);
        NpyArray a; MalaErr err = {{0}};
        ck_assert_int_ne(npy_parse(ref, len, "mem", &a, &err), 0);
    }
    unsigned char *extra = malloc(n + 3);
    memcpy(extra, ref, n);
    write_bytes(p, extra, n + 3);
    expect_npy_error(p, "trailing bytes", "mismatch");
    free(extra);
    ref[1] = 'X';
    write_bytes(p, ref, n);
    expect_npy_error(p, "bad magic", "bad magic");
    ref[1] = 'N'; ref[6] = 9;
    write_bytes(p, ref, n);
    expect_npy_error(p, "version 9", "version");
    free(ref);

    struct { const char *dict; size_t data; const char *needle; } cases[] = {
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }\n", 48, "mismatch" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 12, "mismatch" },
        { "{'descr': '<f4', 'fortran_order': False, }\n", 4, "shape" },
        { "{'descr': '<f4', 'shape': (1,), }\n", 4, "fortran_order" },
        { "{'fortran_order': False, 'shape': (1,), }\n", 4, "descr" },
        { "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }\n", 8, "unsupported dtype" },
        { "{'descr': 'O', 'fortran_order': False, 'shape': (1,), }\n", 8, "unsupported dtype" },
        { "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }\n", 4, "structured" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1, -1), }\n", 4, "shape" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,\n", 4, "shape" },
        { "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }\n", 4, "fortran_order" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}\n", 4, "unexpected key" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk\n", 4, "junk" },
        { "['descr', '<f4']\n", 4, "not a dict" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", 4, "too large" },
        { "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 8), }\n", 4, "overflow" },
        { "{'descr': '<f4', 'fortran_order': False, 'shape': (1,2,3,4,5,6,7,8,9), }\n", 4, "dimensions" },
        { "{'descr: '<f4', 'fortran_order': False, 'shape': (1,), }\n", 4, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy_with_header(p, cases[i].dict, cases[i].data);
        char what[64]; snprintf(what, sizeof what, "header case %zu", i);
        expect_npy_error(p, what, cases[i].needle);
    }
    // a header length beyond the file
    unsigned char hdr[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0xff };
    write_bytes(p, hdr, 10);
    expect_npy_error(p, "header past end", "truncated");
    // a directory is not a file
    expect_npy_error(tu_tmp, "directory", "not a regular file");
    tu_rm_tmpdir();
}
END_TEST

static void expect_npz_error_or_exact(const char *p, const char *key, const NpyArray *want, int *errors) {
    NpyArray a;
    MalaErr err = {{0}};
    if (npz_load(p, key, &a, &err) != 0) {
        ck_assert_msg(strstr(err.msg, p) == err.msg, "message does not start with the path: %s", err.msg);
        ck_assert_ptr_null(a.data);
        (*errors)++;
        return;
    }
    // a flip in an unchecked field (e.g. a timestamp) may load; the data must then be intact
    ck_assert_uint_eq(a.nbytes, want->nbytes);
    ck_assert_mem_eq(a.data, want->data, a.nbytes);
    npy_free(&a);
}

static void fuzz_npz(const char *fixture, const char *key) {
    char p[300];
    tmp_path(p, sizeof p, "bad.npz");
    size_t n;
    unsigned char *ref = tu_read_file(fixture, &n);
    NpyArray want;
    npz_ok(fixture, key, &want);
    int errors = 0;
    for (size_t len = 0; len < n; len++) {           // every truncation is an error
        write_bytes(p, ref, len);
        int before = errors;
        expect_npz_error_or_exact(p, key, &want, &errors);
        ck_assert_msg(errors == before + 1, "%s truncated to %zu bytes loaded", fixture, len);
    }
    int flipped_errors = 0;
    for (size_t i = 0; i < n; i++) {                 // every byte flipped
        ref[i] ^= 0xA5;
        write_bytes(p, ref, n);
        expect_npz_error_or_exact(p, key, &want, &flipped_errors);
        ref[i] ^= 0xA5;
    }
    ck_assert_int_gt(flipped_errors, (int)(n / 4));
    npy_free(&want);
    free(ref);
}

START_TEST(malformed_npz) {
    tu_make_tmpdir("npy");
    fuzz_npz(FIX "npy_samples.npz", "arr_0");
    fuzz_npz(FIX "npy_compressed.npz", "x");
    fuzz_npz(FIX "npy_zip64.npz", "b");
    char p[300];
    tmp_path(p, sizeof p, "text.npz");
    write_bytes(p, "hello, this is not a zip archive at all", 39);
    NpyArray a; MalaErr err = {{0}};
    ck_assert_int_ne(npz_load(p, "x", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, "not a zip"), "%s", err.msg);
    // A zip64 extra field of 16 bytes instead of 24; the message named the entry from
    // freed memory (ASan: heap-use-after-free; the shipped binary: exit 139)
    const char *z16 = "tests/fuzz/regress/npz/zip64_extra_claims_16.npz";
    ck_assert_int_ne(npz_load(z16, "a", &a, &err), 0);
    ck_assert_msg(strstr(err.msg, z16) == err.msg && strstr(err.msg, "corrupt zip64 extra field for 'a.npy'"), "%s", err.msg);
    char **keys;
    int nk;
    ck_assert_int_ne(npz_keys(z16, &keys, &nk, &err), 0);
    ck_assert_msg(strstr(err.msg, "corrupt zip64 extra field for 'a.npy'"), "%s", err.msg);
    tu_rm_tmpdir();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("npy");
    TCase *tc = tcase_create("npy");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, read_numpy_npy);
    tcase_add_test(tc, refuse_fortran_bigendian);
    tcase_add_test(tc, read_numpy_npz);
    tcase_add_test(tc, missing_key_lists_keys);
    tcase_add_test(tc, write_matches_numpy_bytes);
    tcase_add_test(tc, npz_round_trip);
    tcase_add_test(tc, write_errors_are_reported);
    tcase_add_test(tc, malformed_npy);
    tcase_add_test(tc, malformed_npz);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }

// FID Inception-v3: the legacy torch reader on files torch wrote (incep_small.pth, incep_meta.pth),
// the writer byte for byte against torch, malformed files, and the full network against
// torchvision + pytorch-fid's FID blocks (tools/ref/make_inception_fixtures.py) on images of several
// sizes, loading the full 472-tensor file from disk as a user would; its sFID features against
// the plain-torch rebuild of tools/ref/make_sfid_fixture.py.
#include <unistd.h>

#include "testutil.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "eval/inception.h"
#include "formats/torch_legacy.h"

#define FIX "tests/fixtures/"
#define FEAT_TOL 1e-4  // normalised error of pool3 / logits vs PyTorch


static TorchLegacy *open_ok(const char *path) {
    MalaErr err = {{0}};
    TorchLegacy *t = torch_legacy_open(path, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    return t;
}

static float *read_ok(const TorchLegacy *t, const char *name, int64_t *numel) {
    const TorchTensor *x = torch_legacy_find(t, name);
    ck_assert_msg(x != NULL, "no tensor %s", name);
    *numel = torch_tensor_numel(x);
    float *v = malloc((size_t)(*numel ? *numel : 1) * sizeof *v);
    MalaErr err = {{0}};
    ck_assert_msg(torch_legacy_read_f32(t, x, v, &err) == 0, "%s", err.msg);
    return v;
}

// ---------------------------------------------------------------------------------------------
// Architecture and generator

START_TEST(tensor_names_match_torchvision) {
    // incep_names.txt: torchvision Inception3(1008, no aux) + FID blocks, state-dict order
    size_t len;
    char *txt = tu_read_file(FIX "incep_names.txt", &len);
    txt = realloc(txt, len + 1);
    txt[len] = 0;
    InceptionTensor t[INCEPTION_NTENSORS + 1];
    ck_assert_int_eq(inception_tensors(t), INCEPTION_NTENSORS);
    char *line = txt, *next;
    int i = 0;
    for (; line && *line; line = next, i++) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        ck_assert_int_lt(i, INCEPTION_NTENSORS);
        char want[128];
        int k = snprintf(want, sizeof want, "%s", t[i].name);
        for (int d = 0; d < t[i].ndim; d++) k += snprintf(want + k, sizeof want - (size_t)k, " %lld", (long long)t[i].shape[d]);
        ck_assert_str_eq(line, want);
    }
    ck_assert_int_eq(i, INCEPTION_NTENSORS);
    free(txt);
}
END_TEST

// incep_small.pth: tensors torch saved from the shared generator, conv weights as OIHW views of
// HWIO storage: the reader must honour the strides and the generator must agree bit for bit.
START_TEST(reads_torch_written_tensors) {
    TorchLegacy *t = open_ok(FIX "incep_small.pth");
    ck_assert_int_eq(torch_legacy_count(t), 8);
    const TorchTensor *w = torch_legacy_find(t, "Conv2d_1a_3x3.conv.weight");
    ck_assert_ptr_nonnull(w);
    ck_assert_str_eq(w->storage_type, "FloatStorage");
    ck_assert_int_eq(w->ndim, 4);
    int64_t shape[4] = {32, 3, 3, 3}, stride[4] = {1, 32, 288, 96};  // HWIO storage
    for (int d = 0; d < 4; d++) {
        ck_assert_int_eq(w->shape[d], shape[d]);
        ck_assert_int_eq(w->stride[d], stride[d]);
    }
    const TorchTensor *w7 = torch_legacy_find(t, "Mixed_6b.branch7x7_2.conv.weight");
    ck_assert_int_eq(w7->shape[3], 7);
    ck_assert_int_eq(w7->stride[2], 7 * 128 * 128);
    for (int i = 0; i < torch_legacy_count(t); i++) {
        const TorchTensor *x = torch_legacy_tensor(t, i);
        int64_t n;
        float *v = read_ok(t, x->name, &n);
        float *g = malloc((size_t)n * sizeof *g);
        inception_random_tensor(x->name, x->ndim, x->shape, g);
        for (int64_t k = 0; k < n; k++)
            ck_assert_msg(v[k] == g[k], "%s[%lld]: file %.9g generator %.9g", x->name, (long long)k, v[k], g[k]);
        free(v);
        free(g);
    }
    torch_legacy_close(t);
}
END_TEST

// incep_meta.pth: a module's state_dict() (with _metadata), num_batches_tracked (LongStorage, 0-d),
// a storage-offset view, two tensors sharing one storage, a transposed view and float64.
START_TEST(reads_state_dict_features) {
    TorchLegacy *t = open_ok(FIX "incep_meta.pth");
    ck_assert_int_eq(torch_legacy_count(t), 10);
    const char *order[10] = {"conv.weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                             "bn.num_batches_tracked", "extra.view", "extra.shared", "extra.matrix_t", "extra.double"};
    for (int i = 0; i < 10; i++) ck_assert_str_eq(torch_legacy_tensor(t, i)->name, order[i]);

    int64_t n;
    float *v = read_ok(t, "conv.weight", &n), g[108];
    ck_assert_int_eq(n, 108);
    eval_rand_fill(g, 108, "meta/conv.weight", -1, 1);
    for (int k = 0; k < 108; k++) ck_assert(v[k] == g[k]);
    free(v);

    const TorchTensor *nbt = torch_legacy_find(t, "bn.num_batches_tracked");
    ck_assert_int_eq(nbt->ndim, 0);
    ck_assert_str_eq(nbt->storage_type, "LongStorage");
    int64_t seven;
    memcpy(&seven, (const char *)nbt->storage + nbt->offset * 8, 8);
    ck_assert_int_eq(seven, 7);
    MalaErr err = {{0}};
    float dummy;
    ck_assert_int_ne(torch_legacy_read_f32(t, nbt, &dummy, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "not floating point"));
    ck_assert_ptr_nonnull(strstr(err.msg, "incep_meta.pth"));

    float base[10];
    eval_rand_fill(base, 10, "meta/base", -1, 1);
    v = read_ok(t, "extra.view", &n);  // base[3:7]
    ck_assert_int_eq(n, 4);
    for (int k = 0; k < 4; k++) ck_assert(v[k] == base[3 + k]);
    free(v);
    v = read_ok(t, "extra.shared", &n);  // base[0:2]
    for (int k = 0; k < 2; k++) ck_assert(v[k] == base[k]);
    ck_assert_str_eq(torch_legacy_find(t, "extra.shared")->storage_key, torch_legacy_find(t, "extra.view")->storage_key);
    free(v);
    v = read_ok(t, "extra.matrix_t", &n);  // base.view(2, 5).t(): [5, 2]
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 2; j++) ck_assert(v[i * 2 + j] == base[j * 5 + i]);
    free(v);
    v = read_ok(t, "extra.double", &n);
    uint64_t seed = eval_rand_seed("meta/double");
    for (int k = 0; k < 6; k++) ck_assert(v[k] == (float)(-1.0 + 2.0 * eval_rand_u(seed, (uint64_t)k)));
    free(v);
    torch_legacy_close(t);
}
END_TEST

// The writer reproduces torch's bytes exactly (same keys, shapes, strides and data), so files it
// writes exercise the reader as torch's own would.
START_TEST(writer_matches_torch_bytes) {
    size_t len;
    unsigned char *want = tu_read_file(FIX "incep_small.pth", &len);
    TorchLegacy *t = open_ok(FIX "incep_small.pth");
    int n = torch_legacy_count(t);
    TorchSaveTensor *s = calloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++) {
        const TorchTensor *x = torch_legacy_tensor(t, i);
        s[i] = (TorchSaveTensor){x->name, x->ndim, x->shape, x->stride, x->storage_key, x->storage_numel, x->storage};
    }
    unsigned char *got;
    size_t glen;
    MalaErr err = {{0}};
    ck_assert_msg(torch_legacy_serialize(s, n, &got, &glen, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(glen, len);
    for (size_t k = 0; k < len; k++) ck_assert_msg(got[k] == want[k], "byte %zu differs: %02x vs torch %02x", k, got[k], want[k]);
    free(got);
    free(s);
    torch_legacy_close(t);
    free(want);
}
END_TEST

// A single-tensor file and one with more than 256 memo entries and >1000 dict items take the
// other opcode paths (SETITEM / APPEND, LONG_BINPUT / LONG_BINGET, several SETITEMS batches).
START_TEST(writer_round_trips_large_dicts) {
    enum { N = 1203 };
    static TorchSaveTensor s[N];
    static char names[N][32], keys[N][24];
    static float data[N][3];
    static int64_t shape[N][2];
    for (int n = 1; n <= N; n += N - 1) {
        for (int i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "layer%d.weight", i);
            snprintf(keys[i], sizeof keys[i], "%d", 1000 + 7 * (n - i));
            shape[i][0] = 1 + i % 3;
            shape[i][1] = 1;
            for (int k = 0; k < 3; k++) data[i][k] = (float)(i * 3 + k);
            s[i] = (TorchSaveTensor){names[i], 2, shape[i], NULL, keys[i], shape[i][0], data[i]};
        }
        unsigned char *buf;
        size_t len;
        MalaErr err = {{0}};
        ck_assert_msg(torch_legacy_serialize(s, n, &buf, &len, &err) == 0, "%s", err.msg);
        TorchLegacy *t = torch_legacy_open_mem(buf, len, "mem.pth", &err);
        ck_assert_msg(t != NULL, "%s", err.msg);
        ck_assert_int_eq(torch_legacy_count(t), n);
        for (int i = 0; i < n; i++) {
            const TorchTensor *x = torch_legacy_tensor(t, i);
            ck_assert_str_eq(x->name, names[i]);
            ck_assert_int_eq(x->shape[0], shape[i][0]);
            float v[3];
            ck_assert_int_eq(torch_legacy_read_f32(t, x, v, &err), 0);
            for (int k = 0; k < shape[i][0]; k++) ck_assert(v[k] == data[i][k]);
        }
        torch_legacy_close(t);
        free(buf);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Malformed files: every truncation of the pickles, byte flips, foreign files

static void expect_fail(const void *buf, size_t len, const char *needle) {
    MalaErr err = {{0}};
    TorchLegacy *t = torch_legacy_open_mem(buf, len, "bad.pth", &err);
    if (t) torch_legacy_close(t);
    ck_assert_msg(t == NULL, "accepted a malformed file (len %zu, expecting '%s')", len, needle);
    ck_assert_msg(strncmp(err.msg, "bad.pth: ", 9) == 0, "message does not start with the file: %s", err.msg);
    if (needle) ck_assert_msg(strstr(err.msg, needle) != NULL, "'%s' not in: %s", needle, err.msg);
}

START_TEST(rejects_truncated_and_foreign_files) {
    size_t len;
    unsigned char *buf = tu_read_file(FIX "incep_small.pth", &len);
    // every prefix through the pickles and the first storages, then a stride through the data
    for (size_t n = 0; n < len; n += n < 4096 ? 1 : 997) {
        unsigned char *cut = malloc(n ? n : 1);  // exact-size copies let ASan see overreads
        memcpy(cut, buf, n);
        expect_fail(cut, n, n == 0 ? "empty file" : "truncated");
        free(cut);
    }
    expect_fail(buf, len - 1, "truncated");
    unsigned char *c = malloc(len);
    memcpy(c, buf, len);
    c[8] ^= 0x40;
    expect_fail(c, len, "bad magic number");
    memcpy(c, "PK\x03\x04", 4);
    expect_fail(c, len, "not a zip archive");  // read as torch.save's zip format, which this is not
    expect_fail("hello, world\n", 13, "does not start with a pickle");
    // the protocol pickle says 1002
    memcpy(c, buf, len);
    ck_assert_int_eq(c[18], 0xe9);
    c[18] = 0xea;
    expect_fail(c, len, "protocol version");
    // a storage's element count disagrees with its record
    memcpy(c, buf, len);
    MalaErr err = {{0}};
    TorchLegacy *t = torch_legacy_open_mem(c, len, "ok.pth", &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    size_t at = (size_t)((const unsigned char *)torch_legacy_tensor(t, 0)->storage - c) - 8;
    torch_legacy_close(t);
    c[at] ^= 1;
    expect_fail(c, len, "elements, its record says");
    free(c);
    free(buf);
    // MARK as the first opcode after PROTO (pop_mark computed NULL + 0; clang's UBSan in
    // `make fuzz-regress` sees it, tests/fuzz/regress/torch_legacy/mark_first.pth)
    const unsigned char mark_first[8] = {0x80, 0x02, 0x28, 0x28, 0x28, 0x6c, 0x6c, 0xbe};
    expect_fail(mark_first, sizeof mark_first, "unsupported pickle opcode 0xbe at byte 7");
    const unsigned char empty_tuple[5] = {0x80, 0x02, 0x28, 0x74, 0x2e};   // PROTO MARK TUPLE STOP
    expect_fail(empty_tuple, sizeof empty_tuple, "not a legacy torch file (bad magic number)");
    TorchLegacy *m = torch_legacy_open("tests/fuzz/regress/torch_legacy/mark_first.pth", &err);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.msg, "mark_first.pth: unsupported pickle opcode"), "%s", err.msg);
}
END_TEST

START_TEST(survives_byte_flips) {
    size_t len;
    unsigned char *buf = tu_read_file(FIX "incep_meta.pth", &len);
    uint64_t s = 12345;
    for (int it = 0; it < 3000; it++) {
        unsigned char *c = malloc(len);
        memcpy(c, buf, len);
        int flips = 1 + (int)(tu_next(&s) % 3);
        for (int f = 0; f < flips; f++) c[tu_next(&s) % 1200] ^= (unsigned char)(1u << (tu_next(&s) % 8));
        MalaErr err = {{0}};
        TorchLegacy *t = torch_legacy_open_mem(c, len, "flip.pth", &err);
        if (t) {  // whatever parses must be readable within bounds
            for (int i = 0; i < torch_legacy_count(t); i++) {
                const TorchTensor *x = torch_legacy_tensor(t, i);
                int64_t n = torch_tensor_numel(x);
                if (n > 1 << 20) continue;
                float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
                torch_legacy_read_f32(t, x, v, &err);
                free(v);
            }
            torch_legacy_close(t);
        } else {
            ck_assert_msg(strncmp(err.msg, "flip.pth: ", 10) == 0, "%s", err.msg);
        }
        free(c);
    }
    free(buf);
}
END_TEST

START_TEST(missing_file_names_the_standard_weights) {
    MalaErr err = {{0}};
    ck_assert_ptr_null(inception_load("/nonexistent/pt_inception.pth", NULL, 1, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/pt_inception.pth: cannot open"));
    ck_assert_ptr_nonnull(strstr(err.msg, INCEPTION_WEIGHTS_FILE));
    ck_assert_ptr_nonnull(strstr(err.msg, "pytorch-fid"));

    // a valid torch file that is not the FID Inception
    ck_assert_ptr_null(inception_load(FIX "incep_meta.pth", NULL, 1, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "no tensor 'Conv2d_1a_3x3.conv.weight'"));
    ck_assert_ptr_nonnull(strstr(err.msg, INCEPTION_WEIGHTS_FILE));
    // a partial one
    ck_assert_ptr_null(inception_load(FIX "incep_small.pth", NULL, 1, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "incep_small.pth: no tensor 'Conv2d_2a_3x3.bn.weight'"));
    // a wrong shape
    tu_make_tmpdir("incep");
    char path[300];
    snprintf(path, sizeof path, "%s/wrong.pth", tu_tmp);
    static float w[32 * 3 * 5 * 5];
    int64_t shape[4] = {32, 3, 5, 5};
    TorchSaveTensor s = {"Conv2d_1a_3x3.conv.weight", 4, shape, NULL, "94000", 32 * 3 * 5 * 5, w};
    ck_assert_int_eq(torch_legacy_save(path, &s, 1, &err), 0);
    ck_assert_ptr_null(inception_load(path, NULL, 1, &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "'Conv2d_1a_3x3.conv.weight' has shape [32, 3, 5, 5], the FID Inception-v3 expects [32, 3, 3, 3]"));
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// The full network against PyTorch

// Writes the 472 generator tensors as the real file stores them (conv weights OIHW over HWIO
// storage, fc.weight over its transpose) with the byte-exact writer.
static void write_full_file(const char *path) {
    InceptionTensor t[INCEPTION_NTENSORS];
    int n = inception_tensors(t);
    TorchSaveTensor *s = calloc((size_t)n, sizeof *s);
    float **store = calloc((size_t)n, sizeof *store);
    static int64_t strides[INCEPTION_NTENSORS][4];
    static char keys[INCEPTION_NTENSORS][24];
    for (int i = 0; i < n; i++) {
        int64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
        float *v = malloc((size_t)numel * sizeof *v);
        inception_random_tensor(t[i].name, t[i].ndim, t[i].shape, v);
        float *st = malloc((size_t)numel * sizeof *st);
        int64_t *sd = strides[i];
        if (t[i].ndim == 4) {  // storage [H, W, I, O]
            int64_t O = t[i].shape[0], I = t[i].shape[1], H = t[i].shape[2], W = t[i].shape[3];
            sd[0] = 1; sd[1] = O; sd[2] = W * I * O; sd[3] = I * O;
            for (int64_t o = 0; o < O; o++)
                for (int64_t c = 0; c < I; c++)
                    for (int64_t y = 0; y < H; y++)
                        for (int64_t x = 0; x < W; x++)
                            st[o * sd[0] + c * sd[1] + y * sd[2] + x * sd[3]] = v[((o * I + c) * H + y) * W + x];
        } else if (t[i].ndim == 2) {  // fc.weight stored transposed
            int64_t R = t[i].shape[0], C = t[i].shape[1];
            sd[0] = 1; sd[1] = R;
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < C; c++) st[r + c * R] = v[r * C + c];
        } else {
            sd[0] = 1;
            memcpy(st, v, (size_t)numel * sizeof *st);
        }
        free(v);
        store[i] = st;
        snprintf(keys[i], sizeof keys[i], "%d", 140000000 + 4096 * ((i * 37) % n));  // not in tensor order
        s[i] = (TorchSaveTensor){t[i].name, t[i].ndim, t[i].shape, sd, keys[i], numel, st};
    }
    MalaErr err = {{0}};
    ck_assert_msg(torch_legacy_save(path, s, n, &err) == 0, "%s", err.msg);
    for (int i = 0; i < n; i++) free(store[i]);
    free(store);
    free(s);
}

typedef struct { const char *name; int n, c, h, w; } Group;
static const Group kGroups[] = {  // tools/ref/make_inception_fixtures.py: GROUPS
    {"g0", 2, 1, 28, 28}, {"g1", 2, 3, 32, 32}, {"g2", 1, 3, 48, 64}, {"g3", 1, 3, 299, 299}, {"g4", 1, 3, 341, 320},
};

static float *npz_f32_from(const char *file, const char *key, int64_t want_numel) {
    NpyArray a;
    MalaErr err = {{0}};
    ck_assert_msg(npz_load(file, key, &a, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(npy_numel(&a), want_numel);
    float *v;
    ck_assert_msg(npy_to_f32(&a, &v, key, &err) == 0, "%s", err.msg);
    npy_free(&a);
    return v;
}
static float *npz_f32(const char *key, int64_t want_numel) { return npz_f32_from(FIX "incep_ref.npz", key, want_numel); }

static void check_against_torch(Inception *m, const char *label) {
    for (size_t g = 0; g < sizeof kGroups / sizeof kGroups[0]; g++) {
        const Group *G = &kGroups[g];
        char key[32];
        size_t numel = (size_t)G->n * G->c * G->h * G->w;
        snprintf(key, sizeof key, "images_%s", G->name);
        float *img = npz_f32(key, (int64_t)numel);
        for (size_t i = 0; i < numel; i++) img[i] /= 255.0f;  // ToTensor
        snprintf(key, sizeof key, "pool3_%s", G->name);
        float *want_p = npz_f32(key, (int64_t)G->n * INCEPTION_DIM);
        snprintf(key, sizeof key, "logits_%s", G->name);
        float *want_l = npz_f32(key, (int64_t)G->n * INCEPTION_CLASSES);
        // tools/ref/make_sfid_fixture.py: the ADM evaluator's mixed_6/conv features on this network
        snprintf(key, sizeof key, "spatial_%s", G->name);
        float *want_s = npz_f32_from(FIX "incep_sfid.npz", key, (int64_t)G->n * INCEPTION_SPATIAL_DIM);
        float *p = malloc((size_t)G->n * INCEPTION_DIM * sizeof *p), *l = malloc((size_t)G->n * INCEPTION_CLASSES * sizeof *l);
        float *sp = malloc((size_t)G->n * INCEPTION_SPATIAL_DIM * sizeof *sp);
        MalaErr err = {{0}};
        ck_assert_int_eq(inception_forward_all(m, img, G->n, G->c, G->h, G->w, p, l, sp, &err), 0);
        double ep = tu_nerr(p, want_p, (size_t)G->n * INCEPTION_DIM, 1e-6);
        double el = tu_nerr(l, want_l, (size_t)G->n * INCEPTION_CLASSES, 1e-6);
        double es = tu_nerr(sp, want_s, (size_t)G->n * INCEPTION_SPATIAL_DIM, 1e-6);
        printf("inception %s %s [%d,%d,%d,%d]: pool3 err %.2e, logits err %.2e, sFID features err %.2e\n", label,
               G->name, G->n, G->c, G->h, G->w, ep, el, es);
        ck_assert_msg(ep < FEAT_TOL && el < FEAT_TOL && es < FEAT_TOL, "%s: pool3 err %.3g logits err %.3g spatial err %.3g",
                      G->name, ep, el, es);
        // the spatial output changes nothing else
        float *p2 = malloc((size_t)G->n * INCEPTION_DIM * sizeof *p2);
        ck_assert_int_eq(inception_forward(m, img, G->n, G->c, G->h, G->w, p2, NULL, &err), 0);
        ck_assert(!memcmp(p, p2, (size_t)G->n * INCEPTION_DIM * sizeof *p));
        free(img); free(want_p); free(want_l); free(want_s); free(p); free(p2); free(l); free(sp);
    }
}

START_TEST(full_network_from_legacy_file_matches_torch) {
    tu_make_tmpdir("incep");
    char path[300];
    snprintf(path, sizeof path, "%s/pt_inception_random.pth", tu_tmp);
    write_full_file(path);
    MalaErr err = {{0}};
    double t0 = now_seconds();
    Inception *m = inception_load(path, NULL, 2, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    printf("inception: loaded the 91 MiB legacy file in %.2f s\n", now_seconds() - t0);
    tu_rm_tmpdir();
    check_against_torch(m, "legacy");

    // batch invariance: the two-image group in one call vs one at a time, through max_batch 1
    Inception *one = inception_random(NULL, 1);
    int n = 2, c = 3, h = 32, w = 32;
    float *img = npz_f32("images_g1", (int64_t)n * c * h * w);
    for (int i = 0; i < n * c * h * w; i++) img[i] /= 255.0f;
    float pa[2 * INCEPTION_DIM], pb[2 * INCEPTION_DIM];
    ck_assert_int_eq(inception_forward(m, img, n, c, h, w, pa, NULL, &err), 0);
    ck_assert_int_eq(inception_forward(one, img, n, c, h, w, pb, NULL, &err), 0);
    ck_assert_double_lt(tu_nerr(pb, pa, 2 * INCEPTION_DIM, 1e-6), 1e-5);
    // bad arguments
    ck_assert_int_ne(inception_forward(one, img, 1, 2, h, w, pb, NULL, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.msg, "C must be 1 or 3"));
    free(img);
    inception_free(one);
    inception_free(m);
}
END_TEST

// The same tensors in a .safetensors file give the same network.
START_TEST(full_network_from_safetensors) {
    InceptionTensor t[INCEPTION_NTENSORS];
    int n = inception_tensors(t);
    StWriter *wr = st_writer_new();
    float **vals = calloc((size_t)n, sizeof *vals);
    for (int i = 0; i < n; i++) {
        int64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
        vals[i] = malloc((size_t)numel * sizeof(float));
        inception_random_tensor(t[i].name, t[i].ndim, t[i].shape, vals[i]);
        st_writer_add(wr, t[i].name, ST_F32, t[i].shape, t[i].ndim, vals[i]);
    }
    tu_make_tmpdir("incep");
    char path[300];
    snprintf(path, sizeof path, "%s/inception.safetensors", tu_tmp);
    MalaErr err = {{0}};
    ck_assert_msg(st_writer_save(wr, path, &err) == 0, "%s", err.msg);
    st_writer_free(wr);
    for (int i = 0; i < n; i++) free(vals[i]);
    free(vals);
    Inception *m = inception_load(path, NULL, 4, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    tu_rm_tmpdir();
    Inception *r = inception_random(NULL, 4);
    float *img = npz_f32("images_g0", 2 * 28 * 28);
    for (int i = 0; i < 2 * 28 * 28; i++) img[i] /= 255.0f;
    float pa[2 * INCEPTION_DIM], pb[2 * INCEPTION_DIM], la[2 * INCEPTION_CLASSES], lb[2 * INCEPTION_CLASSES];
    ck_assert_int_eq(inception_forward(m, img, 2, 1, 28, 28, pa, la, &err), 0);
    ck_assert_int_eq(inception_forward(r, img, 2, 1, 28, 28, pb, lb, &err), 0);
    ck_assert(memcmp(pa, pb, sizeof pa) == 0);
    ck_assert(memcmp(la, lb, sizeof la) == 0);
    free(img);
    inception_free(m);
    inception_free(r);
}
END_TEST

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);  // keep the report lines of a failing (forked) test
    Suite *s = suite_create("inception");
    TCase *tc = tcase_create("torch_legacy");
    tcase_add_test(tc, tensor_names_match_torchvision);
    tcase_add_test(tc, reads_torch_written_tensors);
    tcase_add_test(tc, reads_state_dict_features);
    tcase_add_test(tc, writer_matches_torch_bytes);
    tcase_add_test(tc, writer_round_trips_large_dicts);
    tcase_add_test(tc, rejects_truncated_and_foreign_files);
    tcase_add_test(tc, survives_byte_flips);
    tcase_add_test(tc, missing_file_names_the_standard_weights);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    TCase *net = tcase_create("network");
    tcase_add_test(net, full_network_from_legacy_file_matches_torch);
    tcase_add_test(net, full_network_from_safetensors);
    tcase_set_timeout(net, 300);
    suite_add_tcase(s, net);
    return tu_run(s);
}

// Data pipeline: the real Fashion-MNIST, corrupt IDX files, image folders (PNG written here,
// crops compared with Pillow's output), the loader's determinism / epochs / resume, and the
// image helpers (PIL resize, torchvision grid) against fixtures from tools/ref/make_npy_fixtures.py.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <stb_image_write.h>   // declarations only (formats/image_io.c holds the implementation)

#include "testutil.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "train/loader.h"
#include "formats/idx.h"

#define FIX "tests/fixtures/"

static void mkdir_ok(const char *p) { ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s", p); }
static void write_bytes(const char *p, const void *b, size_t n) {
    unlink(p);   // a fresh inode: ext4 flushes files truncated and rewritten in place (slow)
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

// stderr into a file while `body` runs; returns the text (malloc'd)
static int g_saved_fd = -1;
static void capture_begin(const char *path) {
    fflush(stderr);
    g_saved_fd = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    close(fd);
}
static char *capture_end(const char *path) {
    fflush(stderr);
    dup2(g_saved_fd, 2);
    close(g_saved_fd);
    size_t n;
    char *s = tu_read_file(path, &n);
    s = realloc(s, n + 1);
    s[n] = 0;
    return s;
}
static int count_str(const char *hay, const char *needle) {
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) c++;
    return c;
}

// ---------------------------------------------------------------------------------------------
// the real Fashion-MNIST

START_TEST(fmnist_real) {
    MalaErr err = {{0}};
    unsetenv("MALA_FASHION_MNIST_DIR");
    Dataset *d = dataset_open("fashion-mnist", 0, 0, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->n, 60000);
    ck_assert_int_eq(d->channels, 1);
    ck_assert_int_eq(d->image_size, 32);
    ck_assert_int_eq(d->num_classes, 10);
    const char *names[10] = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
                              "Bag", "Ankle boot" };
    for (int i = 0; i < 10; i++) ck_assert_str_eq(d->class_names[i], names[i]);
    int count[10] = {0};
    for (int64_t i = 0; i < d->n; i++) {
        int32_t y = dataset_label(d, i);
        ck_assert(y >= 0 && y < 10);
        count[y]++;
    }
    for (int c = 0; c < 10; c++) ck_assert_int_eq(count[c], 6000);
    int32_t first[10] = { 9, 0, 0, 3, 0, 2, 7, 2, 5, 5 };
    for (int i = 0; i < 10; i++) ck_assert_int_eq(dataset_label(d, i), first[i]);

    // image 0: pixel sum 76247 (numpy), a 2-pixel frame of background (-1), values in [-1, 1]
    float x[32 * 32];
    uint8_t u[32 * 32];
    ck_assert_int_eq(dataset_get(d, 0, 0, x, &err), 0);
    ck_assert_int_eq(dataset_get_u8(d, 0, u, &err), 0);
    long sum = 0;
    float lo = 2, hi = -2;
    for (int y = 0; y < 32; y++) for (int xx = 0; xx < 32; xx++) {
        float v = x[y * 32 + xx];
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        sum += u[y * 32 + xx];
        ck_assert_float_eq(v, u[y * 32 + xx] / 127.5f - 1.0f);
        if (y < 2 || y >= 30 || xx < 2 || xx >= 30) ck_assert_float_eq(v, -1.0f);
    }
    ck_assert_int_eq(sum, 76247);
    ck_assert_float_eq(lo, -1.0f);
    ck_assert_float_eq(hi, 1.0f);                    // image 0 has a 255 pixel
    int row14[6] = { 0, 0, 1, 4, 6, 7 };              // raw row 14 starts 0 0 1 4 6 7
    for (int i = 0; i < 6; i++) ck_assert_int_eq(u[(14 + 2) * 32 + 2 + i], row14[i]);
    ck_assert_int_ne(dataset_get_u8(d, 60000, u, &err), 0);

    // the loader over the real data: full batches, correct labels, deterministic
    Loader *l = loader_new(d, 256, 7, 1, &err);
    ck_assert_ptr_nonnull(l);
    float *xb = malloc(sizeof(float) * 256 * 1024);
    int32_t yb[256];
    for (int k = 0; k < 3; k++) {
        loader_next(l, xb, yb);
        for (int b = 0; b < 256; b += 51) {
            int flip;
            int64_t i = loader_sample_at(l, (uint64_t)k * 256 + b, &flip);
            ck_assert_int_eq(yb[b], dataset_label(d, i));
            ck_assert_int_eq(dataset_get(d, i, flip, x, &err), 0);
            ck_assert_mem_eq(xb + (size_t)b * 1024, x, sizeof x);
        }
    }
    loader_free(l);
    free(xb);
    dataset_close(d);

    d = dataset_open("fashion-mnist-test", 32, 1, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->n, 10000);
    ck_assert_int_eq(dataset_label(d, 0), 9);
    dataset_close(d);

    ck_assert_ptr_null(dataset_open("fashion-mnist", 64, 1, &err));
    ck_assert_msg(strstr(err.msg, "image size"), "%s", err.msg);
    ck_assert_ptr_null(dataset_open("fashion-mnist", 32, 3, &err));
    ck_assert_msg(strstr(err.msg, "channel"), "%s", err.msg);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// synthetic IDX files

typedef struct {
    uint32_t img_magic, n_img, rows, cols, lab_magic, n_lab;
    int img_items;        // images actually written
    int bad_label;        // write label 10 at item 3
    int trailing;         // extra bytes after the images
} IdxSpec;

static void put_be32(unsigned char *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = (unsigned char)v; }

static uint8_t fm_pixel(int i, int y, int x) { return (uint8_t)((i * 31 + y * 7 + x * 3 + (x > y ? 100 : 0)) % 256); }

// Writes DIR/train-{images,labels}-*.gz (gzip via zlib) per spec; plain=1 writes uncompressed files.
static void write_idx(const char *dir, const IdxSpec *s, int plain) {
    char ip[400], lp[400];
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte%s", dir, plain ? "" : ".gz");
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte%s", dir, plain ? "" : ".gz");
    size_t isz = 16 + (size_t)s->img_items * s->rows * s->cols + (size_t)s->trailing;
    unsigned char *ib = calloc(isz, 1);
    put_be32(ib, s->img_magic); put_be32(ib + 4, s->n_img); put_be32(ib + 8, s->rows); put_be32(ib + 12, s->cols);
    for (int i = 0; i < s->img_items; i++)
        for (uint32_t y = 0; y < s->rows; y++) for (uint32_t x = 0; x < s->cols; x++)
            ib[16 + ((size_t)i * s->rows + y) * s->cols + x] = fm_pixel(i, (int)y, (int)x);
    size_t lsz = 8 + s->n_lab;
    unsigned char *lb = calloc(lsz, 1);
    put_be32(lb, s->lab_magic); put_be32(lb + 4, s->n_lab);
    for (uint32_t i = 0; i < s->n_lab; i++) lb[8 + i] = (unsigned char)(i % 10);
    if (s->bad_label && s->n_lab > 3) lb[8 + 3] = 10;
    if (plain) { write_bytes(ip, ib, isz); write_bytes(lp, lb, lsz); }
    else {
        gzFile g = gzopen(ip, "wb");
        ck_assert_ptr_nonnull(g);
        ck_assert_int_eq(gzwrite(g, ib, (unsigned)isz), (int)isz);
        ck_assert_int_eq(gzclose(g), Z_OK);
        g = gzopen(lp, "wb");
        ck_assert_int_eq(gzwrite(g, lb, (unsigned)lsz), (int)lsz);
        ck_assert_int_eq(gzclose(g), Z_OK);
    }
    free(ib); free(lb);
}

static IdxSpec good_spec(int n) {
    IdxSpec s = { 0x803, (uint32_t)n, 28, 28, 0x801, (uint32_t)n, n, 0, 0 };
    return s;
}

static Dataset *open_dir(const char *dir, MalaErr *err) {
    char spec[500];
    snprintf(spec, sizeof spec, "fashion-mnist:%s", dir);
    return dataset_open(spec, 0, 0, err);
}

static void expect_idx_error(const char *name, IdxSpec s, const char *needle) {
    const char *dir = tp(name);
    mkdir_ok(dir);
    write_idx(dir, &s, 0);
    MalaErr err = {{0}};
    Dataset *d = open_dir(dir, &err);
    ck_assert_msg(d == NULL, "%s: opened a bad dataset", name);
    ck_assert_msg(strstr(err.msg, dir) == err.msg, "%s: message does not start with the file path: %s", name, err.msg);
    ck_assert_msg(strstr(err.msg, needle), "%s: expected '%s' in: %s", name, needle, err.msg);
}

START_TEST(fmnist_synthetic_and_corrupt) {
    tu_make_tmpdir("data");
    MalaErr err = {{0}};
    // a valid small set, compressed and plain, by spec and by environment variable
    const char *good = tp("good");
    mkdir_ok(good);
    IdxSpec s = good_spec(20);
    write_idx(good, &s, 0);
    Dataset *d = open_dir(good, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->n, 20);
    uint8_t u[32 * 32];
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(dataset_label(d, i), i % 10);
        ck_assert_int_eq(dataset_get_u8(d, i, u, &err), 0);
        for (int y = 0; y < 32; y++) for (int x = 0; x < 32; x++) {
            int inside = y >= 2 && y < 30 && x >= 2 && x < 30;
            ck_assert_int_eq(u[y * 32 + x], inside ? fm_pixel(i, y - 2, x - 2) : 0);
        }
    }
    // dataset_limit keeps an even spread: indices 0, 4, 8, 12, 16
    ck_assert_int_eq(dataset_limit(d, 5, &err), 0);
    ck_assert_int_eq(d->n, 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(dataset_label(d, i), (4 * i) % 10);
        ck_assert_int_eq(dataset_get_u8(d, i, u, &err), 0);
        ck_assert_int_eq(u[2 * 32 + 2], fm_pixel(4 * i, 0, 0));
    }
    ck_assert_int_eq(dataset_limit(d, 100, &err), 0);
    ck_assert_int_eq(d->n, 5);
    ck_assert_int_ne(dataset_limit(d, 0, &err), 0);
    dataset_close(d);

    const char *plain = tp("plain");
    mkdir_ok(plain);
    write_idx(plain, &s, 1);
    d = open_dir(plain, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    dataset_close(d);
    setenv("MALA_FASHION_MNIST_DIR", plain, 1);
    d = dataset_open("fashion-mnist", 32, 1, &err);
    ck_assert_msg(d != NULL && d->n == 20, "%s", err.msg);
    dataset_close(d);
    unsetenv("MALA_FASHION_MNIST_DIR");

    IdxSpec b;
    b = good_spec(20); b.img_magic = 0x801;                   expect_idx_error("magic", b, "not an IDX file");
    b = good_spec(20); b.lab_magic = 0x803;                   expect_idx_error("labmagic", b, "not an IDX file");
    b = good_spec(20); b.img_items = 10;                      expect_idx_error("short", b, "truncated");
    b = good_spec(20); b.n_lab = 19;                          expect_idx_error("count", b, "labels");
    b = good_spec(20); b.bad_label = 1;                       expect_idx_error("label", b, "outside 0..9");
    b = good_spec(20); b.rows = 27;                           expect_idx_error("dims", b, "expected 28x28");
    b = good_spec(20); b.trailing = 5;                        expect_idx_error("trailing", b, "unexpected data");
    b = good_spec(20); b.n_img = b.n_lab = 0; b.img_items = 0; expect_idx_error("empty", b, "item count");

    // a gzip stream cut short, and one with a damaged CRC trailer
    char src[400];
    snprintf(src, sizeof src, "%s/train-images-idx3-ubyte.gz", good);
    size_t n;
    unsigned char *gz = tu_read_file(src, &n);
    const char *cut = tp("cut");
    mkdir_ok(cut);
    write_idx(cut, &s, 0);
    char dst[400];
    snprintf(dst, sizeof dst, "%s/train-images-idx3-ubyte.gz", cut);
    for (size_t len = 0; len < n; len += (len < 40 ? 1 : 97)) {
        write_bytes(dst, gz, len);
        Dataset *bad = open_dir(cut, &err);
        ck_assert_msg(bad == NULL, "gzip truncated to %zu bytes opened", len);
        ck_assert_msg(strstr(err.msg, dst) == err.msg, "%s", err.msg);
    }
    gz[n - 6] ^= 0x55;                                   // inside the CRC32 trailer
    write_bytes(dst, gz, n);
    ck_assert_ptr_null(open_dir(cut, &err));
    ck_assert_msg(strstr(err.msg, dst) == err.msg, "%s", err.msg);
    free(gz);

    ck_assert_ptr_null(open_dir(tp("nowhere"), &err));
    ck_assert_msg(strstr(err.msg, "cannot open"), "%s", err.msg);
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// image folders

static uint8_t *crop_pattern(int w, int h) {   // same formula as tools/ref/make_npy_fixtures.py
    uint8_t *p = malloc((size_t)w * h * 3);
    for (int y = 0; y < h; y++) for (int x = 0; x < w; x++) for (int c = 0; c < 3; c++)
        p[((size_t)y * w + x) * 3 + c] = (uint8_t)((x * 37 + y * 91 + c * 53 + ((x * y) % 17) * 11 + ((x ^ y) & 7) * 9) % 256);
    return p;
}

static void write_pattern_png(const char *path, int w, int h) {
    uint8_t *p = crop_pattern(w, h);
    MalaErr err = {{0}};
    ck_assert_msg(image_write_png(path, p, w, h, 3, &err) == 0, "%s", err.msg);
    free(p);
}

static void expect_fixture(const uint8_t *got, const char *key, int size, int c) {
    NpyArray a;
    MalaErr err = {{0}};
    ck_assert_msg(npz_load(FIX "npy_pil_crop.npz", key, &a, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(a.shape[0], size);
    ck_assert_int_eq(a.shape[1], size);
    ck_assert_int_eq(a.ndim == 3 ? a.shape[2] : 1, c);
    const uint8_t *want = a.data;
    int worst = 0, at = -1;
    for (size_t i = 0; i < a.nbytes; i++) {
        int dlt = abs((int)got[i] - (int)want[i]);
        if (dlt > worst) { worst = dlt; at = (int)i; }
    }
    ck_assert_msg(worst == 0, "%s: differs from Pillow by %d at byte %d", key, worst, at);
    npy_free(&a);
}

START_TEST(folder_dataset) {
    tu_make_tmpdir("data");
    const char *root = tp("imgs");
    mkdir_ok(root);
    mkdir_ok(tp("imgs/cat"));
    mkdir_ok(tp("imgs/dog"));
    mkdir_ok(tp("imgs/dog/sub"));
    mkdir_ok(tp("imgs/.git"));
    write_pattern_png(tp("imgs/cat/a.png"), 64, 48);
    write_pattern_png(tp("imgs/cat/b.png"), 20, 30);
    write_bytes(tp("imgs/cat/notes.txt"), "not an image\n", 13);
    write_pattern_png(tp("imgs/dog/c.png"), 131, 97);
    write_pattern_png(tp("imgs/dog/sub/d.png"), 32, 32);
    write_pattern_png(tp("imgs/dog/trunc.png"), 40, 40);
    size_t n;
    unsigned char *png = tu_read_file(tp("imgs/dog/trunc.png"), &n);
    write_bytes(tp("imgs/dog/trunc.png"), png, n / 2);
    free(png);
    write_bytes(tp("imgs/dog/.DS_Store"), "x", 1);
    write_bytes(tp("imgs/README"), "top-level files are ignored", 27);

    MalaErr err = {{0}};
    const char *log = tp("stderr.txt");
    capture_begin(log);
    Dataset *d = dataset_open(root, 32, 3, &err);
    char *msgs = capture_end(log);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->n, 4);
    ck_assert_int_eq(d->num_classes, 2);
    ck_assert_int_eq(d->channels, 3);
    ck_assert_int_eq(d->image_size, 32);
    ck_assert_str_eq(d->class_names[0], "cat");
    ck_assert_str_eq(d->class_names[1], "dog");
    ck_assert_msg(count_str(msgs, "cat/notes.txt") == 1, "stderr: %s", msgs);
    ck_assert_msg(count_str(msgs, "dog/trunc.png") == 1, "stderr: %s", msgs);
    ck_assert_msg(count_str(msgs, "a.png") == 0 && count_str(msgs, "DS_Store") == 0, "stderr: %s", msgs);
    free(msgs);
    // torchvision order: files of a folder, then its sub-folders
    const char *want[4] = { "cat/a.png", "cat/b.png", "dog/c.png", "dog/sub/d.png" };
    int32_t labels[4] = { 0, 0, 1, 1 };
    const char *keys[4] = { "c64x48", "c20x30", "c131x97", "c32x32" };
    uint8_t u[32 * 32 * 3];
    for (int i = 0; i < 4; i++) {
        const char *p = dataset_path(d, i);
        ck_assert_msg(strlen(p) > strlen(want[i]) && strcmp(p + strlen(p) - strlen(want[i]), want[i]) == 0, "%s", p);
        ck_assert_int_eq(dataset_label(d, i), labels[i]);
        ck_assert_msg(dataset_get_u8(d, i, u, &err) == 0, "%s", err.msg);
        expect_fixture(u, keys[i], 32, 3);           // ADM center_crop_arr through Pillow
    }
    // the 32x32 image is used as is; a mirrored float sample
    uint8_t *orig = crop_pattern(32, 32);
    ck_assert_mem_eq(u, orig, sizeof u);
    float x[3 * 32 * 32];
    ck_assert_int_eq(dataset_get(d, 3, 1, x, &err), 0);
    for (int c = 0; c < 3; c++) for (int y = 0; y < 32; y++) for (int xx = 0; xx < 32; xx++)
        ck_assert_float_eq(x[(c * 32 + y) * 32 + xx], orig[(y * 32 + 31 - xx) * 3 + c] / 127.5f - 1.0f);
    free(orig);

    // the loader over a folder: every sample once per epoch, decoded like dataset_get
    Loader *l = loader_new(d, 3, 11, 1, &err);
    ck_assert_ptr_nonnull(l);
    float xb[4 * 3 * 32 * 32];
    int32_t yb[3];
    int seen[4] = {0};
    for (int k = 0; k < 4; k++) {                    // 12 positions = 3 epochs
        loader_next(l, xb, yb);
        for (int b = 0; b < 3; b++) {
            int flip;
            uint64_t pos = (uint64_t)k * 3 + b;
            int64_t i = loader_sample_at(l, pos, &flip);
            if (pos < 4) seen[i]++;
            ck_assert_int_eq(yb[b], labels[i]);
            ck_assert_int_eq(dataset_get(d, i, flip, x, &err), 0);
            ck_assert_mem_eq(xb + (size_t)b * 3 * 1024, x, sizeof x);
        }
    }
    for (int i = 0; i < 4; i++) ck_assert_int_eq(seen[i], 1);
    loader_free(l);

    // a file that passed the open-time check but no longer decodes: reported once, replaced
    png = tu_read_file(tp("imgs/cat/b.png"), &n);
    memset(png + 40, 0x11, n - 60);                  // corrupt the image data, keep the IEND
    write_bytes(tp("imgs/cat/b.png"), png, n);
    free(png);
    ck_assert_int_ne(dataset_get_u8(d, 1, u, &err), 0);
    ck_assert_msg(strstr(err.msg, "b.png"), "%s", err.msg);
    capture_begin(log);
    l = loader_new(d, 4, 3, 0, &err);
    int32_t y4[4];
    for (int k = 0; k < 3; k++) loader_next(l, xb, NULL), loader_next(l, NULL, y4);
    loader_free(l);
    msgs = capture_end(log);
    ck_assert_msg(count_str(msgs, "b.png") == 1, "stderr: %s", msgs);
    free(msgs);
    dataset_close(d);

    // gray: PIL convert("L") then the crop
    write_pattern_png(tp("imgs/cat/b.png"), 20, 30);
    capture_begin(log);
    d = dataset_open(root, 32, 1, &err);
    free(capture_end(log));
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->channels, 1);
    ck_assert_int_eq(dataset_get_u8(d, 0, u, &err), 0);
    expect_fixture(u, "c64x48_l", 32, 1);
    dataset_close(d);

    // a bigger crop with two BOX halvings (300x260 -> 150x130 -> 75x65 -> bicubic to 40)
    const char *big = tp("big");
    mkdir_ok(big);
    mkdir_ok(tp("big/only"));
    write_pattern_png(tp("big/only/x.png"), 300, 260);
    d = dataset_open(big, 40, 0, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->channels, 3);
    uint8_t u40[40 * 40 * 3];
    ck_assert_int_eq(dataset_get_u8(d, 0, u40, &err), 0);
    expect_fixture(u40, "c300x260", 40, 3);
    dataset_close(d);
    tu_rm_tmpdir();
}
END_TEST

// A symlink back to the root (`ln -s .. circle/loop`) must not repeat the images under the wrong
// label; images smaller than --image-size are noted once, naming their size.
START_TEST(folder_symlink_loop_and_small) {
    tu_make_tmpdir("data");
    const char *root = tp("shapes");
    mkdir_ok(root);
    mkdir_ok(tp("shapes/circle"));
    mkdir_ok(tp("shapes/square"));
    write_pattern_png(tp("shapes/circle/a.png"), 16, 16);
    write_pattern_png(tp("shapes/circle/b.png"), 16, 16);
    write_pattern_png(tp("shapes/square/c.png"), 1, 1);
    ck_assert_int_eq(symlink("..", tp("shapes/circle/loop")), 0);
    ck_assert_int_eq(symlink("../circle", tp("shapes/square/again")), 0);
    MalaErr err = {{0}};
    const char *log = tp("stderr.txt");
    capture_begin(log);
    Dataset *d = dataset_open(root, 32, 3, &err);
    char *msgs = capture_end(log);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_int_eq(d->n, 3);
    ck_assert_msg(count_str(msgs, "circle/loop: a link to a folder already read") == 1, "stderr: %s", msgs);
    ck_assert_msg(count_str(msgs, "square/again: a link to a folder already read") == 1, "stderr: %s", msgs);
    ck_assert_msg(count_str(msgs, "3 image(s) in") == 1 && count_str(msgs, "smaller than the image size 32") == 1 &&
                  count_str(msgs, "c.png, 1x1); they are upscaled to 32x32") == 1, "stderr: %s", msgs);
    free(msgs);
    dataset_close(d);
    // at the images' own size there is no note
    capture_begin(log);
    d = dataset_open(root, 1, 3, &err);
    msgs = capture_end(log);
    ck_assert_msg(d != NULL, "%s", err.msg);
    ck_assert_msg(count_str(msgs, "upscaled") == 0, "stderr: %s", msgs);
    free(msgs);
    dataset_close(d);
    // folder_walk (mala vae, eval sources) skips the loop too
    char **all; size_t n;
    capture_begin(log);
    ck_assert_int_eq(folder_walk(root, &all, &n, &err), 0);
    free(capture_end(log));
    ck_assert_int_eq(n, 3);
    for (size_t i = 0; i < n; i++) free(all[i]);
    free(all);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(folder_errors) {
    tu_make_tmpdir("data");
    MalaErr err = {{0}};
    const char *missing = tp("missing");
    ck_assert_ptr_null(dataset_open(missing, 32, 3, &err));
    ck_assert_msg(strstr(err.msg, missing) == err.msg && strstr(err.msg, "no such dataset directory"), "%s", err.msg);

    const char *file = tp("file.png");
    write_pattern_png(file, 8, 8);
    ck_assert_ptr_null(dataset_open(file, 32, 3, &err));
    ck_assert_msg(strstr(err.msg, "not a directory"), "%s", err.msg);

    const char *flat = tp("flat");                   // images but no class folders
    mkdir_ok(flat);
    write_pattern_png(tp("flat/a.png"), 8, 8);
    ck_assert_ptr_null(dataset_open(flat, 32, 3, &err));
    ck_assert_msg(strstr(err.msg, "no class sub-folders"), "%s", err.msg);

    const char *r = tp("r");                         // class 'empty' has only a non-image
    mkdir_ok(r);
    mkdir_ok(tp("r/full"));
    mkdir_ok(tp("r/empty"));
    write_pattern_png(tp("r/full/a.png"), 8, 8);
    write_bytes(tp("r/empty/x.jpg"), "\xff\xd8\xff\xe0 junk", 9);
    const char *log = tp("log.txt");
    capture_begin(log);
    Dataset *d = dataset_open(r, 32, 3, &err);
    free(capture_end(log));
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(err.msg, "class 'empty' has no readable images"), "%s", err.msg);

    const char *e2 = tp("e2");                       // a class folder with nothing at all
    mkdir_ok(e2);
    mkdir_ok(tp("e2/a"));
    mkdir_ok(tp("e2/b"));
    write_pattern_png(tp("e2/b/a.png"), 8, 8);
    ck_assert_ptr_null(dataset_open(e2, 32, 3, &err));
    ck_assert_msg(strstr(err.msg, "class 'a'"), "%s", err.msg);

    ck_assert_ptr_null(dataset_open(r, 32, 4, &err));
    ck_assert_msg(strstr(err.msg, "channels"), "%s", err.msg);
    ck_assert_ptr_null(dataset_open("", 32, 3, &err));
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// loader: determinism, epochs, seek

static Dataset *small_fmnist(int n) {
    const char *dir = tp("fm");
    mkdir(dir, 0755);
    IdxSpec s = good_spec(n);
    write_idx(dir, &s, 0);
    MalaErr err = {{0}};
    Dataset *d = open_dir(dir, &err);
    ck_assert_msg(d != NULL, "%s", err.msg);
    return d;
}

// Runs `nb` batches from a fresh loader (optionally seeking first).
static void run_loader(Dataset *d, int B, uint64_t seed, int hflip, uint64_t seek, int nb, float *x, int32_t *y) {
    MalaErr err = {{0}};
    Loader *l = loader_new(d, B, seed, hflip, &err);
    ck_assert_msg(l != NULL, "%s", err.msg);
    if (seek) loader_seek(l, seek);
    ck_assert_uint_eq(loader_position(l), seek);
    size_t per = (size_t)d->channels * d->image_size * d->image_size;
    for (int k = 0; k < nb; k++) loader_next(l, x + (size_t)k * B * per, y + (size_t)k * B);
    ck_assert_uint_eq(loader_position(l), seek + nb);
    loader_free(l);
}

START_TEST(loader_determinism_and_seek) {
    tu_make_tmpdir("data");
    Dataset *d = small_fmnist(10);                   // label i % 10 == index: samples are recognisable
    const int B = 3, NB = 10;                        // 30 positions = 3 epochs
    size_t per = 32 * 32, tot = (size_t)NB * B;
    float *x1 = malloc(sizeof(float) * per * tot), *x2 = malloc(sizeof(float) * per * tot);
    int32_t y1[30], y2[30];
    run_loader(d, B, 42, 1, 0, NB, x1, y1);
    run_loader(d, B, 42, 1, 0, NB, x2, y2);
    ck_assert_mem_eq(y1, y2, sizeof y1);
    ck_assert_mem_eq(x1, x2, sizeof(float) * per * tot);

    // each epoch (10 consecutive positions) is a permutation; epochs differ
    for (int e = 0; e < 3; e++) {
        int seen[10] = {0};
        for (int j = 0; j < 10; j++) seen[y1[e * 10 + j]]++;
        for (int i = 0; i < 10; i++) ck_assert_int_eq(seen[i], 1);
    }
    ck_assert_msg(memcmp(y1, y1 + 10, 10 * sizeof(int32_t)) != 0 || memcmp(y1 + 10, y1 + 20, 10 * sizeof(int32_t)) != 0,
                  "epochs use the same order");

    // pixels match dataset_get with the announced flip; both flips occur
    MalaErr err = {{0}};
    Loader *probe = loader_new(d, B, 42, 1, &err);
    int flips = 0;
    float x[1024];
    for (size_t p = 0; p < tot; p++) {
        int flip;
        int64_t i = loader_sample_at(probe, p, &flip);
        ck_assert_int_eq(i, y1[p]);
        flips += flip;
        ck_assert_int_eq(dataset_get(d, i, flip, x, &err), 0);
        ck_assert_mem_eq(x1 + p * per, x, sizeof x);
    }
    ck_assert_msg(flips > 3 && flips < 27, "%d flips of 30", flips);
    loader_free(probe);

    // a different seed gives a different stream
    run_loader(d, B, 43, 1, 0, NB, x2, y2);
    ck_assert_msg(memcmp(y1, y2, sizeof y1) != 0 || memcmp(x1, x2, sizeof(float) * per * tot) != 0, "seed ignored");

    // resume: batch k after seek(k) equals batch k of a fresh run (mid-epoch and across epochs)
    for (uint64_t k = 1; k < 8; k += 3) {
        run_loader(d, B, 42, 1, k, NB - (int)k, x2, y2);
        ck_assert_mem_eq(y2, y1 + k * B, sizeof(int32_t) * (NB - k) * B);
        ck_assert_mem_eq(x2, x1 + k * B * per, sizeof(float) * per * (NB - k) * B);
    }
    // seeking backwards on a loader that is mid-stream
    Loader *l = loader_new(d, B, 42, 1, &err);
    int32_t yy[3];
    for (int k = 0; k < 6; k++) loader_next(l, x2, yy);
    loader_seek(l, 2);
    loader_next(l, x2, yy);
    ck_assert_mem_eq(yy, y1 + 2 * B, sizeof yy);
    ck_assert_mem_eq(x2, x1 + 2 * B * per, sizeof(float) * per * B);
    loader_free(l);

    // no flips when hflip is off: every image equals the unflipped sample
    run_loader(d, B, 42, 0, 0, 4, x2, y2);
    for (int p = 0; p < 12; p++) {
        ck_assert_int_eq(dataset_get(d, y2[p], 0, x, &err), 0);
        ck_assert_mem_eq(x2 + (size_t)p * per, x, sizeof x);
    }
    // a batch bigger than the dataset spans epochs
    int32_t ybig[25];
    float *xbig = malloc(sizeof(float) * per * 25);
    run_loader(d, 25, 5, 0, 0, 1, xbig, ybig);
    int seen[10] = {0};
    for (int j = 0; j < 20; j++) seen[ybig[j]]++;
    for (int i = 0; i < 10; i++) ck_assert_int_eq(seen[i], 2);
    free(xbig);

    ck_assert_ptr_null(loader_new(d, 0, 1, 0, &err));
    free(x1); free(x2);
    dataset_close(d);
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// image helpers against Pillow / torchvision

START_TEST(pil_resize_matches) {
    uint8_t *src = crop_pattern(23, 17);
    struct { const char *key; int w, h; ImageFilter f; } cases[] = {
        { "r_box", 10, 7, IMAGE_BOX }, { "r_bilinear", 31, 9, IMAGE_BILINEAR }, { "r_bicubic", 11, 29, IMAGE_BICUBIC },
    };
    for (int k = 0; k < 3; k++) {
        NpyArray a;
        MalaErr err = {{0}};
        ck_assert_msg(npz_load(FIX "npy_pil_crop.npz", cases[k].key, &a, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(a.shape[0], cases[k].h);
        ck_assert_int_eq(a.shape[1], cases[k].w);
        uint8_t *out = malloc(a.nbytes);
        image_resize(out, cases[k].w, cases[k].h, src, 23, 17, 3, cases[k].f);
        ck_assert_msg(memcmp(out, a.data, a.nbytes) == 0, "%s differs from Pillow", cases[k].key);
        free(out);
        npy_free(&a);
    }
    free(src);
    // direct center_crop_arr on the fixture inputs (no PNG round trip)
    uint8_t out[32 * 32 * 3];
    src = crop_pattern(64, 48);
    ck_assert_int_eq(image_center_crop_arr(out, 32, src, 64, 48, 3), 0);
    expect_fixture(out, "c64x48", 32, 3);
    free(src);
    // a constant image stays constant through BOX and BICUBIC
    uint8_t *flat = malloc(257 * 199 * 3);
    memset(flat, 77, 257 * 199 * 3);
    ck_assert_int_eq(image_center_crop_arr(out, 32, flat, 257, 199, 3), 0);
    for (int i = 0; i < 32 * 32 * 3; i++) ck_assert_int_eq(out[i], 77);
    free(flat);
}
END_TEST

static float grid_value(size_t i) { return (float)(1.3 * sin(0.37 * (double)i)); }

START_TEST(grid_matches_torchvision) {
    struct { const char *key; int n, c, h, w, nrow, pad; } cases[] = {
        { "g5x3", 5, 3, 6, 5, 2, 2 }, { "g3x1", 3, 1, 4, 4, 8, 1 }, { "g1x3", 1, 3, 5, 7, 8, 2 },
    };
    tu_make_tmpdir("data");
    for (int k = 0; k < 3; k++) {
        size_t cnt = (size_t)cases[k].n * cases[k].c * cases[k].h * cases[k].w;
        float *x = malloc(sizeof(float) * cnt);
        for (size_t i = 0; i < cnt; i++) x[i] = grid_value(i);
        NpyArray a;
        MalaErr err = {{0}};
        ck_assert_msg(npz_load(FIX "npy_grid.npz", cases[k].key, &a, &err) == 0, "%s", err.msg);
        uint8_t *g; int gw, gh;
        ck_assert_int_eq(image_grid_u8(&g, &gw, &gh, x, cases[k].n, cases[k].c, cases[k].h, cases[k].w, cases[k].nrow,
                                       cases[k].pad, &err), 0);
        ck_assert_int_eq(gh, a.shape[0]);
        ck_assert_int_eq(gw, a.shape[1]);
        ck_assert_msg(memcmp(g, a.data, a.nbytes) == 0, "%s differs from torchvision", cases[k].key);
        // through a PNG file and back
        const char *p = tp("grid.png");
        ck_assert_msg(image_save_grid(p, x, cases[k].n, cases[k].c, cases[k].h, cases[k].w, cases[k].nrow, cases[k].pad,
                                      &err) == 0, "%s", err.msg);
        uint8_t *back; int bw, bh;
        ck_assert_msg(image_load(p, 3, &back, &bw, &bh, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(bw, gw); ck_assert_int_eq(bh, gh);
        ck_assert_mem_eq(back, g, a.nbytes);
        free(back); free(g); free(x);
        npy_free(&a);
    }
    MalaErr err = {{0}};
    float one = 0;
    ck_assert_int_ne(image_save_grid(tp("bad.png"), &one, 1, 2, 1, 1, 8, 2, &err), 0);
    ck_assert_msg(strstr(err.msg, "bad.png"), "%s", err.msg);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(png_io) {
    tu_make_tmpdir("data");
    MalaErr err = {{0}};
    uint8_t g[6 * 5];
    for (int i = 0; i < 30; i++) g[i] = (uint8_t)(i * 8);
    ck_assert_int_eq(image_write_png(tp("g.png"), g, 6, 5, 1, &err), 0);
    uint8_t *px; int w, h;
    ck_assert_int_eq(image_load(tp("g.png"), 1, &px, &w, &h, &err), 0);
    ck_assert_int_eq(w, 6); ck_assert_int_eq(h, 5);
    ck_assert_mem_eq(px, g, 30);                     // gray -> RGB -> L is exact
    free(px);
    ck_assert_int_eq(image_load(tp("g.png"), 3, &px, &w, &h, &err), 0);
    for (int i = 0; i < 30; i++) ck_assert(px[3 * i] == g[i] && px[3 * i + 1] == g[i] && px[3 * i + 2] == g[i]);
    free(px);
    uint8_t rgb[3] = { 255, 0, 0 };                  // PIL: L = 76 for pure red
    ck_assert_int_eq(image_rgb_to_l(rgb), 76);
    ck_assert_int_eq(image_check(tp("g.png"), &w, &h, &err), 0);
    ck_assert_int_ne(image_load(tp("none.png"), 3, &px, &w, &h, &err), 0);
    ck_assert_msg(strstr(err.msg, "none.png") && strstr(err.msg, "No such file"), "%s", err.msg);
    write_bytes(tp("t.txt"), "hello", 5);
    ck_assert_int_ne(image_load(tp("t.txt"), 3, &px, &w, &h, &err), 0);
    ck_assert_msg(strstr(err.msg, "t.txt") && strstr(err.msg, "not an image"), "%s", err.msg);
    ck_assert_int_ne(image_check(tp("t.txt"), &w, &h, &err), 0);
    // JPEG: decodes; cut in half it fails the open-time check (no end-of-image marker)
    uint8_t *pat = crop_pattern(24, 16);
    ck_assert(stbi_write_jpg(tp("p.jpg"), 24, 16, 3, pat, 90));
    free(pat);
    ck_assert_int_eq(image_check(tp("p.jpg"), &w, &h, &err), 0);
    ck_assert_int_eq(image_load(tp("p.jpg"), 3, &px, &w, &h, &err), 0);
    ck_assert(w == 24 && h == 16);
    free(px);
    size_t n;
    unsigned char *jpg = tu_read_file(tp("p.jpg"), &n);
    write_bytes(tp("p.jpg"), jpg, n / 2);
    free(jpg);
    ck_assert_int_ne(image_check(tp("p.jpg"), &w, &h, &err), 0);
    ck_assert_msg(strstr(err.msg, "p.jpg") && strstr(err.msg, "truncated JPEG"), "%s", err.msg);
    ck_assert_int_ne(image_write_png(tp("nodir/x.png"), g, 6, 5, 1, &err), 0);
    ck_assert_msg(strstr(err.msg, "nodir/x.png"), "%s", err.msg);
    tu_rm_tmpdir();
}
END_TEST


// ---------------------------------------------------------------------------------------------
// IDX files cut short, image formats and limits

#define REG "tests/fuzz/regress/"
#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

// gzip IDX files cut by 1, 4, 8 and 9 bytes (inside the 8-byte trailer, and one byte of data):
// zlib's gzread called them complete.
START_TEST(idx_cut_short) {
    const int cuts[] = {1, 4, 8, 9};
    MalaErr err = {{0}};
    uint32_t dims[3];
    uint8_t *d;
    for (int k = 0; k < 4; k++) {
        char p[300];
        snprintf(p, sizeof p, REG "idx/images_cut%d.gz", cuts[k]);
        ck_assert_int_ne(idx_read(p, 3, dims, &d, &err), 0);
        ck_assert_msg(strstr(err.msg, p) == err.msg && strstr(err.msg, "truncated gzip stream"), "%s", err.msg);
        ck_assert_ptr_null(d);
        snprintf(p, sizeof p, REG "idx/labels_cut%d.gz", cuts[k]);
        ck_assert_int_ne(idx_read(p, 1, dims, &d, &err), 0);
        ck_assert_msg(strstr(err.msg, "truncated gzip stream"), "%s", err.msg);
    }
    ck_assert_msg(idx_read("tests/fuzz/seeds/idx/images.gz", 3, dims, &d, &err) == 0, "%s", err.msg);
    ck_assert(dims[0] == 2 && dims[1] == 28 && dims[2] == 28 && d[1] == 7);
    free(d);
    // Fashion-MNIST's own t10k images, cut the same way
    size_t n;
    if (access(FMNIST_DIR "/t10k-images-idx3-ubyte.gz", R_OK) != 0) return;
    unsigned char *gz = tu_read_file(FMNIST_DIR "/t10k-images-idx3-ubyte.gz", &n);
    for (int k = 0; k < 4; k++) {
        ck_assert_int_ne(idx_parse(gz, n - (size_t)cuts[k], "t10k", 3, dims, &d, &err), 0);
        ck_assert_msg(strstr(err.msg, "t10k: truncated gzip stream"), "cut %d: %s", cuts[k], err.msg);
    }
    ck_assert_msg(idx_parse(gz, n, "t10k", 3, dims, &d, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(dims[0], 10000);
    free(d);
    // trailing garbage after the gzip stream, and a plain file with a byte too many or too few
    unsigned char *more = malloc(n + 3);
    memcpy(more, gz, n);
    memcpy(more + n, "abc", 3);
    ck_assert_int_ne(idx_parse(more, n + 3, "t10k", 3, dims, &d, &err), 0);
    ck_assert_msg(strstr(err.msg, "unexpected bytes after the gzip stream"), "%s", err.msg);
    free(more);
    free(gz);
    unsigned char plain[8 + 5] = {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5};
    ck_assert_int_eq(idx_parse(plain, sizeof plain, "lab", 1, dims, &d, &err), 0);
    ck_assert(dims[0] == 5 && d[4] == 5);
    free(d);
    ck_assert_int_ne(idx_parse(plain, sizeof plain - 1, "lab", 1, dims, &d, &err), 0);
    ck_assert_msg(strstr(err.msg, "lab: truncated: the data has 4 of 5 bytes"), "%s", err.msg);
    plain[7] = 4;
    ck_assert_int_ne(idx_parse(plain, sizeof plain, "lab", 1, dims, &d, &err), 0);
    ck_assert_msg(strstr(err.msg, "unexpected data after 4 items"), "%s", err.msg);
    plain[7] = 0xFF; plain[6] = 0xFF; plain[5] = 0xFF;   // 16M items claimed: refused before any allocation
    ck_assert_int_ne(idx_parse(plain, sizeof plain, "lab", 1, dims, &d, &err), 0);
    ck_assert_msg(strstr(err.msg, "implausible item count"), "%s", err.msg);
}
END_TEST

static uint8_t *load_ok(const char *path, int c, int *w, int *h) {
    uint8_t *px;
    MalaErr err = {{0}};
    ck_assert_msg(image_check(path, w, h, &err) == 0, "%s", err.msg);
    ck_assert_msg(image_load(path, c, &px, w, h, &err) == 0, "%s", err.msg);
    return px;
}

static void expect_refused(const char *path, const char *needle) {
    uint8_t *px;
    int w, h;
    MalaErr err = {{0}};
    ck_assert_msg(image_check(path, &w, &h, &err) != 0, "%s passed image_check", path);
    ck_assert_msg(strstr(err.msg, path) == err.msg && strstr(err.msg, needle), "check %s: expected '%s': %s", path,
                  needle, err.msg);
    ck_assert_msg(image_load(path, 3, &px, &w, &h, &err) != 0, "%s decoded", path);
    ck_assert_msg(strstr(err.msg, path) == err.msg && strstr(err.msg, needle), "load %s: expected '%s': %s", path,
                  needle, err.msg);
    ck_assert_ptr_null(px);
}

// PGM / PPM, 8 and 16 bits: samples rescaled to 0..255 as round(v * 255 / maxval). (stb_image
// read past its buffer for 16-bit files; Pillow clips 16-bit samples to 255.)
START_TEST(pnm_decoding) {
    int w, h;
    uint8_t *g = load_ok(REG "image/pgm16_40x30.pgm", 1, &w, &h);   // sample i = (i * 997) mod 65536
    ck_assert(w == 40 && h == 30);
    for (int i = 0; i < w * h; i++) {
        unsigned v = (unsigned)(i * 997) & 0xFFFF, want = (v * 255 + 32767) / 65535;
        ck_assert_msg(g[i] == want, "pixel %d: %u, expected %u", i, g[i], want);
    }
    uint8_t *rgb = load_ok(REG "image/pgm16_40x30.pgm", 3, &w, &h);
    for (int i = 0; i < w * h; i++) ck_assert(rgb[3 * i] == g[i] && rgb[3 * i + 1] == g[i] && rgb[3 * i + 2] == g[i]);
    free(g); free(rgb);
    rgb = load_ok(REG "image/ppm16_20x10.ppm", 3, &w, &h);
    g = load_ok(REG "image/ppm16_20x10.ppm", 1, &w, &h);
    ck_assert(w == 20 && h == 10);
    for (int i = 0; i < w * h * 3; i++) {
        unsigned v = (unsigned)(i * 997) & 0xFFFF;
        ck_assert_uint_eq(rgb[i], (v * 255 + 32767) / 65535);
    }
    for (int i = 0; i < w * h; i++) ck_assert_uint_eq(g[i], image_rgb_to_l(rgb + 3 * i));
    free(g); free(rgb);
    g = load_ok("tests/fuzz/seeds/image/p5_maxval1000.pgm", 1, &w, &h);   // 0 1 500 999 1000 7 of 1000
    const uint8_t want[6] = {0, 0, 128, 255, 255, 2};
    ck_assert(w == 3 && h == 2 && memcmp(g, want, 6) == 0);
    free(g);
    // a 2000 x 2000 16-bit PGM, as in the issue (8 MB: made here)
    tu_make_tmpdir("pnm");
    size_t n = 32 + 2000u * 2000 * 2;
    unsigned char *b = malloc(n);
    int hl = snprintf((char *)b, 32, "P5\n2000 2000\n65535\n");
    for (size_t i = 0; i < 2000u * 2000; i++) { b[hl + 2 * i] = (unsigned char)(i >> 3); b[hl + 2 * i + 1] = (unsigned char)i; }
    write_bytes(tp("big.pgm"), b, (size_t)hl + 2000u * 2000 * 2);
    rgb = load_ok(tp("big.pgm"), 3, &w, &h);
    ck_assert(w == 2000 && h == 2000);
    for (size_t i = 0; i < 2000u * 2000; i += 4999) {
        unsigned v = (unsigned)b[hl + 2 * i] << 8 | b[hl + 2 * i + 1];
        ck_assert_uint_eq(rgb[3 * i + 1], (v * 255 + 32767) / 65535);
    }
    free(rgb);
    // cut short by one byte: refused at the check (the samples are counted), not half-read
    write_bytes(tp("cut.pgm"), b, (size_t)hl + 2000u * 2000 * 2 - 1);
    expect_refused(tp("cut.pgm"), "truncated PGM/PPM (7999999 of 8000000 sample bytes)");
    write_bytes(tp("hdr.pgm"), "P6\n3 2\n", 7);
    expect_refused(tp("hdr.pgm"), "PGM/PPM header incomplete");
    write_bytes(tp("zero.pgm"), "P5 3 2 0\n\0\0\0\0\0\0", 15);
    expect_refused(tp("zero.pgm"), "maxval is 0");
    free(b);
    tu_rm_tmpdir();
}
END_TEST

// Only the documented formats, and headers over the limits, are refused before any decoding.
START_TEST(image_formats_and_limits) {
    expect_refused(REG "image/tga_18176x6666.tga", "not an image in a supported format (PNG, JPEG, BMP, binary PGM/PPM)");
    expect_refused(REG "image/pnm_width_overflow.pgm", "PGM/PPM width is larger than 32768");
    expect_refused(REG "image/png_100000x100000.png", "100000x100000 pixels: a side longer than 32768");
    expect_refused(REG "image/jpeg_dht_4080_codes.jpg", "cannot decode JPEG");
    expect_refused(REG "image/png_idat_length_2gb.png", "corrupt PNG (chunk 'IDAT' of 1627390011 bytes runs past the end");
    tu_make_tmpdir("fmt");
    write_bytes(tp("a.gif"), "GIF89a\1\0\1\0\0\0\0;", 13);
    expect_refused(tp("a.gif"), "GIF images are not supported");
    write_bytes(tp("a.webp"), "RIFF\0\0\0\0WEBPVP8 ", 16);
    expect_refused(tp("a.webp"), "WebP images are not supported");
    write_bytes(tp("a.pbm"), "P1\n1 1\n1\n", 9);
    expect_refused(tp("a.pbm"), "ASCII or bitmap PNM / PAM images are not supported");
    // a PNG header of 10000 x 9000: within the side limit, over PIL's pixel limit
    size_t n;
    unsigned char *png = tu_read_file(REG "image/png_100000x100000.png", &n);
    const unsigned char wh[8] = {0, 0, 0x27, 0x10, 0, 0, 0x23, 0x28};
    memcpy(png + 16, wh, 8);
    write_bytes(tp("bomb.png"), png, n);
    free(png);
    expect_refused(tp("bomb.png"), "10000x9000 pixels, more than the 89478485 an image may have");
    // limits given by the caller
    size_t len;
    unsigned char *f = tu_read_file("tests/fuzz/seeds/image/rgb.png", &len);   // 9 x 7
    uint8_t *px;
    int w, h;
    MalaErr err = {{0}};
    ImageLimits lim = image_limits_default();
    ck_assert_msg(image_decode(f, len, "rgb.png", 3, &lim, &px, &w, &h, &err) == 0, "%s", err.msg);
    free(px);
    lim.max_side = 8;
    ck_assert_int_ne(image_decode(f, len, "rgb.png", 3, &lim, &px, &w, &h, &err), 0);
    ck_assert_msg(strstr(err.msg, "a side longer than 8"), "%s", err.msg);
    lim = image_limits_default();
    lim.max_pixels = 62;
    ck_assert_int_ne(image_probe(f, len, "rgb.png", &lim, &w, &h, &err), 0);
    ck_assert_msg(strstr(err.msg, "more than the 62"), "%s", err.msg);
    lim = image_limits_default();
    lim.max_file_bytes = (int64_t)len - 1;
    ck_assert_int_ne(image_decode(f, len, "rgb.png", 3, &lim, &px, &w, &h, &err), 0);
    ck_assert_msg(strstr(err.msg, "more than the"), "%s", err.msg);
    free(f);
    tu_rm_tmpdir();
}
END_TEST

// PNG (stb_image), JPEG (libjpeg-turbo: baseline, 4:4:4, progressive, gray, Adobe CMYK) and BMP
// give Pillow's pixels, as RGB and as L (tools/ref/make_image_fixtures.py).
START_TEST(images_match_pillow) {
    const char *names[] = {"baseline.jpg", "444.jpg", "progressive.jpg", "gray.jpg", "cmyk.jpg",
                           "rgba.png", "palette.png", "gray_alpha.png", "rgb.bmp"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        char path[200], key[64];
        snprintf(path, sizeof path, FIX "img_%s", names[k]);
        for (int c = 1; c <= 3; c += 2) {
            snprintf(key, sizeof key, "%s_%s", c == 3 ? "rgb" : "l", names[k]);
            *strrchr(key, '.') = '_';
            NpyArray a;
            MalaErr err = {{0}};
            ck_assert_msg(npz_load(FIX "img_pil.npz", key, &a, &err) == 0, "%s", err.msg);
            int w, h;
            uint8_t *px = load_ok(path, c, &w, &h);
            ck_assert(a.ndim == (c == 3 ? 3 : 2) && a.shape[0] == h && a.shape[1] == w);
            int diff = 0;
            for (size_t i = 0; i < a.nbytes; i++) diff += px[i] != ((uint8_t *)a.data)[i];
            ck_assert_msg(diff == 0, "%s (%d channels): %d of %zu bytes differ from Pillow", names[k], c, diff, a.nbytes);
            free(px);
            npy_free(&a);
        }
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("data");
    TCase *tc = tcase_create("data");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fmnist_real);
    tcase_add_test(tc, fmnist_synthetic_and_corrupt);
    tcase_add_test(tc, folder_dataset);
    tcase_add_test(tc, folder_errors);
    tcase_add_test(tc, folder_symlink_loop_and_small);
    tcase_add_test(tc, loader_determinism_and_seek);
    tcase_add_test(tc, pil_resize_matches);
    tcase_add_test(tc, grid_matches_torchvision);
    tcase_add_test(tc, png_io);
    tcase_add_test(tc, idx_cut_short);
    tcase_add_test(tc, pnm_decoding);
    tcase_add_test(tc, image_formats_and_limits);
    tcase_add_test(tc, images_match_pillow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }

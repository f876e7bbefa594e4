// defines: dataset_open, dataset_close, folder_walk, dataset_limit, dataset_label, dataset_path,
//          dataset_get_u8, dataset_get, dataset_is_image_folder, dataset_report_once, dataset_draw_latent
//
// Top to bottom: Fashion-MNIST (gzip IDX), image folders (ImageNet layout), latent sets, then the
// common sample accessors.
#include "data/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#endif

#include "formats/idx.h"        // defines: idx_read
#include "formats/image_io.h"   // defines: image_load, image_check, image_center_crop_arr, image_u8_to_float
#include "data/latents.h"     // defines: latent_is_set, latent_set_open, latent_set_draw
#include <stb_image.h>  // defines: stbi_info_from_file (declarations only; image_io.c holds the code)

#define FMNIST_DIR      "/usr/share/datasets/fashion-mnist"
#define FMNIST_SIDE     28
#define FMNIST_SIZE     32
#define FOLDER_SIZE     256
#define MAX_DEPTH       32

static const char *FMNIST_CLASSES[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

enum { KIND_FMNIST = 0, KIND_FOLDER = 1, KIND_LATENT = 2 };

struct DatasetPriv {
    int kind;
    int32_t *labels;          // [n]
    // Fashion-MNIST: raw 28x28 images
    uint8_t *pix;             // [n, 28, 28]
    // folders: full paths in one arena
    char *arena;
    int64_t *path_off;        // [n]
    unsigned char *reported;  // [n] late decode failures already reported
    // latent sets: the mapped set; path_off[i] is sample i's row
    LatentSet *lat;
};

static Dataset *dataset_alloc(int kind) {
    Dataset *d = xcalloc(1, sizeof *d);
    d->priv = xcalloc(1, sizeof *d->priv);
    d->priv->kind = kind;
    return d;
}

void dataset_close(Dataset *d) {
    if (!d) return;
    for (int i = 0; i < d->num_classes; i++) free(d->class_names ? d->class_names[i] : NULL);
    free(d->class_names);
    free(d->source);
    if (d->priv) {
        free(d->priv->labels); free(d->priv->pix); free(d->priv->arena);
        free(d->priv->path_off); free(d->priv->reported);
        if (d->priv->lat) { latent_set_close(d->priv->lat); free(d->priv->lat); }
        free(d->priv);
    }
    free(d);
}

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST

// Reads an IDX file (formats/idx.h) of Fashion-MNIST images (3 dimensions, 28x28) or labels (1).
static int read_idx(const char *path, int ndims, uint32_t *dims, uint8_t **data, MalaErr *err) {
    if (idx_read(path, ndims, dims, data, err)) return -1;
    if (ndims == 3 && (dims[1] != FMNIST_SIDE || dims[2] != FMNIST_SIDE)) {
        free(*data);
        *data = NULL;
        return mala_errf(err, "%s: expected %dx%d images, found %ux%u", path, FMNIST_SIDE, FMNIST_SIDE, dims[1], dims[2]);
    }
    return 0;
}

// Finds <dir>/<base>.gz, falling back to the uncompressed <dir>/<base>.
static void idx_path(char *out, size_t cap, const char *dir, const char *base) {
    snprintf(out, cap, "%s/%s.gz", dir, base);
    if (access(out, F_OK) != 0) {
        char plain[4096];
        snprintf(plain, sizeof plain, "%s/%s", dir, base);
        if (access(plain, F_OK) == 0) snprintf(out, cap, "%s", plain);
    }
}

static Dataset *open_fmnist(const char *dir, int test, int image_size, int channels, MalaErr *err) {
    if (image_size != 0 && image_size != FMNIST_SIZE) {
        mala_errf(err, "fashion-mnist: image size must be %d (28x28 padded), got %d", FMNIST_SIZE, image_size);
        return NULL;
    }
    if (channels != 0 && channels != 1) {
        mala_errf(err, "fashion-mnist: images have 1 channel, got channels=%d", channels);
        return NULL;
    }
    char ip[4096], lp[4096];
    idx_path(ip, sizeof ip, dir, test ? "t10k-images-idx3-ubyte" : "train-images-idx3-ubyte");
    idx_path(lp, sizeof lp, dir, test ? "t10k-labels-idx1-ubyte" : "train-labels-idx1-ubyte");
    uint32_t idims[3] = {0}, ldims[1] = {0};
    uint8_t *img, *lab;
    if (read_idx(ip, 3, idims, &img, err)) return NULL;
    if (read_idx(lp, 1, ldims, &lab, err)) { free(img); return NULL; }
    if (idims[0] != ldims[0]) {
        mala_errf(err, "%s: %u images but %s has %u labels", ip, idims[0], lp, ldims[0]);
        free(img); free(lab);
        return NULL;
    }
    Dataset *d = dataset_alloc(KIND_FMNIST);
    d->n = idims[0];
    d->channels = 1;
    d->image_size = FMNIST_SIZE;
    d->num_classes = 10;
    d->class_names = xcalloc(10, sizeof(char *));
    for (int i = 0; i < 10; i++) d->class_names[i] = xstrdup(FMNIST_CLASSES[i]);
    d->source = xstrdup(ip);
    d->priv->pix = img;
    d->priv->labels = xmalloc(sizeof(int32_t) * (size_t)d->n);
    for (int64_t i = 0; i < d->n; i++) {
        if (lab[i] >= 10) {
            mala_errf(err, "%s: label %d of item %lld is outside 0..9", lp, lab[i], (long long)i);
            free(lab); dataset_close(d);
            return NULL;
        }
        d->priv->labels[i] = lab[i];
    }
    free(lab);
    return d;
}

// ---------------------------------------------------------------------------------------------
// image folders

typedef struct { char **v; size_t n, cap; } StrList;

static void sl_push(StrList *l, char *s) {
    if (l->n == l->cap) { l->cap = l->cap ? 2 * l->cap : 64; l->v = realloc(l->v, l->cap * sizeof *l->v); if (!l->v) FATAL("out of memory"); }
    l->v[l->n++] = s;
}
static void sl_free(StrList *l) { for (size_t i = 0; i < l->n; i++) free(l->v[i]); free(l->v); memset(l, 0, sizeof *l); }
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = xmalloc(la + lb + 2);
    memcpy(s, a, la); s[la] = '/'; memcpy(s + la + 1, b, lb + 1);
    return s;
}

// Sorted entry names of dir that are not hidden; dirs and files go to separate lists.
static int list_dir(const char *dir, StrList *dirs, StrList *files, MalaErr *err) {
    DIR *dp = opendir(dir);
    if (!dp) return mala_errf(err, "%s: cannot read directory: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.') continue;
        char *full = join(dir, de->d_name);
        struct stat st;
        if (stat(full, &st) != 0) { fprintf(stderr, "mala: skipping %s: %s\n", full, strerror(errno)); free(full); continue; }
        if (S_ISDIR(st.st_mode)) sl_push(dirs, full);
        else if (S_ISREG(st.st_mode) && files) sl_push(files, full);
        else free(full);
    }
    closedir(dp);
    if (dirs->n > 1) qsort(dirs->v, dirs->n, sizeof(char *), cmp_str);
    if (files && files->n > 1) qsort(files->v, files->n, sizeof(char *), cmp_str);
    return 0;
}

// Folders a walk has entered, by (device, inode): a symlink to a folder already walked (a loop
// such as `ln -s .. loop`, or a link to another class) would repeat its images under the wrong
// label, so the walk enters each folder once.
typedef struct { dev_t *dev; ino_t *ino; size_t n, cap; } Visited;

// 1 when path is a folder not yet in v (and adds it); 0 when already seen or unreadable.
static int visit(Visited *v, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 1;  // list_dir reports the error
    for (size_t i = 0; i < v->n; i++)
        if (v->dev[i] == st.st_dev && v->ino[i] == st.st_ino) return 0;
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->dev = realloc(v->dev, v->cap * sizeof *v->dev);
        v->ino = realloc(v->ino, v->cap * sizeof *v->ino);
        if (!v->dev || !v->ino) FATAL("out of memory");
    }
    v->dev[v->n] = st.st_dev; v->ino[v->n] = st.st_ino; v->n++;
    return 1;
}
static void visited_free(Visited *v) { free(v->dev); free(v->ino); memset(v, 0, sizeof *v); }

// All files under a class folder in torchvision's order: directories sorted as path strings
// (sorted(os.walk(...))), files sorted by name within each. Folders already in seen are skipped
// with one line naming the link.
static int walk_class(const char *cls, Visited *seen, StrList *out, MalaErr *err) {
    StrList dirs = {0};
    sl_push(&dirs, xstrdup(cls));
    for (size_t k = 0; k < dirs.n; k++) {
        StrList sub = {0}, files = {0};
        if (list_dir(dirs.v[k], &sub, &files, err)) { sl_free(&sub); sl_free(&files); sl_free(&dirs); return -1; }
        int depth = 0;
        for (const char *c = dirs.v[k] + strlen(cls); *c; c++) depth += *c == '/';
        for (size_t i = 0; i < sub.n; i++) {
            if (!visit(seen, sub.v[i])) {
                fprintf(stderr, "mala: skipping %s: a link to a folder already read (a symlink loop?)\n", sub.v[i]);
                free(sub.v[i]);
            } else if (depth >= MAX_DEPTH) { fprintf(stderr, "mala: not descending into %s (deeper than %d)\n", sub.v[i], MAX_DEPTH); free(sub.v[i]); }
            else sl_push(&dirs, sub.v[i]);
        }
        free(sub.v);
        for (size_t i = 0; i < files.n; i++) sl_push(out, files.v[i]);
        free(files.v);
    }
    sl_free(&dirs);
    return 0;
}

int folder_walk(const char *root, char ***files, size_t *n, MalaErr *err) {
    StrList out = {0};
    Visited seen = {0};
    visit(&seen, root);
    int rc = walk_class(root, &seen, &out, err);
    visited_free(&seen);
    if (rc) return -1;
    *files = out.v;
    *n = out.n;
    return 0;
}

// Sort key for torchvision's order: (directory, file name).
static int cmp_walk(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    const char *sx = strrchr(x, '/'), *sy = strrchr(y, '/');
    size_t dx = (size_t)(sx - x), dy = (size_t)(sy - y), m = dx < dy ? dx : dy;
    int c = memcmp(x, y, m);
    if (c) return c;
    if (dx != dy) return dx < dy ? -1 : 1;
    return strcmp(sx + 1, sy + 1);
}

// The folder's channel count from the files' headers: 3 when any image has colour, 1 when every
// one is gray (with or without alpha). Stops at the first colour image.
static int folder_channels(char *const *files, const unsigned char *ok, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!ok[i]) continue;
        int w, h, comp = 0;
        FILE *f = fopen(files[i], "rb");
        int known = f && stbi_info_from_file(f, &w, &h, &comp);
        if (f) fclose(f);
        if (!known || comp >= 3) return 3;
    }
    return 1;
}

static Dataset *open_folder(const char *root, int image_size, int channels, MalaErr *err) {
    if (image_size == 0) image_size = FOLDER_SIZE;
    if (image_size < 1 || image_size > 8192) { mala_errf(err, "%s: bad image size %d", root, image_size); return NULL; }
    if (channels != 0 && channels != 1 && channels != 3) { mala_errf(err, "%s: image folders give 1 or 3 channels, not %d", root, channels); return NULL; }
    struct stat st;
    if (stat(root, &st) != 0) {
        mala_errf(err, "%s: no such dataset directory (%s); use 'fashion-mnist' or a folder root/<class>/<image>",
                  root, strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(st.st_mode)) { mala_errf(err, "%s: not a directory (expected root/<class>/<image>)", root); return NULL; }
    StrList classes = {0};
    if (list_dir(root, &classes, NULL, err)) return NULL;
    if (classes.n == 0) {
        mala_errf(err, "%s: no class sub-folders (expected root/<class>/<image>)", root);
        sl_free(&classes);
        return NULL;
    }
    StrList files = {0};
    int32_t *cls_of = NULL;
    size_t cls_cap = 0;
    // the root and every class folder count as read, so a link back to either is skipped
    Visited seen = {0};
    visit(&seen, root);
    for (size_t c = 0; c < classes.n; c++) visit(&seen, classes.v[c]);
    for (size_t c = 0; c < classes.n; c++) {
        size_t before = files.n;
        if (walk_class(classes.v[c], &seen, &files, err)) { sl_free(&classes); sl_free(&files); free(cls_of); visited_free(&seen); return NULL; }
        if (files.n - before > 1) qsort(files.v + before, files.n - before, sizeof(char *), cmp_walk);
        if (files.n > cls_cap) { cls_cap = files.cap; cls_of = realloc(cls_of, cls_cap * sizeof *cls_of); if (!cls_of) FATAL("out of memory"); }
        for (size_t i = before; i < files.n; i++) cls_of[i] = (int32_t)c;
    }
    visited_free(&seen);
    // cheap validity check of every file (header + end marker), in parallel, reported in order
    unsigned char *ok = xcalloc(files.n ? files.n : 1, 1);
    char **why = xcalloc(files.n ? files.n : 1, sizeof(char *));
    int *side = xcalloc(files.n ? files.n : 1, sizeof(int));  // shorter side of each image
    #pragma omp parallel for schedule(dynamic, 64)
    for (long i = 0; i < (long)files.n; i++) {
        MalaErr e;
        int w = 0, h = 0;
        if (image_check(files.v[i], &w, &h, &e) == 0) ok[i] = 1, side[i] = w < h ? w : h;
        else why[i] = xstrdup(e.msg);
    }
    // One note per folder (never per image) when images are upscaled: the crop resizes the
    // shorter side to image_size, so an image smaller than that is enlarged and blurred.
    size_t small = 0, smallest = 0;
    for (size_t i = 0; i < files.n; i++)
        if (ok[i] && side[i] < image_size) { if (!small || side[i] < side[smallest]) smallest = i; small++; }
    if (small) {
        int w = 0, h = 0;
        MalaErr e;
        image_check(files.v[smallest], &w, &h, &e);
        fprintf(stderr, "mala: note: %zu image(s) in %s are smaller than the image size %d (smallest %s, %dx%d); "
                "they are upscaled to %dx%d\n", small, root, image_size, files.v[smallest], w, h, image_size, image_size);
    }
    free(side);
    size_t *count = xcalloc(classes.n, sizeof(size_t)), kept = 0, bytes = 0;
    for (size_t i = 0; i < files.n; i++) {
        if (!ok[i]) { fprintf(stderr, "mala: skipping unreadable image %s\n", why[i]); free(why[i]); continue; }
        count[cls_of[i]]++; kept++; bytes += strlen(files.v[i]) + 1;
    }
    free(why);
    if (channels == 0) channels = folder_channels(files.v, ok, files.n);
    for (size_t c = 0; c < classes.n; c++) {
        if (count[c] == 0) {
            mala_errf(err, "%s: class '%s' has no readable images", classes.v[c], classes.v[c] + strlen(root) + 1);
            sl_free(&classes); sl_free(&files); free(cls_of); free(ok); free(count);
            return NULL;
        }
    }
    Dataset *d = dataset_alloc(KIND_FOLDER);
    d->n = (int64_t)kept;
    d->channels = channels;
    d->image_size = image_size;
    d->num_classes = (int)classes.n;
    d->class_names = xcalloc(classes.n, sizeof(char *));
    for (size_t c = 0; c < classes.n; c++) d->class_names[c] = xstrdup(classes.v[c] + strlen(root) + 1);
    d->source = xstrdup(root);
    DatasetPriv *p = d->priv;
    p->arena = xmalloc(bytes ? bytes : 1);
    p->path_off = xmalloc(sizeof(int64_t) * kept);
    p->labels = xmalloc(sizeof(int32_t) * kept);
    p->reported = xcalloc(kept ? kept : 1, 1);
    size_t k = 0, off = 0;
    for (size_t i = 0; i < files.n; i++) {
        if (!ok[i]) continue;
        size_t l = strlen(files.v[i]) + 1;
        memcpy(p->arena + off, files.v[i], l);
        p->path_off[k] = (int64_t)off; p->labels[k] = cls_of[i];
        off += l; k++;
    }
    sl_free(&classes); sl_free(&files); free(cls_of); free(ok); free(count);
    return d;
}

// ---------------------------------------------------------------------------------------------
// latent sets (mala encode)

static Dataset *open_latents(const char *root, int image_size, int channels, MalaErr *err) {
    LatentSet *ls = xcalloc(1, sizeof *ls);
    if (latent_set_open(ls, root, err)) { free(ls); return NULL; }
    const LatentManifest *m = &ls->m;
    const char *bad = m->h != m->w ? "its latents are not square" : NULL;
    char why[160];
    if (!bad && image_size && image_size != m->h)
        snprintf(why, sizeof why, "its latents are %dx%d, not --image-size %d (image size comes from the latents)", m->h,
                 m->w, image_size), bad = why;
    if (!bad && channels && channels != m->c)
        snprintf(why, sizeof why, "its latents have %d channels, not %d", m->c, channels), bad = why;
    if (bad) {
        mala_errf(err, "%s: %s", root, bad);
        latent_set_close(ls);
        free(ls);
        return NULL;
    }
    Dataset *d = dataset_alloc(KIND_LATENT);
    d->n = ls->rows;
    d->channels = m->c;
    d->image_size = m->h;
    d->num_classes = m->num_classes;
    d->views = m->views;
    d->latent_scale = m->scale;
    d->class_names = ls->class_names;
    ls->class_names = NULL;
    d->source = xstrdup(root);
    d->priv->lat = ls;
    d->priv->labels = xmalloc(sizeof(int32_t) * (size_t)d->n);
    d->priv->path_off = xmalloc(sizeof(int64_t) * (size_t)d->n);
    for (int64_t i = 0; i < d->n; i++) { d->priv->labels[i] = ls->labels[i]; d->priv->path_off[i] = i; }
    return d;
}

Dataset *dataset_open(const char *spec, int image_size, int channels, MalaErr *err) {
    if (!spec || !spec[0]) { mala_errf(err, "dataset: empty spec"); return NULL; }
    const char *names[2] = { "fashion-mnist-test", "fashion-mnist" };
    for (int t = 0; t < 2; t++) {
        size_t l = strlen(names[t]);
        if (strncmp(spec, names[t], l) == 0 && (spec[l] == 0 || spec[l] == ':')) {
            const char *dir = spec[l] == ':' ? spec + l + 1 : getenv("MALA_FASHION_MNIST_DIR");
            if (!dir || !dir[0]) dir = FMNIST_DIR;
            return open_fmnist(dir, t == 0, image_size, channels, err);
        }
    }
    // a folder; drop trailing slashes so class names and messages are clean
    char root[4096];
    snprintf(root, sizeof root, "%s", spec);
    for (size_t l = strlen(root); l > 1 && root[l - 1] == '/'; l--) root[l - 1] = 0;
    if (latent_is_set(root)) return open_latents(root, image_size, channels, err);
    return open_folder(root, image_size, channels, err);
}

// ---------------------------------------------------------------------------------------------
// samples

int dataset_limit(Dataset *d, int64_t n, MalaErr *err) {
    if (n < 1) return mala_errf(err, "%s: dataset limit must be >= 1, got %lld", d->source, (long long)n);
    if (n >= d->n) return 0;
    DatasetPriv *p = d->priv;
    int64_t N = d->n;
    for (int64_t i = 0; i < n; i++) {
        int64_t src = (int64_t)((__int128)i * N / n);   // increasing, >= i: in-place compaction is safe
        p->labels[i] = p->labels[src];
        if (p->kind == KIND_FMNIST)
            memmove(p->pix + (size_t)i * FMNIST_SIDE * FMNIST_SIDE, p->pix + (size_t)src * FMNIST_SIDE * FMNIST_SIDE,
                    FMNIST_SIDE * FMNIST_SIDE);
        else
            p->path_off[i] = p->path_off[src];
    }
    d->n = n;
    return 0;
}

int32_t dataset_label(const Dataset *d, int64_t i) { return d->priv->labels[i]; }

const char *dataset_path(const Dataset *d, int64_t i) {
    return d->priv->kind == KIND_FOLDER ? d->priv->arena + d->priv->path_off[i] : NULL;
}

int dataset_get_u8(const Dataset *d, int64_t i, uint8_t *hwc, MalaErr *err) {
    if (i < 0 || i >= d->n) return mala_errf(err, "%s: sample %lld out of range (n = %lld)", d->source, (long long)i, (long long)d->n);
    int S = d->image_size, C = d->channels;
    if (d->priv->kind == KIND_LATENT) return mala_errf(err, "%s: a latent set holds latents, not images", d->source);
    if (d->priv->kind == KIND_FMNIST) {
        int pad = (S - FMNIST_SIDE) / 2;
        memset(hwc, 0, (size_t)S * S);
        const uint8_t *src = d->priv->pix + (size_t)i * FMNIST_SIDE * FMNIST_SIDE;
        for (int y = 0; y < FMNIST_SIDE; y++) memcpy(hwc + (size_t)(y + pad) * S + pad, src + y * FMNIST_SIDE, FMNIST_SIDE);
        return 0;
    }
    const char *path = dataset_path(d, i);
    uint8_t *px; int w, h;
    if (image_load(path, C, &px, &w, &h, err)) return -1;
    int rc = image_center_crop_arr(hwc, S, px, w, h, C);
    free(px);
    if (rc) return mala_errf(err, "%s: cannot crop a %dx%d image to %d", path, w, h, S);
    return 0;
}

int dataset_get(const Dataset *d, int64_t i, int hflip, float *chw, MalaErr *err) {
    int S = d->image_size, C = d->channels;
    if (d->priv->kind == KIND_LATENT) {
        if (i < 0 || i >= d->n) return mala_errf(err, "%s: sample %lld out of range (n = %lld)", d->source, (long long)i, (long long)d->n);
        latent_set_draw(d->priv->lat, d->priv->path_off[i], hflip && d->views == 2, 0, 0, 0, chw);
        return 0;
    }
    uint8_t *u = malloc((size_t)S * S * C);
    if (!u) return mala_errf(err, "%s: out of memory", d->source);
    int rc = dataset_get_u8(d, i, u, err);
    if (rc == 0) image_u8_to_float(chw, u, S, S, C, hflip);
    free(u);
    return rc;
}

int dataset_is_image_folder(const Dataset *d) { return d->priv->kind == KIND_FOLDER; }

int dataset_report_once(Dataset *d, int64_t i) {
    return d->priv->reported && !__atomic_exchange_n(&d->priv->reported[i], 1, __ATOMIC_RELAXED);
}

void dataset_draw_latent(const Dataset *d, int64_t i, int hflip, uint64_t seed, uint64_t stream, float *z) {
    latent_set_draw(d->priv->lat, d->priv->path_off[i], hflip && d->views == 2, 1, seed, stream, z);
}

// defines: cmd_eval, cmd_bench_inception
// `mala eval stats|fid|is` and `mala bench inception`: image batches (ADM .npz or a folder) through
// the FID Inception, then statistics, FID and IS. Results: one JSON line on stdout; progress and a
// readable summary on stderr.

#include <dirent.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_stats.h"
#include "commands.h"   // defines: args_parse, set_threads, cmd_eval
#include "progress.h"   // defines: Progress
#include "backend.h"    // defines: backend_select
#include "fid.h"
#include "eval_metrics.h"  // defines: FeatRows, json_pr_kid
#include "fmnist_features.h"
#include "data.h"       // defines: Dataset (eval stats --data fashion-mnist)
#include "dist.h"       // defines: dist_init (eval fid|is --ckpt under mpirun)
#include "generate.h"   // defines: Generator (eval fid --ckpt samples on the fly)
#include "generate_shard.h"  // defines: ShardedGen (--ckpt: the batches sharded over the processes)
#include "image_io.h"   // defines: image_load
#include "inception.h"
#include "json.h"       // defines: JsonBuf, json_write_line, json_printf_line
#include "npy.h"
#include "out_paths.h"  // defines: out_check_file, OPT_FORCE
#include "app/commands.h"  // defines: gen_memory_bytes

#define DEFAULT_SPLITS 10

// ---------------------------------------------------------------------------------------------
// Inception weights: --inception, $MALA_INCEPTION, then the usual places
// ---------------------------------------------------------------------------------------------
static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

// Returns the weights path, "random" for the generator weights, or NULL (message printed).
static const char *find_weights(const char *given, char *buf, size_t cap) {
    if (given) return given;
    const char *env = getenv("MALA_INCEPTION");
    if (env && *env) return env;
    const char *home = getenv("HOME");
    const char *cands[3] = {INCEPTION_WEIGHTS_FILE, "assets/" INCEPTION_WEIGHTS_FILE, NULL};
    for (int i = 0; i < 2; i++)
        if (file_exists(cands[i])) return cands[i];
    if (home) {  // where pytorch-fid's torch.hub download puts it
        snprintf(buf, cap, "%s/.cache/torch/hub/checkpoints/%s", home, INCEPTION_WEIGHTS_FILE);
        if (file_exists(buf)) return buf;
    }
    fprintf(stderr, "error: no FID Inception weights found: pass --inception FILE or set MALA_INCEPTION "
                    "(looked for ./%s, ./assets/, ~/.cache/torch/hub/checkpoints/); the file is %s "
                    "(--inception random runs with random weights, for smoke tests only)\n",
            INCEPTION_WEIGHTS_FILE, INCEPTION_WEIGHTS_URL);
    return NULL;
}

// The Fashion-MNIST classifier: --classifier, $MALA_FMNIST_CLASSIFIER, ./assets/, ./, then the
// assets/ folder beside the executable.
static const char *find_classifier(const char *given, char *buf, size_t cap) {
    if (given) return given;
    const char *env = getenv("MALA_FMNIST_CLASSIFIER");
    if (env && *env) return env;
    if (file_exists("assets/" FMNIST_FEAT_FILE)) return "assets/" FMNIST_FEAT_FILE;
    if (file_exists(FMNIST_FEAT_FILE)) return FMNIST_FEAT_FILE;
    char exe[900];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, cap, "%s/assets/%s", exe, FMNIST_FEAT_FILE);
        if (file_exists(buf)) return buf;
    }
    fprintf(stderr, "error: no Fashion-MNIST classifier found: pass --classifier FILE or set MALA_FMNIST_CLASSIFIER "
                    "(looked for ./assets/%s, ./, and assets/ beside mala; tools/train_fmnist_classifier.py makes it)\n",
            FMNIST_FEAT_FILE);
    return NULL;
}

static Inception *load_inception(const char *path, const Backend *be, int batch) {
    if (!strcmp(path, "random")) {
        fprintf(stderr, "warning: --inception random: random weights, the numbers are NOT FID/IS\n");
        return inception_random(be, batch);
    }
    MalaErr err;
    double t0 = now_seconds();
    Inception *m = inception_load(path, be, batch, &err);
    if (!m) {
        fprintf(stderr, "error: %s\n", err.msg);
        return NULL;
    }
    fprintf(stderr, "[eval] FID Inception-v3 from %s on %s (%.1f s)\n", path, be->name, now_seconds() - t0);
    return m;
}

// ---------------------------------------------------------------------------------------------
// Image sources: an ADM sample batch (.npz, arr_0 uint8 [N, H, W, C] or [N, H, W]) or a folder
// of image files (recursive, sorted; RGB as PIL's convert("RGB"); unreadable files are skipped).
// Batches come out as float NCHW in [0, 1] (ToTensor), every image of a batch the same size.
// ---------------------------------------------------------------------------------------------
typedef struct {
    const char *path;
    int n;                 // images in the source
    int next;              // next image index
    NpyArray arr;          // npz
    int h, w, c;
    char **files;          // folder
    int skipped;
    uint8_t *pend;         // folder: a decoded image waiting for the next batch
    int pw, ph;
    float *batch;          // [max, C, H, W]
    size_t batch_cap;
    Dataset *ds;           // fashion-mnist[-test][:DIR]
    Generator *gen;        // sampling from a checkpoint (eval fid|is --ckpt)
    const GenOpts *gopts;
    uint64_t seed;
    float *x;              // [gen batch, C, H, W] samples in [-1, 1]
    int32_t *y;
    ShardedGen shard;      // the generator's batches (over the processes under mpirun)
    int32_t *labels;       // npz arr_1 [n], dataset labels [batch]; NULL: unlabelled
    const int32_t *batch_labels;  // the labels of the last batch, or NULL
} Source;

// What `--ckpt` asks for: num images sampled with these options, labels cycling over the classes.
typedef struct {
    const char *ckpt, *device, *precision;
    const char *vae;       // latent models: the VAE that decodes the samples
    int num, batch;
    uint64_t seed;
    GenOpts opts;
} SampleSpec;

static int has_image_ext(const char *name) {
    // the formats read, and two refused by name (a folder's stray GIF or TGA is reported, not hidden)
    static const char *ext[] = {".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".tga", ".gif"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t k = strlen(ext[i]);
        if (n > k && strcasecmp(name + n - k, ext[i]) == 0) return 1;
    }
    return 0;
}


static int source_open_sampler(Source *s, const SampleSpec *sp, MalaErr *err) {
    memset(s, 0, sizeof *s);
    s->path = sp->ckpt;
    s->gen = xcalloc(1, sizeof *s->gen);
    if (generator_open(s->gen, sp->ckpt, backend_select(sp->device, sp->precision), sp->batch, err)) return -1;
    const char *vae = sp->vae;
    char vae_buf[4200];
    int recorded = generator_recorded_vae(s->gen, sp->ckpt, &vae, vae_buf, sizeof vae_buf, err);
    if (recorded < 0) return -1;
    if (recorded && dist_rank() == 0) fprintf(stderr, "using the VAE recorded in %s: %s\n", sp->ckpt, vae);
    if (generator_attach_vae(s->gen, vae, sp->ckpt, err)) return -1;
    s->gopts = &sp->opts;
    s->seed = sp->seed;
    s->n = sp->num;
    s->c = generator_out_channels(s->gen);  // a latent model's decoded images
    s->h = s->w = generator_out_size(s->gen);
    s->x = xmalloc((size_t)sp->batch * generator_image_floats(s->gen) * sizeof(float));
    s->y = xmalloc((size_t)sp->batch * sizeof(int32_t));
    return 0;
}

// arr_1 of an ADM sample batch: the class labels the images were generated with (optional).
static int source_npz_labels(Source *s, MalaErr *err) {
    char **keys;
    int nk, has = 0;
    if (npz_keys(s->path, &keys, &nk, err)) return -1;
    for (int i = 0; i < nk; i++) has |= !strcmp(keys[i], "arr_1");
    npz_keys_free(keys, nk);
    if (!has) return 0;
    NpyArray l;
    double *v = NULL;
    if (npz_load(s->path, "arr_1", &l, err)) return -1;
    int rc = l.ndim != 1 || l.shape[0] != s->n
                 ? mala_errf(err, "%s: arr_1 (the labels) must be [%d], one per image", s->path, s->n)
                 : npy_to_f64(&l, &v, "arr_1", err);
    if (!rc) {
        s->labels = xmalloc((size_t)s->n * sizeof *s->labels);
        for (int i = 0; i < s->n; i++) s->labels[i] = v[i] >= 0 && v[i] < 1e9 ? (int32_t)v[i] : -1;
    }
    free(v);
    npy_free(&l);
    return rc;
}

static int source_open(Source *s, const char *path, MalaErr *err) {
    memset(s, 0, sizeof *s);
    s->path = path;
    if (!strncmp(path, "fashion-mnist", 13)) {  // the images as the training loader sees them (32x32)
        if (!(s->ds = dataset_open(path, 0, 0, err))) return -1;
        s->n = (int)s->ds->n;
        s->c = s->ds->channels;
        s->h = s->w = s->ds->image_size;
        s->pend = xmalloc((size_t)s->c * s->h * s->w);
        s->labels = xmalloc((size_t)s->n * sizeof *s->labels);
        for (int i = 0; i < s->n; i++) s->labels[i] = dataset_label(s->ds, i);
        return 0;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) return mala_errf(err, "%s: no such file or folder", path);
    if (S_ISDIR(sb.st_mode)) {
        char **all;
        size_t total;
        if (folder_walk(path, &all, &total, err)) return -1;
        s->files = xmalloc((total ? total : 1) * sizeof *s->files);
        s->n = 0;
        for (size_t i = 0; i < total; i++) {
            if (has_image_ext(all[i])) s->files[s->n++] = all[i];
            else free(all[i]);
        }
        free(all);
        if (s->n == 0) return mala_errf(err, "%s: no image files (png, jpg, bmp, ppm, pgm) in this folder", path);
        return 0;
    }
    if (npz_load(path, "arr_0", &s->arr, err)) return -1;
    const NpyArray *a = &s->arr;
    if (strcmp(a->dtype, "|u1") != 0 || (a->ndim != 4 && a->ndim != 3) || (a->ndim == 4 && a->shape[3] != 1 && a->shape[3] != 3))
        return mala_errf(err, "%s: arr_0 must be uint8 images [N, H, W, 3], [N, H, W, 1] or [N, H, W] (the ADM sample "
                         "batch format), not %s with %d dimensions", path, a->dtype, a->ndim);
    if (a->shape[0] < 1 || a->shape[0] > 0x7fffffff || a->shape[1] < 1 || a->shape[2] < 1)
        return mala_errf(err, "%s: arr_0 has no images", path);
    s->n = (int)a->shape[0];
    s->h = (int)a->shape[1];
    s->w = (int)a->shape[2];
    s->c = a->ndim == 4 ? (int)a->shape[3] : 1;
    return source_npz_labels(s, err);
}

static void source_close(Source *s) {
    if (s->shard.g) sharded_gen_free(&s->shard);
    if (s->ds) dataset_close(s->ds);
    if (s->gen) generator_close(s->gen);
    free(s->gen);
    free(s->x);
    free(s->y);
    npy_free(&s->arr);
    for (int i = 0; i < s->n && s->files; i++) free(s->files[i]);
    free(s->files);
    free(s->pend);
    free(s->batch);
    free(s->labels);
}

static float *batch_buf(Source *s, int max, int c, int h, int w) {
    size_t need = (size_t)max * c * h * w;
    if (need > s->batch_cap) {
        free(s->batch);
        s->batch = xmalloc(need * sizeof *s->batch);
        s->batch_cap = need;
    }
    return s->batch;
}

static void hwc_to_chw(float *dst, const uint8_t *src, int h, int w, int c) {
    for (int ch = 0; ch < c; ch++)
        for (size_t i = 0; i < (size_t)h * w; i++) dst[(size_t)ch * h * w + i] = src[i * c + ch] / 255.0f;
}

// Samples quantised as the ADM evaluator sees a batch file: uint8 = clamp(127.5 x + 128), / 255.
static float *sampler_next(Source *s, int max, int *n, int *c, int *h, int *w) {
    int k = s->n - s->next < max ? s->n - s->next : max;
    if (k > s->gen->max_batch) k = s->gen->max_batch;
    *c = s->c; *h = s->h; *w = s->w;
    *n = 0;
    if (k <= 0) return NULL;
    MalaErr err;  // batches of the first call's size, labels i mod K
    if (!s->shard.g) sharded_gen_init(&s->shard, s->gen, s->gopts, s->seed, s->n, k);
    if ((k = sharded_gen_next(&s->shard, s->x, k, &err)) < 0) {
        fprintf(stderr, "error: %s\n", err.msg);
        return NULL;
    }
    float *b = batch_buf(s, max, s->c, s->h, s->w);
    if (generator_decode(s->gen, s->x, k, b, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return NULL;
    }
    size_t total = (size_t)k * s->c * s->h * s->w;
    for (size_t i = 0; i < total; i++) b[i] = (float)image_sample_to_u8(b[i]) / 255.0f;
    const int K = s->gen->net->cfg.num_classes;  // the labels the shard sampled with: image i has i mod K
    for (int i = 0; i < k; i++) s->y[i] = (s->next + i) % K;
    s->batch_labels = s->y;
    s->next += k;
    *n = k;
    return b;
}

// Next batch of up to `max` same-sized images; *n = 0 at the end.
static float *source_next(Source *s, int max, int *n, int *c, int *h, int *w) {
    *n = 0;
    s->batch_labels = s->labels ? s->labels + s->next : NULL;
    if (s->gen) return sampler_next(s, max, n, c, h, w);
    if (s->ds) {
        int k = s->n - s->next < max ? s->n - s->next : max;
        *c = s->c; *h = s->h; *w = s->w;
        float *b = batch_buf(s, max, s->c, s->h, s->w);
        for (int i = 0; i < k; i++) {
            MalaErr err;
            if (dataset_get_u8(s->ds, s->next + i, s->pend, &err)) FATAL("%s", err.msg);
            hwc_to_chw(b + (size_t)i * s->c * s->h * s->w, s->pend, s->h, s->w, s->c);
        }
        s->next += k;
        *n = k;
        return b;
    }
    if (!s->files) {
        int k = s->n - s->next < max ? s->n - s->next : max;
        *c = s->c; *h = s->h; *w = s->w;
        float *b = batch_buf(s, max, s->c, s->h, s->w);
        size_t per = (size_t)s->h * s->w * s->c;
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < k; i++)
            hwc_to_chw(b + (size_t)i * per, (const uint8_t *)s->arr.data + (size_t)(s->next + i) * per, s->h, s->w, s->c);
        s->next += k;
        *n = k;
        return b;
    }
    float *b = NULL;
    *c = 3;
    while (*n < max) {
        if (!s->pend) {
            if (s->next >= s->n) break;
            MalaErr err;
            const char *f = s->files[s->next++];
            if (image_load(f, 3, &s->pend, &s->pw, &s->ph, &err)) {
                fprintf(stderr, "warning: skipping %s\n", err.msg);
                s->skipped++;
                s->pend = NULL;
                continue;
            }
        }
        if (*n > 0 && (s->pw != *w || s->ph != *h)) break;  // a new size starts the next batch
        if (*n == 0) { *w = s->pw; *h = s->ph; b = batch_buf(s, max, 3, *h, *w); }
        hwc_to_chw(b + (size_t)*n * 3 * *h * *w, s->pend, *h, *w, 3);
        free(s->pend);
        s->pend = NULL;
        (*n)++;
    }
    return b;
}

// ---------------------------------------------------------------------------------------------
// Running the network over a source
// ---------------------------------------------------------------------------------------------
// The network the images go through: the FID Inception (2048-d pool3, 1008 logits for IS) or
// the Fashion-MNIST classifier (128-d features, 10 logits for the class accuracy).
typedef struct {
    const char *name;   // "inception" or "fmnist"
    const char *path;   // its weights
    Inception *inc;
    FmnistNet *fm;
    int dim, classes;
} Extractor;

typedef struct {
    int n;
    double seconds;
    float *logits;      // [n, classes] when asked for (IS)
    FeatRows feats;     // the first EVAL_KEEP_FEATS feature rows (precision/recall, KID)
    long labelled, correct;  // fmnist: images with a label, and those the classifier assigns it to
} RunResult;

// spatial: the Inception's sFID features, when not NULL (the classifier has none).
static int extract(Extractor *x, const float *img, int n, int c, int h, int w, float *feats, float *logits,
                   float *spatial, MalaErr *err) {
    if (x->fm) return fmnist_net_forward_u01(x->fm, img, n, c, h, w, feats, logits, err);
    return inception_forward_all(x->inc, img, n, c, h, w, feats, logits, spatial, err);
}

static void count_correct(RunResult *r, const float *logits, const int32_t *labels, int n, int K) {
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (logits[(size_t)i * K + k] > logits[(size_t)i * K + best]) best = k;
        r->labelled++;
        r->correct += labels[i] == best;
    }
}

// stats / sstats (NULL: not wanted) get the features / the sFID features of every image (sstats:
// the Inception only).
static int run_source(Extractor *m, const char *path, const SampleSpec *sp, int batch, int limit, FidStats *stats,
                      FidStats *sstats, int want_logits, RunResult *r) {
    Source s;
    MalaErr err;
    memset(r, 0, sizeof *r);
    if (sp) path = sp->ckpt;
    if (sp ? source_open_sampler(&s, sp, &err) : source_open(&s, path, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        source_close(&s);
        return -1;
    }
    int total = limit > 0 && limit < s.n ? limit : s.n;
    if (s.gen) s.n = total;  // sampled as far as used (eval_serve_samples counts the same)
    if (m->fm) sstats = NULL;
    float *pool3 = xmalloc((size_t)batch * m->dim * sizeof *pool3);
    float *lg_batch = m->fm ? xmalloc((size_t)batch * m->classes * sizeof *lg_batch) : NULL;
    float *spatial = sstats ? xmalloc((size_t)batch * INCEPTION_SPATIAL_DIM * sizeof *spatial) : NULL;
    size_t lcap = want_logits ? (size_t)total : 0;
    if (want_logits) r->logits = xmalloc((lcap ? lcap : 1) * m->classes * sizeof *r->logits);
    double t0 = now_seconds();
    int n = 0, c = 0, h = 0, w = 0, rc = 0;
    Progress pg;
    progress_init(&pg, stderr);
    float *img;
    while (r->n < total && (img = source_next(&s, total - r->n < batch ? total - r->n : batch, &n, &c, &h, &w)) && n) {
        float *lg = want_logits ? r->logits + (size_t)r->n * m->classes : lg_batch;
        if (extract(m, img, n, c, h, w, pool3, lg, spatial, &err)) {
            progress_break(&pg);
            fprintf(stderr, "error: %s: %s\n", path, err.msg);
            rc = -1;
            break;
        }
        if (stats) fid_stats_add(stats, pool3, n);
        if (sstats) fid_stats_add(sstats, spatial, n);
        feat_rows_add(&r->feats, m->dim, pool3, n);
        if (m->fm && s.batch_labels) count_correct(r, lg, s.batch_labels, n, m->classes);
        r->n += n;
        double rate = r->n / (now_seconds() - t0);
        char eta[32];
        progress_format_eta(eta, sizeof eta, (total - r->n) / rate);
        progress_update(&pg, r->n == total, "[eval] %s: %d/%d images, %.1f img/s, ETA %s", path, r->n, total, rate,
                        eta);
    }
    progress_break(&pg);
    r->seconds = now_seconds() - t0;
    if (!rc && s.skipped) fprintf(stderr, "[eval] %s: %d unreadable files skipped\n", path, s.skipped);
    if (!rc && r->n == 0) {
        fprintf(stderr, "error: %s: no images could be read\n", path);
        rc = -1;
    }
    free(pool3);
    free(lg_batch);
    free(spatial);
    source_close(&s);
    return rc;
}

static int is_stats_file(const char *path) {
    char **keys;
    int n, mu = 0, sigma = 0;
    MalaErr err;
    if (npz_keys(path, &keys, &n, &err)) return 0;
    for (int i = 0; i < n; i++) {
        mu |= !strcmp(keys[i], "mu");
        sigma |= !strcmp(keys[i], "sigma");
    }
    npz_keys_free(keys, n);
    return mu && sigma;
}

// Stats of a path: a stats .npz is loaded, images are run through the network. *spatial gets the
// sFID statistics (the Inception only): computed from images, loaded from mu_s / sigma_s where the
// file has them (NULL where it does not, and for the classifier).
static FidStats *stats_of_path(Extractor *m, const char *path, const SampleSpec *sp, int batch, int limit,
                               int want_logits, RunResult *r, FidStats **spatial) {
    memset(r, 0, sizeof *r);
    *spatial = NULL;
    MalaErr err;
    if (!sp && is_stats_file(path)) {
        FidStats *s = fid_stats_load(path, &err);
        if (s && s->dim != m->dim) {
            fprintf(stderr, "error: %s: %d-d statistics, but --features %s gives %d-d features (make them with "
                            "mala eval stats --features %s)\n", path, s->dim, m->name, m->dim, m->name);
            fid_stats_free(s);
            return NULL;
        }
        if (s && stats_load_feats(path, m->dim, &r->feats, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            fid_stats_free(s);
            return NULL;
        }
        if (!s) fprintf(stderr, "error: %s\n", err.msg);
        else fprintf(stderr, "[eval] reference statistics from %s%s\n", path,
                     r->feats.n ? "" : " (no feats in it: no precision/recall or KID)");
        if (s && m->inc && !(*spatial = fid_stats_load_keys(path, "mu_s", "sigma_s", &err)))
            fprintf(stderr, "[eval] %s: no sFID statistics (%s)\n", path, err.msg);
        return s;
    }
    FidStats *s = fid_stats_new(m->dim), *sp_stats = m->inc ? fid_stats_new(INCEPTION_SPATIAL_DIM) : NULL;
    if (run_source(m, path, sp, batch, limit, s, sp_stats, want_logits, r) || fid_stats_finalize(s, &err) ||
        (sp_stats && fid_stats_finalize(sp_stats, &err))) {
        if (r->n) fprintf(stderr, "error: %s: %s\n", path, err.msg);
        fid_stats_free(s);
        fid_stats_free(sp_stats);
        free(r->logits);
        r->logits = NULL;
        feat_rows_free(&r->feats);
        return NULL;
    }
    *spatial = sp_stats;
    return s;
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------
typedef struct {
    const char *data, *out, *samples, *ref, *inception, *save_stats, *features, *classifier;
    int batch, threads, splits, limit, quick, force;
    SampleSpec gen;                      // used when gen.ckpt is set
    const char *sampler;
    const char *preset;                  // --ckpt: "dit" (sample_ddp.py's), "quick" or "custom"
} EvalArgs;

static const SampleSpec *sample_spec(const EvalArgs *a) { return a->gen.ckpt ? &a->gen : NULL; }
static const char *samples_name(const EvalArgs *a) { return a->gen.ckpt ? a->gen.ckpt : a->samples; }

static void json_str_field(JsonBuf *b, const char *key, const char *v) {
    json_buf_printf(b, ",\"%s\":", key);
    json_buf_string(b, v ? v : "", strlen(v ? v : ""));
}

// Prints the result line (core/json.h: never with inf or nan in it); 1 when it cannot.
static int print_result(JsonBuf *b) {
    MalaErr err;
    int rc = json_write_line(stdout, b->buf, &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);
    json_buf_free(b);
    return rc ? 1 : 0;
}

// --ckpt: how the images were sampled, as JSON fields (the preset names DiT's FID-50K settings).
static void json_sampling_fields(JsonBuf *b, const EvalArgs *a) {
    if (!a->gen.ckpt) return;
    const GenOpts *o = &a->gen.opts;
    json_str_field(b, "preset", a->preset);
    json_str_field(b, "sampler", sampler_kind_name(o->kind));
    json_buf_printf(b, ",\"steps\":%d,\"cfg_scale\":%g,\"eta\":%g,\"clip\":%s,\"num\":%d", o->steps, o->cfg_scale,
                    o->eta, o->clip ? "true" : "false", a->gen.num);
}

// "inception":PATH or "classifier":PATH, and "features":NAME.
static void json_net_fields(JsonBuf *b, const Extractor *m) {
    json_str_field(b, "features", m->name);
    json_str_field(b, m->fm ? "classifier" : "inception", m->path);
}

static int eval_stats(EvalArgs *a, Extractor *m) {
    RunResult r;
    FidStats *s = fid_stats_new(m->dim), *sp = m->inc ? fid_stats_new(INCEPTION_SPATIAL_DIM) : NULL;
    MalaErr err;
    int rc = run_source(m, a->data, NULL, a->batch, a->limit, s, sp, 0, &r);
    if (!rc && (fid_stats_finalize(s, &err) || (sp && fid_stats_finalize(sp, &err)) ||
                stats_save_with_feats(s, sp, &r.feats, a->out, &err))) {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    }
    fid_stats_free(sp);
    if (rc) {
        fid_stats_free(s);
        feat_rows_free(&r.feats);
        return 1;
    }
    fprintf(stderr, "[eval] statistics of %d images -> %s (mu [%d], sigma [%d, %d], float64%s; feats [%d, %d], the "
                    "first images' features)\n", r.n, a->out, m->dim, m->dim, m->dim,
            m->inc ? "; sFID: mu_s [2023], sigma_s [2023, 2023]" : "", r.feats.n, m->dim);
    JsonBuf b = {0};
    json_buf_puts(&b, "{\"cmd\":\"eval stats\"");
    json_str_field(&b, "data", a->data);
    json_str_field(&b, "out", a->out);
    json_net_fields(&b, m);
    json_buf_printf(&b, ",\"n\":%d,\"dim\":%d,\"feats\":%d,\"seconds\":%.3f,\"img_per_s\":%.2f}", r.n, m->dim,
                    r.feats.n, r.seconds, r.n / r.seconds);
    fid_stats_free(s);
    feat_rows_free(&r.feats);
    return print_result(&b);
}

// img/s of the feature network over the images it ran (none when both sides were statistics).
static void json_rate_fields(JsonBuf *b, double t0, int n, double seconds) {
    json_buf_printf(b, ",\"seconds\":%.3f", now_seconds() - t0);  // the whole command
    if (n > 0 && seconds > 0) json_buf_printf(b, ",\"img_per_s\":%.2f", n / seconds);
    json_buf_puts(b, "}");
}

static int eval_fid(EvalArgs *a, Extractor *m) {
    RunResult rs, rr;
    MalaErr err;
    double t0 = now_seconds();
    FidStats *ref_s, *s_s;  // the sFID statistics
    FidStats *ref = stats_of_path(m, a->ref, NULL, a->batch, 0, 0, &rr, &ref_s);
    if (!ref) return 1;
    FidStats *s = stats_of_path(m, a->samples, sample_spec(a), a->batch, a->limit, !m->fm, &rs, &s_s);
    if (!s) { fid_stats_free(ref); fid_stats_free(ref_s); feat_rows_free(&rr.feats); return 1; }
    int rc = 0, have_sfid = ref_s && s_s;  // a statistics file may lack mu_s / sigma_s
    double fid, sfid = 0, ism = 0, iss = 0;
    if (fid_from_stats(s, ref, &fid, &err)) { fprintf(stderr, "error: %s\n", err.msg); rc = 1; }
    if (!rc && have_sfid && fid_from_stats(s_s, ref_s, &sfid, &err)) { fprintf(stderr, "error: sFID: %s\n", err.msg); rc = 1; }
    int have_is = !rc && rs.logits && rs.n >= a->splits;
    if (have_is && inception_score(rs.logits, rs.n, INCEPTION_CLASSES, a->splits, &ism, &iss, &err)) {
        fprintf(stderr, "warning: no Inception Score: %s\n", err.msg);
        have_is = 0;
    }
    if (!rc) {
        const char *fd_key = m->fm ? "fd" : "fid";
        fprintf(stderr, "%s %.4f  (%d samples from %s vs %s)\n", m->fm ? "FD (fmnist features)" : "FID", fid, rs.n,
                samples_name(a), a->ref);
        if (have_sfid) fprintf(stderr, "sFID %.4f  (mixed_6/conv features, pytorch-fid's network)\n", sfid);
        if (have_is) fprintf(stderr, "IS  %.4f +- %.4f  (%d splits)\n", ism, iss, a->splits);
        if (rs.labelled)
            fprintf(stderr, "class accuracy %.4f  (%ld labelled samples)\n", (double)rs.correct / rs.labelled,
                    rs.labelled);
        if (rs.n && rs.n < m->dim)
            fprintf(stderr, "note: fewer samples (%d) than feature dimensions (%d): the covariance is rank "
                            "deficient and the distance is biased upwards%s\n", rs.n, m->dim,
                    m->fm ? "" : "; papers use 50K");
        JsonBuf b = {0};
        json_buf_puts(&b, "{\"cmd\":\"eval fid\"");
        json_str_field(&b, "samples", samples_name(a));
        json_str_field(&b, "ref", a->ref);
        json_net_fields(&b, m);
        json_sampling_fields(&b, a);
        json_buf_printf(&b, ",\"n\":%d,\"%s\":%.6f", rs.n, fd_key, fid);
        if (rs.labelled) json_buf_printf(&b, ",\"class_acc\":%.6f", (double)rs.correct / rs.labelled);
        if (have_sfid) json_buf_printf(&b, ",\"sfid\":%.6f", sfid);
        if (have_is) json_buf_printf(&b, ",\"is_mean\":%.6f,\"is_std\":%.6f,\"splits\":%d", ism, iss, a->splits);
        if (rr.feats.n && rs.feats.n && json_pr_kid(&b, &rr.feats, &rs.feats, &err))
            fprintf(stderr, "warning: no precision/recall or KID: %s\n", err.msg);
        json_rate_fields(&b, t0, rs.n + rr.n, rs.seconds + rr.seconds);
        rc = print_result(&b);
    }
    // after the result, which a failed save must not hide
    if (a->save_stats && stats_save_with_feats(s, s_s, &rs.feats, a->save_stats, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    }
    free(rs.logits);
    feat_rows_free(&rs.feats);
    feat_rows_free(&rr.feats);
    fid_stats_free(s);
    fid_stats_free(ref);
    fid_stats_free(s_s);
    fid_stats_free(ref_s);
    return rc;
}

static int eval_is(EvalArgs *a, Extractor *m) {
    RunResult r;
    MalaErr err;
    if (run_source(m, a->samples, sample_spec(a), a->batch, a->limit, NULL, NULL, 1, &r)) {
        free(r.logits);
        feat_rows_free(&r.feats);
        return 1;
    }
    feat_rows_free(&r.feats);
    double mean, std;
    int rc = 0;
    if (inception_score(r.logits, r.n, INCEPTION_CLASSES, a->splits, &mean, &std, &err)) {
        fprintf(stderr, "error: %s: %s\n", a->samples, err.msg);
        rc = 1;
    } else {
        fprintf(stderr, "IS %.4f +- %.4f  (%d samples from %s, %d splits)\n", mean, std, r.n, samples_name(a), a->splits);
        JsonBuf b = {0};
        json_buf_puts(&b, "{\"cmd\":\"eval is\"");
        json_str_field(&b, "samples", samples_name(a));
        json_str_field(&b, "inception", m->path);
        json_sampling_fields(&b, a);
        json_buf_printf(&b, ",\"n\":%d,\"is_mean\":%.6f,\"is_std\":%.6f,\"splits\":%d,\"seconds\":%.3f,\"img_per_s\":%.2f}",
                        r.n, mean, std, a->splits, r.seconds, r.n / r.seconds);
        rc = print_result(&b);
    }
    free(r.logits);
    return rc;
}

// Ranks > 0 of `mpirun -np N mala eval fid|is --ckpt`: they sample their share of the batches for
// rank 0 (pipeline/generate_shard.h), which runs the Inception and prints the result. The batches
// are the ones rank 0's sampler_next asks for: min(--batch, --sample-batch, the images used).
static int eval_serve_samples(const EvalArgs *a) {
    MalaErr err;
    Generator g;
    int total = a->limit > 0 && a->limit < a->gen.num ? a->limit : a->gen.num;
    int batch = a->batch < total ? a->batch : total;
    if (batch > a->gen.batch) batch = a->gen.batch;
    if (generator_open(&g, a->gen.ckpt, backend_select(a->gen.device, a->gen.precision), a->gen.batch, &err))
        FATAL("%s", err.msg);
    ShardedGen s;
    sharded_gen_init(&s, &g, &a->gen.opts, a->gen.seed, total, batch);
    if (sharded_gen_serve(&s, &err)) FATAL("%s", err.msg);
    sharded_gen_free(&s);
    generator_close(&g);
    dist_finalize();
    return 0;
}

static const char *kEvalUsage =
    "usage: mala eval stats --data fashion-mnist|FILE.npz|DIR --out stats.npz [flags]\n"
    "       mala eval fid --samples FILE.npz|DIR --ref stats.npz|FILE.npz|DIR [flags]\n"
    "       mala eval fid --ckpt MODEL --ref stats.npz [--quick] [sampling flags]\n"
    "       mala eval is --samples FILE.npz|DIR [flags]   (or --ckpt MODEL)\n\n"
    "With --ckpt the images are sampled on the fly (labels cycle over the classes), quantised to\n"
    "uint8 as a sample batch file would be, and never stored. The sampling defaults are DiT's\n"
    "FID-50K (sample_ddp.py): 50,000 images, DDPM 250 steps, guidance 1.5, no clipping; --quick\n"
    "is DDIM 50 steps and 10,000 images (labelled \"preset\":\"quick\", not comparable with FID-50K).\n"
    "Flags given explicitly win over either preset.\n"
    "FID / IS as pytorch-fid and torch-fidelity compute them, with the FID Inception-v3\n"
    "(" INCEPTION_WEIGHTS_FILE ").\n"
    "Images: an ADM sample batch .npz (arr_0 uint8 [N, H, W, C]) or a folder of image files\n"
    "(searched recursively); any size, resized to 299x299. Statistics: .npz with mu and sigma\n"
    "(pytorch-fid's format; ADM reference batches work as --ref). Weights: --inception, else\n"
    "$MALA_INCEPTION, ./" INCEPTION_WEIGHTS_FILE ", ./assets/, ~/.cache/torch/hub/checkpoints/.\n"
    "--features fmnist: the bundled Fashion-MNIST classifier instead (assets/" FMNIST_FEAT_FILE ",\n"
    "no download; 1 x 32 x 32 or 28 x 28 images): \"fd\" (the Frechet distance of its 128-d features)\n"
    "and \"class_acc\" (labelled samples: --ckpt, or arr_1 of an .npz) in place of FID and IS.\n"
    "Both report precision/recall (k = 3, ADM evaluator) and KID (torch-fidelity) when the reference\n"
    "has features (images, or stats written by mala eval stats), on the first 10,000 of each side.";

int cmd_eval(int argc, char **argv) {
    const char *sub = argc >= 2 ? argv[1] : NULL;
    EvalArgs a = {.batch = 50, .threads = 0, .splits = DEFAULT_SPLITS, .sampler = "ddpm", .preset = "dit",
                  .features = "inception"};
    a.gen.opts = gen_opts_default();  // DiT's sample_ddp.py: DDPM 250 steps, guidance 1.5, clip_denoised=False
    a.gen.opts.cfg_scale = 1.5f;
    a.gen.opts.clip = 0;
    a.gen.num = 50000;
    a.gen.batch = 50;
    Opt opts[] = {
        {"--data", OPT_STR, &a.data, "PATH", "stats: images (.npz or folder)"},
        {"--out", OPT_STR, &a.out, "FILE", "stats: output .npz"},
        {"--samples", OPT_STR, &a.samples, "PATH", "fid / is: generated images (.npz or folder)"},
        {"--ref", OPT_STR, &a.ref, "PATH", "fid: reference statistics .npz, or reference images"},
        {"--save-stats", OPT_STR, &a.save_stats, "FILE", "fid: also save the samples' statistics"},
        OPT_FORCE(&a.force),
        {"--inception", OPT_STR, &a.inception, "FILE", "weights (.pth legacy torch or .safetensors; 'random' for smoke tests)"},
        {"--features", OPT_STR, &a.features, "inception|fmnist", "the feature network (default inception)"},
        {"--classifier", OPT_STR, &a.classifier, "FILE", "--features fmnist: the classifier's weights"},
        {"--batch", OPT_INT, &a.batch, "N", "images per Inception batch", ARG_MIN(1)},
        {"--splits", OPT_INT, &a.splits, "N", "IS splits", ARG_MIN(1)},
        {"--limit", OPT_INT, &a.limit, "N", "use only the first N samples (0 = all)", ARG_MIN(0)},
        OPT_THREADS(&a.threads),
        {"--ckpt", OPT_STR, &a.gen.ckpt, "FILE", "fid / is: sample from this model instead of --samples"},
        {"--quick", OPT_FLAG, &a.quick, NULL, "--ckpt: the quick preset, DDIM 50 steps and 10,000 images"},
        {"--vae", OPT_STR, &a.gen.vae, "FILE", "--ckpt of a latent model: the VAE that decodes its samples"},
        {"--num", OPT_INT, &a.gen.num, "N", "--ckpt: images to sample", ARG_MIN(1), ARG_ALIAS("--num-fid-samples")},
        {"--sample-batch", OPT_INT, &a.gen.batch, "B", "--ckpt: images per sampling batch", ARG_MIN(1),
         ARG_ALIAS("--per-proc-batch-size")},
        {"--sampler", OPT_STR, &a.sampler, sampler_kind_list(), "--ckpt: sampler"},
        {"--steps", OPT_INT, &a.gen.opts.steps, "N", "--ckpt: sampling steps", ARG_MIN(1), ARG_MAX(1000),
         ARG_ALIAS("--num-sampling-steps")},
        {"--cfg-scale", OPT_FLOAT, &a.gen.opts.cfg_scale, "W", "--ckpt: guidance scale (1 = none)", ARG_MIN(0), ARG_MAX(100)},
        {"--eta", OPT_FLOAT, &a.gen.opts.eta, "E", "--ckpt: DDIM eta", ARG_MIN(0), ARG_MAX(10)},
        {"--clip", OPT_BOOL, &a.gen.opts.clip, "BOOL", "--ckpt: clip predicted x0 to [-1, 1]"},
        {"--seed", OPT_U64, &a.gen.seed, "S", "--ckpt: noise seed", ARG_ALIAS("--global-seed")},
        {"--device", OPT_STR, &a.gen.device, "cpu|cuda", "backend of the Inception and the sampler (default: cuda if present)"},
        {"--precision", OPT_STR, &a.gen.precision, "fp32|bf16|tf32",
         "--ckpt: the sampler's matrix products, CPU fp32 or bf16, CUDA tf32 or fp32 (default: fp32 on the CPU, tf32 "
         "on CUDA; the Inception, and bf16's fmnist features, run in fp32)"},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        args_usage(kEvalUsage, opts, nopts);
        return sub ? 0 : 2;
    }
    if (strcmp(sub, "stats") && strcmp(sub, "fid") && strcmp(sub, "is")) {
        static const char *const subs[] = {"stats", "fid", "is"};
        const char *s = args_suggest(sub, subs, 3);
        fprintf(stderr, "error: unknown eval command '%s'%s%s%s (stats, fid or is; see mala eval --help)\n", sub,
                s ? "; did you mean " : "", s ? s : "", s ? "?" : "");
        return 2;
    }
    args_parse(kEvalUsage, opts, nopts, argc, argv, 2);
    int given_sampler = args_given(opts, nopts, &a.sampler), given_steps = args_given(opts, nopts, &a.gen.opts.steps),
        given_num = args_given(opts, nopts, &a.gen.num);
    if (a.quick) {
        if (!given_sampler) a.sampler = "ddim";
        if (!given_steps) a.gen.opts.steps = 50;
        if (!given_num) a.gen.num = 10000;
    }
    int custom = given_sampler || given_steps || given_num || args_given(opts, nopts, &a.gen.opts.cfg_scale) ||
                 args_given(opts, nopts, &a.gen.opts.eta) || args_given(opts, nopts, &a.gen.opts.clip);
    a.preset = custom ? "custom" : a.quick ? "quick" : "dit";
    const char *missing = NULL;
    if (strcmp(a.features, "inception") && strcmp(a.features, "fmnist")) {
        fprintf(stderr, "error: --features %s: expected inception or fmnist\n", a.features);
        return 2;
    }
    if (!strcmp(a.features, "fmnist") && !strcmp(sub, "is")) {
        fprintf(stderr, "error: mala eval is needs the Inception (--features inception); with --features fmnist, "
                        "mala eval fid reports the class accuracy\n");
        return 2;
    }
    if (!strcmp(sub, "stats")) missing = !a.data ? "--data" : !a.out ? "--out" : NULL;
    else if (!strcmp(sub, "fid")) missing = !a.samples && !a.gen.ckpt ? "--samples or --ckpt" : !a.ref ? "--ref" : NULL;
    else missing = !a.samples && !a.gen.ckpt ? "--samples or --ckpt" : NULL;
    if (a.samples && a.gen.ckpt) {
        fprintf(stderr, "error: --samples and --ckpt exclude each other\n");
        return 2;
    }
    if (sampler_kind_parse(a.sampler, &a.gen.opts.kind)) {
        fprintf(stderr, "error: --sampler %s: expected %s\n", a.sampler, sampler_kind_list());
        return 2;
    }
    if (missing) {
        fprintf(stderr, "error: mala eval %s needs %s (see mala eval --help)\n", sub, missing);
        return 2;
    }
    args_check_memory("--batch", a.batch, (double)a.batch * (INCEPTION_DIM + INCEPTION_CLASSES) * sizeof(float),
                      "the Inception features of a batch");
    if (a.gen.ckpt && a.gen.batch > a.gen.num) a.gen.batch = a.gen.num;
    dist_init(&argc, &argv);
    if (dist_world() > 1 && (!a.gen.ckpt || !strcmp(sub, "stats"))) {
        if (dist_rank() == 0)
            fprintf(stderr, "error: mala eval %s under mpirun: only sampling with --ckpt is shared out over the "
                    "processes; run it as one process\n", sub);
        dist_finalize();
        return 2;
    }
    if (dist_rank() > 0) return eval_serve_samples(&a);
    if (!strcmp(sub, "stats")) out_check_file("--out", a.out, a.force, NULL);
    if (!strcmp(sub, "fid") && a.save_stats) out_check_file("--save-stats", a.save_stats, a.force, NULL);
    if (a.gen.ckpt) {  // the generator's guided batch, at least its images in and out
        MalaErr err;
        StFile f;
        NetConfig c;
        ClassNames cn;
        if (st_open(&f, a.gen.ckpt, &err) || ckpt_read_config(&f, &c, &cn, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        class_names_free(&cn);
        st_close(&f);
        args_check_memory("--sample-batch", a.gen.batch, gen_memory_bytes(&c, backend_cpu(), a.gen.batch, NULL),
                          "the model's weights and activations (2 passes per image with guidance)");
        fprintf(stderr, "[eval] sampling %d images from %s: %s %d steps, guidance %g%s (%s)\n", a.gen.num, a.gen.ckpt,
                a.sampler, a.gen.opts.steps, a.gen.opts.cfg_scale, a.gen.opts.clip ? ", clipped" : "",
                !strcmp(a.preset, "dit") ? "DiT's FID-50K settings"
                : !strcmp(a.preset, "quick") ? "the QUICK preset: not comparable with DiT's FID-50K"
                                             : "custom settings, not DiT's FID-50K");
    }
    set_threads(a.threads);
    char buf[1024];
    Extractor m = {.name = a.features};
    const Backend *be = backend_select(a.gen.device, a.gen.precision);
    if (!strcmp(a.features, "fmnist")) {
        if (!(m.path = find_classifier(a.classifier, buf, sizeof buf))) return 1;
        MalaErr err;
        if (!(m.fm = fmnist_net_load(m.path, be, a.batch, &err))) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        m.dim = FMNIST_FEAT_DIM;
        m.classes = FMNIST_FEAT_CLASSES;
        fprintf(stderr, "[eval] Fashion-MNIST classifier from %s on %s (test accuracy %.4f)\n", m.path, be->name,
                fmnist_net_test_accuracy(m.fm));
    } else {
        if (!(m.path = find_weights(a.inception, buf, sizeof buf))) return 1;
        // internal batch: memory ~14 MB per image
        if (!(m.inc = load_inception(m.path, be, a.batch < 32 ? a.batch : 32))) return 1;
        m.dim = INCEPTION_DIM;
        m.classes = INCEPTION_CLASSES;
    }
    int rc = !strcmp(sub, "stats") ? eval_stats(&a, &m) : !strcmp(sub, "fid") ? eval_fid(&a, &m) : eval_is(&a, &m);
    if (m.inc) inception_free(m.inc);
    fmnist_net_free(m.fm);
    dist_finalize();
    return rc;
}

// ---------------------------------------------------------------------------------------------
// Benchmark
// ---------------------------------------------------------------------------------------------
int cmd_bench_inception(int argc, char **argv) {
    int batch = 16, iters = 3, warmup = 1, size = 32, channels = 3, threads = 0;
    const char *weights = "random", *device = NULL;
    Opt opts[] = {
        {"--batch", OPT_INT, &batch, "N", "images per forward", ARG_MIN(1)},
        {"--iters", OPT_INT, &iters, "N", "timed forwards", ARG_MIN(1)},
        {"--warmup", OPT_INT, &warmup, "N", "untimed forwards first", ARG_MIN(0)},
        {"--size", OPT_INT, &size, "S", "input images S x S (resized to 299 inside, as in eval)", ARG_MIN(1), ARG_MAX(4096)},
        {"--channels", OPT_INT, &channels, "C", "1 or 3", ARG_MIN(1), ARG_MAX(3)},
        OPT_THREADS(&threads),
        {"--inception", OPT_STR, &weights, "FILE", "weights file, or 'random'"},
        OPT_DEVICE(&device),
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    args_parse("usage: mala bench inception [flags]\n\nFID Inception-v3 forward throughput (resize, pool3 and logits), one JSON line.\n"
               "PyTorch peer: /usr/bin/python3 tools/bench_inception_torch.py --batch N --threads N",
               opts, nopts, argc, argv, 1);
    if (channels == 2) {
        fprintf(stderr, "error: --channels 2: expected 1 or 3\n");
        return 2;
    }
    args_check_memory("--batch", batch, (double)batch * channels * size * size * sizeof(float), "the input images");
    set_threads(threads);
    const Backend *be = backend_select(device, NULL);
    Inception *m = strcmp(weights, "random") ? NULL : inception_random(be, batch);
    if (!m) {
        MalaErr err;
        if (!(m = inception_load(weights, be, batch, &err))) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    }
    size_t per = (size_t)channels * size * size;
    float *img = xmalloc((size_t)batch * per * sizeof *img);
    eval_rand_fill(img, (size_t)batch * per, "bench/images", 0.0, 1.0);
    float *pool3 = xmalloc((size_t)batch * INCEPTION_DIM * sizeof *pool3);
    float *logits = xmalloc((size_t)batch * INCEPTION_CLASSES * sizeof *logits);
    MalaErr err;
    int rc = 0;
    for (int i = 0; i < warmup; i++) inception_forward(m, img, batch, channels, size, size, pool3, logits, &err);
    double *times = xmalloc((size_t)iters * sizeof *times);
    for (int i = 0; i < iters; i++) {
        double t0 = now_seconds();
        inception_forward(m, img, batch, channels, size, size, pool3, logits, &err);  // ends with a copy to the host
        times[i] = now_seconds() - t0;
    }
    const Spread sp = spread_of(times, iters);  // img/s: median, and the slowest and fastest forward
    free(times);
    double gflop = inception_flops(m) / ((double)(warmup + iters) * batch) / 1e9;
    fprintf(stderr, "FID Inception forward on %s: %.2f img/s median (%.2f .. %.2f; batch %d, %d threads, %dx%dx%d "
            "input), %.1f GFLOP/s\n", be->name, batch / sp.median, batch / sp.max, batch / sp.min, batch, num_threads(),
            channels, size, size, gflop * batch / sp.median);
    if (json_printf_line(stdout, &err, "{\"bench\":\"inception\",\"impl\":\"mala-c\",\"device\":\"%s\",\"batch\":%d,\"threads\":%d,"
           "\"input\":\"%dx%dx%d\",\"iters\":%d,"
           "\"img_per_s\":%.3f,\"img_per_s_min\":%.3f,\"img_per_s_max\":%.3f,\"best_img_per_s\":%.3f,"
           "\"gflop_per_image\":%.3f,\"gflop_per_s\":%.2f,\"peak_rss_mb\":%.0f}",
           be->name, batch, num_threads(), channels, size, size, iters, batch / sp.median, batch / sp.max, batch / sp.min,
           batch / sp.min, gflop, gflop * batch / sp.median, peak_rss_bytes() / 1048576.0)) {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    }
    free(img);
    free(pool3);
    free(logits);
    inception_free(m);
    return rc;
}

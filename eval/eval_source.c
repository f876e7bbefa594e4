// defines: source_open, source_open_sampler, source_next, source_close
#include "eval/eval_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/dist.h"
#include "formats/image_io.h"

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


int source_open_sampler(Source *s, const SampleSpec *sp, MalaErr *err) {
    memset(s, 0, sizeof *s);
    s->path = sp->ckpt;
    if (sp->gen) {  // the caller's model (mala train --eval-every: the EMA weights)
        s->gen = sp->gen;
        s->gen_borrowed = 1;
    } else {
        s->gen = xcalloc(1, sizeof *s->gen);
        if (generator_open(s->gen, sp->ckpt, backend_select(sp->device, sp->precision), sp->batch, err)) return -1;
        const char *vae = sp->vae;
        char vae_buf[4200];
        int recorded = generator_recorded_vae(s->gen, sp->ckpt, &vae, vae_buf, sizeof vae_buf, err);
        if (recorded < 0) return -1;
        if (recorded && dist_rank() == 0) fprintf(stderr, "using the VAE recorded in %s: %s\n", sp->ckpt, vae);
        if (generator_attach_vae(s->gen, vae, sp->ckpt, err)) return -1;
    }
    s->gopts = &sp->opts;
    s->label_mode = sp->labels;
    s->store = sp->store;
    s->cancel = sp->cancel;
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

int source_open(Source *s, const char *path, MalaErr *err) {
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

void source_close(Source *s) {
    if (s->shard.g) sharded_gen_free(&s->shard);
    if (s->ds) dataset_close(s->ds);
    if (s->gen && !s->gen_borrowed) {
        generator_close(s->gen);
        free(s->gen);
    }
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
    MalaErr err;  // batches of the first call's size
    if (!s->shard.g) {
        sharded_gen_init(&s->shard, s->gen, s->gopts, s->seed, s->n, k);
        s->shard.labels = s->label_mode;
        s->shard.store = s->store;
        s->shard.cancel = s->cancel;
    }
    if ((k = sharded_gen_next(&s->shard, s->x, k, &err)) < 0) {
        if (!s->shard.cancelled) fprintf(stderr, "error: %s\n", err.msg);
        return NULL;
    }
    float *b = batch_buf(s, max, s->c, s->h, s->w);
    if (generator_decode(s->gen, s->x, k, b, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return NULL;
    }
    size_t total = (size_t)k * s->c * s->h * s->w;
    for (size_t i = 0; i < total; i++) b[i] = (float)image_sample_to_u8(b[i]) / 255.0f;
    const int K = s->gen->net->cfg.num_classes;  // K = 0: unconditional
    gen_labels(s->y, s->label_mode, s->seed, s->next, k, K);  // the labels the shard sampled with
    s->batch_labels = K > 0 ? s->y : NULL;  // an unconditional model's samples have no class to check
    s->next += k;
    *n = k;
    return b;
}

// Next batch of up to `max` same-sized images; *n = 0 at the end.
float *source_next(Source *s, int max, int *n, int *c, int *h, int *w) {
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


// defines: loader_new, loader_next, loader_seek, loader_position, loader_shard, loader_sample_at, loader_free
//
// The training batch stream over a Dataset (data/dataset.h): epoch permutations, flips, the
// background batch thread.
#include "train/loader.h"

#include <pthread.h>
#include <string.h>

#include <omp.h>

#include "formats/image_io.h"   // defines: image_u8_to_float

// ---------------------------------------------------------------------------------------------
// loader

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t splitmix64(uint64_t *s) { return mix64(*s += 0x9E3779B97F4A7C15ull); }

// perm[0..n) for epoch e: Fisher-Yates driven by splitmix64 seeded from (seed, e).
static void epoch_perm(int64_t *perm, int64_t n, uint64_t seed, uint64_t e) {
    uint64_t s = mix64(mix64(seed ^ 0x70657266756C6C21ull) + 0x9E3779B97F4A7C15ull * (e + 1));
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(((unsigned __int128)splitmix64(&s) * (uint64_t)(i + 1)) >> 64);
        int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
}

static inline int flip_at(uint64_t seed, uint64_t p) { return (int)(mix64(mix64(seed ^ 0x666C6970666C6970ull) + p) >> 63); }

struct Loader {
    Dataset *d;
    int B, hflip, threads;
    int stride, offset;  // batch k is stream positions k*stride + offset .. + B-1 (loader_shard)
    uint64_t seed;
    size_t per;                    // C*S*S
    float *bx[2];
    int32_t *by[2];
    int full[2];
    uint64_t next_fill, next_take;
    int stop, running, sync_init;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    // worker-owned
    int64_t *perm;
    uint64_t perm_epoch;
    int perm_ok;
    int64_t *idx;
    int *flip;
    uint8_t *u8;                   // B * S*S*C
};

// Decodes sample i into hwc; on failure reports it once and uses the next decodable sample.
static int32_t load_sample(Loader *l, int64_t i, uint8_t *hwc) {
    Dataset *d = l->d;
    for (int64_t t = 0; t < d->n; t++) {
        int64_t k = (i + t) % d->n;
        MalaErr e;
        if (dataset_get_u8(d, k, hwc, &e) == 0) return dataset_label(d, k);
        if (dataset_report_once(d, k))
            fprintf(stderr, "mala: %s (using the next image instead)\n", e.msg);
    }
    memset(hwc, 128, (size_t)d->image_size * d->image_size * d->channels);
    return dataset_label(d, i);
}

static void fill_batch(Loader *l, uint64_t k, int slot) {
    Dataset *d = l->d;
    uint64_t n = (uint64_t)d->n;
    for (int b = 0; b < l->B; b++) {
        uint64_t p = k * (uint64_t)l->stride + (uint64_t)l->offset + (uint64_t)b, e = p / n;
        if (!l->perm_ok || l->perm_epoch != e) { epoch_perm(l->perm, d->n, l->seed, e); l->perm_epoch = e; l->perm_ok = 1; }
        l->idx[b] = l->perm[p % n];
        l->flip[b] = l->hflip ? flip_at(l->seed, p) : 0;
    }
    int S = d->image_size, C = d->channels;
    size_t img = (size_t)S * S * C;
    int folder = dataset_is_image_folder(d), latent = d->views > 0;
    #pragma omp parallel for num_threads(l->threads) schedule(dynamic, 1) if ((folder || latent) && l->B > 1 && l->threads > 1)
    for (int b = 0; b < l->B; b++) {
        if (latent) {
            uint64_t p = k * (uint64_t)l->stride + (uint64_t)l->offset + (uint64_t)b;
            l->by[slot][b] = dataset_label(d, l->idx[b]);
            dataset_draw_latent(d, l->idx[b], l->flip[b], l->seed ^ LOADER_LATENT_KEY, p, l->bx[slot] + (size_t)b * l->per);
            continue;
        }
        uint8_t *u = l->u8 + (size_t)b * img;
        l->by[slot][b] = load_sample(l, l->idx[b], u);
        image_u8_to_float(l->bx[slot] + (size_t)b * l->per, u, S, S, C, l->flip[b]);
    }
}

static void *worker(void *arg) {
    Loader *l = arg;
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!l->stop && l->full[l->next_fill & 1]) pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) break;
        uint64_t k = l->next_fill;
        int slot = (int)(k & 1);
        pthread_mutex_unlock(&l->mu);
        fill_batch(l, k, slot);
        pthread_mutex_lock(&l->mu);
        l->full[slot] = 1;
        l->next_fill++;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static int start_worker(Loader *l) {
    l->stop = 0;
    l->full[0] = l->full[1] = 0;
    l->next_fill = l->next_take;
    if (pthread_create(&l->th, NULL, worker, l) != 0) return -1;
    l->running = 1;
    return 0;
}

static void stop_worker(Loader *l) {
    if (!l->running) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->th, NULL);
    l->running = 0;
}

Loader *loader_new(Dataset *d, int batch, uint64_t seed, int hflip, MalaErr *err) {
    if (!d || d->n < 1) { mala_errf(err, "loader: empty dataset"); return NULL; }
    if (batch < 1) { mala_errf(err, "loader: batch size must be >= 1, got %d", batch); return NULL; }
    Loader *l = xcalloc(1, sizeof *l);
    l->d = d; l->B = l->stride = batch; l->seed = seed; l->hflip = hflip ? 1 : 0;
    l->per = (size_t)d->channels * d->image_size * d->image_size;
    for (int s = 0; s < 2; s++) {
        l->bx[s] = malloc(sizeof(float) * l->per * batch);
        l->by[s] = malloc(sizeof(int32_t) * batch);
    }
    l->perm = malloc(sizeof(int64_t) * (size_t)d->n);
    l->idx = malloc(sizeof(int64_t) * batch);
    l->flip = malloc(sizeof(int) * batch);
    l->u8 = malloc(l->per * batch);
    if (!l->bx[0] || !l->bx[1] || !l->by[0] || !l->by[1] || !l->perm || !l->idx || !l->flip || !l->u8) {
        mala_errf(err, "loader: out of memory for batch %d of %zu values", batch, l->per);
        loader_free(l);
        return NULL;
    }
    int cores = 1;
#ifdef _OPENMP
    cores = omp_get_num_procs();
#endif
    l->threads = cores < 4 ? cores : 4;
    const char *env = getenv("MALA_LOADER_THREADS");
    if (env && atoi(env) > 0) l->threads = atoi(env);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->sync_init = 1;
    if (start_worker(l)) {
        mala_errf(err, "loader: cannot start the loader thread");
        loader_free(l);
        return NULL;
    }
    return l;
}

void loader_next(Loader *l, float *x, int32_t *y) {
    pthread_mutex_lock(&l->mu);
    int slot = (int)(l->next_take & 1);
    while (!l->full[slot]) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    if (x) memcpy(x, l->bx[slot], sizeof(float) * l->per * l->B);
    if (y) memcpy(y, l->by[slot], sizeof(int32_t) * l->B);
    pthread_mutex_lock(&l->mu);
    l->full[slot] = 0;
    l->next_take++;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

void loader_seek(Loader *l, uint64_t batches_consumed) {
    stop_worker(l);
    l->next_take = batches_consumed;
    if (start_worker(l)) FATAL("loader: cannot restart the loader thread");
}

uint64_t loader_position(const Loader *l) { return l->next_take; }

void loader_shard(Loader *l, int global_batch, int offset) {
    CHECK(offset >= 0 && offset + l->B <= global_batch, "slice %d+%d of a global batch of %d", offset, l->B, global_batch);
    stop_worker(l);
    l->stride = global_batch;
    l->offset = offset;
    if (start_worker(l)) FATAL("loader: cannot restart the loader thread");
}

int64_t loader_sample_at(const Loader *l, uint64_t p, int *flip) {
    uint64_t n = (uint64_t)l->d->n;
    int64_t *perm = xmalloc(sizeof(int64_t) * n);
    epoch_perm(perm, (int64_t)n, l->seed, p / n);
    int64_t i = perm[p % n];
    free(perm);
    if (flip) *flip = l->hflip ? flip_at(l->seed, p) : 0;
    return i;
}

void loader_free(Loader *l) {
    if (!l) return;
    stop_worker(l);
    for (int s = 0; s < 2; s++) { free(l->bx[s]); free(l->by[s]); }
    free(l->perm); free(l->idx); free(l->flip); free(l->u8);
    if (l->sync_init) { pthread_mutex_destroy(&l->mu); pthread_cond_destroy(&l->cv); }
    free(l);
}

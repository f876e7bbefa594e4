// defines: batch_store_open, batch_store_load, batch_store_has, batch_store_save, batch_store_finish, batch_store_dir_for
#include "pipeline/batch_store.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "core/dist.h"

void batch_store_dir_for(char *dir, size_t cap, const char *output) {
    size_t n = strlen(output);
    while (n > 1 && output[n - 1] == '/') n--;
    snprintf(dir, cap, "%.*s.partial", (int)n, output);
}

static void batch_path(const BatchStore *bs, int j, char *p, size_t cap) {
    snprintf(p, cap, "%s/batch-%07d.f32", bs->dir, j);
}

// Only the files this module writes (and their .tmp leftovers): nothing else is removed.
static int is_ours(const char *name) {
    return !strncmp(name, "batch-", 6) || !strncmp(name, "settings.json", 13) || !strcmp(name, ".lock");
}

// Our files in dir; with_lock: the lock file too (the folder is done with).
static void remove_ours(const char *dir, int with_lock) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4400];
    while ((e = readdir(d)))
        if (is_ours(e->d_name) && (with_lock || strcmp(e->d_name, ".lock"))) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
}

// A partial run discarded: its batches and settings go, the folder and its lock (ours) stay.
static void remove_batches(const char *dir) { remove_ours(dir, 0); }

// Rank 0: a new folder with the settings, or the partial run's checked against them.
static void open_lead(BatchStore *bs, const Manifest *settings, int force, const char *flag) {
    char sp[4200];
    snprintf(sp, sizeof sp, "%s/settings.json", bs->dir);
    if (mkdir(bs->dir, 0777) && errno != EEXIST) FATAL("%s: cannot create %s: %s", flag, bs->dir, strerror(errno));
    MalaErr lerr;  // one process at a time: a second one would mix its batches in, or lose the folder under it
    if (dir_lock_take(&bs->lock, bs->dir, "mala writing the partial run's batches", &lerr))
        FATAL("%s: %s", flag, lerr.msg);
    struct stat st;
    if (!stat(sp, &st)) {
        MalaErr err;
        Manifest *then = xmalloc(sizeof *then);
        char *diff = xmalloc(8192);
        if (manifest_read(then, sp, &err)) snprintf(diff, 8192, "its settings.json: %s", err.msg);
        else if (!manifest_diff(then, settings, diff, 8192)) diff[0] = 0;
        free(then);
        if (diff[0] && !force)
            FATAL("%s: %s holds a partial run with other settings: %s; run the same command to continue it, or "
                  "--force (or removing the folder) to start over", flag, bs->dir, diff);
        if (diff[0]) {
            fprintf(stderr, "--force: discarding the partial run in %s (other settings)\n", bs->dir);
            remove_batches(bs->dir);
        }
        int same = !diff[0];
        free(diff);
        if (same) return;
    }
    MalaErr err;
    if (manifest_write(settings, sp, &err)) FATAL("%s", err.msg);
}

void batch_store_open(BatchStore *bs, const char *dir, const Manifest *settings, int n, int batch, size_t per,
                      int force, const char *flag) {
    memset(bs, 0, sizeof *bs);
    bs->lock.fd = -1;
    snprintf(bs->dir, sizeof bs->dir, "%s", dir);
    bs->n = n;
    bs->batch = batch;
    bs->per = per;
    const char *stop = getenv("MALA_TEST_STOP_AFTER");
    bs->stop_after = stop ? atoi(stop) : 0;
    if (dist_rank() == 0) open_lead(bs, settings, force, flag);
    dist_barrier();
    for (int j = 0; j * batch < n; j++) {
        char p[4400];
        batch_path(bs, j, p, sizeof p);
        struct stat st;
        int nb = n - j * batch < batch ? n - j * batch : batch;
        if (!stat(p, &st) && (size_t)st.st_size == (size_t)nb * per * sizeof(float)) bs->kept += nb;
    }
}

int batch_store_load(const BatchStore *bs, int j, float *x, int nb) {
    char p[4400];
    batch_path(bs, j, p, sizeof p);
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    size_t want = (size_t)nb * bs->per, got = fread(x, sizeof(float), want, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    return got == want && !extra;
}

int batch_store_has(const BatchStore *bs, int j, int nb) {
    char p[4400];
    batch_path(bs, j, p, sizeof p);
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode) && (size_t)st.st_size == (size_t)nb * bs->per * sizeof(float);
}

void batch_store_save(BatchStore *bs, int j, const float *x, int nb) {
    char p[4400];
    batch_path(bs, j, p, sizeof p);
    MalaErr err;
    if (atomic_write_file(p, x, (size_t)nb * bs->per * sizeof(float), &err)) FATAL("%s", err.msg);
    if (++bs->saved == bs->stop_after) {
        dist_barrier();  // every rank has kept its K batches: what a test expects to find
        fprintf(stderr, "stopped after %d batches (MALA_TEST_STOP_AFTER)\n", bs->saved);
        fflush(stderr);
        _exit(3);
    }
}

void batch_store_finish(BatchStore *bs) {
    if (!bs->dir[0]) return;  // never opened
    if (dist_rank() == 0) {
        remove_ours(bs->dir, 1);
        rmdir(bs->dir);
    }
    dir_lock_release(&bs->lock);
}

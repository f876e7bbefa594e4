#include "train/run_dir.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

static void ckpt_name(char *buf, size_t n, uint64_t step) { snprintf(buf, n, "%07llu.safetensors", (unsigned long long)step); }

void run_ckpt_path(char *buf, size_t n, const char *run, uint64_t step) {
    char name[64];
    ckpt_name(name, sizeof name, step);
    snprintf(buf, n, "%s/checkpoints/%s", run, name);
}

int run_list_checkpoints(const char *run, uint64_t **out) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints", run);
    DIR *d = opendir(dir);
    int n = 0, cap = 16;
    uint64_t *steps = xmalloc(cap * sizeof(uint64_t));
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end, name[64];
        unsigned long long s = strtoull(e->d_name, &end, 10);
        if (end == e->d_name || strcmp(end, ".safetensors")) continue;
        ckpt_name(name, sizeof name, s);
        if (strcmp(name, e->d_name)) continue;
        if (n == cap) steps = realloc(steps, (cap *= 2) * sizeof(uint64_t));
        steps[n++] = s;
    }
    if (d) closedir(d);
    for (int i = 1; i < n; i++)  // insertion sort: a handful of files
        for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) { uint64_t t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t; }
    *out = steps;
    return n;
}

int64_t run_newest_checkpoint(const char *run) {
    uint64_t *steps;
    int n = run_list_checkpoints(run, &steps);
    int64_t newest = n ? (int64_t)steps[n - 1] : -1;
    free(steps);
    return newest;
}

void run_prune_checkpoints(const char *run, int keep, uint64_t upto) {
    char path[4200];
    uint64_t *steps;
    int n = run_list_checkpoints(run, &steps), mine = 0;
    while (mine < n && steps[mine] <= upto) mine++;
    for (int i = 0; i + keep < mine; i++) {
        run_ckpt_path(path, sizeof path, run, steps[i]);
        unlink(path);
    }
    free(steps);
}

void run_log_add(RunLog *l, uint64_t step, double loss, double img_s, double elapsed) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->step = realloc(l->step, l->cap * sizeof(uint64_t));
        l->loss = realloc(l->loss, l->cap * sizeof(double));
        l->img_s = realloc(l->img_s, l->cap * sizeof(double));
        l->elapsed = realloc(l->elapsed, l->cap * sizeof(double));
        if (!l->step || !l->loss || !l->img_s || !l->elapsed) FATAL("out of memory reading a training log");
    }
    l->step[l->n] = step;
    l->loss[l->n] = loss;
    l->img_s[l->n] = img_s;
    l->elapsed[l->n++] = elapsed;
}

long run_log_read(const char *csv, uint64_t upto, RunLog *l) {
    FILE *f = fopen(csv, "r");
    if (!f) return -1;
    char line[512];
    long keep_bytes = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s;
        double loss, col[7];
        int got = sscanf(line, "%llu,%lf,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &s, &loss, &col[0], &col[1], &col[2], &col[3],
                         &col[4], &col[5], &col[6]);
        if (got >= 2) {
            if (s > upto) break;
            run_log_add(l, s, loss, got == 9 ? col[3] : NAN, got == 9 ? col[6] : NAN);
        }
        keep_bytes = ftell(f);
    }
    fclose(f);
    return keep_bytes;
}

void run_log_free(RunLog *l) {
    free(l->step); free(l->loss); free(l->img_s); free(l->elapsed);
    memset(l, 0, sizeof *l);
}

int run_log_rows(const char *csv) {
    FILE *f = fopen(csv, "r");
    if (!f) return -1;
    int rows = -1, c, prev = '\n';
    while ((c = fgetc(f)) != EOF) {
        if (prev == '\n' && c != '\n') rows++;
        prev = c;
    }
    fclose(f);
    return rows < 0 ? 0 : rows;
}

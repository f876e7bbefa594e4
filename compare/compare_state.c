// defines: compare_read_evals, compare_append_eval, compare_read_log, compare_log_free,
//          compare_run_rate, compare_newest_ckpt, compare_run_size, compare_run_schedule, compare_row_point,
//          compare_eval_at_point
// The files a comparison keeps per run, read back on every invocation (this is what makes it
// resumable): evals.csv (ours, append-only), model.csv, and train's log.csv and checkpoints.
#include <errno.h>
#include <math.h>
#include <string.h>

#include "formats/atomic_file.h"
#include "core/backend.h"
#include "core/bench_stats.h"
#include "model/checkpoint.h"
#include "compare/compare.h"
#include "model/net.h"
#include "train/run_dir.h"

static const char *EVAL_HEADER = "images,step,train_s,fd,class_acc,fid,is_mean,is_std,sample_img_s,capped\n";

// A CSV number; an empty field is NAN.
static double field(char **p) {
    char *s = *p, *end;
    double v = NAN;
    if (*s && *s != ',' && *s != '\n') v = strtod(s, &end), s = end;
    while (*s && *s != ',' && *s != '\n') s++;  // "nan" and the like
    if (*s == ',') s++;
    *p = s;
    return v;
}

void compare_read_evals(CompareRun *r) {
    char path[4400], line[1024];
    snprintf(path, sizeof path, "%s/evals.csv", r->dir);
    r->nev = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    int ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (ln == 1 && !strncmp(line, "images,", 7)) continue;
        char *p = line;
        double v[10];
        for (int i = 0; i < 10; i++) v[i] = field(&p);
        if (!isfinite(v[0]) || !isfinite(v[1]) || v[0] < 1 || r->nev == (int)(sizeof r->ev / sizeof r->ev[0])) {
            fprintf(stderr, "warning: %s:%d: not an evaluation row, skipped\n", path, ln);
            continue;
        }
        EvalRow *e = &r->ev[r->nev++];
        e->images = (int64_t)v[0]; e->step = (int64_t)v[1]; e->train_s = v[2];
        e->fd = v[3]; e->class_acc = v[4]; e->fid = v[5]; e->is_mean = v[6]; e->is_std = v[7];
        e->sample_img_s = v[8]; e->capped = v[9] == 1;
    }
    fclose(f);
}

static void put_num(FILE *f, double v, const char *sep) {
    if (isfinite(v)) fprintf(f, "%.6g%s", v, sep);
    else fputs(sep, f);
}

void compare_append_eval(CompareRun *r, const EvalRow *e) {
    char path[4400];
    snprintf(path, sizeof path, "%s/evals.csv", r->dir);
    FILE *t = fopen(path, "r");
    int fresh = !t;
    if (t) fclose(t);
    FILE *f = fopen(path, "a");
    if (!f) FATAL("%s: cannot append: %s", path, strerror(errno));
    if (fresh) fputs(EVAL_HEADER, f);
    fprintf(f, "%lld,%lld,", (long long)e->images, (long long)e->step);
    double v[7] = {e->train_s, e->fd, e->class_acc, e->fid, e->is_mean, e->is_std, e->sample_img_s};
    for (int i = 0; i < 7; i++) put_num(f, v[i], ",");
    fprintf(f, "%d\n", e->capped);
    if (fclose(f)) FATAL("%s: cannot append: %s", path, strerror(errno));
    if (r->nev < (int)(sizeof r->ev / sizeof r->ev[0])) r->ev[r->nev++] = *e;
}

void compare_read_log(const char *run_dir, TrainLog *l) {
    memset(l, 0, sizeof *l);
    char path[4400];
    snprintf(path, sizeof path, "%s/log.csv", run_dir);
    RunLog r = {0};
    run_log_read(path, UINT64_MAX, &r);
    if (r.n) {
        l->step = xmalloc(r.n * sizeof(double));
        l->loss = xmalloc(r.n * sizeof(double));
        l->img_s = xmalloc(r.n * sizeof(double));
        l->elapsed = xmalloc(r.n * sizeof(double));
    }
    for (int i = 0; i < r.n; i++) {
        if (isnan(r.elapsed[i])) continue;  // a row without train's later columns
        l->step[l->n] = (double)r.step[i]; l->loss[l->n] = r.loss[i];
        l->img_s[l->n] = r.img_s[i]; l->elapsed[l->n] = r.elapsed[i];
        l->n++;
    }
    run_log_free(&r);
}

void compare_log_free(TrainLog *l) {
    free(l->step); free(l->loss); free(l->img_s); free(l->elapsed);
    memset(l, 0, sizeof *l);
}

double compare_run_rate(const char *run_dir, int batch, int64_t *images_done, double *train_s) {
    TrainLog l;
    compare_read_log(run_dir, &l);
    double rate = 0, recent[20];
    int nr = 0;
    *images_done = 0;
    *train_s = 0;
    if (l.n) {
        *images_done = (int64_t)l.step[l.n - 1] * batch;
        *train_s = l.elapsed[l.n - 1];
        for (int i = l.n - 1; i >= 0 && nr < 20; i--)
            if (isfinite(l.img_s[i]) && l.img_s[i] > 0) recent[nr++] = l.img_s[i];
        if (nr) rate = spread_of(recent, nr).median;
    }
    compare_log_free(&l);
    return rate;
}

int64_t compare_newest_ckpt(const char *run_dir) { return run_newest_checkpoint(run_dir); }

// Parameters, GFLOP/img and classes of a checkpoint's configuration.
static int model_size(const char *ckpt, double *params, double *gflop, int *classes) {
    StFile f;
    NetConfig c;
    ClassNames cn;
    MalaErr err;
    if (st_open(&f, ckpt, &err)) return -1;
    int rc = ckpt_read_config(&f, &c, &cn, &err);
    st_close(&f);
    if (rc) return -1;
    class_names_free(&cn);
    Net *n = net_create(&c, backend_select("cpu", NULL), 1, NET_INFER);
    *params = (double)n->n_trainable;
    *gflop = net_flops_per_image(&c) / 1e9;
    *classes = c.num_classes;
    net_free(n);
    return 0;
}

int compare_run_size(CompareRun *r) {
    char path[4400], line[256];
    snprintf(path, sizeof path, "%s/model.csv", r->dir);
    FILE *f = fopen(path, "r");
    if (f) {
        int ok = fgets(line, sizeof line, f) && fgets(line, sizeof line, f) &&
                 sscanf(line, "%lf,%lf,%d", &r->params, &r->gflop, &r->classes) == 3 && r->params > 0 && r->classes > 0;
        fclose(f);
        if (ok) return 0;
        fprintf(stderr, "warning: %s: not a model size row, read from the checkpoint instead\n", path);
    }
    int64_t s = compare_newest_ckpt(r->dir);
    char ckpt[4400];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/%07lld.safetensors", r->dir, (long long)s);
    if (s < 0 || model_size(ckpt, &r->params, &r->gflop, &r->classes)) return -1;
    int n = snprintf(line, sizeof line, "params,gflop_per_img,classes\n%.0f,%.9g,%d\n", r->params, r->gflop, r->classes);
    MalaErr err;
    if (atomic_write_file(path, line, (size_t)n, &err)) fprintf(stderr, "warning: %s\n", err.msg);
    return 0;
}

void compare_run_schedule(const CompareConfig *c, CompareRun *r, double gflop) {
    int64_t *im;
    double *t;
    r->npoints = compare_arm_points(c, gflop, &im, &t);
    r->budget = compare_arm_budget(c, gflop);
    for (int i = 0; i < r->npoints; i++) {
        r->point[i] = im[i];
        r->point_tflop[i] = t ? t[i] : 0;
    }
    free(im);
    free(t);
}

double compare_row_point(const CompareConfig *c, const CompareRun *r, const EvalRow *e) {
    if (c->budget_images) return (double)e->images;
    for (int i = 0; i < r->npoints; i++)
        if (r->point[i] == e->images) return r->point_tflop[i];
    return 0;
}

const EvalRow *compare_eval_at_point(const CompareConfig *c, const CompareRun *r, double pt) {
    for (int i = r->nev - 1; i >= 0 && pt > 0; i--)
        if (compare_row_point(c, r, &r->ev[i]) == pt) return &r->ev[i];
    return NULL;
}

// defines: compare_write_report, compare_write_grid
// The results of a comparison from its runs' files: results.md (one row per arm: the mean over
// seeds, +- the sample standard deviation when there are several), results.csv (every
// evaluation of every run), results.json, the plots and the grid of samples. Training compute
// (TFLOP: images seen x the run's forward GFLOP/img / 1000) beside images and time throughout;
// across arms, results compare at the points of the schedule they share (compare_row_point).
#include <errno.h>
#include <math.h>
#include <string.h>

#include "formats/atomic_file.h"
#include "compare/compare.h"
#include "formats/image_io.h"
#include "formats/json.h"
#include "eval/line_plot.h"
#include "formats/npy.h"

static double median(double *v, int n) {
    if (!n) return NAN;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median img/s of a run's training log rows (robust to the odd slow row on a shared machine).
static double train_img_s(const CompareRun *r) {
    TrainLog l;
    compare_read_log(r->dir, &l);
    double m = median(l.img_s, l.n);
    compare_log_free(&l);
    return m;
}

static double sample_img_s(const CompareRun *r) {
    double v[1000];
    int n = 0;
    for (int i = 0; i < r->nev; i++)
        if (isfinite(r->ev[i].sample_img_s)) v[n++] = r->ev[i].sample_img_s;
    return median(v, n);
}

// The evaluation of run r at exactly `images` (NULL when it has none).
static const EvalRow *at(const CompareRun *r, int64_t images) {
    for (int i = r->nev - 1; i >= 0; i--)
        if (r->ev[i].images == images) return &r->ev[i];
    return NULL;
}

// Training TFLOP of a run at `images` (NAN while its GFLOP/img is unknown).
static double run_tflop(const CompareRun *r, int64_t images) {
    return r->gflop > 0 ? compare_tflop(images, r->gflop) : NAN;
}

// The arm's last point that every seed with results has reached (its comparable result), 0 if
// none. A seed not evaluated yet (a comparison run a few runs at a time) is left out until it is.
static int64_t common_point(const CompareRun *runs, int nruns, int arm) {
    int64_t best = 0;
    for (int i = 0; i < nruns; i++) {
        if (runs[i].arm_index != arm || !runs[i].nev) continue;
        for (int e = runs[i].nev - 1; e >= 0; e--) {
            int64_t im = runs[i].ev[e].images;
            int all = 1;
            for (int j = 0; j < nruns; j++)
                if (runs[j].arm_index == arm && runs[j].nev && !at(&runs[j], im)) all = 0;
            if (all && im > best) best = im;
        }
        break;
    }
    return best;
}

typedef struct {
    const CompareArm *arm;
    int64_t images;
    double params, gflop, train_img_s, sample_img_s, train_s, tflop;
    CompareStat fd, acc, fid, is;
    int seeds;
} ArmRow;

static ArmRow arm_row(const CompareConfig *c, const CompareRun *runs, int nruns, int a) {
    ArmRow row = {.arm = &c->arms[a]};
    row.images = common_point(runs, nruns, a);
    double fd[COMPARE_MAX_SEEDS] = {0}, acc[COMPARE_MAX_SEEDS] = {0}, fid[COMPARE_MAX_SEEDS] = {0};
    double is[COMPARE_MAX_SEEDS] = {0}, tr[COMPARE_MAX_SEEDS] = {0}, sm[COMPARE_MAX_SEEDS] = {0};
    double ts[COMPARE_MAX_SEEDS] = {0};
    int n = 0;
    for (int i = 0; i < nruns; i++) {
        if (runs[i].arm_index != a) continue;
        if (runs[i].params > 0) { row.params = runs[i].params; row.gflop = runs[i].gflop; }
        if (!runs[i].nev) continue;
        const EvalRow *e = row.images ? at(&runs[i], row.images) : NULL;
        fd[n] = e ? e->fd : NAN;
        acc[n] = e ? e->class_acc : NAN;
        fid[n] = e ? e->fid : NAN;
        is[n] = e ? e->is_mean : NAN;
        ts[n] = e ? e->train_s : NAN;
        tr[n] = train_img_s(&runs[i]);
        sm[n] = sample_img_s(&runs[i]);
        n++;
    }
    row.seeds = n;
    row.fd = compare_stat(fd, n); row.acc = compare_stat(acc, n); row.fid = compare_stat(fid, n); row.is = compare_stat(is, n);
    row.train_img_s = compare_stat(tr, n).mean;
    row.sample_img_s = compare_stat(sm, n).mean;
    row.train_s = compare_stat(ts, n).mean;
    row.tflop = row.images && row.gflop > 0 ? compare_tflop(row.images, row.gflop) : NAN;
    return row;
}

static void md_stat(FILE *f, CompareStat s, const char *fmt) {
    if (!s.n) { fputs(" - |", f); return; }
    fputc(' ', f);
    fprintf(f, fmt, s.mean);
    if (isfinite(s.sd)) { fputs(" ± ", f); fprintf(f, fmt, s.sd); }
    fputs(" |", f);
}

static void md_num(FILE *f, double v, const char *fmt) {
    if (!isfinite(v) || v == 0) { fputs(" - |", f); return; }
    fputc(' ', f);
    fprintf(f, fmt, v);
    fputs(" |", f);
}

// Every run's FD / class accuracy at every evaluation point any run reached (columns by images
// seen, ascending): the metric along each run, where the arm rows give only the last shared point.
static void write_points(FILE *f, const CompareConfig *c, const CompareRun *runs, int nruns) {
    double pts[1000];  // a run has at most 1000 evaluation points, and all runs share the schedule
    int np = 0;
    for (int i = 0; i < nruns; i++)
        for (int e = 0; e < runs[i].nev; e++) {
            const double pt = compare_row_point(c, &runs[i], &runs[i].ev[e]);
            int k = 0;
            while (k < np && pts[k] < pt) k++;
            if (pt <= 0 || (k < np && pts[k] == pt) || np == 1000) continue;
            memmove(pts + k + 1, pts + k, (size_t)(np - k) * sizeof *pts);
            pts[k] = pt;
            np++;
        }
    if (!np) return;
    if (c->budget_images) {
        fprintf(f, "\nFD / class accuracy at every evaluation point (images seen, steps):\n\n| run |");
        for (int k = 0; k < np; k++)
            fprintf(f, " %lld (%lld) |", (long long)pts[k], (long long)compare_steps(c, (int64_t)pts[k]));
    } else {
        fprintf(f, "\nFD / class accuracy at every evaluation point (training TFLOP; each arm at the whole step "
                   "nearest to it, its images in results.csv):\n\n| run |");
        for (int k = 0; k < np; k++) fprintf(f, " %g |", pts[k]);
    }
    fprintf(f, "\n|---|");
    for (int k = 0; k < np; k++) fputs("---|", f);
    fputc('\n', f);
    for (int i = 0; i < nruns; i++) {
        fprintf(f, "| %s |", runs[i].name);
        for (int k = 0; k < np; k++) {
            const EvalRow *e = compare_eval_at_point(c, &runs[i], pts[k]);
            if (!e || !isfinite(e->fd)) { fputs(" - |", f); continue; }
            fprintf(f, " %#.4g / %.3f |", e->fd, e->class_acc);
        }
        fputc('\n', f);
    }
}

static void write_md(const CompareConfig *c, const CompareRun *runs, int nruns, const char *path) {
    char tmp[4410];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { fprintf(stderr, "warning: %s: cannot write: %s\n", tmp, strerror(errno)); return; }
    fprintf(f, "# mala compare: %s\n\n", c->path);
    if (c->budget_images)
        fprintf(f, "Data %s; batch %d, lr %g; budget %lld images seen per arm and seed (%lld steps)%s; seeds", c->data,
                c->batch, c->lr, (long long)c->budget_images, (long long)compare_steps(c, c->budget_images),
                c->wall_time_s > 0 ? ", wall-time cap" : "");
    else
        fprintf(f, "Data %s; batch %d, lr %g; budget %g training TFLOP per arm and seed (forward: images seen x "
                "GFLOP/img / 1000; each arm to the whole step nearest to it, evaluated every %g TFLOP)%s; seeds",
                c->data, c->batch, c->lr, c->budget_tflop, c->eval_every_tflop,
                c->wall_time_s > 0 ? ", wall-time cap" : "");
    for (int s = 0; s < c->nseeds; s++) fprintf(f, "%s %llu", s ? "," : "", (unsigned long long)c->seeds[s]);
    fprintf(f, ".\nEvaluation of the EMA weights: %s %d steps, guidance %g, %d images, noise seed %llu; FD of the %s "
               "features against %s%s.\n\n", c->sampler, c->eval_steps, c->cfg_scale, c->eval_images,
            (unsigned long long)c->eval_seed, c->features, c->ref, c->inception[0] ? "; FID / IS with the Inception" : "");
    fprintf(f, "FD, class accuracy, FID and IS at the last point every seed of the arm reached (of the seeds with "
               "results): the mean over seeds%s. "
               "Train img/s: the median of the training log's rows; sample img/s: eval's (sampling and features).\n\n",
            c->nseeds > 1 ? " ± the sample standard deviation" : "");
    fprintf(f, "| arm | backbone | attention | preset | params | GFLOP/img | train img/s | sample img/s | images seen | "
               "train TFLOP | train time (s) | FD | class acc | FID | IS |\n");
    fprintf(f, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int a = 0; a < c->narms; a++) {
        ArmRow r = arm_row(c, runs, nruns, a);
        fprintf(f, "| %s | %s | %s | %s |", r.arm->name, r.arm->backbone, r.arm->attention[0] ? r.arm->attention : "-",
                r.arm->preset);
        if (r.params > 0) fprintf(f, " %.3fM |", r.params / 1e6);
        else fputs(" - |", f);
        md_num(f, r.gflop, "%.3f");
        md_num(f, r.train_img_s, "%.1f");
        md_num(f, r.sample_img_s, "%.1f");
        if (r.images) fprintf(f, " %lld |", (long long)r.images);
        else fputs(" - |", f);
        md_num(f, r.tflop, "%.4g");
        md_num(f, r.train_s, "%.0f");
        md_stat(f, r.fd, "%#.4g");
        md_stat(f, r.acc, "%.4f");
        md_stat(f, r.fid, "%#.4g");
        md_stat(f, r.is, "%#.4g");
        fputc('\n', f);
    }
    compare_write_ranking(f, c, runs, nruns);
    compare_write_gap(f, c, runs, nruns);
    fprintf(f, "\nPer run (the newest evaluation):\n\n| run | flags | images seen | step | train TFLOP | "
               "train time (s) | FD | class acc | FID | IS |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < nruns; i++) {
        const CompareRun *r = &runs[i];
        fprintf(f, "| %s | %s |", r->name, r->arm->flags[0] ? r->arm->flags : "-");
        if (!r->nev) { fputs(" - | - | - | - | - | - | - | - |\n", f); continue; }
        const EvalRow *e = &r->ev[r->nev - 1];
        fprintf(f, " %lld%s | %lld |", (long long)e->images, e->capped ? " (capped)" : "", (long long)e->step);
        md_num(f, run_tflop(r, e->images), "%.4g");
        md_num(f, e->train_s, "%.0f");
        md_num(f, e->fd, "%#.4g");
        md_num(f, e->class_acc, "%.4f");
        md_num(f, e->fid, "%#.4g");
        md_num(f, e->is_mean, "%#.4g");
        fputc('\n', f);
    }
    write_points(f, c, runs, nruns);
    fprintf(f, "\n![loss](loss.png)\n![FD against images seen](fd_vs_images.png)\n"
               "![FD against training compute](fd_vs_tflop.png)\n![FD against training time](fd_vs_time.png)\n"
               "![class accuracy against images seen](class_acc_vs_images.png)\n"
               "![class accuracy against training compute](class_acc_vs_tflop.png)\n"
               "![class accuracy against training time](class_acc_vs_time.png)\n\n"
               "compare.png: %d row%s of samples per run (one image per class), runs in this order:", c->grid_per_class,
            c->grid_per_class > 1 ? "s" : "");
    for (int i = 0; i < nruns; i++) fprintf(f, "%s %s", i ? "," : "", runs[i].name);
    fprintf(f, ".\n\n![samples](compare.png)\n");
    if (fclose(f) || rename(tmp, path)) fprintf(stderr, "warning: %s: cannot write: %s\n", path, strerror(errno));
}

static void csv_num(FILE *f, double v, const char *sep) {
    if (isfinite(v)) fprintf(f, "%.6g%s", v, sep);
    else fputs(sep, f);
}

static void write_csv(const CompareRun *runs, int nruns, const char *path) {
    char tmp[4410];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { fprintf(stderr, "warning: %s: cannot write: %s\n", tmp, strerror(errno)); return; }
    fprintf(f, "arm,seed,backbone,attention,preset,params,gflop_per_img,images,step,train_s,fd,class_acc,fid,is_mean,"
               "is_std,sample_img_s,train_img_s,capped,tflop\n");
    for (int i = 0; i < nruns; i++) {
        const CompareRun *r = &runs[i];
        double tr = train_img_s(r);
        for (int e = 0; e < r->nev; e++) {
            const EvalRow *v = &r->ev[e];
            fprintf(f, "%s,%llu,%s,%s,%s,", r->arm->name, (unsigned long long)r->seed, r->arm->backbone,
                    r->arm->attention, r->arm->preset);
            csv_num(f, r->params > 0 ? r->params : NAN, ",");
            csv_num(f, r->gflop > 0 ? r->gflop : NAN, ",");
            fprintf(f, "%lld,%lld,", (long long)v->images, (long long)v->step);
            double x[8] = {v->train_s, v->fd, v->class_acc, v->fid, v->is_mean, v->is_std, v->sample_img_s, tr};
            for (int j = 0; j < 8; j++) csv_num(f, x[j], ",");
            fprintf(f, "%d,", v->capped);
            csv_num(f, run_tflop(r, v->images), "\n");
        }
    }
    if (fclose(f) || rename(tmp, path)) fprintf(stderr, "warning: %s: cannot write: %s\n", path, strerror(errno));
}

static void json_num(JsonBuf *b, const char *key, double v) {
    if (isfinite(v)) json_buf_printf(b, ",\"%s\":%.6g", key, v);
    else json_buf_printf(b, ",\"%s\":null", key);
}

static void json_stat(JsonBuf *b, const char *key, CompareStat s) {
    json_buf_printf(b, ",\"%s\":{\"n\":%d", key, s.n);
    json_num(b, "mean", s.mean);
    json_num(b, "sd", s.sd);
    json_buf_puts(b, "}");
}

static void json_str(JsonBuf *b, const char *key, const char *v) {
    json_buf_printf(b, ",\"%s\":", key);
    json_buf_string(b, v, strlen(v));
}

static void write_json(const CompareConfig *c, const CompareRun *runs, int nruns, const char *path) {
    JsonBuf b = {0};
    json_buf_puts(&b, "{\"config\":");
    json_buf_string(&b, c->path, strlen(c->path));
    json_str(&b, "data", c->data);
    json_str(&b, "features", c->features);
    json_str(&b, "ref", c->ref);
    json_buf_printf(&b, ",\"batch\":%d,\"lr\":%.9g,\"budget_images\":%lld,\"eval_every_images\":%lld", c->batch, c->lr,
                    (long long)c->budget_images, (long long)c->eval_every_images);
    json_num(&b, "budget_tflop", c->budget_tflop > 0 ? c->budget_tflop : NAN);
    json_num(&b, "eval_every_tflop", c->eval_every_tflop > 0 ? c->eval_every_tflop : NAN);
    json_buf_printf(&b, ",\"eval\":{\"sampler\":\"%s\",\"steps\":%d,\"images\":%d,\"cfg_scale\":%g,"
                    "\"cfg_channels\":\"%s\",\"seed\":%llu}", c->sampler, c->eval_steps, c->eval_images, c->cfg_scale,
                    c->cfg_channels, (unsigned long long)c->eval_seed);
    json_buf_puts(&b, ",\"seeds\":[");
    for (int s = 0; s < c->nseeds; s++) json_buf_printf(&b, "%s%llu", s ? "," : "", (unsigned long long)c->seeds[s]);
    json_buf_puts(&b, "],\"arms\":[");
    for (int a = 0; a < c->narms; a++) {
        ArmRow r = arm_row(c, runs, nruns, a);
        json_buf_puts(&b, a ? ",{\"name\":" : "{\"name\":");
        json_buf_string(&b, r.arm->name, strlen(r.arm->name));
        json_str(&b, "backbone", r.arm->backbone);
        json_str(&b, "attention", r.arm->attention);
        json_str(&b, "preset", r.arm->preset);
        json_str(&b, "flags", r.arm->flags);
        json_num(&b, "params", r.params > 0 ? r.params : NAN);
        json_num(&b, "gflop_per_img", r.gflop > 0 ? r.gflop : NAN);
        json_num(&b, "train_img_s", r.train_img_s);
        json_num(&b, "sample_img_s", r.sample_img_s);
        json_buf_printf(&b, ",\"images\":%lld", (long long)r.images);
        json_num(&b, "tflop", r.tflop);
        json_num(&b, "train_s", r.train_s);
        json_stat(&b, "fd", r.fd);
        json_stat(&b, "class_acc", r.acc);
        json_stat(&b, "fid", r.fid);
        json_stat(&b, "is", r.is);
        json_buf_puts(&b, ",\"runs\":[");
        int first = 1;
        for (int i = 0; i < nruns; i++) {
            if (runs[i].arm_index != a) continue;
            json_buf_printf(&b, "%s{\"seed\":%llu,\"points\":[", first ? "" : ",", (unsigned long long)runs[i].seed);
            first = 0;
            for (int e = 0; e < runs[i].nev; e++) {
                const EvalRow *v = &runs[i].ev[e];
                json_buf_printf(&b, "%s{\"images\":%lld,\"step\":%lld", e ? "," : "", (long long)v->images,
                                (long long)v->step);
                json_num(&b, "tflop", run_tflop(&runs[i], v->images));
                json_num(&b, "train_s", v->train_s);
                json_num(&b, "fd", v->fd);
                json_num(&b, "class_acc", v->class_acc);
                json_num(&b, "fid", v->fid);
                json_num(&b, "is_mean", v->is_mean);
                json_num(&b, "is_std", v->is_std);
                json_num(&b, "sample_img_s", v->sample_img_s);
                json_buf_printf(&b, ",\"capped\":%s}", v->capped ? "true" : "false");
            }
            json_buf_puts(&b, "]}");
        }
        json_buf_puts(&b, "]}");
    }
    json_buf_puts(&b, "]}\n");
    MalaErr err;
    if (atomic_write_file(path, b.buf, b.len, &err)) fprintf(stderr, "warning: %s\n", err.msg);
    json_buf_free(&b);
}

enum { X_IMAGES, X_TIME, X_TFLOP };

// metric: 0 FD, 1 class accuracy. x: X_IMAGES images seen, X_TIME training seconds, X_TFLOP training
// TFLOP (a run without its GFLOP/img yet is left out). One series per arm: the mean over the seeds
// at the points every seed has.
static void plot_metric(const CompareConfig *c, const CompareRun *runs, int nruns, int metric, int xkind,
                        const char *path) {
    PlotSeries s[COMPARE_MAX_ARMS];
    double *xs[COMPARE_MAX_ARMS], *ys[COMPARE_MAX_ARMS];
    for (int a = 0; a < c->narms; a++) {
        const CompareRun *r0 = NULL;  // the arm's first run with results (seeds without any are left out)
        for (int i = 0; i < nruns; i++)
            if (runs[i].arm_index == a && (!r0 || (!r0->nev && runs[i].nev))) r0 = &runs[i];
        xs[a] = xmalloc((r0->nev + 1) * sizeof(double));
        ys[a] = xmalloc((r0->nev + 1) * sizeof(double));
        int n = 0;
        for (int e = 0; e < r0->nev; e++) {
            double sx = 0, sy = 0;
            int k = 0, all = 1;
            for (int i = 0; i < nruns; i++) {
                if (runs[i].arm_index != a || !runs[i].nev) continue;
                const EvalRow *v = at(&runs[i], r0->ev[e].images);
                if (!v) { all = 0; break; }
                sx += xkind == X_TIME    ? v->train_s
                      : xkind == X_TFLOP ? run_tflop(&runs[i], v->images)
                                         : (double)v->images;
                sy += metric ? v->class_acc : v->fd;
                k++;
            }
            if (!all || !isfinite(sx)) continue;
            xs[a][n] = sx / k;
            ys[a][n] = sy / k;
            n++;
        }
        s[a] = (PlotSeries){c->arms[a].name, xs[a], ys[a], n};
    }
    static const char *xlabel[] = {"images seen", "training seconds", "training TFLOP (forward)"};
    PlotStyle st = {metric ? "class accuracy of the samples" : "FD of the samples", xlabel[xkind],
                    metric ? "higher is better" : "lower is better", !metric};
    MalaErr err;
    if (line_plot_png(path, s, c->narms, &st, &err)) fprintf(stderr, "warning: %s\n", err.msg);
    for (int a = 0; a < c->narms; a++) { free(xs[a]); free(ys[a]); }
}

static void plot_loss(const CompareRun *runs, int nruns, int batch, const char *path) {
    PlotSeries s[COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS];
    TrainLog logs[COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS];
    for (int i = 0; i < nruns; i++) {
        compare_read_log(runs[i].dir, &logs[i]);
        for (int j = 0; j < logs[i].n; j++) logs[i].step[j] *= batch;  // images seen
        s[i] = (PlotSeries){runs[i].name, logs[i].step, logs[i].loss, logs[i].n};
    }
    PlotStyle st = {"training loss", "images seen", "mean of each log interval", 1};
    MalaErr err;
    if (line_plot_png(path, s, nruns, &st, &err)) fprintf(stderr, "warning: %s\n", err.msg);
    for (int i = 0; i < nruns; i++) compare_log_free(&logs[i]);
}

void compare_write_report(const CompareConfig *c, CompareRun *runs, int nruns, const char *out) {
    for (int i = 0; i < nruns; i++)
        if (!(runs[i].params > 0)) compare_run_size(&runs[i]);
    char path[4400];
    snprintf(path, sizeof path, "%s/results.md", out);
    write_md(c, runs, nruns, path);
    snprintf(path, sizeof path, "%s/results.csv", out);
    write_csv(runs, nruns, path);
    snprintf(path, sizeof path, "%s/results.json", out);
    write_json(c, runs, nruns, path);
    snprintf(path, sizeof path, "%s/loss.png", out);
    plot_loss(runs, nruns, c->batch, path);
    static const char *names[2][3] = {{"fd_vs_images.png", "fd_vs_time.png", "fd_vs_tflop.png"},
                                      {"class_acc_vs_images.png", "class_acc_vs_time.png", "class_acc_vs_tflop.png"}};
    for (int m = 0; m < 2; m++)
        for (int t = 0; t < 3; t++) {
            snprintf(path, sizeof path, "%s/%s", out, names[m][t]);
            plot_metric(c, runs, nruns, m, t, path);
        }
}

// The grid with a black column on its left naming each run beside its rows (white text).
static int save_labelled(const char *path, const float *x, int n, int ch, int h, int w, int classes,
                         const char *const *names, const int *row0, const int *rows, int nnames, MalaErr *err) {
    enum { PAD = 2 };
    uint8_t *g;
    int gw, gh;
    if (image_grid_u8(&g, &gw, &gh, x, n, ch, h, w, classes, PAD, err)) return -1;
    int lw = 0;
    for (int i = 0; i < nnames; i++) lw = plot_text_width(names[i]) > lw ? plot_text_width(names[i]) : lw;
    lw += 2 * 6;
    const int W = lw + gw;
    uint8_t *img = xcalloc((size_t)W * gh * 3, 1);
    for (int y = 0; y < gh; y++) memcpy(img + ((size_t)y * W + lw) * 3, g + (size_t)y * gw * 3, (size_t)gw * 3);
    static const uint8_t white[3] = {255, 255, 255};
    for (int i = 0; i < nnames; i++) {
        int mid = PAD + row0[i] * (h + PAD) + (rows[i] * (h + PAD) - PAD) / 2;
        plot_text(img, W, gh, 6, mid - 4, names[i], white);
    }
    int rc = image_write_png(path, img, W, gh, 3, err);
    free(img);
    free(g);
    return rc;
}

void compare_write_grid(CompareRun *runs, int nruns, int classes, const char *out) {
    float *all = NULL;
    int64_t n = 0, per = 0;
    enum { MAXR = COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS };
    int ch = 0, h = 0, w = 0, nn = 0, row0[MAXR], rows[MAXR];
    const char *names[MAXR];
    for (int i = 0; i < nruns; i++) {
        if (!runs[i].grid[0]) continue;
        NpyArray a;
        MalaErr err;
        if (npy_load(runs[i].grid, &a, &err)) { fprintf(stderr, "warning: %s\n", err.msg); continue; }
        if (strcmp(a.dtype, "<f4") || a.ndim != 4 || (per && (a.shape[1] != ch || a.shape[2] != h || a.shape[3] != w))) {
            fprintf(stderr, "warning: %s: not a float32 [N, C, H, W] grid of the others' shape, left out\n", runs[i].grid);
            npy_free(&a);
            continue;
        }
        ch = (int)a.shape[1]; h = (int)a.shape[2]; w = (int)a.shape[3];
        per = (int64_t)ch * h * w;
        int gap = n > 0 ? classes : 0;  // a blank row (black, as the padding) between two runs
        all = realloc(all, (size_t)(n + gap + a.shape[0]) * per * sizeof(float));
        for (int64_t j = 0; j < gap * per; j++) all[n * per + j] = -1.0f;
        n += gap;
        names[nn] = runs[i].name;
        row0[nn] = (int)(n / classes);
        rows[nn++] = (int)((a.shape[0] + classes - 1) / classes);
        memcpy(all + n * per, a.data, (size_t)a.shape[0] * per * sizeof(float));
        n += a.shape[0];
        npy_free(&a);
    }
    if (!n) return;
    char path[4400];
    MalaErr err;
    snprintf(path, sizeof path, "%s/compare.png", out);
    if (save_labelled(path, all, (int)n, ch, h, w, classes, names, row0, rows, nn, &err))
        fprintf(stderr, "warning: %s\n", err.msg);
    free(all);
}

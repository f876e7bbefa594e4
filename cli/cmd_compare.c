// mala compare --config FILE --out DIR: trains every arm of a comparison (each seed a run) with
// this program's own `mala train` as a child process, evaluates the EMA weights at every
// evaluation point with `mala eval fid`, and writes the results (compare.h lists the files).
//
// The runs advance in rounds, one evaluation point at a time for every run, so that a comparison
// stopped early still compares equal budgets. Everything is re-read from DIR on start: a run that
// holds a checkpoint continues with `train --resume`, an evaluation already in evals.csv is not
// repeated, nothing written before is removed or rewritten (results.* and the plots are
// regenerated from the runs' files). Before anything is written, DIR must be new, empty or a
// comparison's (its config.ini), and the config may not change what its runs used so far
// (compare_config_drift); an accepted one replaces config.ini.
//
// With budget_tflop the budget and the evaluation points are training compute: each arm gets its
// own images (compare_arm_points) from its forward GFLOP/img, which its runs' model.csv or, before
// one trained, `mala train --dry-run` with the arm's flags gives (arm_size_gflop).
//
// --runs NAME,... limits an invocation to some runs (a comparison longer than one machine's
// lifetime, done a few whole runs at a time); the report always covers every run DIR holds, and a
// finished run needs only its small files (evals.csv, model.csv, log.csv, the grid), not its
// checkpoints.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "cli/commands.h"
#include "compare/compare.h"
#include "formats/json.h"
#include "model/net.h"
#include "core/progress.h"

static volatile sig_atomic_t stop_signal = 0;
static void on_signal(int sig) { stop_signal = sig; }

// --threads of every child: the config's, or with --jobs N > 1 and threads = 0 the cores / N.
static int child_threads = 0;
static int pool_child = 0;  // this process is one of run_point_pool's (its parent reports a stop)

// ---- child processes ----

typedef struct { char *v[128]; int n; char store[128][640]; } Argv;

static void av_add(Argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void av_add(Argv *a, const char *fmt, ...) {
    if (a->n >= 126) FATAL("compare: a child command with too many arguments");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->store[a->n], sizeof a->store[0], fmt, ap);
    va_end(ap);
    a->v[a->n] = a->store[a->n];
    a->v[++a->n] = NULL;
}

// Starts argv in a process group of its own (a terminal's ^C reaches us alone; we pass one
// SIGTERM on, which train answers with a checkpoint); stdout to out_path (truncated) or
// /dev/null, stderr appended to err_path.
static pid_t spawn(Argv *a, const char *out_path, const char *err_path) {
    FILE *log = fopen(err_path, "a");
    if (log) {
        fprintf(log, "$");
        for (int i = 0; i < a->n; i++) fprintf(log, " %s", a->v[i]);
        fprintf(log, "\n");
        fclose(log);
    }
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) FATAL("compare: fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        int o = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || in < 0) _exit(127);
        dup2(in, 0); dup2(o, 1); dup2(e, 2);
        // The harness's own image: /proc/self/exe still executes when the file it was started from
        // has been replaced or deleted (a rebuild while a comparison runs), so every child runs the
        // same program as the harness.
        execv("/proc/self/exe", a->v);
        dprintf(2, "error: compare: cannot start mala again (/proc/self/exe): %s\n", strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

// Waits for the child, calling tick about once a second (tick returns 1 to stop the child with
// SIGTERM). Returns the exit status, 128 + signal for a killed child.
static int wait_child(pid_t pid, int (*tick)(void *), void *ctx, int *stopped) {
    int status, sent = 0;
    double last_tick = 0;
    *stopped = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) FATAL("compare: waitpid: %s", strerror(errno));
        int due = tick && now_seconds() - last_tick >= 1.0;
        if (due) last_tick = now_seconds();
        if (!sent && (stop_signal || (due && tick(ctx)))) {
            kill(-pid, SIGTERM);
            sent = 1;
            *stopped = 1;
        }
        usleep(250000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The last line of a child's log, for an error message.
static void last_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    char line[1024];
    buf[0] = 0;
    while (f && fgets(line, sizeof line, f))
        if (line[0] != '\n' && line[0] != '$') snprintf(buf, cap, "%s", line);
    if (f) fclose(f);
    size_t l = strlen(buf);
    while (l && (buf[l - 1] == '\n' || buf[l - 1] == '\r')) buf[--l] = 0;
}

// ---- progress ----

typedef struct {
    const CompareConfig *c;
    CompareRun *runs, *cur;
    int nruns, point, npoints;
    int64_t target_step;
    Progress pg;
    double eval_s_sum;  // seconds of the evaluations this invocation ran
    int eval_n;
    const double *arm_gflop;  // forward GFLOP/img of each arm's preset
    double t_seg;       // when the current child started
    double elapsed0;    // the run's training seconds when it started
    int jobs;           // runs in flight at once (--jobs)
} Ctl;

// Seconds left: the runs' remaining images at their own rates (a run without one at the others'
// mean GFLOP/s over its GFLOP/img), and the evaluations left at this invocation's mean time.
static double overall_eta(Ctl *k, double *frac) {
    double secs = 0, rsum = 0, done_img = 0, total_img = 0;
    int nknown = 0, evals_left = 0;
    double rates[COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS];
    int64_t left[COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS];
    for (int i = 0; i < k->nruns; i++) {
        int64_t img;
        double ts;
        rates[i] = 0;
        left[i] = 0;
        if (!k->runs[i].selected) continue;
        rates[i] = compare_run_rate(k->runs[i].dir, k->c->batch, &img, &ts);
        left[i] = k->runs[i].done ? 0 : k->runs[i].budget - img;
        if (left[i] < 0) left[i] = 0;
        done_img += k->runs[i].done ? k->runs[i].budget : img;
        total_img += k->runs[i].budget;
        if (rates[i] > 0) { rsum += rates[i] * k->arm_gflop[k->runs[i].arm_index]; nknown++; }
        if (!k->runs[i].done) evals_left += k->runs[i].npoints - k->runs[i].nev;
    }
    double mean_gflops = nknown ? rsum / nknown : 0;
    for (int i = 0; i < k->nruns; i++) {
        double r = rates[i] > 0 ? rates[i] : mean_gflops / k->arm_gflop[k->runs[i].arm_index];
        if (left[i] > 0) secs += r > 0 ? left[i] / r : INFINITY;
    }
    if (evals_left > 0) secs += k->eval_n ? evals_left * k->eval_s_sum / k->eval_n : 0;
    *frac = total_img > 0 ? done_img / total_img : 0;
    return secs / k->jobs;
}

static int train_tick(void *ctx) {
    Ctl *k = ctx;
    int64_t img;
    double ts;
    double rate = compare_run_rate(k->cur->dir, k->c->batch, &img, &ts), frac;
    char eta_run[32], eta_all[32];
    progress_format_eta(eta_run, sizeof eta_run, rate > 0 ? (k->cur->budget - img) / rate : NAN);
    progress_format_eta(eta_all, sizeof eta_all, overall_eta(k, &frac));
    progress_update(&k->pg, 0, "compare: %s (point %d/%d): %lld/%lld images, step %lld/%lld, %.0f img/s, ETA %s | all %.1f%%, ETA %s",
                    k->cur->name, k->point + 1, k->npoints, (long long)img, (long long)k->cur->budget,
                    (long long)(img / k->c->batch), (long long)k->target_step, rate, eta_run, 100 * frac, eta_all);
    // the wall-time cap: training seconds so far plus this child's since its last log row
    return k->c->wall_time_s > 0 && k->elapsed0 + (now_seconds() - k->t_seg) >= k->c->wall_time_s;
}

static int eval_tick(void *ctx) {
    Ctl *k = ctx;
    double frac;
    char eta_all[32];
    progress_format_eta(eta_all, sizeof eta_all, overall_eta(k, &frac));
    progress_update(&k->pg, 0, "compare: %s (point %d/%d): evaluating, %.0f s | all %.1f%%, ETA %s", k->cur->name,
                    k->point + 1, k->npoints, now_seconds() - k->t_seg, 100 * frac, eta_all);
    return 0;
}

// ---- the steps of a run ----

static void stop_here(Ctl *k) {
    progress_break(&k->pg);
    if (pool_child) _exit(130);
    fprintf(stderr, "compare: stopped by signal %d; run the same command again to continue\n", (int)stop_signal);
    exit(130);
}

// Where every child runs: the config's device and precision, and the threads each child gets.
static void add_device_threads(Argv *a, const CompareConfig *c) {
    av_add(a, "--device"); av_add(a, "%s", c->device);
    if (strcmp(c->precision, "auto")) av_add(a, "--precision"), av_add(a, "%s", c->precision);
    if (child_threads) av_add(a, "--threads"), av_add(a, "%d", child_threads);
}

// The arm's recipe and model as every train child of it gets them (a run's, and --dry-run's).
static void add_model_args(Argv *a, const CompareConfig *c, const CompareArm *arm) {
    av_add(a, "--batch"); av_add(a, "%d", c->batch);
    av_add(a, "--lr"); av_add(a, "%.9g", arm->lr > 0 ? arm->lr : c->lr);
    av_add(a, "--data"); av_add(a, "%s", c->data);
    av_add(a, "--model"); av_add(a, "%s", arm->preset);
    av_add(a, "--backbone"); av_add(a, "%s", arm->backbone);
    if (!strcmp(arm->backbone, "dit")) av_add(a, "--attn"), av_add(a, "%s", arm->attention);
    add_device_threads(a, c);
    for (int i = 0; i < c->ntrain_flags; i++) av_add(a, "%s", c->train_flag[i]);
    for (int i = 0; i < arm->nflags; i++) av_add(a, "%s", arm->flag[i]);
}

// Trains the run to `step` (or to where the wall-time cap stops it). Returns the step reached.
static int64_t train_to(Ctl *k, CompareRun *r, int64_t step) {
    const CompareConfig *c = k->c;
    const CompareArm *arm = r->arm;
    int64_t have = compare_newest_ckpt(r->dir);
    if (have >= step) return have;
    if (have < 0 && r->nev)  // a copy of DIR without checkpoints: training again would append to its log
        FATAL("compare: %s was evaluated up to step %lld but %s/checkpoints holds no checkpoint to continue from: "
              "restore it, or move %s away to start the run again", r->name, (long long)r->ev[r->nev - 1].step, r->dir,
              r->dir);
    Argv a = {0};
    av_add(&a, "mala");
    av_add(&a, "train");
    av_add(&a, "--out"); av_add(&a, "%s", r->dir);
    av_add(&a, "--iters"); av_add(&a, "%lld", (long long)step);
    av_add(&a, "--seed"); av_add(&a, "%llu", (unsigned long long)r->seed);
    av_add(&a, "--log-every"); av_add(&a, "%d", c->log_every);
    // By default a checkpoint at the segment's end only, the evaluation point: train's periodic
    // checkpoints fall at multiples of --ckpt-every, and points at equal compute are rounded steps,
    // not multiples of the first (1791, 3581, 5372, 7162: every 1791 would add one at 7164).
    av_add(&a, "--ckpt-every"); av_add(&a, "%lld", (long long)(c->ckpt_every ? c->ckpt_every : step));
    av_add(&a, "--sample-every"); av_add(&a, "0");
    add_model_args(&a, c, arm);
    if (have >= 0) av_add(&a, "--resume");
    char log[4400];
    snprintf(log, sizeof log, "%s/train.log", r->dir);
    int64_t img;
    compare_run_rate(r->dir, c->batch, &img, &k->elapsed0);
    k->cur = r;
    k->target_step = step;
    k->t_seg = now_seconds();
    int stopped;
    int rc = wait_child(spawn(&a, NULL, log), train_tick, k, &stopped);
    if (stop_signal) stop_here(k);
    int64_t reached = compare_newest_ckpt(r->dir);
    if ((rc == 130 || rc == 143) && !stopped) {  // a signal to train alone: not a wall-time cap, not done
        progress_break(&k->pg);
        FATAL("compare: %s: mala train was stopped by signal %d at step %lld, not by compare; run the same command "
              "again to continue", r->name, rc - 128, (long long)reached);
    }
    if (rc && !stopped) {
        char why[1024];
        last_line(log, why, sizeof why);
        progress_break(&k->pg);
        FATAL("compare: %s: mala train exited with status %d: %s (the whole log: %s)", r->name, rc, why, log);
    }
    if (reached < 0) FATAL("compare: %s: training left no checkpoint (see %s)", r->name, log);
    return reached;
}

// Parses the result line of an eval child (the last line of its stdout starting with '{').
static JsonValue *eval_json(const char *path) {
    FILE *f = fopen(path, "r");
    char line[8192], last[8192] = "";
    while (f && fgets(line, sizeof line, f))
        if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
    if (f) fclose(f);
    MalaErr err;
    size_t l = strlen(last);
    while (l && (last[l - 1] == '\n' || last[l - 1] == '\r')) last[--l] = 0;
    return l ? json_parse(last, l, &err) : NULL;
}

static double jnum(const JsonValue *o, const char *key) {
    const JsonValue *v = o ? json_get(o, key) : NULL;
    return v && v->type == JSON_NUMBER ? v->number : NAN;
}

// One `mala eval` child; inception: NULL for the config's feature network (FD, class accuracy),
// else the Inception weights (FID, IS). The JSON result or a fatal error.
static JsonValue *run_eval(Ctl *k, CompareRun *r, const char *sub, const char *ckpt, const char *data_or_ref,
                           const char *out_stats, const char *inception, int limit) {
    const CompareConfig *c = k->c;
    Argv a = {0};
    av_add(&a, "mala");
    av_add(&a, "eval");
    av_add(&a, "%s", sub);
    if (inception) av_add(&a, "--inception"), av_add(&a, "%s", inception);
    else if (!strcmp(c->features, "fmnist")) av_add(&a, "--features"), av_add(&a, "fmnist");
    else av_add(&a, "--inception"), av_add(&a, "%s", c->inception[0] ? c->inception : "random");
    if (!strcmp(sub, "stats")) {
        av_add(&a, "--data"); av_add(&a, "%s", data_or_ref);
        av_add(&a, "--out"); av_add(&a, "%s", out_stats);
        if (limit) av_add(&a, "--limit"), av_add(&a, "%d", limit);
    } else {
        av_add(&a, "--ckpt"); av_add(&a, "%s", ckpt);
        av_add(&a, "--ref"); av_add(&a, "%s", data_or_ref);
        av_add(&a, "--sampler"); av_add(&a, "%s", c->sampler);
        av_add(&a, "--steps"); av_add(&a, "%d", c->eval_steps);
        av_add(&a, "--num"); av_add(&a, "%d", c->eval_images);
        av_add(&a, "--cfg-scale"); av_add(&a, "%g", c->cfg_scale);
        av_add(&a, "--cfg-channels"); av_add(&a, "%s", c->cfg_channels);
        av_add(&a, "--seed"); av_add(&a, "%llu", (unsigned long long)c->eval_seed);
    }
    add_device_threads(&a, c);
    char log[4400], out[4400];
    snprintf(log, sizeof log, "%s/eval.log", r ? r->dir : out_stats);
    if (!r) snprintf(log, sizeof log, "%s.log", out_stats);
    snprintf(out, sizeof out, "%s.stdout.tmp", r ? r->dir : out_stats);  // not X.json.tmp: the manifest's
    if (r) snprintf(out, sizeof out, "%s/eval.json.tmp", r->dir);
    k->t_seg = now_seconds();
    int stopped;
    int rc = wait_child(spawn(&a, out, log), r ? eval_tick : NULL, k, &stopped);
    JsonValue *j = rc || stop_signal ? NULL : eval_json(out);
    unlink(out);
    if (stop_signal) stop_here(k);
    if (!j) {
        char why[1024];
        last_line(log, why, sizeof why);
        progress_break(&k->pg);
        FATAL("compare: %s: mala eval %s failed (status %d): %s (the whole log: %s)", r ? r->name : data_or_ref, sub, rc,
              why, log);
    }
    return j;
}

// Reference statistics for a feature set, computed once into DIR (a ref that is an .npz is used
// as it is).
static void ref_stats(Ctl *k, const char *out, const char *tag, const char *inception, char *path, size_t cap) {
    const CompareConfig *c = k->c;
    size_t l = strlen(c->ref);
    if (l > 4 && !strcmp(c->ref + l - 4, ".npz")) { snprintf(path, cap, "%s", c->ref); return; }
    snprintf(path, cap, "%s/ref-%s.npz", out, tag);
    struct stat st;
    if (stat(path, &st) == 0) return;
    progress_update(&k->pg, 1, "compare: reference statistics of %s (%s features) -> %s", c->ref, tag, path);
    JsonValue *j = run_eval(k, NULL, "stats", NULL, c->ref, path, inception, c->ref_images);
    json_free(j);
}

static void evaluate(Ctl *k, CompareRun *r, int64_t step, int capped, const char *ref, const char *ref_inc) {
    char ckpt[4400];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/%07lld.safetensors", r->dir, (long long)step);
    EvalRow e = {.images = step * k->c->batch, .step = step, .capped = capped};
    TrainLog l;
    compare_read_log(r->dir, &l);
    e.train_s = NAN;
    for (int i = 0; i < l.n; i++)
        if ((int64_t)l.step[i] <= step) e.train_s = l.elapsed[i];
    compare_log_free(&l);
    k->cur = r;
    double t0 = now_seconds();
    JsonValue *j = run_eval(k, r, "fid", ckpt, ref, NULL, NULL, 0);
    int fmnist = !strcmp(k->c->features, "fmnist");
    e.fd = jnum(j, fmnist ? "fd" : "fid");
    e.class_acc = fmnist ? jnum(j, "class_acc") : NAN;
    e.fid = fmnist ? NAN : e.fd;
    e.is_mean = fmnist ? NAN : jnum(j, "is_mean");
    e.is_std = fmnist ? NAN : jnum(j, "is_std");
    e.sample_img_s = jnum(j, "img_per_s");
    json_free(j);
    if (ref_inc) {
        j = run_eval(k, r, "fid", ckpt, ref_inc, NULL, k->c->inception, 0);
        e.fid = jnum(j, "fid");
        e.is_mean = jnum(j, "is_mean");
        e.is_std = jnum(j, "is_std");
        json_free(j);
    }
    k->eval_s_sum += now_seconds() - t0;
    k->eval_n++;
    compare_append_eval(r, &e);
    progress_break(&k->pg);
    fprintf(stderr, "compare: %s at %lld images (step %lld): FD %.4g, class accuracy %.4g%s\n", r->name,
            (long long)e.images, (long long)step, e.fd, e.class_acc, capped ? " (wall-time cap reached)" : "");
}

// The sample grid of the run's newest evaluated checkpoint: `mala sample` with the evaluation's
// sampler, grid_per_class rows of one image per class.
static void make_grid(Ctl *k, CompareRun *r, int classes) {
    if (!r->nev) return;
    int64_t step = r->ev[r->nev - 1].step;
    char ckpt[4400], npy[4300], png[4400], log[4400];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/%07lld.safetensors", r->dir, (long long)step);
    snprintf(npy, sizeof npy, "%s/grid-%07lld.npy", r->dir, (long long)step);
    snprintf(png, sizeof png, "%s/grid-%07lld.png", r->dir, (long long)step);
    snprintf(log, sizeof log, "%s/eval.log", r->dir);
    struct stat st;
    if (stat(npy, &st) == 0) { snprintf(r->grid, sizeof r->grid, "%s", npy); return; }
    if (stat(ckpt, &st)) return;  // pruned (an older comparison): no grid
    Argv a = {0};
    av_add(&a, "mala");
    av_add(&a, "sample");
    av_add(&a, "--ckpt"); av_add(&a, "%s", ckpt);
    av_add(&a, "--sampler"); av_add(&a, "%s", k->c->sampler);
    av_add(&a, "--steps"); av_add(&a, "%d", k->c->eval_steps);
    av_add(&a, "--cfg-scale"); av_add(&a, "%g", k->c->cfg_scale);
    av_add(&a, "--cfg-channels"); av_add(&a, "%s", k->c->cfg_channels);
    av_add(&a, "--seed"); av_add(&a, "%llu", (unsigned long long)k->c->eval_seed);
    char labels[600] = "";
    for (int g = 0; g < k->c->grid_per_class; g++)
        for (int y = 0; y < classes; y++)
            snprintf(labels + strlen(labels), sizeof labels - strlen(labels), "%s%d", labels[0] ? "," : "", y);
    av_add(&a, "--labels"); av_add(&a, "%s", labels);
    av_add(&a, "--nrow"); av_add(&a, "%d", classes);
    av_add(&a, "--out"); av_add(&a, "%s", png);
    av_add(&a, "--save-npy"); av_add(&a, "%s", npy);
    add_device_threads(&a, k->c);
    k->cur = r;
    k->t_seg = now_seconds();
    int stopped;
    int rc = wait_child(spawn(&a, NULL, log), eval_tick, k, &stopped);
    if (stop_signal) stop_here(k);
    if (rc) {
        char why[1024];
        last_line(log, why, sizeof why);
        progress_break(&k->pg);
        fprintf(stderr, "warning: compare: %s: no sample grid: %s\n", r->name, why);
        return;
    }
    snprintf(r->grid, sizeof r->grid, "%s", npy);
}

// ---- one evaluation point of one run, and the pool that runs several at once ----

// Trains run r to the point's step (or to the wall-time cap) and evaluates it there. Returns
// whether the run is done (its budget reached, or capped).
static int run_point(Ctl *k, CompareRun *r, int64_t step, const char *ref, const char *ref_inc) {
    int64_t reached = train_to(k, r, step);
    int capped = reached < step;
    if (reached > step) {  // a checkpoint beyond this point (a changed config): evaluate that one
        progress_break(&k->pg);
        fprintf(stderr, "note: compare: %s holds step %lld, beyond point %lld: evaluated there\n", r->name,
                (long long)reached, (long long)step);
    }
    int again = 0;  // the cap stopped it before a step past its last evaluation
    for (int e = 0; e < r->nev; e++) again |= r->ev[e].step == reached;
    if (!again) evaluate(k, r, reached, capped, ref, ref_inc);
    return capped || reached >= compare_steps(k->c, r->budget);
}

#define POOL_DONE 10  // a pool child's exit status: its run is done

// The step of the run's point p (-1: it has no point p; a budget_tflop arm may have fewer).
static int64_t point_step(const CompareConfig *c, const CompareRun *r, int p) {
    return p < r->npoints ? compare_steps(c, r->point[p]) : -1;
}

static int point_pending(const CompareRun *r, int64_t step) {
    if (r->done || !r->selected || step < 0) return 0;
    for (int e = 0; e < r->nev; e++)
        if (r->ev[e].step >= step) return 0;
    return 1;
}

// After a run's point: its evaluations as on disk, whether it is done, the report.
static void point_finished(Ctl *k, CompareRun *r, int done, const char *out) {
    compare_read_evals(r);
    r->done = done;
    compare_write_report(k->c, k->runs, k->nruns, out);
}

// The runs of one point, k->jobs at a time: each in a child of this process (a fork running
// run_point), the next one started when one ends. Stopping (SIGINT / SIGTERM) reaches the children,
// which stop their own children and keep what they have; a child that fails stops the others.
static void run_point_pool(Ctl *k, int point, const char *ref, const char *ref_inc, const char *out) {
    pid_t pid[64];
    int slot_run[64], busy = 0, next = 0, failed = -1, forwarded = 0;
    const int jobs = k->jobs < 64 ? k->jobs : 64;
    for (int j = 0; j < jobs; j++) pid[j] = 0;
    for (;;) {
        while (busy < jobs && failed < 0 && !stop_signal) {
            while (next < k->nruns && !point_pending(&k->runs[next], point_step(k->c, &k->runs[next], point))) next++;
            if (next >= k->nruns) break;
            int j = 0;
            while (pid[j]) j++;
            fflush(stderr);
            pid_t p = fork();
            if (p < 0) FATAL("compare: fork: %s", strerror(errno));
            if (p == 0) {
                pool_child = 1;
                const int done = run_point(k, &k->runs[next], point_step(k->c, &k->runs[next], point), ref, ref_inc);
                progress_break(&k->pg);
                fflush(stderr);
                _exit(done ? POOL_DONE : 0);
            }
            pid[j] = p, slot_run[j] = next++, busy++;
        }
        if (!busy) break;
        if (stop_signal && !forwarded) {  // the signal may have reached this process alone
            for (int j = 0; j < jobs; j++)
                if (pid[j]) kill(pid[j], SIGTERM);
            forwarded = 1;
        }
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);  // polled: a signal must not wait for a child's end
        if (w < 0 && errno != EINTR) FATAL("compare: waitpid: %s", strerror(errno));
        if (w <= 0) {
            usleep(250000);
            continue;
        }
        int j = 0;
        while (j < jobs && pid[j] != w) j++;
        if (j == jobs) continue;  // not one of ours
        pid[j] = 0, busy--;
        const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (rc == 0 || rc == POOL_DONE) point_finished(k, &k->runs[slot_run[j]], rc == POOL_DONE, out);
        else if (rc != 130 && failed < 0) {
            failed = slot_run[j];
            for (int i = 0; i < jobs; i++)
                if (pid[i]) kill(pid[i], SIGTERM);
        }
    }
    if (failed >= 0) FATAL("compare: %s failed (its error is above); the other runs were stopped", k->runs[failed].name);
    if (stop_signal) stop_here(k);
}

// ---- the command ----

// Checks each arm's model as train will build it (preset, backbone, attention) before anything
// runs, so that a typo fails in a second with the config's line.
static void check_arms(const CompareConfig *c, double *gflop) {
    for (int i = 0; i < c->narms; i++) {
        const CompareArm *a = &c->arms[i];
        NetConfig nc;
        MalaErr err;
        BackboneKind bk;
        backbone_parse(a->backbone, &bk);
        net_config_default(&nc, bk);
        if (net_config_preset(&nc, a->preset, &err))
            FATAL("%s:%d: [arm %s] preset %s: %s", c->path, a->line, a->name, a->preset,
                  err.msg[0] ? err.msg : "unknown preset");
        if (nc.backbone != bk)
            FATAL("%s:%d: [arm %s] preset %s is a %s preset, the arm's backbone is %s", c->path, a->line, a->name,
                  a->preset, backbone_name(nc.backbone), a->backbone);
        gflop[i] = net_flops_per_image(&nc) / 1e9;  // the preset at its default image shape: for ETAs only
    }
}

// Marks the runs named in `only` (comma-separated <arm>-s<seed>) as this invocation's.
static void select_runs(const char *only, CompareRun *runs, int nruns, const char *config) {
    if (!only) return;
    for (const char *p = only; *p;) {
        size_t l = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < nruns; i++)
            if (strlen(runs[i].name) == l && !strncmp(runs[i].name, p, l)) found = runs[i].selected = 1;
        if (!found) {
            char names[2048] = "";
            for (int i = 0; i < nruns; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", runs[i].name);
            FATAL("--runs: %s has no run '%.*s' (its runs: %s)", config, (int)l, p, names);
        }
        p += l;
        if (*p == ',') p++;
    }
}

// How far run NAME of the comparison in DIR (ctx) got: 0 not started, 1 trained, 2 evaluated.
static int run_state(const char *name, void *ctx) {
    static CompareRun r;  // large (its evaluation rows)
    snprintf(r.dir, sizeof r.dir, "%s/runs/%s", (const char *)ctx, name);
    compare_read_evals(&r);
    if (r.nev) return 2;
    if (compare_newest_ckpt(r.dir) >= 0) return 1;
    TrainLog l;
    compare_read_log(r.dir, &l);
    const int rows = l.n;
    compare_log_free(&l);
    return rows > 0;
}

// The config DIR's runs used (DIR/config.ini) into old: 1, or 0 for a new or empty DIR. Anything
// else (a training run's directory, a folder of the user's) is refused before a file is written.
static int stored_config(const char *out, CompareConfig *old) {
    DIR *d = opendir(out);
    if (!d) {
        const int e = errno;
        struct stat st;
        if (e == ENOENT || (e == ENOTDIR && stat(out, &st) != 0)) return 0;  // make_dirs says why
        FATAL("--out %s: %s", out, e == ENOTDIR ? "not a directory" : strerror(e));
    }
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d))) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    if (empty) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.ini", out);
    struct stat st;
    if (stat(path, &st))
        FATAL("--out %s: not empty and not a comparison's directory (no config.ini): give a new or empty one", out);
    MalaErr err;
    if (compare_config_load(path, old, &err))
        FATAL("--out %s: not a comparison's directory (its config.ini: %s): give a new or empty one", out, err.msg);
    return 1;
}

// Refuses a config that changes what DIR's runs used (compare_config_drift).
static void check_drift(const CompareConfig *old, const CompareConfig *c, const char *out) {
    char stored[4200], ref[4300] = "";
    snprintf(stored, sizeof stored, "%s/config.ini", out);
    const char *tags[] = {old->features, "inception"};
    struct stat st;
    for (int i = 0; i < 2 && !ref[0]; i++) {
        snprintf(ref, sizeof ref, "%s/ref-%s.npz", out, tags[i]);
        if (stat(ref, &st)) ref[0] = 0;
    }
    MalaErr err;
    if (compare_config_drift(old, c, stored, run_state, (void *)out, ref[0] ? ref : NULL, &err)) FATAL("%s", err.msg);
}

// A file's bytes (a config: compare_config_load read it already, so at most 1 MiB); NULL if unreadable.
static char *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = xmalloc((1 << 20) + 1);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

// DIR/config.ini: the config of the latest invocation (what the runs use from now on).
static void store_config(const char *src, const char *out) {
    char dst[4200];
    snprintf(dst, sizeof dst, "%s/config.ini", out);
    size_t n = 0, m = 0;
    char *now = file_bytes(src, &n), *prev = file_bytes(dst, &m);
    if (!now) FATAL("%s: cannot read: %s", src, strerror(errno));
    MalaErr err;
    if (!prev || m != n || memcmp(prev, now, n)) {
        if (prev) fprintf(stderr, "note: %s replaces %s (their differences change no result so far)\n", src, dst);
        if (atomic_write_file(dst, now, n, &err)) FATAL("%s", err.msg);
    }
    free(now);
    free(prev);
}

// An arm's forward GFLOP/img for budget_tflop: its runs' (model.csv or a checkpoint: what its runs
// counted first, so that a later binary keeps the points), else what `mala train --dry-run` with the
// arm's flags reports: the model train builds, at the data's image size and channels and with the
// arm's extra model flags (--rope, --lepe, ...). Its stderr goes to the arm's first run's dry-run.log,
// kept only when it fails: every invocation (--report too) asks again until a run has started, and
// its train.log would gather one line each time.
static double arm_size_gflop(const CompareConfig *c, int arm, CompareRun *runs, int nruns, const char *out) {
    CompareRun *first = NULL;
    for (int i = 0; i < nruns; i++)
        if (runs[i].arm_index == arm) {
            if (!compare_run_size(&runs[i]) && runs[i].gflop > 0) return runs[i].gflop;
            if (!first) first = &runs[i];
        }
    const CompareArm *a = &c->arms[arm];
    Argv av = {0};
    av_add(&av, "mala");
    av_add(&av, "train");
    add_model_args(&av, c, a);
    av_add(&av, "--dry-run");
    char log[4400], res[4400];
    snprintf(log, sizeof log, "%s/dry-run.log", first->dir);
    snprintf(res, sizeof res, "%s/dry-run.json.tmp", first->dir);
    unlink(log);
    int stopped;
    const int rc = wait_child(spawn(&av, res, log), NULL, NULL, &stopped);
    JsonValue *j = rc ? NULL : eval_json(res);
    unlink(res);
    if (stop_signal) exit(130);
    const double g = jnum(j, "gflop_per_img");
    json_free(j);
    if (g > 0) unlink(log);
    else {
        char why[1024];
        last_line(log, why, sizeof why);
        FATAL("%s:%d: [arm %s]: mala train --dry-run (its GFLOP/img for budget_tflop) failed with status %d: %s (the "
              "whole log: %s)", c->path, a->line, a->name, rc, why, log);
    }
    return g;
}

// The start line of a budget_tflop comparison: each arm's images and steps.
static void print_tflop_budgets(const CompareConfig *c, const CompareRun *runs, int nruns, const double *gflop,
                                const char *out) {
    fprintf(stderr, "compare: %d arm%s x %d seed%s, %g training TFLOP each (batch %d), %d evaluation point%s; %s\n",
            c->narms, c->narms > 1 ? "s" : "", c->nseeds, c->nseeds > 1 ? "s" : "", c->budget_tflop, c->batch,
            runs[0].npoints, runs[0].npoints > 1 ? "s" : "", out);
    for (int a = 0; a < c->narms; a++)
        for (int i = 0; i < nruns; i++)
            if (runs[i].arm_index == a) {
                fprintf(stderr, "compare: [arm %s] %.4g GFLOP/img: %lld images (%lld steps, %.6g TFLOP)\n",
                        c->arms[a].name, gflop[a], (long long)runs[i].budget,
                        (long long)compare_steps(c, runs[i].budget), compare_tflop(runs[i].budget, gflop[a]));
                break;
            }
}

int cmd_compare(int argc, char **argv) {
    const char *config = NULL, *out = NULL, *only = NULL;
    int report_only = 0, jobs = 1;
    Opt opts[] = {
        {"--config", OPT_STR, &config, "FILE", "the comparison (INI: [compare] and [arm NAME] sections; docs/compare.md)"},
        {"--out", OPT_STR, &out, "DIR", "results and runs (run again with the same DIR to continue)"},
        {"--report", OPT_FLAG, &report_only, NULL, "only rewrite results.* and the plots from DIR's runs"},
        {"--jobs", OPT_INT, &jobs, "N", "runs trained and evaluated at once, each child with the cores / N threads "
                                        "unless the config sets threads (the same results)", ARG_MIN(1), ARG_MAX(64)},
        {"--runs", OPT_STR, &only, "LIST", "train and evaluate only these runs (<arm>-s<seed>, comma-separated); "
                                           "the report covers every run"},
    };
    args_parse("usage: mala compare --config FILE --out DIR\n\n"
               "Trains every arm of the config (each seed a run) to the same budget of images seen\n"
               "(budget_images) or of training compute (budget_tflop: each arm its own images),\n"
               "evaluates the EMA weights at every evaluation point (FD and class accuracy of the\n"
               "Fashion-MNIST classifier; FID and IS when Inception weights are given) and writes\n"
               "DIR/results.md, results.csv, results.json, plots and compare.png. Resumable: run it\n"
               "again with the same DIR and it continues where it stopped.",
               opts, 5, argc, argv, 1);
    if (!config || !out) FATAL("mala compare needs --config FILE and --out DIR (see mala compare --help)");
    CompareConfig *c = xcalloc(1, sizeof *c);
    MalaErr err;
    if (compare_config_load(config, c, &err)) FATAL("%s", err.msg);
    double arm_gflop[COMPARE_MAX_ARMS];
    check_arms(c, arm_gflop);
    if (!strcmp(c->features, "inception") && !c->inception[0])
        FATAL("%s: features = inception needs inception = FILE (or 'random' for a smoke test)", config);

    struct stat st;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/runs", out);
    CompareConfig *old = xcalloc(1, sizeof *old);
    const int stored = stored_config(out, old);
    if (report_only && (!stored || stat(dir, &st))) FATAL("--report: %s holds no comparison (no runs/ in it)", out);
    if (stored) check_drift(old, c, out);
    free(old);
    int nruns = c->narms * c->nseeds;
    CompareRun *runs = xcalloc(nruns, sizeof *runs);
    for (int a = 0, i = 0; a < c->narms; a++)
        for (int s = 0; s < c->nseeds; s++, i++) {
            CompareRun *r = &runs[i];
            r->arm = &c->arms[a];
            r->arm_index = a;
            r->seed = c->seeds[s];
            r->selected = !only;
            snprintf(r->name, sizeof r->name, "%s-s%llu", r->arm->name, (unsigned long long)r->seed);
            snprintf(r->dir, sizeof r->dir, "%s/runs/%s", out, r->name);
        }
    select_runs(only, runs, nruns, config);
    if (!report_only) {
        make_dirs(out);
        store_config(config, out);
    }
    make_dirs(dir);
    for (int i = 0; i < nruns; i++) {
        make_dirs(runs[i].dir);
        compare_read_evals(&runs[i]);
    }
    child_threads = c->threads;
    if (!child_threads && jobs > 1) {
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        child_threads = cores > jobs ? (int)(cores / jobs) : 1;
    }
    int npoints = 0;
    for (int a = 0; a < c->narms; a++) {
        const double g = c->budget_tflop ? arm_size_gflop(c, a, runs, nruns, out) : 0;
        for (int i = 0; i < nruns; i++) {
            CompareRun *r = &runs[i];
            if (r->arm_index != a) continue;
            compare_run_schedule(c, r, g);
            r->done = r->nev && (r->ev[r->nev - 1].capped || r->ev[r->nev - 1].images >= r->budget);
            npoints = r->npoints > npoints ? r->npoints : npoints;
        }
        if (g > 0) arm_gflop[a] = g;
    }
    Ctl k = {.c = c, .runs = runs, .nruns = nruns, .npoints = npoints, .arm_gflop = arm_gflop, .jobs = jobs};
    progress_init(&k.pg, stderr);
    k.pg.interval = 3.0;  // a line every few seconds in a log file

    if (!report_only) {
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        if (c->budget_images)
            fprintf(stderr, "compare: %d arm%s x %d seed%s, %lld images each (%lld steps at batch %d), %d evaluation "
                            "point%s; %s\n", c->narms, c->narms > 1 ? "s" : "", c->nseeds, c->nseeds > 1 ? "s" : "",
                    (long long)c->budget_images, (long long)compare_steps(c, c->budget_images), c->batch, npoints,
                    npoints > 1 ? "s" : "", out);
        else
            print_tflop_budgets(c, runs, nruns, arm_gflop, out);
        char ref[4400], ref_inc[4400];
        ref_stats(&k, out, c->features, NULL, ref, sizeof ref);
        int extra_inception = c->inception[0] && !strcmp(c->features, "fmnist");
        if (extra_inception) ref_stats(&k, out, "inception", c->inception, ref_inc, sizeof ref_inc);
        for (int p = 0; p < npoints; p++) {
            k.point = p;
            if (jobs > 1) {
                run_point_pool(&k, p, ref, extra_inception ? ref_inc : NULL, out);
                continue;
            }
            for (int i = 0; i < nruns; i++) {
                const int64_t step = point_step(c, &runs[i], p);
                if (point_pending(&runs[i], step))
                    point_finished(&k, &runs[i], run_point(&k, &runs[i], step, ref, extra_inception ? ref_inc : NULL),
                                   out);
            }
        }
        progress_break(&k.pg);
    }
    int classes = 0;
    for (int i = 0; i < nruns && !classes; i++)
        if (!compare_run_size(&runs[i])) classes = runs[i].classes;
    for (int i = 0; i < nruns && classes > 0; i++) {
        k.point = npoints - 1;
        if (report_only || !runs[i].selected) {  // an existing grid only
            char npy[4300];
            if (runs[i].nev) {
                snprintf(npy, sizeof npy, "%s/grid-%07lld.npy", runs[i].dir, (long long)runs[i].ev[runs[i].nev - 1].step);
                if (!stat(npy, &st)) snprintf(runs[i].grid, sizeof runs[i].grid, "%s", npy);
            }
        } else {
            make_grid(&k, &runs[i], classes);
        }
    }
    progress_break(&k.pg);
    compare_write_report(c, runs, nruns, out);
    if (classes > 0) compare_write_grid(runs, nruns, classes, out);
    int all_done = 1;
    for (int i = 0; i < nruns; i++) all_done &= runs[i].done || !runs[i].selected;
    fprintf(stderr, "compare: %s; results in %s/results.md\n", all_done ? (only ? "these runs done" : "done") : "partial results",
            out);
    free(runs);
    free(c);
    return 0;
}

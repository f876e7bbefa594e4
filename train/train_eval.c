// defines: train_eval_open, train_eval_due, train_eval_run, train_eval_free
#include "train/train_eval.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dist.h"
#include "eval/eval_pass.h"
#include "eval/line_plot.h"
#include "formats/atomic_file.h"
#include "pipeline/generate_shard.h"

enum { EVAL_BATCH = 50, EVAL_SEED = 0 };

struct TrainEval {
    EvalEvery e;
    char csv[4200], plot[4200], best_json[4200], best_ckpt[4200];
    int lead, step_images;
    Extractor m;
    FidStats *ref;
    Generator gen;
    SampleSpec sp;
    uint64_t done;        // the last point evaluated (in e's unit), from evals.csv
    double best_fd;       // the lowest FD so far (evals.csv)
    int n;                // evals.csv rows, for fd.png
    double *x, *fd;
};

static void *realloc_or_die(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q) FATAL("out of memory (%zu bytes)", n);
    return q;
}

// A step's point in e's unit (steps or training images).
static uint64_t point_of(const TrainEval *t, uint64_t step) {
    return t->e.in_steps ? step : step * (uint64_t)t->step_images;
}

// evals.csv: the header of a new file, else its rows (the last point, the best FD, the curve).
static int csv_read(TrainEval *t) {
    FILE *f = fopen(t->csv, "r");
    if (!f) {
        MalaErr err;
        static const char hdr[] = "images,step,train_s,fd,class_acc,eval_s\n";
        if (!atomic_write_file(t->csv, hdr, sizeof hdr - 1, &err)) return 0;
        fprintf(stderr, "error: %s\n", err.msg);
        return -1;
    }
    char line[512];
    if (!fgets(line, sizeof line, f)) { fclose(f); return 0; }  // the header
    while (fgets(line, sizeof line, f)) {
        unsigned long long images, step;
        double fd;
        if (sscanf(line, "%llu,%llu,%*[^,],%lf", &images, &step, &fd) != 3) continue;
        uint64_t p = t->e.in_steps ? step : images;
        if (p > t->done) t->done = p;
        if (fd < t->best_fd) t->best_fd = fd;
        t->x = realloc_or_die(t->x, (t->n + 1) * sizeof *t->x);
        t->fd = realloc_or_die(t->fd, (t->n + 1) * sizeof *t->fd);
        t->x[t->n] = (double)images;
        t->fd[t->n++] = fd;
    }
    fclose(f);
    return 0;
}

// Rank 0: the feature network and the reference statistics (computed once, kept for the run).
static int open_features(TrainEval *t, const Backend *be) {
    static char buf[1024];
    MalaErr err;
    const char *inc = t->e.inception[0] ? t->e.inception : NULL;
    t->m.name = inc ? "inception" : "fmnist";
    if (!inc) {
        if (!(t->m.path = eval_find_classifier(NULL, buf, sizeof buf))) return -1;
        if (!(t->m.fm = fmnist_net_load(t->m.path, be, EVAL_BATCH, &err))) {
            fprintf(stderr, "error: %s\n", err.msg);
            return -1;
        }
        t->m.dim = FMNIST_FEAT_DIM;
        t->m.classes = FMNIST_FEAT_CLASSES;
    } else {
        if (!(t->m.path = eval_find_inception(inc, buf, sizeof buf))) return -1;
        if (!(t->m.inc = eval_load_inception(t->m.path, be, 32))) return -1;
        t->m.dim = INCEPTION_DIM;
        t->m.classes = INCEPTION_CLASSES;
    }
    RunResult rr;
    FidStats *spatial;
    t->ref = eval_stats_of_path(&t->m, t->e.ref, NULL, EVAL_BATCH, 0, 0, &rr, &spatial);
    fid_stats_free(spatial);
    feat_rows_free(&rr.feats);
    return t->ref ? 0 : -1;
}

TrainEval *train_eval_open(const EvalEvery *e, const NetConfig *c, const ClassNames *cn, const Backend *be,
                           const char *vae, const char *out, int step_images) {
    TrainEval *t = xcalloc(1, sizeof *t);
    t->e = *e;
    t->lead = dist_rank() == 0;
    t->step_images = step_images;
    t->best_fd = INFINITY;
    snprintf(t->csv, sizeof t->csv, "%s/evals.csv", out);
    snprintf(t->plot, sizeof t->plot, "%s/fd.png", out);
    snprintf(t->best_json, sizeof t->best_json, "%s/best.json", out);
    snprintf(t->best_ckpt, sizeof t->best_ckpt, "%s/best.safetensors", out);
    int ok = !t->lead || (!open_features(t, be) && !csv_read(t));
    double state[2] = {(double)t->done, t->best_fd};
    dist_bcast(&ok, sizeof ok, 0);
    dist_bcast(state, sizeof state, 0);
    t->done = (uint64_t)state[0];
    t->best_fd = state[1];
    int batch = e->images < EVAL_BATCH ? e->images : EVAL_BATCH;
    generator_new(&t->gen, c, cn, be, batch);
    MalaErr err;
    if (ok && generator_attach_vae(&t->gen, vae, "the model trained", &err)) {
        fprintf(stderr, "error: --eval-every: %s\n", err.msg);
        ok = 0;
    }
    const int size = generator_out_size(&t->gen), ch = generator_out_channels(&t->gen);
    if (ok && !e->inception[0] && ((size != 32 && size != 28) || (ch != 1 && ch != 3))) {
        if (t->lead)
            fprintf(stderr, "error: --eval-every: the Fashion-MNIST classifier takes 32x32 or 28x28 images, the model "
                    "makes %dx%dx%d: give --inception FILE (and an --eval-ref of its features)\n", ch, size, size);
        ok = 0;
    }
    if (dist_any(!ok)) {
        train_eval_free(t);
        return NULL;
    }
    t->sp = (SampleSpec){.ckpt = "the EMA weights", .num = e->images, .batch = batch, .seed = EVAL_SEED,
                         .labels = LABELS_BALANCED, .gen = &t->gen};
    t->sp.opts = gen_opts_default();
    sampler_kind_parse(e->sampler, &t->sp.opts.kind);  // checked by the command
    t->sp.opts.steps = e->steps;
    t->sp.opts.cfg_scale = c->num_classes ? e->cfg_scale : 1.0f;
    t->sp.opts.clip = 0;
    return t;
}

int train_eval_due(const TrainEval *t, uint64_t step, uint64_t last_step) {
    uint64_t p = point_of(t, step), prev = step ? point_of(t, step - 1) : 0;
    if (p <= t->done) return 0;
    return step == last_step || (t->e.every && p / t->e.every > prev / t->e.every);
}

// Rank 0: the row, the curve, the scalars; 1 when fd is the best yet (best.json written).
static int record(TrainEval *t, uint64_t step, double train_s, double fd, double acc, double secs, TfEvents *tb) {
    MalaErr err;
    uint64_t images = step * (uint64_t)t->step_images;
    FILE *f = fopen(t->csv, "a");
    if (!f || fprintf(f, "%llu,%llu,%.3f,%.6g,%.6g,%.3f\n", (unsigned long long)images, (unsigned long long)step,
                      train_s, fd, acc, secs) < 0 || fclose(f))
        FATAL("%s: cannot append: %s", t->csv, strerror(errno));
    t->x = realloc_or_die(t->x, (t->n + 1) * sizeof *t->x);
    t->fd = realloc_or_die(t->fd, (t->n + 1) * sizeof *t->fd);
    t->x[t->n] = (double)images;
    t->fd[t->n++] = fd;
    PlotSeries s = {t->m.fm ? "FD (fmnist features)" : "FID", t->x, t->fd, t->n};
    PlotStyle st = {"evaluation during training (mala train --eval-every)", "training images",
                    t->m.fm ? "FD" : "FID", 0};
    if (line_plot_png(t->plot, &s, 1, &st, &err)) fprintf(stderr, "warning: %s\n", err.msg);
    const char *tags[2] = {"eval/fd", "eval/class_acc"};
    float v[2] = {(float)fd, (float)acc};
    if (tb && tb->f && tfev_scalars(tb, (int64_t)step, tags, v, isnan(acc) ? 1 : 2, &err)) FATAL("%s", err.msg);
    if (!(fd < t->best_fd)) return 0;
    t->best_fd = fd;
    char json[512], accs[48] = "";
    if (!isnan(acc)) snprintf(accs, sizeof accs, ",\"class_acc\":%.6g", acc);
    int len = snprintf(json, sizeof json, "{\"step\":%llu,\"images\":%llu,\"%s\":%.6g%s,\"checkpoint\":"
                       "\"best.safetensors\"}\n", (unsigned long long)step, (unsigned long long)images,
                       t->m.fm ? "fd" : "fid", fd, accs);
    if (atomic_write_file(t->best_json, json, (size_t)len, &err)) fprintf(stderr, "warning: %s\n", err.msg);
    return 1;
}

void train_eval_run(TrainEval *t, const Trainer *tr, double train_s, TfEvents *tb, const volatile int *stop) {
    double t0 = now_seconds();
    tr->be->copy(t->gen.net->w, tr->ema, tr->net->n_floats * sizeof(float));
    uint64_t done_before = t->done;
    t->done = point_of(t, tr->step);
    t->sp.cancel = stop;
    int best = 0, cancelled = 0;
    if (t->lead) {
        fprintf(stderr, "[eval] step %llu: FD of the EMA weights, %d images, %s %d steps, guidance %g "
                "(--eval-every, --eval-images, --eval-sampler, --eval-steps, --eval-cfg-scale)\n",
                (unsigned long long)tr->step, t->e.images, t->e.sampler, t->e.steps, t->sp.opts.cfg_scale);
        RunResult r;
        FidStats *spatial;
        MalaErr err;
        double fd = NAN;
        FidStats *s = eval_stats_of_path(&t->m, "the EMA weights", &t->sp, t->sp.batch, t->e.images, 0, &r, &spatial);
        if (!s && r.cancelled) {
            cancelled = 1;
            fprintf(stderr, "[eval] step %llu: stopped by the signal; the run evaluates this point again when it "
                    "resumes\n", (unsigned long long)tr->step);
        } else if (!s || fid_from_stats(s, t->ref, &fd, &err)) {
            if (s) fprintf(stderr, "error: %s\n", err.msg);
            if (dist_world() > 1)  // the other processes would wait for it
                FATAL("--eval-every: the evaluation at step %llu failed", (unsigned long long)tr->step);
            fprintf(stderr, "warning: --eval-every: no evaluation at step %llu; training goes on\n",
                    (unsigned long long)tr->step);
        } else {
            double acc = r.labelled ? (double)r.correct / r.labelled : NAN, secs = now_seconds() - t0;
            fprintf(stderr, "[eval] step %llu: %s %.4f, %.1f s\n", (unsigned long long)tr->step,
                    t->m.fm ? "FD" : "FID", fd, secs);
            if (!isnan(acc)) fprintf(stderr, "[eval] class accuracy %.4f\n", acc);
            else if (r.no_acc[0]) fprintf(stderr, "[eval] no class accuracy: %s\n", r.no_acc);
            best = record(t, tr->step, train_s, fd, acc, secs, tb);
        }
        fid_stats_free(s);
        fid_stats_free(spatial);
        free(r.logits);
        feat_rows_free(&r.feats);
    } else {  // the other ranks sample their share of the batches (eval_run_source's sharding)
        ShardedGen sg;
        MalaErr err;
        sharded_gen_init(&sg, &t->gen, &t->sp.opts, t->sp.seed, t->e.images, t->sp.batch);
        sg.labels = t->sp.labels;
        sg.cancel = stop;
        if (sharded_gen_serve(&sg, &err) && !sg.cancelled) FATAL("%s", err.msg);
        cancelled = sg.cancelled;
        sharded_gen_free(&sg);
    }
    if (cancelled) t->done = done_before;  // still due
    dist_bcast(&best, sizeof best, 0);
    if (best && (t->lead || tr->zero)) {  // ZeRO: the save gathers the moments
        MalaErr err;
        if (trainer_save(tr, t->best_ckpt, &err)) FATAL("%s", err.msg);
        if (t->lead) fprintf(stderr, "[eval] the best so far: %s (best.json)\n", t->best_ckpt);
    }
}

void train_eval_free(TrainEval *t) {
    if (!t) return;
    if (t->m.inc) inception_free(t->m.inc);
    fmnist_net_free(t->m.fm);
    fid_stats_free(t->ref);
    generator_close(&t->gen);
    free(t->x);
    free(t->fd);
    free(t);
}

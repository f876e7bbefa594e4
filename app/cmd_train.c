// mala train: headless DiT training (train.py's recipe) with atomic checkpoints, --resume,
// a CSV log, a loss curve, sample grids, and a clean stop on SIGINT / SIGTERM.
//
// Run directory: checkpoints/NNNNNNN.safetensors, log.csv, loss.png, samples/NNNNNNN.png.
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"  // defines: atomic_remove_stale
#include "commands.h"
#include "data.h"
#include "denoiser.h"
#include "image_io.h"
#include "loss_plot.h"
#include "rng.h"
#include "sampler.h"
#include "trainer.h"

static volatile sig_atomic_t stop_requested = 0;
// The first SIGINT / SIGTERM asks for a clean stop (a checkpoint, then exit); a second one kills.
static void on_signal(int sig) {
    if (stop_requested) { signal(sig, SIG_DFL); raise(sig); }
    stop_requested = sig;
}

static void make_dir(const char *path) {
    if (mkdir(path, 0755) && errno != EEXIST) FATAL("%s: cannot create directory: %s", path, strerror(errno));
}

// Checkpoint steps present in dir, ascending.
static int list_checkpoints(const char *dir, uint64_t **out) {
    DIR *d = opendir(dir);
    int n = 0, cap = 16;
    uint64_t *steps = xmalloc(cap * sizeof(uint64_t));
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char *end;
        unsigned long long s = strtoull(e->d_name, &end, 10);
        if (end == e->d_name || strcmp(end, ".safetensors")) continue;
        if (n == cap) steps = realloc(steps, (cap *= 2) * sizeof(uint64_t));
        steps[n++] = s;
    }
    if (d) closedir(d);
    for (int i = 1; i < n; i++)  // insertion sort: a handful of files
        for (int j = i; j > 0 && steps[j - 1] > steps[j]; j--) { uint64_t t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t; }
    *out = steps;
    return n;
}

static void ckpt_path(char *buf, size_t n, const char *run, uint64_t step) {
    snprintf(buf, n, "%s/checkpoints/%07llu.safetensors", run, (unsigned long long)step);
}

static void prune_checkpoints(const char *run, int keep) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints", run);
    uint64_t *steps;
    int n = list_checkpoints(dir, &steps);
    for (int i = 0; i + keep < n; i++) {
        ckpt_path(path, sizeof path, run, steps[i]);
        unlink(path);
    }
    free(steps);
}

// The loss history of the run (for the curve), re-read from log.csv on resume.
typedef struct { uint64_t *step; double *loss; int n, cap; } History;

static void history_add(History *h, uint64_t step, double loss) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->step = realloc(h->step, h->cap * sizeof(uint64_t));
        h->loss = realloc(h->loss, h->cap * sizeof(double));
    }
    h->step[h->n] = step;
    h->loss[h->n++] = loss;
}

// Keeps the CSV rows up to `upto` (rows logged after the checkpoint we resume from are dropped).
static void history_load(History *h, const char *csv, uint64_t upto) {
    FILE *f = fopen(csv, "r");
    if (!f) return;
    char line[512];
    size_t keep_bytes = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s;
        double loss;
        if (sscanf(line, "%llu,%lf", &s, &loss) == 2) {
            if (s > upto) break;
            history_add(h, s, loss);
        }
        keep_bytes = (size_t)ftell(f);
    }
    fclose(f);
    if (truncate(csv, (off_t)keep_bytes)) fprintf(stderr, "warning: %s: cannot trim: %s\n", csv, strerror(errno));
}

typedef struct {
    Dit *m;           // inference copy fed with the EMA weights
    Diffusion base;
    Sampler s;
    int n;
    float *x, *d_x;   // host and backend copies of the images
    int32_t *y;
} Preview;

static void preview_init(Preview *p, const DitConfig *c, const Backend *be) {
    MalaErr err;
    p->n = c->num_classes <= 16 ? 4 * c->num_classes : 64;
    p->m = dit_create(c, be, 2 * p->n, DIT_INFER);
    if (diffusion_init(&p->base, BETA_LINEAR, 1000, &err)) FATAL("%s", err.msg);
    SamplerConfig sc = sampler_config_default();
    sc.kind = SAMPLER_DDIM;
    sc.num_steps = 50;
    sc.cfg_scale = 4.0f;
    sc.learn_sigma = c->learn_sigma;
    sc.num_classes = c->num_classes;
    if (sampler_init(&p->s, be, &p->base, &sc, p->n, c->in_channels, c->image_size, denoiser_fn, p->m, &err))
        FATAL("%s", err.msg);
    size_t bytes = (size_t)p->n * c->in_channels * c->image_size * c->image_size * sizeof(float);
    p->x = xmalloc(bytes);
    p->d_x = be->alloc(bytes);
    p->y = xmalloc(p->n * sizeof(int32_t));
}

static void preview_write(Preview *p, const Trainer *tr, const char *path) {
    const DitConfig *c = &p->m->cfg;
    MalaErr err;
    tr->be->copy(p->m->w, tr->m->ema, tr->m->n_floats * sizeof(float));
    Rng r;
    rng_seed(&r, 1234);
    size_t per = (size_t)c->in_channels * c->image_size * c->image_size;
    rng_normal_fill(&r, p->x, per * p->n);
    int per_class = p->n / c->num_classes > 0 ? p->n / c->num_classes : 1;
    for (int i = 0; i < p->n; i++) p->y[i] = (i / per_class) % c->num_classes;
    tr->be->to_device(p->d_x, p->x, per * p->n * sizeof(float));
    int rc = sampler_run(&p->s, p->d_x, p->y, p->n, &err);
    if (rc >= 0) tr->be->to_host(p->x, p->d_x, per * p->n * sizeof(float));
    if (rc < 0 ||
        image_save_grid(path, p->x, p->n, c->in_channels, c->image_size, c->image_size, per_class, 2, &err))
        fprintf(stderr, "\nwarning: sample grid: %s\n", err.msg);
}

static void preview_free(Preview *p) {
    p->m->be->release(p->d_x);
    free(p->x); free(p->y);
    sampler_free(&p->s);
    diffusion_free(&p->base);
    dit_free(p->m);
}

static void format_eta(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

int cmd_train(int argc, char **argv) {
    ModelOpts mo;
    model_opts_default(&mo, "DiT-S/2");
    TrainOpts to;
    train_opts_default(&to);
    const char *data = "fashion-mnist", *out = "runs/mala", *device = NULL, *precision = NULL;
    int batch = 256, ckpt_every = 5000, sample_every = 5000, log_every = 100, keep = 3, resume = 0;
    int hflip = -1, limit = 0, threads = 0;
    uint64_t iters = 400000;
    float lr = -1.0f, ema_decay = -1.0f;  // -1: the default, or the checkpoint's value on --resume
    Opt rest[] = {
        {"--data", OPT_STR, &data, "SRC", "fashion-mnist or an image folder root/<class>/<image>"},
        {"--batch", OPT_INT, &batch, "B", "batch size"},
        {"--iters", OPT_U64, &iters, "N", "train until this many steps"},
        {"--lr", OPT_FLOAT, &lr, "LR", "AdamW learning rate, constant (default 1e-4; with --resume: the checkpoint's unless given)"},
        {"--warmup", OPT_INT, &to.warmup, "N", "linear learning-rate warmup steps"},
        {"--weight-decay", OPT_FLOAT, &to.weight_decay, "WD", "AdamW weight decay"},
        {"--grad-clip", OPT_FLOAT, &to.grad_clip, "G", "clip the global gradient norm (0 = off)"},
        {"--ema-decay", OPT_FLOAT, &ema_decay, "D", "EMA decay (default 0.9999; with --resume: the checkpoint's unless given)"},
        {"--label-drop", OPT_FLOAT, &to.label_drop, "P", "label dropout to the null class (guidance)"},
        {"--max-bad-steps", OPT_INT, &to.max_bad_steps, "N", "stop after N non-finite steps in a row"},
        {"--seed", OPT_U64, &to.seed, "S", "seed of init, data order, noise"},
        {"--hflip", OPT_INT, &hflip, "0|1", "random horizontal flips (-1: on for folders, off for fashion-mnist)"},
        {"--limit", OPT_INT, &limit, "N", "use only the first N images"},
        {"--out", OPT_STR, &out, "DIR", "run directory"},
        {"--ckpt-every", OPT_INT, &ckpt_every, "N", "checkpoint every N steps"},
        {"--sample-every", OPT_INT, &sample_every, "N", "sample grid every N steps (0 = never)"},
        {"--log-every", OPT_INT, &log_every, "N", "progress / CSV every N steps"},
        {"--keep", OPT_INT, &keep, "K", "keep the last K checkpoints"},
        {"--resume", OPT_FLAG, &resume, NULL, "continue from the newest complete checkpoint in --out"},
        {"--threads", OPT_INT, &threads, "N", "CPU threads (0 = all cores)"},
        OPT_DEVICE(&device),
        OPT_PRECISION(&precision),
    };
    enum { N_OPTS = MODEL_OPTS_N + sizeof rest / sizeof *rest };
    Opt opts[N_OPTS];
    model_opts_table(&mo, opts);
    memcpy(opts + MODEL_OPTS_N, rest, sizeof rest);
    args_parse("usage: mala train [flags]\n\nTrains a class-conditional DiT (DiT's recipe: AdamW lr 1e-4, EMA 0.9999,\n"
               "batch 256, label dropout 0.1). With --resume the model and optimiser settings come from the\n"
               "checkpoint; --iters may extend the run.",
               opts, N_OPTS, argc, argv, 1);
    signal(SIGINT, on_signal);   // before anything slow (device, dataset, model), so that a signal
    signal(SIGTERM, on_signal);  // during start-up stops the run cleanly too
    if (batch < 1 || log_every < 1 || ckpt_every < 1 || keep < 1) FATAL("--batch, --log-every, --ckpt-every and --keep must be positive");
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    MalaErr err;

    char dir[4096], path[4200], csv[4200], plot[4200];
    make_dir(out);
    snprintf(dir, sizeof dir, "%s/checkpoints", out);
    make_dir(dir);
    int stale = atomic_remove_stale(dir, ".safetensors", &err);  // partial saves of a killed run
    if (stale > 0)
        fprintf(stderr, "removed %d partial checkpoint%s (*.safetensors.tmp) in %s\n", stale, stale > 1 ? "s" : "", dir);
    snprintf(csv, sizeof csv, "%s/log.csv", out);
    snprintf(plot, sizeof plot, "%s/loss.png", out);

    DitConfig c;
    ClassNames cn = {0};
    Trainer *tr = NULL;
    History hist = {0};
    if (resume) {
        uint64_t *steps;
        int n = list_checkpoints(dir, &steps);
        for (int i = n - 1; i >= 0 && !tr; i--) {  // newest complete checkpoint
            ckpt_path(path, sizeof path, out, steps[i]);
            TrainOpts saved = to;
            int saved_batch;
            if (trainer_peek(path, &c, &cn, &saved, &saved_batch, &err)) {
                fprintf(stderr, "warning: skipping %s\n", err.msg);
                continue;
            }
            saved.max_bad_steps = to.max_bad_steps;
            if (lr > 0) saved.lr = lr;  // a new learning rate or EMA decay from here on
            if (ema_decay >= 0) saved.ema_decay = ema_decay;
            to = saved;
            batch = saved_batch;
            tr = trainer_new(&c, &cn, &to, be, batch);
            if (trainer_load(tr, path, &err)) {
                fprintf(stderr, "warning: skipping %s\n", err.msg);
                trainer_free(tr);
                tr = NULL;
                class_names_free(&cn);
            }
        }
        free(steps);
        if (!tr) FATAL("--resume: no complete checkpoint in %s", dir);
        fprintf(stderr, "resuming %s at step %llu\n", path, (unsigned long long)tr->step);
        history_load(&hist, csv, tr->step);
    } else {
        model_opts_config(&mo, &c);
        if (lr > 0) to.lr = lr;
        if (ema_decay >= 0) to.ema_decay = ema_decay;
    }

    Dataset *ds = dataset_open(data, c.image_size, c.in_channels, &err);
    if (!ds) FATAL("%s", err.msg);
    if (limit > 0 && dataset_limit(ds, limit, &err)) FATAL("%s", err.msg);
    if (ds->num_classes != c.num_classes) {
        if (resume || mo.classes != 10 || ds->num_classes > c.num_classes)
            FATAL("%s: %d classes, the model has %d (--classes)", data, ds->num_classes, c.num_classes);
        c.num_classes = ds->num_classes;
    }
    if (!tr) {
        cn.n = ds->num_classes;
        cn.names = xcalloc(cn.n, sizeof(char *));
        for (int i = 0; i < cn.n; i++) cn.names[i] = xstrdup(ds->class_names[i]);
        tr = trainer_new(&c, &cn, &to, be, batch);
        trainer_init_weights(tr);
        FILE *f = fopen(csv, "w");
        if (!f || fprintf(f, "step,loss,mse,vb,grad_norm,img_per_s,lr,skipped\n") < 0 || fclose(f))
            FATAL("%s: cannot write: %s", csv, strerror(errno));
    }
    if (hflip < 0) hflip = strcmp(data, "fashion-mnist") != 0 && strncmp(data, "fashion-mnist:", 14) != 0;
    Loader *ld = loader_new(ds, batch, to.seed, hflip, &err);
    if (!ld) FATAL("%s", err.msg);
    loader_seek(ld, tr->batches);

    char desc[256];
    dit_config_describe(&c, desc, sizeof desc);
    fprintf(stderr, "model: %s; %.2fM parameters, %s backend, %d threads\n", desc, tr->m->n_trainable / 1e6, be->name,
            num_threads());
    fprintf(stderr, "data: %s, %lld images, %d classes; batch %d, lr %g, EMA %g; run dir %s\n", data,
            (long long)ds->n, ds->num_classes, batch, to.lr, to.ema_decay, out);

    Preview pv = {0};
    if (sample_every > 0) {
        preview_init(&pv, &c, be);
        snprintf(path, sizeof path, "%s/samples", out);
        make_dir(path);
    }

    size_t img = (size_t)batch * c.in_channels * c.image_size * c.image_size;
    float *x = xmalloc(img * sizeof(float));
    int32_t *y = xmalloc(batch * sizeof(int32_t));
    double acc_loss = 0, acc_mse = 0, acc_vb = 0, acc_gn = 0, t_log = now_seconds(), t_start = t_log;
    int acc_n = 0;
    uint64_t start_step = tr->step, last_saved = tr->step;
    int tty = isatty(2), rc = 0;
    while (tr->step < iters && !stop_requested) {
        loader_next(ld, x, y);
        StepStats st = trainer_step(tr, x, y);
        if (st.skipped) {
            fprintf(stderr, "\nwarning: step %llu: non-finite loss or gradient, skipped (%d in a row)\n",
                    (unsigned long long)tr->step + 1, tr->bad_in_a_row);
            if (tr->bad_in_a_row >= to.max_bad_steps) {
                fprintf(stderr, "error: %d non-finite steps in a row; stopping. The last good checkpoint is %s\n",
                        tr->bad_in_a_row, last_saved ? (ckpt_path(path, sizeof path, out, last_saved), path) : "(none)");
                rc = 1;
                break;
            }
            continue;
        }
        acc_loss += st.loss; acc_mse += st.mse; acc_vb += st.vb; acc_gn += st.grad_norm; acc_n++;
        if (tr->step % log_every == 0) {
            double now = now_seconds(), rate = acc_n * (double)batch / (now - t_log);
            double eta = (iters - tr->step) * (now - t_start) / (double)(tr->step - start_step);
            char etas[32];
            format_eta(etas, sizeof etas, eta);
            fprintf(stderr, "%sstep %llu/%llu  loss %.4f (mse %.4f vb %.4f)  grad %.3f  %.1f img/s  ETA %s%s",
                    tty ? "\r" : "", (unsigned long long)tr->step, (unsigned long long)iters, acc_loss / acc_n,
                    acc_mse / acc_n, acc_vb / acc_n, acc_gn / acc_n, rate, etas, tty ? "   " : "\n");
            FILE *f = fopen(csv, "a");
            if (!f || fprintf(f, "%llu,%.6g,%.6g,%.6g,%.6g,%.2f,%g,%llu\n", (unsigned long long)tr->step,
                              acc_loss / acc_n, acc_mse / acc_n, acc_vb / acc_n, acc_gn / acc_n, rate, to.lr,
                              (unsigned long long)tr->skipped_total) < 0 || fclose(f))
                FATAL("%s: cannot append: %s", csv, strerror(errno));
            history_add(&hist, tr->step, acc_loss / acc_n);
            if (loss_plot_png(plot, hist.step, hist.loss, hist.n, &err)) fprintf(stderr, "\nwarning: %s\n", err.msg);
            acc_loss = acc_mse = acc_vb = acc_gn = 0;
            acc_n = 0;
            t_log = now;
        }
        if (tr->step % ckpt_every == 0 || tr->step == iters) {
            ckpt_path(path, sizeof path, out, tr->step);
            if (trainer_save(tr, path, &err)) FATAL("%s", err.msg);
            last_saved = tr->step;
            prune_checkpoints(out, keep);
        }
        if (sample_every > 0 && tr->step % sample_every == 0) {
            snprintf(path, sizeof path, "%s/samples/%07llu.png", out, (unsigned long long)tr->step);
            preview_write(&pv, tr, path);
        }
    }
    if (tty) fprintf(stderr, "\n");
    if (stop_requested) {  // also when it came during start-up or while a checkpoint was written
        int wrote = tr->step != last_saved;
        if (wrote) {
            ckpt_path(path, sizeof path, out, tr->step);
            if (trainer_save(tr, path, &err)) FATAL("%s", err.msg);
            prune_checkpoints(out, keep);
            last_saved = tr->step;
        }
        if (last_saved) ckpt_path(path, sizeof path, out, last_saved);
        fprintf(stderr, "stopped by signal %d at step %llu; %s %s%s\n", (int)stop_requested, (unsigned long long)tr->step,
                !last_saved ? "no checkpoint" : wrote ? "wrote" : "the last checkpoint is", last_saved ? path : "written",
                last_saved ? " (continue with --resume)" : "");
    } else if (rc == 0) {
        fprintf(stderr, "done: step %llu, %.0f s; checkpoints in %s\n", (unsigned long long)tr->step,
                now_seconds() - t_start, dir);
    }
    if (sample_every > 0) preview_free(&pv);
    free(x);
    free(y);
    free(hist.step);
    free(hist.loss);
    loader_free(ld);
    dataset_close(ds);
    trainer_free(tr);
    class_names_free(&cn);
    return rc;
}

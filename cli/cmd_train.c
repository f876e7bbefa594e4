// mala train: headless DiT training (train.py's recipe) with atomic checkpoints, --resume,
// a CSV log, a loss curve, sample grids, and a clean stop on SIGINT / SIGTERM.
//
// Run directory: checkpoints/NNNNNNN.safetensors, log.csv, loss.png, samples/NNNNNNN.png, a TensorBoard
// event file per process start (events.out.tfevents.*: log.csv's rows and the grids), created
// once everything else has been checked; with --eval-every, evals.csv, fd.png, best.json and
// best.safetensors (train/train_eval.h). A directory holds one run: training into one that already
// has log rows, checkpoints or grids needs --resume (one that a start left before its first logged
// step is used again). The run's target step, data and logging settings travel in the checkpoints'
// metadata (run.*), so --resume continues with them unless they are given again. A stop by SIGINT /
// SIGTERM exits with 130 / 143 after its checkpoint.
//
// Under mpirun / srun (docs/design.md §9) every process runs this command: --batch is the global batch,
// split in equal slices over the ranks (trainer_shard, loader_shard); rank 0 alone writes the
// run directory and the console; the ranks agree every step on stopping (a signal on any rank)
// and compare a hash of their weights at every log line. --zero 1 shards AdamW's moments over the
// ranks (ZeRO-1, trainer_zero1); the checkpoints stay the same.
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "formats/atomic_file.h"  // defines: atomic_remove_stale
#include "cli/commands.h"
#include "core/dir_lock.h"
#include "train/loader.h"
#include "core/dist.h"
#include "pipeline/generate.h"
#include "formats/image_io.h"
#include "data/latents.h"  // defines: latent_is_set
#include "eval/line_plot.h"
#include "core/progress.h"
#include "train/run_settings.h"
#include "train/train_grid.h"
#include "train/train_run.h"
#include "train/train_meta.h"  // defines: train_meta_opt_u64
#include "train/run_dir.h"
#include "train/trainer.h"
#include "cpu/cpu_threads.h"
#include "train/train_tensorboard.h"
#include "cli/train_batch.h"
#include "train/train_eval.h"
#include "cli/train_init.h"

static volatile sig_atomic_t stop_requested = 0, signals_seen = 0, signal_says = 0;
// The first SIGINT / SIGTERM asks for a clean stop: the step, sample grid or evaluation under way
// ends within one sampling step, then a checkpoint is written and the run exits. A second signal
// is answered and still writes the checkpoint (it is what keeps the run resumable); a third exits
// at once. signal_says: this process speaks for the run (rank 0).
static void on_signal(int sig) {
    static const char first[] = "\nstopping: writing a checkpoint (a third signal exits at once, without it)\n",
                      second[] = "\nstopping: still writing the checkpoint; one more signal exits at once without it\n";
    int n = ++signals_seen;
    if (n >= 3) { signal(sig, SIG_DFL); raise(sig); return; }
    if (n == 1) stop_requested = sig;
    if (signal_says) {
        ssize_t w = n == 1 ? write(2, first, sizeof first - 1) : write(2, second, sizeof second - 1);
        (void)w;
    }
}

// Rank 0 holds --out's writer lock (core/dir_lock.h) from before it reads the run until it exits:
// a second `mala train` on the same directory, fresh or --resume, is refused naming this process.
static DirLock run_lock = {-1};
static void lock_run(const char *out) {
    MalaErr err;
    if (run_lock.fd < 0 && dir_lock_take(&run_lock, out, "mala train", &err)) FATAL("%s", err.msg);
}

// The loss history of the run (for the curve), re-read from log.csv on resume: keeps the rows up
// to `upto` (rows logged after the checkpoint we resume from are dropped from the file too).
// Returns the training seconds of the last row kept (its elapsed_s column; 0 without one).
static double history_load(RunLog *h, const char *csv, uint64_t upto) {
    long keep_bytes = run_log_read(csv, upto, h);
    if (keep_bytes < 0) return 0;
    if (truncate(csv, (off_t)keep_bytes)) fprintf(stderr, "warning: %s: cannot trim: %s\n", csv, strerror(errno));
    return h->n && !isnan(h->elapsed[h->n - 1]) ? h->elapsed[h->n - 1] : 0;
}

// --vae, checked before anything is written: a latent set's decoder (a VAE file whose latents have the
// set's channels). DiT's `--vae ema|mse` name a download; here the flag names the file.
static void check_vae(const char *vae, const char *data, const Dataset *ds) {
    const char *dit = !strcmp(vae, "ema") || !strcmp(vae, "mse")
                          ? " (DiT's --vae ema|mse name a VAE to download; here --vae is a VAE file, docs/latent.md)"
                          : "";
    if (!ds->views)
        FATAL("--vae %s: %s holds images, not latents: a pixel-space run needs no VAE%s", vae, data, dit);
    if (access(vae, R_OK)) FATAL("--vae %s: %s%s", vae, strerror(errno), dit);
    VaeConfig vc;
    vae_peek(vae, &vc);
    if (vc.latent != ds->channels)
        FATAL("--vae %s: its latents have %d channels, %s's have %d", vae, vc.latent, data, ds->channels);
}


// --resume: without --precision the run goes on in the precision it trained in (run.precision; tf32
// is fp32 on the CPU); --precision given may change it (checkpoints hold fp32 either way). A note says
// which when they differ.
static void resume_precision(const Backend *be, const char *device, const char *given, const char *run, int lead) {
    if (!*run || !strcmp(run, be->precision())) return;  // (an older file has none: the flag's or the default)
    if (!given) {
        backend_select(device, run);  // the same backend, set to the run's precision
        be->weights_changed();
    }
    if (lead) fprintf(stderr, "note: the run trained in %s; it goes on in %s%s\n", run, be->precision(),
                      given ? " (--precision)" : " (the run's; --precision changes it)");
}

// Files in dir (0 when it does not exist).
static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

// A fresh run refuses a directory that already holds one: nothing of it may be lost or mixed in.
// A start that failed or stopped before its first logged step (no checkpoint, a log.csv of the
// header alone, no sample grid) left no run: the directory is used again.
static void refuse_existing_run(const char *out, const char *dir, const char *csv) {
    uint64_t *steps;
    int n = run_list_checkpoints(out, &steps), rows = run_log_rows(csv);
    char samples[4200];
    snprintf(samples, sizeof samples, "%s/samples", out);
    int grids = count_files(samples);
    if (n || rows > 0 || grids) {
        char what[200] = "";
        if (rows >= 0) snprintf(what, sizeof what, "log.csv with %d row%s", rows, rows == 1 ? "" : "s");
        if (n) snprintf(what + strlen(what), sizeof what - strlen(what), "%s%d checkpoint%s up to step %llu",
                        what[0] ? ", " : "", n, n > 1 ? "s" : "", (unsigned long long)steps[n - 1]);
        if (grids) snprintf(what + strlen(what), sizeof what - strlen(what), "%s%d file%s in samples/",
                            what[0] ? ", " : "", grids, grids > 1 ? "s" : "");
        if (!n)
            FATAL("%s already holds a run (%s) but no checkpoint to continue it from with --resume: train into a fresh "
                  "--out directory", out, what);
        FATAL("%s already holds a run (%s): continue it with --resume, or train into a fresh --out directory", out, what);
    }
    if (rows == 0 && dist_rank() == 0)
        fprintf(stderr, "note: %s holds a start that trained no logged step (log.csv without rows, no checkpoint): "
                "training there anew\n", out);
    free(steps);
}

// A run started over from step 0 (below): the earlier start's files move to DIR/restart-N/, so that
// nothing of it is lost or mixed into the new start's; how says with what settings it starts.
static void move_earlier_start(const char *out, const char *csv, const char *how) {
    int rows = run_log_rows(csv);
    char aside[4200], from[4300], to[4400];
    for (int k = 1;; k++) {
        snprintf(aside, sizeof aside, "%s/restart-%d", out, k);
        if (!mkdir(aside, 0755)) break;
        if (errno != EEXIST) FATAL("--resume: cannot create %s: %s", aside, strerror(errno));
    }
    static const char *const EARLIER[] = {"log.csv", "loss.png", "samples", "evals.csv", "fd.png", "best.json",
                                          "best.safetensors"};
    for (size_t i = 0; i < sizeof EARLIER / sizeof *EARLIER; i++) {
        snprintf(from, sizeof from, "%s/%s", out, EARLIER[i]);
        snprintf(to, sizeof to, "%s/%s", aside, EARLIER[i]);
        if (rename(from, to) && errno != ENOENT) FATAL("--resume: cannot move %s to %s: %s", from, to, strerror(errno));
    }
    fprintf(stderr, "note: --resume: %s has no checkpoint (log.csv had %d row%s): starting the run over from step 0 "
            "with %s; the earlier start's files are in %s\n", out, rows > 0 ? rows : 0, rows == 1 ? "" : "s", how,
            aside);
}

// --resume with no complete checkpoint and no stored command line (a run an older mala started):
// a run that logged steps or wrote grids starts over from step 0 with the flags given (its earlier
// files moved aside); otherwise there is nothing to resume.
static void no_checkpoint_to_resume(const char *out, const char *dir, const char *csv, int files) {
    int rows = run_log_rows(csv);
    char samples[4200];
    snprintf(samples, sizeof samples, "%s/samples", out);
    if (files) FATAL("--resume: no complete checkpoint in %s", dir);
    if (rows <= 0 && !count_files(samples))
        FATAL("--resume: nothing to resume in %s (no checkpoint%s): drop --resume to start the run", out,
              rows == 0 ? ", and log.csv has no rows" : "");
    move_earlier_start(out, csv, "the flags given (it has no stored command line, DIR/train.args)");
}

// DIR/train.args: a fresh run's command line (its arguments, each ended by a NUL), so that a run
// killed before its first checkpoint starts over with --resume alone, as it was started.
static void args_save(const char *out, int argc, char **argv) {
    size_t len = 0;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *buf = xmalloc(len ? len : 1), p[4200];
    len = 0;
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]) + 1;
        memcpy(buf + len, argv[i], l);
        len += l;
    }
    snprintf(p, sizeof p, "%s/train.args", out);
    MalaErr err;
    if (atomic_write_file(p, buf, len, &err)) FATAL("%s", err.msg);
    free(buf);
}

// For --resume in a directory without a checkpoint: DIR/train.args, then the arguments given now
// but --resume (a flag given again wins: the parser keeps the last). NULL when nothing is stored.
static char **args_for_restart(const char *out, int argc, char **argv, int *n_out) {
    char p[4200];
    snprintf(p, sizeof p, "%s/train.args", out);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    char *buf = xmalloc(1 << 16);
    size_t len = fread(buf, 1, 1 << 16, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    if (!len || more || buf[len - 1]) {  // empty, too long, or cut short: not a command line
        free(buf);
        return NULL;
    }
    char **v = xcalloc(len + (size_t)argc + 1, sizeof *v);
    int n = 0;
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1) v[n++] = buf + i;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--resume")) v[n++] = argv[i];
    *n_out = n;
    return v;  // (buf lives as long as the run: its strings are the options' values)
}

// The absolute path `p` names, existing or not: the realpath of its longest existing prefix, then
// the rest of it with "." and ".." applied (a part that does not exist yet is no symbolic link).
static void resolve_path(const char *p, char *out, size_t cap) {
    char head[4096], tail[4096] = "", r[PATH_MAX];
    snprintf(head, sizeof head, "%s", p);
    while (!realpath(head[0] ? head : ".", r)) {
        char *slash = strrchr(head, '/'), *last = slash ? slash + 1 : head;
        size_t hl = strlen(last), tl = strlen(tail);
        if (!head[0] || hl + tl + 2 > sizeof tail) {  // no working directory, or a path too long: as given
            snprintf(out, cap, "%s", p);
            return;
        }
        memmove(tail + hl + 1, tail, tl + 1);  // tail = last/tail
        memcpy(tail, last, hl);
        tail[hl] = '/';
        if (!slash) head[0] = 0;
        else if (slash == head) head[1] = 0;
        else *slash = 0;
    }
    snprintf(out, cap, "%s", r);
    for (char *save = NULL, *part = strtok_r(tail, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, ".")) continue;
        if (!strcmp(part, "..")) {
            char *slash = strrchr(out, '/');
            if (slash == out) out[1] = 0;
            else if (slash) *slash = 0;
            continue;
        }
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%s", l > 1 ? "/" : "", part);
    }
}

// A run directory equal to or inside the data would become part of it (its checkpoints/ a class of
// the next run): refused. spec: --data (fashion-mnist[-test][:DIR], a folder or a latent set).
static void refuse_out_in_data(const char *out, const char *spec) {
    const char *root = spec;
    const char *names[2] = {"fashion-mnist-test", "fashion-mnist"};
    for (int t = 0; t < 2; t++) {
        size_t l = strlen(names[t]);
        if (!strncmp(spec, names[t], l) && (spec[l] == 0 || spec[l] == ':')) {
            root = spec[l] == ':' ? spec + l + 1 : getenv("MALA_FASHION_MNIST_DIR");
            if (!root || !root[0]) return;  // the system's copy (read-only)
            break;
        }
    }
    char d[PATH_MAX], o[4096];
    if (!realpath(root, d)) return;  // no such data: its own error follows
    resolve_path(out, o, sizeof o);
    size_t l = strlen(d);
    if (!strcmp(o, d) || (!strncmp(o, d, l) && (o[l] == '/' || (l == 1 && d[0] == '/'))))
        FATAL("--out %s is %s --data %s (%s): the run's files would become part of the data; choose a directory "
              "outside it", out, strcmp(o, d) ? "inside" : "the same directory as", spec, d);
}

// ---- the command ----

// Everything `mala train` sets up, from the flags to the run handed to train/train_run.h.
typedef struct {
    int argc;
    char **argv;
    // the flags
    ModelOpts mo;
    TrainOpts to;
    RunSettings rs;
    const char *eval_every, *eval_sampler, *eval_ref, *inception;
    const char *out, *device, *precision, *init, *init_weights;
    int batch, gbatch, accum, resume, threads, epochs, zero, dry_run, init_heads;
    uint64_t iters;
    Opt opts[MODEL_OPTS_N + 64];
    int n_opts;
    int auto_accum;  // --global-batch alone: the memory check picks --accum
    // the run
    int rank, world, lead;
    const Backend *be;
    MalaErr err;
    char dir[4096], path[4200], csv[4200], plot[4200], data_buf[4200], vae_buf[4200];
    NetConfig c, ic;  // the model, and --init's (fine-tuned at its image size unless --image-size)
    ClassNames cn;
    Trainer *tr;
    char resume_path[4200];
    int iters_stored;  // the checkpoint's run.iters was read
    int from_init;
    const char *model_name;
    Dataset *ds;
    int hflip, grid_every;
    Loader *ld;
    TrainGrid pv;
    RunLog hist;
    TfEvents tb;       // a new file per start: earlier files are never rewritten
    TrainEval *tev;    // --eval-every (collective)
    RunMeta meta;
} TrainCmd;

#define GIVEN(var) args_given(t->opts, t->n_opts, &(var))

static int restarting = 0;  // a --resume without a checkpoint, started over from train.args
static void train_resume(TrainCmd *t);

// The flags, checked alone. -1, or the exit status of a --resume restarted from train.args.
static int train_flags(TrainCmd *t) {
    model_opts_default(&t->mo, "DiT-S/2");
    t->mo.channels = t->mo.classes = 0;  // from the data unless given
    train_opts_default(&t->to);
    t->rs = (RunSettings){"fashion-mnist", NULL, 100, 5000, 5000, -1, 0, 3, 50, 0, 400000, 0, "data", "data"};  // defaults
    t->rs.tensorboard = 1;
    eval_every_default(&t->rs.eval);
    t->out = "runs/mala";
    t->init_weights = "ema";
    t->batch = 256;
    t->accum = 1;
    t->iters = 400000;
    Opt rest[] = {
        {"--data", OPT_STR, &t->rs.data, "SRC",
         "fashion-mnist, an image folder root/<class>/<image>, or a latent set (mala encode)",
         ARG_ALIAS("--data-path")},
        {"--vae", OPT_STR, &t->rs.vae, "FILE", "latent data: the VAE that decodes the sample grids (without it, no grids)"},
        {"--batch", OPT_INT, &t->batch, "B", "batch size of a forward pass (under mpirun / srun: over all processes, "
         "split over them)", ARG_MIN(1)},
        {"--accum", OPT_INT, &t->accum, "K", "gradient accumulation: K batches of --batch make one optimiser step",
         ARG_MIN(1)},
        {"--global-batch", OPT_INT, &t->gbatch, "G", "images per optimiser step, --batch x --accum; given alone it is "
         "--batch, or --accum the fewest K that fit in memory (default: --batch)", ARG_MIN(1),
         ARG_ALIAS("--global-batch-size")},
        {"--iters", OPT_U64, &t->iters, "N", "train until this many steps", ARG_MIN(1)},
        {"--epochs", OPT_INT, &t->epochs, "E", "passes over the data instead of --iters (DiT's --epochs: E x floor(images / "
         "batch) steps; default: --iters)", ARG_MIN(1)},
        {"--lr", OPT_FLOAT, &t->to.lr, "LR", "AdamW learning rate, constant", ARG_MIN(0), ARG_MAX(1)},
        {"--warmup", OPT_INT, &t->to.warmup, "N", "linear learning-rate warmup steps", ARG_MIN(0)},
        {"--decay-start", OPT_U64, &t->to.decay_start, "S", "linear learning-rate decay from --lr after step S ...",
         ARG_MIN(0)},
        {"--decay-end", OPT_U64, &t->to.decay_end, "E", "... to --lr-end at step E, and --lr-end after it (default: no "
         "decay)", ARG_MIN(1)},
        {"--lr-end", OPT_FLOAT, &t->to.lr_end, "LR", "the rate the decay ends at", ARG_MIN(0), ARG_MAX(1)},
        {"--weight-decay", OPT_FLOAT, &t->to.weight_decay, "WD", "AdamW weight decay", ARG_MIN(0), ARG_MAX(10)},
        {"--grad-clip", OPT_FLOAT, &t->to.grad_clip, "G", "clip the global gradient norm (0 = off)", ARG_MIN(0)},
        {"--ema-decay", OPT_FLOAT, &t->to.ema_decay, "D", "EMA decay", ARG_MIN(0), ARG_MAX(1)},
        {"--label-drop", OPT_FLOAT, &t->to.label_drop, "P", "label dropout to the null class (guidance)", ARG_MIN(0),
         ARG_MAX(1)},
        {"--max-bad-steps", OPT_INT, &t->to.max_bad_steps, "N", "stop after N non-finite steps in a row", ARG_MIN(1)},
        {"--seed", OPT_U64, &t->to.seed, "S", "seed of init, data order, noise", ARG_ALIAS("--global-seed")},
        {"--hflip", OPT_INT, &t->rs.hflip, "0|1", "random horizontal flips (default: on for folders, off for fashion-mnist)",
         ARG_MIN(-1), ARG_MAX(1)},
        {"--limit", OPT_INT, &t->rs.limit, "N", "use only N images spread over the data (0 = all)", ARG_MIN(0)},
        {"--out", OPT_STR, &t->out, "DIR", "run directory (created with its parents)", ARG_ALIAS("--results-dir")},
        {"--ckpt-every", OPT_INT, &t->rs.ckpt_every, "N", "checkpoint every N steps", ARG_MIN(1)},
        {"--sample-every", OPT_INT, &t->rs.sample_every, "N", "sample grid every N steps and at the end (0 = never)",
         ARG_MIN(0)},
        {"--sample-steps", OPT_INT, &t->rs.sample_steps, "S", "DDIM steps of a sample grid", ARG_MIN(1), ARG_MAX(1000)},
        {"--sample-images", OPT_INT, &t->rs.sample_images, "N",
         "images in a sample grid (default: 4 per class, at most 64)", ARG_MIN(1), ARG_MAX(256)},
        {"--log-every", OPT_INT, &t->rs.log_every, "N", "progress / CSV every N steps", ARG_MIN(1)},
        {"--keep", OPT_INT, &t->rs.keep, "K", "keep the last K checkpoints", ARG_MIN(1)},
        {"--tensorboard", OPT_INT, &t->rs.tensorboard, "0|1", "1: a TensorBoard event file in --out (tensorboard "
         "--logdir)", ARG_MIN(0), ARG_MAX(1)},
        {"--eval-every", OPT_STR, &t->eval_every, "N|Ns", "evaluate the EMA weights (mala eval fid --quick's FD) every N "
         "training images (Ns: N steps) and at the end; 0 = never (docs/train.md)"},
        {"--eval-images", OPT_INT, &t->rs.eval.images, "N", "images sampled per evaluation", ARG_MIN(1)},
        {"--eval-sampler", OPT_STR, &t->eval_sampler, sampler_kind_list(), "the evaluation's sampler (default ddim)"},
        {"--eval-steps", OPT_INT, &t->rs.eval.steps, "S", "the evaluation's sampler steps", ARG_MIN(1), ARG_MAX(1000)},
        {"--eval-cfg-scale", OPT_FLOAT, &t->rs.eval.cfg_scale, "W", "the evaluation's guidance scale", ARG_MIN(0),
         ARG_MAX(100)},
        {"--eval-ref", OPT_STR, &t->eval_ref, "REF", "the evaluation's reference: statistics .npz (mala eval stats), "
         "images, or fashion-mnist-test (default)"},
        {"--inception", OPT_STR, &t->inception, "FILE", "evaluate with the FID Inception (these weights) instead of the "
         "Fashion-MNIST classifier's features"},
        {"--resume", OPT_FLAG, &t->resume, NULL, "continue from the newest complete checkpoint in --out"},
        {"--init", OPT_STR, &t->init, "FILE", "fine-tune: a new run from the weights of a model file or training "
         "checkpoint (step 0, a fresh optimiser; its model unless --model)"},
        {"--init-weights", OPT_STR, &t->init_weights, "ema|online", "--init of a training checkpoint: its EMA or online "
         "weights"},
        {"--heads", OPT_INT, &t->init_heads, "N", "--init of a PyTorch .pt: attention heads (default: its args, else DiT's "
         "preset for the width)", ARG_MIN(1), ARG_MAX(4096)},
        {"--zero", OPT_INT, &t->zero, "0|1", "1: ZeRO-1, AdamW's moments sharded over the processes (the same model, 1/N "
         "of its memory)", ARG_MIN(0), ARG_MAX(1)},
        OPT_THREADS(&t->threads),
        OPT_DEVICE(&t->device),
        OPT_PRECISION(&t->precision),
        {"--dry-run", OPT_FLAG, &t->dry_run, NULL, "check the flags and the data, print the model's size as one JSON line "
         "(params, gflop_per_img: forward GFLOP per image) and exit; writes nothing"},
    };
    enum { N_OPTS = MODEL_OPTS_N + sizeof rest / sizeof *rest };
    Opt opts[N_OPTS];
    model_opts_table(&t->mo, opts);
    opts[6].help = "image channels (default: the data's)";
    opts[7].help = "number of classes (default: the data's; 0: an unconditional model, the labels unused)";
    memcpy(opts + MODEL_OPTS_N, rest, sizeof rest);
    args_parse("usage: mala train [flags]\n\nTrains a class-conditional DiT (DiT's recipe: AdamW lr 1e-4, EMA 0.9999,\n"
               "batch 256, label dropout 0.1). Channels, classes and class names come from the data.\n"
               "With --resume the model and optimiser settings, the data, the logging settings and the precision come\n"
               "from the checkpoint, except flags given again; so does --iters, which may extend the run.\n"
               "A stop by SIGINT / SIGTERM writes a checkpoint and exits with status 130 / 143.\n"
               "--classes 0 trains an unconditional model, --init FILE fine-tunes a model (docs/train.md).",
               opts, N_OPTS, t->argc, t->argv, 1);
    _Static_assert(sizeof opts <= sizeof t->opts, "TrainCmd's flag table is too small");
    memcpy(t->opts, opts, sizeof opts);
    t->n_opts = N_OPTS;
    if (GIVEN(t->epochs) && GIVEN(t->iters)) FATAL("--epochs and --iters exclude each other");
    if (t->init && t->resume)
        FATAL("--init %s starts a new run from its weights; --resume continues the run in --out: give one of them", t->init);
    if (GIVEN(t->init_weights) && !t->init) FATAL("--init-weights %s: applies to --init FILE only", t->init_weights);
    if (GIVEN(t->init_heads) && !t->init) FATAL("--heads %d: applies to --init FILE.pt only", t->init_heads);
    t->init_weights = weights_online("--init-weights", t->init_weights) ? "online" : "ema";  // "model": DiT's "online"
    // --global-batch G = --batch x --accum; alone, the memory check picks --accum (choose_accum)
    t->auto_accum = GIVEN(t->gbatch) && !GIVEN(t->batch) && !GIVEN(t->accum);
    if (GIVEN(t->gbatch)) split_global_batch(t->gbatch, &t->batch, &t->accum, GIVEN(t->batch), GIVEN(t->accum));
    if (t->resume && !t->dry_run && !restarting && run_newest_checkpoint(t->out) < 0) {
        int sargc;
        char **sargv = args_for_restart(t->out, t->argc, t->argv, &sargc);
        if (sargv) {
            restarting = 1;
            int rc = cmd_train(sargc, sargv);
            free(sargv[0]);  // the stored command line's buffer: its first string starts it
            free(sargv);
            return rc;
        }
    }
    return -1;
}

// The processes, the signals, the device; then the run to continue (--resume) or the directory to start in.
static void train_open(TrainCmd *t) {
    dist_init(&t->argc, &t->argv);
    t->rank = dist_rank();
    t->world = dist_world();
    t->lead = t->rank == 0;
    signal_says = t->lead;
    signal(SIGINT, on_signal);   // before anything slow (device, dataset, model), so that a signal
    signal(SIGTERM, on_signal);  // during start-up stops the run cleanly too
    set_threads(t->threads);
    if (t->precision && !strcmp(t->precision, "int8"))
        FATAL("--precision int8: int8 is for sampling only (it has no backward); train in fp32 or bf16");
    t->be = backend_select(t->device, t->precision);

    snprintf(t->dir, sizeof t->dir, "%s/checkpoints", t->out);
    snprintf(t->csv, sizeof t->csv, "%s/log.csv", t->out);
    snprintf(t->plot, sizeof t->plot, "%s/loss.png", t->out);

    // 1. the model: a checkpoint's (--resume) or the flags' (shaped by the data, below)
    struct stat out_st;
    if (t->lead && !t->dry_run && !stat(t->out, &out_st) && S_ISDIR(out_st.st_mode)) lock_run(t->out);  // before reading the run
    if (t->resume) {
        train_resume(t);
    } else {
        struct stat st;
        if (stat(t->out, &st) == 0 && !S_ISDIR(st.st_mode)) FATAL("--out %s: exists and is not a directory", t->out);
        if (!t->dry_run && restarting && t->lead) move_earlier_start(t->out, t->csv, "its stored command line (DIR/train.args)");
        else if (!t->dry_run && !restarting) refuse_existing_run(t->out, t->dir, t->csv);
    }
}

// --resume: the newest complete checkpoint of --out, with the run's settings except the flags given
// again; a directory without one starts fresh (t->resume set to 0).
static void train_resume(TrainCmd *t) {
    uint64_t *steps;
    int n = run_list_checkpoints(t->out, &steps);
    TrainOpts saved = t->to;
    for (int i = n - 1; i >= 0 && !t->tr; i--) {  // newest complete checkpoint
        run_ckpt_path(t->resume_path, sizeof t->resume_path, t->out, steps[i]);
        int saved_batch;
        if (trainer_peek(t->resume_path, &t->c, &t->cn, &saved, &saved_batch, &t->err)) {
            fprintf(stderr, "warning: skipping %s\n", t->err.msg);
            continue;
        }
        BatchFlags bf = {t->batch, t->accum, t->gbatch, GIVEN(t->batch), GIVEN(t->accum), GIVEN(t->gbatch)};
        check_resumed_batch(&bf, saved_batch, saved.accum);
        t->batch = saved_batch;
        t->accum = saved.accum;
        if (t->batch % t->world)
            FATAL("--resume: the run's global batch %d does not split over %d processes", t->batch, t->world);
        TrainMemArgs ma = {.batch = t->batch / t->world, .world = t->world, .zero = t->zero, .accum = t->accum,
                           .grids = t->lead && t->rs.sample_every > 0, .grid_images = t->rs.sample_images, .vae = t->rs.vae};
        train_memory_check(&t->c, t->be, &ma, t->batch, 1, "the resumed model", 0);  // "resuming ..." says it
        t->tr = trainer_new(&t->c, &t->cn, &saved, t->be, t->batch / t->world);
        trainer_shard(t->tr, t->rank, t->world);
        if (t->zero) trainer_zero1(t->tr);
        if (trainer_load(t->tr, t->resume_path, &t->err)) {
            fprintf(stderr, "warning: skipping %s\n", t->err.msg);
            trainer_free(t->tr);
            t->tr = NULL;
            class_names_free(&t->cn);
        }
    }
    free(steps);
    if (!t->tr) {
        if (t->lead) no_checkpoint_to_resume(t->out, t->dir, t->csv, n);  // or an error
        dist_barrier();
        t->resume = 0;  // a fresh start from here on
        return;
    }
    model_opts_check_resumed(&t->mo, t->opts, &t->c);
    if (GIVEN(t->to.seed) && t->to.seed != saved.seed)
        FATAL("--resume: --seed %llu contradicts the run's seed %llu (it fixes the data order and the noise)",
              (unsigned long long)t->to.seed, (unsigned long long)saved.seed);
    // the checkpoint's optimiser settings, except those given again (a manual schedule)
    if (GIVEN(t->to.lr)) saved.lr = t->to.lr;
    if (GIVEN(t->to.ema_decay)) saved.ema_decay = t->to.ema_decay;
    if (GIVEN(t->to.warmup)) saved.warmup = t->to.warmup;
    if (GIVEN(t->to.decay_start)) saved.decay_start = t->to.decay_start;
    if (GIVEN(t->to.decay_end)) saved.decay_end = t->to.decay_end;
    if (GIVEN(t->to.lr_end)) saved.lr_end = t->to.lr_end;
    if (GIVEN(t->to.weight_decay)) saved.weight_decay = t->to.weight_decay;
    if (GIVEN(t->to.grad_clip)) saved.grad_clip = t->to.grad_clip;
    if (GIVEN(t->to.label_drop)) saved.label_drop = t->to.label_drop;
    saved.max_bad_steps = t->to.max_bad_steps;
    t->to = saved;
    t->tr->opt = t->to;
    // the run's data and logging settings, except those given again
    RunSettings r = t->rs;
    if (!run_meta_read(t->resume_path, &r, t->data_buf, sizeof t->data_buf, t->vae_buf, sizeof t->vae_buf, &t->iters_stored))
        fprintf(stderr, "warning: %s has no run settings (an older mala wrote it): using the command line's\n",
                t->resume_path);
    if (t->iters_stored && !GIVEN(t->iters) && !GIVEN(t->epochs)) t->iters = r.iters;
    if (!GIVEN(t->rs.data)) t->rs.data = r.data;
    if (!GIVEN(t->rs.vae)) t->rs.vae = r.vae;
    if (!GIVEN(t->rs.log_every)) t->rs.log_every = r.log_every;
    if (!GIVEN(t->rs.sample_every)) t->rs.sample_every = r.sample_every;
    if (!GIVEN(t->rs.ckpt_every)) t->rs.ckpt_every = r.ckpt_every;
    if (!GIVEN(t->rs.hflip)) t->rs.hflip = r.hflip;
    if (!GIVEN(t->rs.limit)) t->rs.limit = r.limit;
    if (!GIVEN(t->rs.keep)) t->rs.keep = r.keep;
    if (!GIVEN(t->rs.sample_steps)) t->rs.sample_steps = r.sample_steps;
    if (!GIVEN(t->rs.sample_images)) t->rs.sample_images = r.sample_images;
    if (!GIVEN(t->rs.tensorboard)) t->rs.tensorboard = r.tensorboard;
    memcpy(t->rs.channels_from, r.channels_from, sizeof t->rs.channels_from);
    memcpy(t->rs.classes_from, r.classes_from, sizeof t->rs.classes_from);
    t->rs.init = r.init;
    EvalEvery fl = t->rs.eval;  // the stored evaluation settings, except flags given again
    t->rs.eval = r.eval;
    if (GIVEN(t->rs.eval.images)) t->rs.eval.images = fl.images;
    if (GIVEN(t->rs.eval.steps)) t->rs.eval.steps = fl.steps;
    if (GIVEN(t->rs.eval.cfg_scale)) t->rs.eval.cfg_scale = fl.cfg_scale;
    resume_precision(t->be, t->device, t->precision, r.precision, t->lead);
}

// The evaluation and schedule settings, checked before anything is written.
static void train_settings(TrainCmd *t) {
    if (!t->dry_run) refuse_out_in_data(t->out, t->rs.data);
    if (t->eval_every && eval_every_parse(t->eval_every, &t->rs.eval, &t->err)) FATAL("%s", t->err.msg);
    if (t->eval_sampler) snprintf(t->rs.eval.sampler, sizeof t->rs.eval.sampler, "%s", t->eval_sampler);
    if (t->eval_ref) snprintf(t->rs.eval.ref, sizeof t->rs.eval.ref, "%s", t->eval_ref);
    if (t->inception) snprintf(t->rs.eval.inception, sizeof t->rs.eval.inception, "%s", t->inception);
    if (strchr(t->rs.eval.ref, ';') || strchr(t->rs.eval.inception, ';'))  // run.eval's separator
        FATAL("--eval-ref / --inception: a path with ';' cannot be stored in the run's settings: rename it");
    SamplerKind eval_kind;
    if (sampler_kind_parse(t->rs.eval.sampler, &eval_kind))
        FATAL("--eval-sampler %s: expected %s", t->rs.eval.sampler, sampler_kind_list());
    if (t->rs.eval.every && strncmp(t->rs.eval.ref, "fashion-mnist", 13) && access(t->rs.eval.ref, R_OK))
        FATAL("--eval-ref %s: %s", t->rs.eval.ref, strerror(errno));

    // the schedule as flags and checkpoint make it (before anything is written)
    if (!t->to.decay_end && (GIVEN(t->to.decay_start) || GIVEN(t->to.lr_end)))
        FATAL("--decay-start and --lr-end need --decay-end (the step the decay ends at)");
    if (t->to.decay_end && t->to.decay_end <= t->to.decay_start)
        FATAL("--decay-end %llu must be after --decay-start %llu", (unsigned long long)t->to.decay_end,
              (unsigned long long)t->to.decay_start);
}

// The data, checked before anything is written: it shapes a fresh model; the memory plan. 0 after
// --dry-run's line (nothing more to do), else -1.
static int train_data(TrainCmd *t) {
    // 2. the data, checked before anything is written; it shapes a fresh model
    t->from_init = t->init && !GIVEN(t->mo.preset) && !GIVEN(t->mo.backbone);  // else the flags' model
    if (t->init) train_init_peek(t->init, t->init_heads, &t->ic);
    if (t->from_init && !GIVEN(t->mo.image_size)) t->mo.image_size = t->ic.image_size;
    t->model_name = t->from_init ? "the --init model" : t->mo.preset;
    // a latent set fixes the image size (its latents'), unless a flag asks for one
    const int latent_data = latent_is_set(t->rs.data);
    t->ds = dataset_open(t->rs.data, t->resume ? t->c.image_size : latent_data && !GIVEN(t->mo.image_size) ? 0 : t->mo.image_size,
                               t->resume ? t->c.in_channels : GIVEN(t->mo.channels) ? t->mo.channels : 0, &t->err);
    if (!t->ds) FATAL("%s", t->err.msg);
    if (t->rs.limit > 0 && dataset_limit(t->ds, t->rs.limit, &t->err)) FATAL("%s", t->err.msg);
    if (t->resume && (t->ds->views > 0) != (t->c.latent_scale > 0))
        FATAL("%s: %s, the resumed model is a %s model", t->rs.data, t->ds->views ? "a latent set" : "images",
              t->c.latent_scale > 0 ? "latent" : "pixel-space");
    if (t->resume) {
        if (t->c.num_classes && t->ds->num_classes != t->c.num_classes)  // an unconditional model takes any data
            FATAL("%s: %d classes, the resumed model has %d", t->rs.data, t->ds->num_classes, t->c.num_classes);
        for (int i = 0; i < t->cn.n; i++)
            if (strcmp(t->cn.names[i], t->ds->class_names[i]))
                FATAL("%s: class %d is '%s', the resumed model's is '%s' (the labels would change meaning)", t->rs.data, i,
                      t->ds->class_names[i], t->cn.names[i]);
    } else {
        const int uncond = GIVEN(t->mo.classes) && t->mo.classes == 0;  // the data's labels unused
        if (GIVEN(t->mo.classes) && !uncond && t->mo.classes != t->ds->num_classes)
            FATAL("--classes %d contradicts the data: %s has %d classes (--classes 0: an unconditional model)",
                  t->mo.classes, t->rs.data, t->ds->num_classes);
        snprintf(t->rs.channels_from, sizeof t->rs.channels_from, "%s", GIVEN(t->mo.channels) ? "--channels" : "data");
        snprintf(t->rs.classes_from, sizeof t->rs.classes_from, "%s", GIVEN(t->mo.classes) ? "--classes" : "data");
        t->mo.channels = t->ds->channels;
        t->mo.classes = uncond ? 0 : t->ds->num_classes;
        if (t->ds->views) t->mo.image_size = t->ds->image_size;
        if (t->from_init) train_init_config(&t->mo, t->opts, &t->ic, &t->c);
        else model_opts_config(&t->mo, &t->c);
        t->c.latent_scale = t->ds->latent_scale;  // the model file records that it is a latent model
        model_check_learnable(&t->c, t->model_name);
        if (t->init) train_init_check(&t->c, t->init, !strcmp(t->init_weights, "online"));  // before the memory plan
        t->cn.n = t->mo.classes;
        t->cn.names = xcalloc(t->cn.n, sizeof(char *));
        for (int i = 0; i < t->cn.n; i++) t->cn.names[i] = xstrdup(t->ds->class_names[i]);
    }
    if (t->batch % t->world)
        FATAL("--batch %d does not split over %d processes: give a multiple of %d", t->batch, t->world, t->world);
    if (t->batch > t->ds->n)
        FATAL("--batch %d is larger than the data (%lld images in %s%s): lower --batch", t->batch, (long long)t->ds->n, t->rs.data,
              t->rs.limit > 0 ? " with --limit" : "");
    if (GIVEN(t->epochs)) {  // a step takes --batch x --accum images
        uint64_t per_epoch = (uint64_t)t->ds->n / ((uint64_t)t->batch * t->accum);
        t->iters = (uint64_t)t->epochs * (per_epoch ? per_epoch : 1);
    }
    if (t->dry_run) {  // the model train would build (mala compare's budget_tflop asks its GFLOP/img)
        size_t trainable;
        net_param_floats(&t->c, &trainable);
        if (t->lead) printf("{\"params\":%zu,\"gflop_per_img\":%.9g,\"classes\":%d,\"image_size\":%d,\"channels\":%d}\n",
                         trainable, net_flops_per_image(&t->c) / 1e9, t->c.num_classes, t->c.image_size, t->c.in_channels);
        class_names_free(&t->cn);
        dataset_close(t->ds);
        dist_finalize();
        return 0;
    }
    t->hflip = t->rs.hflip >= 0 ? t->rs.hflip
                              : strcmp(t->rs.data, "fashion-mnist") != 0 && strncmp(t->rs.data, "fashion-mnist:", 14) != 0;
    if (t->ds->views) {  // a latent set's flips are its encoded views (a latent cannot be mirrored)
        if (t->rs.hflip == 1 && t->ds->views == 1)
            FATAL("--hflip 1: %s holds one view per image; encode with `mala encode --hflip` to train with flips", t->rs.data);
        t->hflip = t->rs.hflip >= 0 ? t->rs.hflip : t->ds->views == 2;
    }
    // the sample grids' settings and their VAE, checked before the memory plan prints its line
    if (!t->lead) t->rs.sample_every = 0;  // rank 0's grids only
    t->grid_every = t->rs.sample_every;
    if (t->grid_every > 0 && t->c.latent_scale > 0 && !t->rs.vae) {
        fprintf(stderr, "note: a latent model's sample grids decode through the VAE: no grids without --vae FILE\n");
        t->grid_every = 0;
    }
    if (t->rs.eval.every && t->c.latent_scale > 0 && !t->rs.vae)
        FATAL("--eval-every: a latent model's samples decode through the VAE: give --vae FILE");
    if (t->rs.vae && (GIVEN(t->rs.vae) || t->grid_every > 0 || t->rs.eval.every)) check_vae(t->rs.vae, t->rs.data, t->ds);
    if (!t->resume) {  // everything the run allocates, refused before anything is created
        TrainMemArgs ma = {.batch = t->batch / t->world, .world = t->world, .zero = t->zero, .accum = t->accum,
                           .grids = t->grid_every > 0, .grid_images = t->rs.sample_images, .vae = t->rs.vae, .data_n = t->ds->n};
        if (t->auto_accum) choose_accum(&t->c, t->be, &ma, t->gbatch, &t->batch, &t->accum, t->lead);
        train_memory_check(&t->c, t->be, &ma, t->batch, 0, t->model_name, t->lead);
    }
    t->to.accum = t->accum;
    return -1;
}

// The data order, the sample grids, the trainer (--init's weights loaded), and the run directory.
static void train_prepare(TrainCmd *t) {
    // 3. the data order and the sample grids (their VAE loaded), before anything is written
    t->ld = loader_new(t->ds, t->batch / t->world, t->to.seed, t->hflip, &t->err);
    if (!t->ld) FATAL("%s", t->err.msg);
    if (t->world > 1) loader_shard(t->ld, t->batch, t->rank * (t->batch / t->world));
    if (t->grid_every > 0) train_grid_init(&t->pv, &t->c, &t->cn, t->be, t->rs.vae, t->rs.sample_images, t->rs.sample_steps, &stop_requested);

    // 4. the trainer (a fresh one: --init's weights checked and loaded first), then the run directory
    // (rank 0's, once every rank has checked the run)
    if (!t->resume) {
        t->tr = trainer_new(&t->c, &t->cn, &t->to, t->be, t->batch / t->world);
        trainer_shard(t->tr, t->rank, t->world);
        if (t->zero) trainer_zero1(t->tr);
        trainer_init_weights(t->tr);
        if (t->init) train_init_load(t->tr, t->init, !strcmp(t->init_weights, "online"), t->lead, &t->rs.init);
    }
    dist_barrier();
    if (t->lead) {
        make_dirs(t->dir);
        if (run_lock.fd < 0) {  // --out is new: it is locked now that it exists, and checked again under the lock
            lock_run(t->out);
            refuse_existing_run(t->out, t->dir, t->csv);
        }
        int stale = atomic_remove_stale(t->dir, ".safetensors", &t->err);  // partial saves of a killed run
        if (stale > 0)
            fprintf(stderr, "removed %d partial checkpoint%s (*.safetensors.tmp) in %s\n", stale, stale > 1 ? "s" : "",
                    t->dir);
        if (t->grid_every > 0) {
            snprintf(t->path, sizeof t->path, "%s/samples", t->out);
            make_dirs(t->path);
        }
    }
    if (t->resume) {
        if (t->lead)
            fprintf(stderr, "resuming %s at step %llu, to step %llu (%s)\n", t->resume_path, (unsigned long long)t->tr->step,
                    (unsigned long long)t->iters, GIVEN(t->iters) ? "--iters" : GIVEN(t->epochs) ? "--epochs"
                    : t->iters_stored ? "the run's --iters; give --iters to change it"
                                   : "--iters' default: the checkpoint stores no target");
        if (t->lead) t->rs.elapsed = history_load(&t->hist, t->csv, t->tr->step);
    } else {
        if (t->lead && !restarting) args_save(t->out, t->argc, t->argv);
        FILE *f = t->lead ? fopen(t->csv, "w") : NULL;
        if (t->lead && (!f || fprintf(f, "step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time\n") < 0 || fclose(f)))
            FATAL("%s: cannot write: %s", t->csv, strerror(errno));
    }
}

// The log files and the event file opened, the evaluations set up, and what the run is said on
// the console. -1, or the exit status when the evaluations cannot start.
static int train_report(TrainCmd *t) {
    t->rs.iters = t->iters;
    if (t->lead && t->rs.tensorboard && (tfev_open_dir(&t->tb, t->out, &t->err) ||
                                   (t->resume && tfev_session_start(&t->tb, (int64_t)t->tr->step + 1, &t->err))))
        FATAL("%s", t->err.msg);
    snprintf(t->rs.precision, sizeof t->rs.precision, "%s", t->be->precision());
    if (t->rs.eval.every && t->tr->step <= t->iters &&  // (at the target: its last point may be due, a stop cut it)
        !(t->tev = train_eval_open(&t->rs.eval, &t->c, &t->cn, t->be, t->rs.vae, t->out, trainer_step_images(t->tr)))) {
        dist_finalize();  // its error line is out
        return 1;
    }
    if (t->lead && t->tev)
        fprintf(stderr, "evaluation: %s every %llu %s and at the end, %d images, %s %d steps, guidance %g, against %s "
                "(evals.csv, fd.png, best.json)\n", t->rs.eval.inception[0] ? "FID" : "FD (fmnist features)",
                (unsigned long long)t->rs.eval.every, t->rs.eval.in_steps ? "steps" : "training images", t->rs.eval.images,
                t->rs.eval.sampler, t->rs.eval.steps, t->rs.eval.cfg_scale, t->rs.eval.ref);
    run_meta_fill(&t->meta, &t->rs);
    t->tr->n_meta = t->meta.n;
    t->tr->meta = t->meta.kv;
    loader_seek(t->ld, t->tr->batches);
    train_check_replicas(t->tr);

    char desc[256];
    net_config_describe(&t->c, desc, sizeof desc);
    if (t->lead && t->world > 1)
        fprintf(stderr, "processes: %d (%s), %d images each of the global batch %d\n", t->world, dist_engine(), t->tr->batch,
                t->batch);
    if (t->lead) fprintf(stderr, "model: %s; %.2fM parameters, %s backend, %d threads\n", desc, t->tr->net->n_trainable / 1e6, t->be->name,
            num_threads());
    if (t->lead && (t->world > 1 || t->zero))
        fprintf(stderr, "optimiser state (AdamW m, v): %.2f MB per process%s\n", trainer_opt_state_bytes(t->tr) / 1e6,
                t->tr->zero ? " (ZeRO-1: 1/world of it)" : t->world > 1 ? " (each holds all of it; --zero 1 shards it)"
                                                      : " (--zero 1: one process, nothing to shard)");
    char bdesc[64];
    snprintf(bdesc, sizeof bdesc, t->accum > 1 ? "%d (--batch %d x --accum %d)" : "%d", t->batch * t->accum, t->batch, t->accum);
    char kdesc[64];
    snprintf(kdesc, sizeof kdesc, t->c.num_classes ? "%d classes" : "%d classes unused (an unconditional model)",
             t->ds->num_classes);
    if (t->lead) fprintf(stderr, "data: %s, %lld images, %d channel%s, %s; batch %s, lr %g, EMA %g; %llu steps; run dir %s\n",
            t->rs.data, (long long)t->ds->n, t->ds->channels, t->ds->channels > 1 ? "s" : "", kdesc, bdesc, t->to.lr,
            t->to.ema_decay, (unsigned long long)t->iters, t->out);
    if (t->lead && t->to.decay_end > t->to.decay_start)
        fprintf(stderr, "lr decay: linear from %g after step %llu to %g at step %llu\n", t->to.lr,
                (unsigned long long)t->to.decay_start, t->to.lr_end, (unsigned long long)t->to.decay_end);
    if (t->lead && t->grid_every > 0)
        fprintf(stderr, "sample grids: %d images, DDIM %d steps, every %d steps and at the end (--sample-images, "
                "--sample-steps, --sample-every 0 for none)\n", t->pv.n, t->pv.steps, t->grid_every);
    if (t->lead && t->tr->step >= t->iters)
        fprintf(stderr, "note: the run is at step %llu, its target: nothing to train (give a larger --iters to go "
                "on)\n", (unsigned long long)t->tr->step);
    return -1;
}

int cmd_train(int argc, char **argv) {
    TrainCmd *t = xcalloc(1, sizeof *t);
    t->argc = argc;
    t->argv = argv;
    int rc = train_flags(t);
    if (rc < 0) {
        train_open(t);
        train_settings(t);
        rc = train_data(t);
    }
    if (rc < 0) {
        train_prepare(t);
        rc = train_report(t);
    }
    if (rc >= 0) {
        free(t);
        return rc;
    }
    TrainRun run = {t->tr, t->ld, &t->to, &t->rs, &t->meta, t->out, t->batch, t->accum,
                    t->grid_every > 0 ? &t->pv : NULL, t->grid_every, t->tev, &t->tb, &t->hist, t->lead, &stop_requested};
    rc = train_run_loop(&run);
    if (rc == TRAIN_RUN_IO_ERROR) FATAL("%s", run.err.msg);
    if (tfev_close(&t->tb, &t->err)) FATAL("%s", t->err.msg);
    if (t->grid_every > 0) train_grid_free(&t->pv);
    train_eval_free(t->tev);
    run_log_free(&t->hist);
    loader_free(t->ld);
    dataset_close(t->ds);
    trainer_free(t->tr);
    class_names_free(&t->cn);
    dist_barrier();  // rank 0's last checkpoint is complete before any rank reports done
    dist_finalize();
    free(t);
    return rc;
}

#undef GIVEN

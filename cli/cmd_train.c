// mala train: headless DiT training (train.py's recipe) with atomic checkpoints, --resume,
// a CSV log, a loss curve, sample grids, and a clean stop on SIGINT / SIGTERM. This file is the
// front end: the flags become the set-up's settings (train/train_setup.h, which returns its errors
// for this file to print), the loop is train/train_run.h's, and the signals are handled here.
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/train_init.h"
#include "core/dist.h"
#include "cpu/cpu_threads.h"
#include "sampler/sampler.h"
#include "train/train_batch.h"
#include "train/train_run.h"
#include "train/train_setup.h"

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

// Each SIGCONT (the end of a SIGSTOP or Ctrl-Z): the run leaves the stop out of its training seconds.
static volatile sig_atomic_t continued = 0;
static void on_continue(int sig) {
    (void)sig;
    continued++;
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

// ---- the command ----

// `mala train`'s flags: the set-up's settings (train/train_setup.h) and the model flags, which
// the set-up asks for the model through its hooks (train_model_config, train_model_check_resumed).
typedef struct {
    int argc;
    char **argv;
    TrainSetup s;
    ModelOpts mo;
    int threads;
    Opt opts[MODEL_OPTS_N + 64];
    int n_opts;
} TrainCmd;

#define GIVEN(var) args_given(t->opts, t->n_opts, &(var))

static int restarting = 0;  // a --resume without a checkpoint, started over from train.args

// The set-up's hooks: the model flags (their Opt rows say which were given) make the model.
static int train_model_config(void *user, const NetConfig *init, int channels, int classes, int image_size,
                              NetConfig *c, MalaErr *err) {
    TrainCmd *t = user;
    t->mo.channels = channels;
    t->mo.classes = classes;
    t->mo.image_size = image_size;
    if (init) train_init_config(&t->mo, t->opts, init, c);
    else model_opts_config(&t->mo, c);
    return 0;
}
static int train_model_check_resumed(void *user, const NetConfig *c, MalaErr *err) {
    TrainCmd *t = user;
    model_opts_check_resumed(&t->mo, t->opts, c);
    return 0;
}

// The flag table: the model flags, then train's (their values land in t->s).
static int train_opts_table(TrainCmd *t) {
    Opt *opts = t->opts;
    TrainSetup *s = &t->s;
    Opt rest[] = {
        {"--data", OPT_STR, &s->rs.data, "SRC",
         "fashion-mnist, an image folder root/<class>/<image>, or a latent set (mala encode)",
         ARG_ALIAS("--data-path")},
        {"--vae", OPT_STR, &s->rs.vae, "FILE", "latent data: the VAE that decodes the sample grids (without it, no grids)"},
        {"--batch", OPT_INT, &s->batch, "B", "batch size of a forward pass (under mpirun / srun: over all processes, "
         "split over them)", ARG_MIN(1)},
        {"--accum", OPT_INT, &s->accum, "K", "gradient accumulation: K batches of --batch make one optimiser step",
         ARG_MIN(1)},
        {"--global-batch", OPT_INT, &s->gbatch, "G", "images per optimiser step, --batch x --accum; given alone it is "
         "--batch, or --accum the fewest K that fit in memory (default: --batch)", ARG_MIN(1),
         ARG_ALIAS("--global-batch-size")},
        {"--iters", OPT_U64, &s->iters, "N", "train until this many steps", ARG_MIN(1)},
        {"--epochs", OPT_INT, &s->epochs, "E", "passes over the data instead of --iters (DiT's --epochs: E x floor(images / "
         "batch) steps; default: --iters)", ARG_MIN(1)},
        {"--lr", OPT_FLOAT, &s->to.lr, "LR", "AdamW learning rate, constant", ARG_MIN(0), ARG_MAX(1)},
        {"--warmup", OPT_INT, &s->to.warmup, "N", "linear learning-rate warmup steps", ARG_MIN(0)},
        {"--decay-start", OPT_U64, &s->to.decay_start, "S", "linear learning-rate decay from --lr after step S ...",
         ARG_MIN(0)},
        {"--decay-end", OPT_U64, &s->to.decay_end, "E", "... to --lr-end at step E, and --lr-end after it (default: no "
         "decay)", ARG_MIN(1)},
        {"--lr-end", OPT_FLOAT, &s->to.lr_end, "LR", "the rate the decay ends at", ARG_MIN(0), ARG_MAX(1)},
        {"--weight-decay", OPT_FLOAT, &s->to.weight_decay, "WD", "AdamW weight decay", ARG_MIN(0), ARG_MAX(10)},
        {"--grad-clip", OPT_FLOAT, &s->to.grad_clip, "G", "clip the global gradient norm (0 = off)", ARG_MIN(0)},
        {"--ema-decay", OPT_FLOAT, &s->to.ema_decay, "D", "EMA decay", ARG_MIN(0), ARG_MAX(1)},
        {"--label-drop", OPT_FLOAT, &s->to.label_drop, "P", "label dropout to the null class (guidance)", ARG_MIN(0),
         ARG_MAX(1)},
        {"--max-bad-steps", OPT_INT, &s->to.max_bad_steps, "N", "stop after N non-finite steps in a row", ARG_MIN(1)},
        {"--seed", OPT_U64, &s->to.seed, "S", "seed of init, data order, noise", ARG_ALIAS("--global-seed")},
        {"--hflip", OPT_INT, &s->rs.hflip, "0|1", "random horizontal flips (default: on for folders, off for fashion-mnist)",
         ARG_MIN(-1), ARG_MAX(1)},
        {"--limit", OPT_INT, &s->rs.limit, "N", "use only N images spread over the data (0 = all)", ARG_MIN(0)},
        {"--out", OPT_STR, &s->out, "DIR", "run directory (created with its parents)", ARG_ALIAS("--results-dir")},
        {"--ckpt-every", OPT_INT, &s->rs.ckpt_every, "N", "checkpoint every N steps", ARG_MIN(1)},
        {"--sample-every", OPT_INT, &s->rs.sample_every, "N", "sample grid every N steps and at the end (0 = never)",
         ARG_MIN(0)},
        {"--sample-steps", OPT_INT, &s->rs.sample_steps, "S", "DDIM steps of a sample grid", ARG_MIN(1), ARG_MAX(1000)},
        {"--sample-images", OPT_INT, &s->rs.sample_images, "N",
         "images in a sample grid (default: 4 per class, at most 64)", ARG_MIN(1), ARG_MAX(256)},
        {"--log-every", OPT_INT, &s->rs.log_every, "N", "progress / CSV every N steps", ARG_MIN(1)},
        {"--keep", OPT_INT, &s->rs.keep, "K", "keep the last K checkpoints", ARG_MIN(1)},
        {"--tensorboard", OPT_INT, &s->rs.tensorboard, "0|1", "1: a TensorBoard event file in --out (tensorboard "
         "--logdir)", ARG_MIN(0), ARG_MAX(1)},
        {"--eval-every", OPT_STR, &s->eval_every, "N|Ns", "evaluate the EMA weights (mala eval fid --quick's FD) every N "
         "training images (Ns: N steps) and at the end; 0 = never (docs/train.md)"},
        {"--eval-images", OPT_INT, &s->rs.eval.images, "N", "images sampled per evaluation", ARG_MIN(1)},
        {"--eval-sampler", OPT_STR, &s->eval_sampler, sampler_kind_list(), "the evaluation's sampler (default ddim)"},
        {"--eval-steps", OPT_INT, &s->rs.eval.steps, "S", "the evaluation's sampler steps", ARG_MIN(1), ARG_MAX(1000)},
        {"--eval-cfg-scale", OPT_FLOAT, &s->rs.eval.cfg_scale, "W", "the evaluation's guidance scale", ARG_MIN(0),
         ARG_MAX(100)},
        {"--eval-ref", OPT_STR, &s->eval_ref, "REF", "the evaluation's reference: statistics .npz (mala eval stats), "
         "images, or fashion-mnist-test (default)"},
        {"--inception", OPT_STR, &s->inception, "FILE", "evaluate with the FID Inception (these weights) instead of the "
         "Fashion-MNIST classifier's features"},
        {"--resume", OPT_FLAG, &s->resume, NULL, "continue from the newest complete checkpoint in --out"},
        {"--init", OPT_STR, &s->init, "FILE", "fine-tune: a new run from the weights of a model file or training "
         "checkpoint (step 0, a fresh optimiser; its model unless --model)"},
        {"--init-weights", OPT_STR, &s->init_weights, "ema|online", "--init of a training checkpoint: its EMA or online "
         "weights"},
        {"--heads", OPT_INT, &s->init_heads, "N", "--init of a PyTorch .pt: attention heads (default: its args, else DiT's "
         "preset for the width)", ARG_MIN(1), ARG_MAX(4096)},
        {"--zero", OPT_INT, &s->zero, "0|1", "1: ZeRO-1, AdamW's moments sharded over the processes (the same model, 1/N "
         "of its memory)", ARG_MIN(0), ARG_MAX(1)},
        OPT_THREADS(&t->threads),
        OPT_DEVICE(&s->device),
        OPT_PRECISION(&s->precision),
        {"--dry-run", OPT_FLAG, &s->dry_run, NULL, "check the flags and the data, print the model's size as one JSON line "
         "(params, gflop_per_img: forward GFLOP per image) and exit; writes nothing"},
    };
    enum { N_OPTS = MODEL_OPTS_N + sizeof rest / sizeof *rest };
    _Static_assert(N_OPTS <= sizeof t->opts / sizeof *t->opts, "TrainCmd's flag table is too small");
    model_opts_table(&t->mo, opts);
    opts[6].help = "image channels (default: the data's)";
    opts[7].help = "number of classes (default: the data's; 0: an unconditional model, the labels unused)";
    memcpy(opts + MODEL_OPTS_N, rest, sizeof rest);
    return N_OPTS;
}

// Which settings the command line gave (a given one wins over a resumed run's).
static void train_given(TrainCmd *t) {
    TrainSetup *s = &t->s;
    TrainGiven *g = &s->given;
    g->batch = GIVEN(s->batch), g->accum = GIVEN(s->accum), g->gbatch = GIVEN(s->gbatch);
    g->iters = GIVEN(s->iters), g->epochs = GIVEN(s->epochs);
    g->seed = GIVEN(s->to.seed), g->lr = GIVEN(s->to.lr), g->ema_decay = GIVEN(s->to.ema_decay);
    g->warmup = GIVEN(s->to.warmup), g->decay_start = GIVEN(s->to.decay_start), g->decay_end = GIVEN(s->to.decay_end);
    g->lr_end = GIVEN(s->to.lr_end), g->weight_decay = GIVEN(s->to.weight_decay);
    g->grad_clip = GIVEN(s->to.grad_clip), g->label_drop = GIVEN(s->to.label_drop);
    g->data = GIVEN(s->rs.data), g->vae = GIVEN(s->rs.vae), g->log_every = GIVEN(s->rs.log_every);
    g->sample_every = GIVEN(s->rs.sample_every), g->ckpt_every = GIVEN(s->rs.ckpt_every);
    g->hflip = GIVEN(s->rs.hflip), g->limit = GIVEN(s->rs.limit), g->keep = GIVEN(s->rs.keep);
    g->sample_steps = GIVEN(s->rs.sample_steps), g->sample_images = GIVEN(s->rs.sample_images);
    g->tensorboard = GIVEN(s->rs.tensorboard);
    g->eval_images = GIVEN(s->rs.eval.images), g->eval_steps = GIVEN(s->rs.eval.steps);
    g->eval_cfg_scale = GIVEN(s->rs.eval.cfg_scale);
    g->model = GIVEN(t->mo.preset) || GIVEN(t->mo.backbone);
    g->image_size = GIVEN(t->mo.image_size), g->channels = GIVEN(t->mo.channels), g->classes = GIVEN(t->mo.classes);
}

// The flags, checked alone, into t->s. -1, or the exit status of a --resume restarted from train.args.
static int train_flags(TrainCmd *t) {
    TrainSetup *s = &t->s;
    model_opts_default(&t->mo, "DiT-S/2");
    t->mo.channels = t->mo.classes = 0;  // from the data unless given
    train_opts_default(&s->to);
    s->rs = (RunSettings){"fashion-mnist", NULL, 100, 5000, 5000, -1, 0, 3, 50, 0, 400000, 0, "data", "data"};
    s->rs.tensorboard = 1;
    eval_every_default(&s->rs.eval);
    s->out = "runs/mala";
    s->init_weights = "ema";
    s->batch = 256;
    s->accum = 1;
    s->iters = 400000;
    t->n_opts = train_opts_table(t);
    args_parse("usage: mala train [flags]\n\nTrains a class-conditional DiT (DiT's recipe: AdamW lr 1e-4, EMA 0.9999,\n"
               "batch 256, label dropout 0.1). Channels, classes and class names come from the data.\n"
               "With --resume the model and optimiser settings, the data, the logging settings and the precision come\n"
               "from the checkpoint, except flags given again; so does --iters, which may extend the run.\n"
               "A stop by SIGINT / SIGTERM writes a checkpoint and exits with status 130 / 143.\n"
               "--classes 0 trains an unconditional model, --init FILE fine-tunes a model (docs/train.md).",
               t->opts, t->n_opts, t->argc, t->argv, 1);
    train_given(t);
    const TrainGiven *g = &s->given;
    if (g->epochs && g->iters) FATAL("--epochs and --iters exclude each other");
    if (s->init && s->resume)
        FATAL("--init %s starts a new run from its weights; --resume continues the run in --out: give one of them", s->init);
    if (GIVEN(s->init_weights) && !s->init) FATAL("--init-weights %s: applies to --init FILE only", s->init_weights);
    if (GIVEN(s->init_heads) && !s->init) FATAL("--heads %d: applies to --init FILE.pt only", s->init_heads);
    s->init_weights = weights_online("--init-weights", s->init_weights) ? "online" : "ema";  // "model": DiT's "online"
    // --global-batch G = --batch x --accum; alone, the memory check picks --accum (choose_accum)
    s->auto_accum = g->gbatch && !g->batch && !g->accum;
    MalaErr err;
    if (g->gbatch && split_global_batch(s->gbatch, &s->batch, &s->accum, g->batch, g->accum, &err)) FATAL("%s", err.msg);
    s->image_size = t->mo.image_size;
    s->channels = t->mo.channels;
    s->classes = t->mo.classes;
    s->preset = t->mo.preset;
    s->model = (TrainModelHooks){train_model_config, train_model_check_resumed, t};
    s->restarting = restarting;
    if (s->resume && !s->dry_run && !restarting && run_newest_checkpoint(s->out) < 0) {
        int sargc;
        char **sargv = args_for_restart(s->out, t->argc, t->argv, &sargc);
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

// Open MPI's mpirun forwards a SIGTERM or SIGINT to the ranks and kills them
// odls_base_sigkill_timeout seconds later (1 by default): too soon to write a stop's checkpoint of
// a real model (DiT-B/2's 2 GB was cut). A signal to the ranks themselves is not timed: they vote
// and stop together, and mpirun ends with them. mpirun passes --mca settings to the ranks as
// OMPI_MCA_*, so rank 0 can tell which it got.
static void warn_mpirun_kill_timeout(void) {
    if (dist_rank() != 0 || !getenv("OMPI_COMM_WORLD_SIZE")) return;
    const char *v = getenv("OMPI_MCA_odls_base_sigkill_timeout");
    int secs = v ? atoi(v) : 1;
    if (secs < 10)
        fprintf(stderr, "warning: Open MPI's mpirun kills the ranks %d s after it forwards a signal "
                "(odls_base_sigkill_timeout), which can cut the stop's checkpoint short: stop the run by "
                "signalling the ranks (`pkill -TERM -P <mpirun's pid>`), or launch with `mpirun --mca "
                "odls_base_sigkill_timeout 60` (mpirun then takes about twice that to exit)\n", secs);
}

// The processes and the signals, before anything slow (device, dataset, model), so that a signal
// during start-up stops the run cleanly too.
static void train_start(TrainCmd *t) {
    dist_init(&t->argc, &t->argv);
    signal_says = dist_rank() == 0;
    warn_mpirun_kill_timeout();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    struct sigaction sc = {.sa_handler = on_continue, .sa_flags = SA_RESTART};
    sigemptyset(&sc.sa_mask);
    sigaction(SIGCONT, &sc, NULL);
    set_threads(t->threads);
    t->s.argc = t->argc;  // DIR/train.args
    t->s.argv = t->argv;
    t->s.stop = &stop_requested;
}

// --dry-run: the model train would build, as one JSON line (mala compare's budget_tflop asks its
// GFLOP/img); nothing is written.
static void train_dry_run(const TrainSetup *s) {
    size_t trainable;
    net_param_floats(&s->c, &trainable);
    if (s->lead)
        printf("{\"params\":%zu,\"gflop_per_img\":%.9g,\"classes\":%d,\"image_size\":%d,\"channels\":%d}\n",
               trainable, net_flops_per_image(&s->c) / 1e9, s->c.num_classes, s->c.image_size, s->c.in_channels);
}

// A set-up's error: its line and the exit status, 2 for the memory plan's refusal (train/mem_plan.h).
// The refusal and the replicas' check fail every process together: under MPI a process without a
// line (it fits, its weights agree) stops quietly beside the one that says why.
static _Noreturn void setup_failed(const TrainSetup *s, const MalaErr *err) {
    if (!s->no_memory && !s->diverged) FATAL("%s", err->msg);
    if (err->msg[0]) fprintf(stderr, "error: %s\n", err->msg);
    dist_finalize();
    exit(s->no_memory ? 2 : 1);
}

int cmd_train(int argc, char **argv) {
    TrainCmd *t = xcalloc(1, sizeof *t);
    TrainSetup *s = &t->s;
    t->argc = argc;
    t->argv = argv;
    int rc = train_flags(t);
    if (rc >= 0) {
        free(t);
        return rc;
    }
    train_start(t);
    MalaErr err;
    if (train_setup_open(s, &err) || train_setup_settings(s, &err) || train_setup_data(s, &err)) setup_failed(s, &err);
    if (s->dry_run) {
        train_dry_run(s);
        train_setup_free(s);
        dist_finalize();
        free(t);
        return 0;
    }
    if (train_setup_plan(s, &err) || train_setup_prepare(s, &err) || (rc = train_setup_report(s, &err)) < 0)
        setup_failed(s, &err);
    if (rc > 0) {  // the evaluations cannot start (their error line is out)
        dist_finalize();
        free(t);
        return rc;
    }
    TrainRun run = {s->tr, s->ld, &s->to, &s->rs, &s->meta, s->out, s->batch, s->accum,
                    s->grid_every > 0 ? &s->pv : NULL, s->grid_every, s->tev, &s->tb, &s->hist, s->lead, &stop_requested};
    run.continued = &continued;
    rc = train_run_loop(&run);
    if (rc == TRAIN_RUN_IO_ERROR) FATAL("%s", run.err.msg);
    if (tfev_close(&s->tb, &err)) FATAL("%s", err.msg);
    dist_barrier();  // rank 0's last checkpoint is complete before any rank reports done
    train_setup_free(s);
    dist_finalize();
    free(t);
    return rc;
}

#undef GIVEN

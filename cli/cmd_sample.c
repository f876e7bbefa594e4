// mala sample: DDPM / DDIM / DPM-Solver++(2M) with classifier-free guidance from a model file, to a PNG grid, PNG
// files, an ADM-evaluator .npz and/or a raw float32 .npy.
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "pipeline/gen_prompt.h"
#include "cli/commands.h"
#include "core/dist.h"
#include "pipeline/generate.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "cli/out_paths.h"
#include "core/progress.h"
#include "cpu/cpu_threads.h"
#include "pipeline/gen_params.h"
#include "pipeline/batch_store.h"
#include "pipeline/generate_shard.h"
#include "pipeline/labels.h"
#include "cli/run_manifest.h"
#include "cli/sample_init.h"

typedef struct {
    Progress pg;
    double t0;                     // when sampling began
    int total_images;
    int batches;                   // this process's batches to sample (kept ones not counted)
    const ShardedGen *sg;          // which batch runs, and how many ran before it
} SampleProgress;

// The ETA covers the whole job: every step of every batch this process samples.
static int on_step(void *ctx, int i, int n, const float *x0) {
    SampleProgress *p = ctx;
    const ShardedGen *s = p->sg;
    double dt = now_seconds() - p->t0;
    long long done = (long long)s->batches_run * n + i + 1, total = (long long)p->batches * n;
    char eta[32];
    progress_format_eta(eta, sizeof eta, (double)(total - done) * dt / (double)done);
    progress_update(&p->pg, done == total, "sampling images %d-%d of %d: batch %d/%d, step %d/%d, %.2f steps/s, ETA %s",
                    s->batch_first + 1, s->batch_first + s->batch_n, p->total_images, s->batches_run + 1, p->batches,
                    i + 1, n, done / dt, eta);
    return 0;
}

// --out-dir's files: NNNNNN_<class>.png, as this command names them.
static int is_sample_png(const char *name) {
    size_t n = strlen(name), d = strspn(name, "0123456789");
    return d >= 6 && name[d] == '_' && n > d + 5 && !strcmp(name + n - 4, ".png");
}

// DiT's sample.py flags whose values a model file carries: refused with that explanation rather
// than as unknown flags.
static void refuse_model_flags(int argc, char **argv) {
    static const char *const from_file[] = {"--model", "--image-size", "--num-classes"};
    for (int a = 1; a < argc; a++)
        for (int k = 0; k < 3; k++) {
            size_t len = strlen(from_file[k]);
            if (!strncmp(argv[a], from_file[k], len) && (!argv[a][len] || argv[a][len] == '='))
                FATAL("%s: mala sample reads the model, its image size and its classes from the model file "
                      "(--ckpt); drop %s", from_file[k], from_file[k]);
        }
}

// Images when --n is not given: 16 of one class, else 8 per class (64 spread over >16 classes).
static int default_count(int classes, int one_class) {
    return one_class || !classes ? 16 : classes <= 16 ? 8 * classes : 64;  // 0 classes: unconditional
}

// The model's configuration from its file, before anything is allocated for it.
static void peek_config(const char *path, NetConfig *c) {
    MalaErr err;
    ClassNames cn;
    if (ckpt_file_config(path, c, &cn, &err)) FATAL("%s", err.msg);
    class_names_free(&cn);
}

// Labels from --labels "3,Sneaker,7" (names or numbers).
static int parse_labels(const char *s, const ClassNames *cn, int32_t **out) {
    int cap = 16, n = 0;
    int32_t *y = xmalloc(cap * sizeof(int32_t));
    char *copy = xstrdup(s), *save = NULL;
    for (char *p = copy; *p; p++)
        if (*p == ',' && (p == copy || p[1] == ',' || p[1] == 0)) FATAL("--labels %s: empty entry", s);
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        int k = class_names_find(cn, tok);
        if (k < 0) FATAL("--labels: unknown class '%s' (the model has %d classes)", tok, cn->n);
        if (n == cap) y = realloc(y, (cap *= 2) * sizeof(int32_t));
        y[n++] = k;
    }
    free(copy);
    if (!n) FATAL("--labels: empty list");
    *out = y;
    return n;
}

// The PNG's generation parameters (pipeline/gen_params.h): n images from labels, the first at index first.
static char *png_params(const Generator *g, const char *ckpt, const char *vae, const GenOpts *go, const int32_t *labels,
                        int n, uint64_t seed, int64_t first, const SampleInit *si) {
    GenParams p = {.model_path = ckpt, .vae_path = g->vae ? vae : NULL, .classes = &g->classes, .labels = labels, .n = n,
                   .seed = seed, .first = first, .opts = go, .channels = generator_out_channels(g),
                   .width = generator_out_size(g), .height = generator_out_size(g),
                   .strength = si->init ? si->gi.strength : 0.0f, .init_path = si->init, .mask_path = si->mask,
                   .resample = si->gi.resample};
    if (n == 1 && si->npaths > 1) p.init_path = si->paths[first];  // --init-image DIR: this output's file
    MalaErr err;
    char *text = gen_params_text(&p, &err);
    if (!text) FATAL("%s", err.msg);
    return text;
}

static void to_u8_nhwc(uint8_t *dst, const float *x, int n, int C, int S) {
    for (int i = 0; i < n; i++)
        for (int h = 0; h < S; h++)
            for (int w = 0; w < S; w++)
                for (int c = 0; c < C; c++)
                    dst[(((size_t)i * S + h) * S + w) * C + c] = image_sample_to_u8(x[(((size_t)i * C + c) * S + h) * S + w]);
}

// The partial run of these settings beside `output` (pipeline/batch_store.h), created or continued.
static void open_store(BatchStore *st, const SamplingRecord *rec, const char *output, const char *flag, size_t per,
                       int force) {
    Manifest *set = xcalloc(1, sizeof *set);
    manifest_partial_settings(set, rec);
    char dir[4200];
    batch_store_dir_for(dir, sizeof dir, output);
    batch_store_open(st, dir, set, rec->n, rec->batch, per, force, flag);
    if (st->kept && dist_rank() == 0)
        fprintf(stderr, "continuing the partial run in %s: kept %d of %d images\n", dir, st->kept, rec->n);
    free(set);
}

// Everything `mala sample` sets up, from the flags to the images written.
typedef struct {
    int argc;
    char **argv;
    // the flags
    const char *ckpt, *sampler, *cls, *labels, *out, *out_dir, *npz, *npy, *init_noise, *device, *precision, *weights;
    const char *vae, *cfg_channels, *label_mode, *cfg_interval, *init_image, *mask, *blend;
    GenOpts go;
    int n, batch, threads, nrow, force, resample, heads;
    float strength;
    uint64_t seed;
    Opt opts[64];
    int nopts;
    LabelMode lmode;
    SampleInit si;
    // the run
    int rank, world, lead;
    const Backend *be;
    NetConfig pc;  // the file's configuration, read before the model is built
    MalaErr err;
    size_t per_image, per, oper;
    int count, recorded, K, oc, os;
    double gen_dev, gen_bytes;
    Generator g;
    char vae_buf[4200];
    const NetConfig *c;
    int32_t *y;
    float *x, *img, *chunk;
    uint8_t *u8;
    GenOpts used;  // as the sampler runs it
    SamplingRecord rec;
    BatchStore store;
    const char *keep;
    SampleProgress pr;
} SampleCmd;

// The flags, checked alone. -1 (go on), or an exit status.
static int sample_flags(SampleCmd *t) {
    t->sampler = "ddpm";
    t->weights = "ema";
    t->cfg_channels = "all";
    t->cfg_interval = "none";
    t->go = gen_opts_default();
    t->batch = 16;
    t->strength = 0.75f;
    Opt opts[] = {
        {"--ckpt", OPT_STR, &t->ckpt, "FILE", "model file (.safetensors; default: the bundled Fashion-MNIST model)"},
        {"--weights", OPT_STR, &t->weights, "ema|online", "a training checkpoint's EMA or online weights (a PyTorch "
         "checkpoint's ema or model)"},
        {"--heads", OPT_INT, &t->heads, "N", "attention heads of a PyTorch .pt (default: its args, else DiT's preset)",
         ARG_MIN(1), ARG_MAX(1024)},
        {"--sampler", OPT_STR, &t->sampler, sampler_kind_list(), "sampler"},
        {"--steps", OPT_INT, &t->go.steps, "N", "sampling steps (respaced from 1000)", ARG_MIN(1), ARG_MAX(1000),
         ARG_ALIAS("--num-sampling-steps")},
        {"--eta", OPT_FLOAT, &t->go.eta, "E", "DDIM noise (0 = deterministic)", ARG_MIN(0), ARG_MAX(10)},
        {"--cfg-scale", OPT_FLOAT, &t->go.cfg_scale, "W", "classifier-free guidance scale (1 = none)", ARG_MIN(0),
         ARG_MAX(100)},
        {"--cfg-channels", OPT_STR, &t->cfg_channels, "N|all", "guide the first N eps channels (DiT: 3), the rest "
         "conditional; default all"},
        {"--cfg-interval", OPT_STR, &t->cfg_interval, "LO,HI|none", "guide only the steps whose sigma = sqrt(1/abar - 1) "
         "is in (LO, HI] (Kynkaanniemi et al. 2024), one pass elsewhere"},
        {"--clip", OPT_BOOL, &t->go.clip, "BOOL", "clip predicted x0 to [-1, 1]"},
        {"--class", OPT_STR, &t->cls, "K", "class name or number for every image"},
        {"--labels", OPT_STR, &t->labels, "L,L,...", "one label per image (names or numbers)"},
        {"--label-mode", OPT_STR, &t->label_mode, "balanced|random", "without --class/--labels: the classes in equal "
         "blocks (default), or uniform draws from --seed per image (DiT's sample_ddp.py)"},
        {"--n", OPT_INT, &t->n, "N", "images (default: 16 with --class, else 8 per class up to 16 classes, 64 above)",
         ARG_MIN(1)},
        {"--seed", OPT_U64, &t->seed, "S", "seed of the initial and per-step noise", ARG_ALIAS("--global-seed")},
        {"--batch", OPT_INT, &t->batch, "B", "images per forward pass", ARG_MIN(1), ARG_ALIAS("--per-proc-batch-size")},
        {"--out", OPT_STR, &t->out, "FILE.png", "write a grid"},
        {"--nrow", OPT_INT, &t->nrow, "N", "images per grid row (default 8)", ARG_MIN(0)},
        {"--out-dir", OPT_STR, &t->out_dir, "DIR", "write one PNG per image", ARG_ALIAS("--sample-dir")},
        {"--save-npz", OPT_STR, &t->npz, "FILE", "ADM evaluator batch: arr_0 uint8 NHWC, arr_1 labels"},
        {"--save-npy", OPT_STR, &t->npy, "FILE", "raw float32 NCHW samples in [-1, 1]"},
        OPT_FORCE(&t->force),
        {"--init-noise", OPT_STR, &t->init_noise, "FILE.npy", "start from this float32 NCHW noise"},
        {"--vae", OPT_STR, &t->vae, "FILE", "latent models: the VAE that decodes their samples (diffusers safetensors)"},
        {"--init-image", OPT_STR, &t->init_image, "FILE|DIR", "image-to-image: start from this image (every image) or "
         "from each image of DIR (one output each)"},
        {"--strength", OPT_FLOAT, &t->strength, "S", "image-to-image: noise the input to t = S T and take the last "
         "round(S steps) steps (default 0.75; 1 with --mask; 1 = plain generation)", ARG_MIN(0), ARG_MAX(1)},
        {"--mask", OPT_STR, &t->mask, "M.png", "inpainting (with --init-image): white = regenerate, black = keep"},
        {"--resample", OPT_INT, &t->resample, "R", "inpainting: RePaint jumps per step (ddpm, ddim)", ARG_MIN(0),
         ARG_MAX(100)},
        {"--blend", OPT_STR, &t->blend, "A,B,W", "class blend: every image's label embedding is (1-W) e_A + W e_B"},
        OPT_THREADS(&t->threads),
        OPT_DEVICE(&t->device),
        OPT_PRECISION(&t->precision),
    };
    refuse_model_flags(t->argc, t->argv);
    args_parse("usage: mala sample [flags]\n\nGenerates class-conditional images (an unconditional model's: no --class,\n"
               "no guidance). Without --out, --out-dir, --save-npz or --save-npy it writes samples.png.\n"
               "Existing files are not replaced without --force (which also clears an --out-dir of an\n"
               "earlier run's NNNNNN_<class>.png images). --init-image starts from images (image-to-image;\n"
               "with --mask, inpainting), --blend mixes two classes (docs/sample.md).\n"
               "With --save-npz, --save-npy or --out-dir every batch is kept in OUTPUT.partial as it is\n"
               "sampled: the same command run again continues (other settings are refused). FILE.json\n"
               "beside an .npz / .npy records how it was made (mala info FILE.npz prints it).",
               opts, sizeof opts / sizeof opts[0], t->argc, t->argv, 1);
    _Static_assert(sizeof opts <= sizeof t->opts, "SampleCmd's flag table is too small");
    memcpy(t->opts, opts, sizeof opts);
    t->nopts = sizeof opts / sizeof opts[0];
    if (sampler_kind_parse(t->sampler, &t->go.kind)) FATAL("--sampler %s: expected %s", t->sampler, sampler_kind_list());
    if (gen_cfg_channels_parse(t->cfg_channels, &t->go.cfg_channels))
        FATAL("--cfg-channels %s: expected all or a channel count 1..1024", t->cfg_channels);
    if (gen_cfg_interval_parse(t->cfg_interval, &t->go.cfg_lo, &t->go.cfg_hi))
        FATAL("--cfg-interval %s: expected LO,HI with 0 <= LO < HI (sigma), or none", t->cfg_interval);
    t->weights = weights_online("--weights", t->weights) ? "online" : "ema";  // "model" is DiT's "online"
    ckpt_torch_options(!strcmp(t->weights, "online"), t->heads);
    if (t->cls && t->labels) FATAL("--class and --labels exclude each other");
    t->lmode = LABELS_BALANCED;
    if (t->label_mode && (t->cls || t->labels)) FATAL("--label-mode and %s exclude each other", t->cls ? "--class" : "--labels");
    if (t->label_mode && label_mode_parse(t->label_mode, &t->lmode))
        FATAL("--label-mode %s: expected balanced or random", t->label_mode);
    if (!t->out && !t->out_dir && !t->npz && !t->npy) t->out = "samples.png";
    if (!t->init_image) {
        const char *needs = t->mask ? "--mask" : args_given(t->opts, t->nopts, &t->strength) ? "--strength"
                          : args_given(t->opts, t->nopts, &t->resample) ? "--resample" : NULL;
        if (needs) FATAL("%s: needs --init-image FILE|DIR (the image to start from)", needs);
    }
    if (args_given(t->opts, t->nopts, &t->resample) && !t->mask) FATAL("--resample: applies to inpainting (--mask) only");
    if (t->init_image && !(t->strength > 0.0f)) FATAL("--strength %g: must be in (0, 1]", (double)t->strength);
    if (t->mask && !args_given(t->opts, t->nopts, &t->strength)) t->strength = 1.0f;
    if (t->blend && (t->cls || t->labels)) FATAL("--blend sets every image's class; drop %s", t->cls ? "--class" : "--labels");
    sample_init_list(&t->si, t->init_image, t->mask);
    if (args_given(opts, sizeof opts / sizeof opts[0], &t->go.eta) && t->go.kind != SAMPLER_DDIM)
        FATAL("--eta: applies to --sampler ddim only (%s has no eta)", t->sampler);
    if (t->out && (strlen(t->out) < 4 || strcasecmp(t->out + strlen(t->out) - 4, ".png")))
        FATAL("--out %s: writes a PNG grid; give a file name ending in .png", t->out);
    return -1;
}

// The processes, the device and the model (its VAE attached), sized for the images asked for.
static void sample_open(SampleCmd *t) {
    set_threads(t->threads);
    // Under mpirun / srun the batches of --batch images go round-robin over the ranks, each
    // computed exactly as one process computes it (same images, same batch), then gathered:
    // rank 0 writes the same bytes one process writes.
    dist_init(&t->argc, &t->argv);
    t->rank = dist_rank();
    t->world = dist_world();
    t->lead = t->rank == 0;
    t->be = backend_select(t->device, t->precision);
    if (!t->ckpt) t->ckpt = default_model_path();
    peek_config(t->ckpt, &t->pc);
    if (gen_guidance_for(&t->pc, &t->go.cfg_scale, args_given(t->opts, t->nopts, &t->go.cfg_scale),
                         "--cfg-scale", &t->err))
        FATAL("%s: %s", t->ckpt, t->err.msg);
    if (t->pc.latent_scale > 0 && t->go.clip && args_given(t->opts, t->nopts, &t->go.clip))
        FATAL("--clip true: %s is a latent model, whose x0 (latents) is not bounded to [-1, 1] and is never clipped; "
              "drop --clip", t->ckpt);
    if (t->pc.num_classes == 0 && (t->cls || t->labels))
        FATAL("%s %s: %s is an unconditional model (num_classes 0): it samples without classes; drop %s",
              t->cls ? "--class" : "--labels", t->cls ? t->cls : t->labels, t->ckpt, t->cls ? "--class" : "--labels");
    t->per_image = (size_t)t->pc.in_channels * t->pc.image_size * t->pc.image_size;
    t->count = t->n;
    if (!t->count && t->labels) {
        t->count = 1;
        for (const char *p = t->labels; *p; p++) t->count += *p == ',';
    }
    if (t->si.npaths > 1 && t->count && t->count != t->si.npaths)
        FATAL("%s %d images: --init-image %s holds %d (one output each)", t->labels ? "--labels gives" : "--n asks for",
              t->count, t->init_image, t->si.npaths);
    if (t->si.npaths > 1) t->count = t->n = t->si.npaths;
    if (!t->count && t->si.npaths == 1) t->count = t->n = 1;  // one input image: one output unless --n says more
    if (!t->count) t->count = default_count(t->pc.num_classes, t->cls != NULL);
    args_check_memory("--n", t->count, (double)t->count * t->per_image * (sizeof(float) + 1), "the images");
    if (t->batch > t->count) t->batch = t->count;  // the generator is sized for the images asked for
    t->gen_bytes = gen_memory_bytes(&t->pc, t->be, t->batch, &t->gen_dev);
    args_check_memory("--batch", t->batch, t->gen_bytes - t->gen_dev, "the model's weights and activations (2 passes per image "
                      "with guidance)");

    if (generator_open(&t->g, t->ckpt, t->be, t->batch, &t->err)) FATAL("%s", t->err.msg);
    t->recorded = generator_recorded_vae(&t->g, t->ckpt, &t->vae, t->vae_buf, sizeof t->vae_buf, &t->err);
    if (t->recorded < 0) FATAL("%s", t->err.msg);
    if (t->recorded && t->lead) fprintf(stderr, "using the VAE recorded in %s: %s\n", t->ckpt, t->vae);
    if (generator_attach_vae(&t->g, t->vae, t->ckpt, &t->err)) FATAL("%s", t->err.msg);
    t->c = &t->g.net->cfg;
    t->K = t->c->num_classes;
    if ((t->out || t->out_dir) && generator_out_channels(&t->g) != 1 && generator_out_channels(&t->g) != 3)
        FATAL("%s: the model makes %d-channel images, which a PNG cannot hold; use --save-npy (or --save-npz)",
              t->out ? "--out" : "--out-dir", generator_out_channels(&t->g));
}

// Every image's label (--labels, --class, the classes in blocks, a blend) and its starting noise;
// the outputs checked and the input images read, before any work. -1, or the exit status.
static int sample_inputs(SampleCmd *t) {
    if (t->labels) {
        int got = parse_labels(t->labels, &t->g.classes, &t->y);
        if (t->n && t->n != got) FATAL("--n %d disagrees with the %d labels given", t->n, got);
        t->n = got;
    } else {
        int k = -1;
        if (t->cls && gen_prompt_class(&t->g.classes, t->cls, "--class", &k, &t->err)) {
            fprintf(stderr, "error: %s\n", t->err.msg);
            generator_close(&t->g);
            return 1;
        }
        if (!t->n) t->n = default_count(t->K, t->cls != NULL);
        t->y = xmalloc(t->n * sizeof(int32_t));
        for (int i = 0; i < t->n; i++) t->y[i] = k >= 0 ? k : (int32_t)((int64_t)i * t->K / t->n);
        if (t->lmode == LABELS_RANDOM) gen_labels(t->y, t->lmode, t->seed, 0, t->n, t->K);
    }
    if (t->blend) {
        if (!t->K) FATAL("--blend %s: %s is an unconditional model (num_classes 0)", t->blend, t->ckpt);
        sample_parse_blend(t->blend, &t->g.classes, &t->go);
        for (int i = 0; i < t->n; i++) t->y[i] = t->go.blend_a;  // the label embedding is the blend's
    }
    t->per = (size_t)t->c->in_channels * t->c->image_size * t->c->image_size;
    t->x = xmalloc(t->per * t->n * sizeof(float));
    if (t->init_noise) {
        NpyArray a;
        if (npy_load(t->init_noise, &a, &t->err)) FATAL("%s", t->err.msg);
        if (strcmp(a.dtype, "<f4") || a.ndim != 4 || a.shape[0] != t->n || a.shape[1] != t->c->in_channels ||
            a.shape[2] != t->c->image_size || a.shape[3] != t->c->image_size)
        {
            char shape[96] = "";
            for (int d = 0; d < a.ndim && d < 8; d++)
                snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "," : "", (long long)a.shape[d]);
            FATAL("%s: expected float32 [%d,%d,%d,%d] noise, got %s [%s]", t->init_noise, t->n, t->c->in_channels, t->c->image_size,
                  t->c->image_size, a.dtype, shape);
        }
        memcpy(t->x, a.data, t->per * t->n * sizeof(float));
        npy_free(&a);
    } else {
        generator_noise(&t->g, t->x, t->seed, 0, t->n);
    }
    // After every flag and input is validated (their errors say more than "exists") and before any
    // work: nothing is computed for an output that cannot be written.
    if (t->lead) {
        const char *const files[3][2] = {{"--out", t->out}, {"--save-npz", t->npz}, {"--save-npy", t->npy}};
        for (int i = 0; i < 3; i++)
            if (files[i][1]) out_check_file(files[i][0], files[i][1], t->force, NULL);
        if (t->out_dir) {
            int removed = out_check_dir("--out-dir", t->out_dir, t->force, is_sample_png);
            if (removed) fprintf(stderr, "--force: removed %d images of an earlier run from %s\n", removed, t->out_dir);
        }
    }
    sample_init_load(&t->si, &t->g, t->n, t->strength, t->resample);

    t->used = t->go;  // as the sampler runs it
    t->used.clip = t->go.clip && !(t->c->latent_scale > 0);
    t->rec = (SamplingRecord){t->ckpt, t->weights, t->c, &t->used, t->labels ? "list" : t->cls ? "class" : label_mode_name(t->lmode), t->y, t->n,
                          t->batch, t->seed, t->init_noise, t->be, t->g.vae ? t->vae : NULL};
    t->rec.init_image = t->init_image;
    t->rec.mask = t->mask;
    t->rec.strength = t->strength;
    t->rec.resample = t->resample;
    return -1;
}

// The batches, sharded over the processes (pipeline/generate_shard.h): this process's share
// sampled (or found in the partial run kept), and every image gathered on rank 0.
static void sample_run(SampleCmd *t) {
    // a long run's batches, kept beside the output that asks for all of them
    t->keep = t->npz ? t->npz : t->npy ? t->npy : t->out_dir;
    if (t->keep) open_store(&t->store, &t->rec, t->keep, t->npz ? "--save-npz" : t->npy ? "--save-npy" : "--out-dir", t->per, t->force);
    ShardedGen sg;
    sharded_gen_init(&sg, &t->g, &t->go, t->seed, t->n, t->batch);
    sg.given_y = t->y;
    sg.given_noise = t->x;  // read a round ahead of the images written over it
    sg.init = t->si.init ? &t->si.gi : NULL;
    sg.store = t->store.dir[0] ? &t->store : NULL;
    t->pr = (SampleProgress){.total_images = t->n, .t0 = now_seconds(), .sg = &sg};
    for (int b0 = 0; b0 < t->n; b0 += t->batch) {
        int nb = t->n - b0 < t->batch ? t->n - b0 : t->batch;
        t->pr.batches += (b0 / t->batch) % t->world == t->rank && !(sg.store && batch_store_has(sg.store, b0 / t->batch, nb));
    }
    if (t->lead) {
        sg.on_step = on_step;
        sg.step_ctx = &t->pr;
    }
    progress_init(&t->pr.pg, stderr);
    if (t->lead) {
        for (int i = 0, k; i < t->n; i += k)
            if ((k = sharded_gen_next(&sg, t->x + t->per * i, t->n - i, &t->err)) <= 0) FATAL("%s", t->err.msg);
    } else if (sharded_gen_serve(&sg, &t->err)) {
        FATAL("%s", t->err.msg);
    }
    progress_break(&t->pr.pg);
    sharded_gen_free(&sg);
    if (!t->lead) t->out = t->out_dir = t->npz = t->npy = NULL;  // rank 0 writes
}

// The outputs (rank 0): the images decoded batch by batch (a latent model's through its VAE), kept
// whole only for the grid and the .npy; PNG files with their parameters, the grid, .npz, .npy and
// how they were made.
static void sample_write(SampleCmd *t) {
    // the images: decoded batch by batch (a latent model's through its VAE), kept whole only
    // for the grid and the .npy
    t->oc = generator_out_channels(&t->g);
    t->os = generator_out_size(&t->g);
    t->oper = generator_out_floats(&t->g);
    if (t->out || t->npy) args_check_memory("--n", t->n, (double)t->n * t->oper * sizeof(float), "the decoded images");
    if (t->npz) args_check_memory("--n", t->n, (double)t->n * t->oper, "the .npz's uint8 images");
    t->img = t->out || t->npy ? xmalloc(t->oper * t->n * sizeof(float)) : NULL;
    t->chunk = t->img ? NULL : xmalloc(t->oper * t->batch * sizeof(float));
    t->u8 = t->npz ? xmalloc(t->oper * t->n) : NULL;
    progress_init(&t->pr.pg, stderr);
    for (int b0 = 0; (t->out || t->out_dir || t->npz || t->npy) && b0 < t->n; b0 += t->batch) {
        int nb = t->n - b0 < t->batch ? t->n - b0 : t->batch;
        float *dst = t->img ? t->img + t->oper * b0 : t->chunk;
        if (generator_decode(&t->g, t->x + t->per * b0, nb, dst, &t->err)) FATAL("%s", t->err.msg);
        if (t->g.vae) progress_update(&t->pr.pg, b0 + nb == t->n, "decoding images %d-%d of %d", b0 + 1, b0 + nb, t->n);
        for (int i = 0; t->out_dir && i < nb; i++) {
            char path[4096];
            const char *name = t->K ? t->g.classes.names[t->y[b0 + i]] : "uncond";
            if (t->si.npaths > 1) {  // --init-image DIR: the input's name without folder and extension, too
                const char *in = strrchr(t->si.paths[b0 + i], '/'), *dot = strrchr(in ? in + 1 : t->si.paths[b0 + i], '.');
                in = in ? in + 1 : t->si.paths[b0 + i];
                snprintf(path, sizeof path, "%s/%06d_%s_%.*s.png", t->out_dir, b0 + i, name, (int)(dot ? dot - in : 1000), in);
            } else {
                snprintf(path, sizeof path, "%s/%06d_%s.png", t->out_dir, b0 + i, name);
            }
            for (char *p = path + strlen(t->out_dir) + 1; *p; p++)
                if (*p == '/' || *p == ' ') *p = '_';
            char *params = png_params(&t->g, t->ckpt, t->vae, &t->used, t->y + b0 + i, 1, t->seed, b0 + i, &t->si);
            if (image_save_grid_text(path, dst + t->oper * i, 1, t->oc, t->os, t->os, 1, 0, GEN_PARAMS_KEYWORD, params, &t->err))
                FATAL("%s", t->err.msg);
            free(params);
        }
        if (t->u8) to_u8_nhwc(t->u8 + t->oper * b0, dst, nb, t->oc, t->os);
    }
    progress_break(&t->pr.pg);
    if (t->out) {
        char *params = png_params(&t->g, t->ckpt, t->vae, &t->used, t->y, t->n, t->seed, 0, &t->si);
        if (image_save_grid_text(t->out, t->img, t->n, t->oc, t->os, t->os, t->nrow > 0 ? t->nrow : 8, 2, GEN_PARAMS_KEYWORD, params, &t->err))
            FATAL("%s", t->err.msg);
        free(params);
        fprintf(stderr, "wrote %s (%d images)\n", t->out, t->n);
    }
    if (t->out_dir) fprintf(stderr, "wrote %d PNGs to %s\n", t->n, t->out_dir);
    if (t->npz) {
        int64_t *lab = xmalloc(t->n * sizeof(int64_t));
        for (int i = 0; i < t->n; i++) lab[i] = t->y[i];
        NpyArray arr[2];
        npy_wrap(&arr[0], "|u1", t->u8, 4, (int64_t[]){t->n, t->os, t->os, t->oc});
        npy_wrap(&arr[1], "<i8", lab, 1, (int64_t[]){t->n});
        const char *keys[2] = {"arr_0", "arr_1"};
        if (npz_save(t->npz, keys, arr, 2, &t->err)) FATAL("%s", t->err.msg);
        fprintf(stderr, "wrote %s (arr_0 uint8 [%d,%d,%d,%d], arr_1 labels)\n", t->npz, t->n, t->os, t->os, t->oc);
        free(lab);
    }
    if (t->npy) {
        NpyArray a;
        npy_wrap(&a, "<f4", t->img, 4, (int64_t[]){t->n, t->oc, t->os, t->os});
        if (npy_save(t->npy, &a, &t->err)) FATAL("%s", t->err.msg);
        fprintf(stderr, "wrote %s\n", t->npy);
    }
    if (t->lead && (t->npz || t->npy)) {  // how they were made, beside them
        Manifest *m = xcalloc(1, sizeof *m);
        manifest_str(m, "cmd", "mala sample");
        manifest_add_sampling(m, &t->rec);
        manifest_lit(m, "batch", "%d", t->batch);
        if (t->npz) manifest_write_beside(m, t->npz);
        if (t->npy) manifest_write_beside(m, t->npy);
        free(m);
    }
    if (t->lead) batch_store_finish(&t->store);
}

int cmd_sample(int argc, char **argv) {
    SampleCmd *t = xcalloc(1, sizeof *t);
    t->argc = argc;
    t->argv = argv;
    int rc = sample_flags(t);
    if (rc < 0) {
        sample_open(t);
        rc = sample_inputs(t);
    }
    if (rc >= 0) {
        free(t);
        return rc;
    }
    sample_run(t);
    sample_write(t);
    free(t->img);
    free(t->chunk);
    free(t->u8);
    free(t->x);
    free(t->y);
    sample_init_free(&t->si);
    generator_close(&t->g);
    dist_finalize();
    free(t);
    return 0;
}

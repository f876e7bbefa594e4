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
#include "model/torch_load.h"  // defines: torch_file_sniff
#include "formats/image_io.h"
#include "formats/npy.h"
#include "cli/out_paths.h"
#include "core/progress.h"
#include "cpu/cpu_threads.h"
#include "pipeline/gen_params.h"
#include "pipeline/batch_store.h"
#include "pipeline/labels.h"
#include "cli/run_manifest.h"
#include "cli/sample_init.h"

typedef struct {
    Progress pg;
    double t0;                     // when sampling began
    int done_images, batch_end, total_images;
    int batches_done, batches;     // this process's batches: finished, and in all
} SampleProgress;

// The ETA covers the whole job: every step of every batch this process samples.
static int on_step(void *ctx, int i, int n, const float *x0) {
    SampleProgress *p = ctx;
    double dt = now_seconds() - p->t0;
    long long done = (long long)p->batches_done * n + i + 1, total = (long long)p->batches * n;
    char eta[32];
    progress_format_eta(eta, sizeof eta, (double)(total - done) * dt / (double)done);
    progress_update(&p->pg, done == total, "sampling images %d-%d of %d: batch %d/%d, step %d/%d, %.2f steps/s, ETA %s",
                    p->done_images + 1, p->batch_end, p->total_images, p->batches_done + 1, p->batches, i + 1, n,
                    done / dt, eta);
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

// --weights online: the training checkpoint's online weights in place of the EMA ones.
static void use_online_weights(Generator *g, const char *path) {
    MalaErr err;
    StFile f;
    if (st_open(&f, path, &err)) FATAL("%s", err.msg);
    if (!ckpt_has_ema(g->net, &f))
        FATAL("--weights online: %s holds one set of weights (a model file, EMA when exported); the online weights "
              "are in training checkpoints (runs/NAME/checkpoints/)", path);
    if (ckpt_load_tensors(g->net, &f, "", g->net->w, &err)) FATAL("%s", err.msg);
    st_close(&f);
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

int cmd_sample(int argc, char **argv) {
    const char *ckpt = NULL, *sampler = "ddpm", *cls = NULL, *labels = NULL, *out = NULL, *out_dir = NULL;
    const char *npz = NULL, *npy = NULL, *init_noise = NULL, *device = NULL, *precision = NULL, *weights = "ema";
    const char *vae = NULL, *cfg_channels = "all", *label_mode = NULL, *cfg_interval = "none";
    const char *init_image = NULL, *mask = NULL, *blend = NULL;
    GenOpts go = gen_opts_default();
    int n = 0, batch = 16, threads = 0, nrow = 0, force = 0, resample = 0, heads = 0;
    float strength = 0.75f;
    uint64_t seed = 0;
    Opt opts[] = {
        {"--ckpt", OPT_STR, &ckpt, "FILE", "model file (.safetensors; default: the bundled Fashion-MNIST model)"},
        {"--weights", OPT_STR, &weights, "ema|online", "a training checkpoint's EMA or online weights (a PyTorch "
         "checkpoint's ema or model)"},
        {"--heads", OPT_INT, &heads, "N", "attention heads of a PyTorch .pt (default: its args, else DiT's preset)",
         ARG_MIN(1), ARG_MAX(1024)},
        {"--sampler", OPT_STR, &sampler, sampler_kind_list(), "sampler"},
        {"--steps", OPT_INT, &go.steps, "N", "sampling steps (respaced from 1000)", ARG_MIN(1), ARG_MAX(1000),
         ARG_ALIAS("--num-sampling-steps")},
        {"--eta", OPT_FLOAT, &go.eta, "E", "DDIM noise (0 = deterministic)", ARG_MIN(0), ARG_MAX(10)},
        {"--cfg-scale", OPT_FLOAT, &go.cfg_scale, "W", "classifier-free guidance scale (1 = none)", ARG_MIN(0),
         ARG_MAX(100)},
        {"--cfg-channels", OPT_STR, &cfg_channels, "N|all", "guide the first N eps channels (DiT: 3), the rest "
         "conditional; default all"},
        {"--cfg-interval", OPT_STR, &cfg_interval, "LO,HI|none", "guide only the steps whose sigma = sqrt(1/abar - 1) "
         "is in (LO, HI] (Kynkaanniemi et al. 2024), one pass elsewhere"},
        {"--clip", OPT_BOOL, &go.clip, "BOOL", "clip predicted x0 to [-1, 1]"},
        {"--class", OPT_STR, &cls, "K", "class name or number for every image"},
        {"--labels", OPT_STR, &labels, "L,L,...", "one label per image (names or numbers)"},
        {"--label-mode", OPT_STR, &label_mode, "balanced|random", "without --class/--labels: the classes in equal "
         "blocks (default), or uniform draws from --seed per image (DiT's sample_ddp.py)"},
        {"--n", OPT_INT, &n, "N", "images (default: 16 with --class, else 8 per class up to 16 classes, 64 above)",
         ARG_MIN(1)},
        {"--seed", OPT_U64, &seed, "S", "seed of the initial and per-step noise", ARG_ALIAS("--global-seed")},
        {"--batch", OPT_INT, &batch, "B", "images per forward pass", ARG_MIN(1), ARG_ALIAS("--per-proc-batch-size")},
        {"--out", OPT_STR, &out, "FILE.png", "write a grid"},
        {"--nrow", OPT_INT, &nrow, "N", "images per grid row (default 8)", ARG_MIN(0)},
        {"--out-dir", OPT_STR, &out_dir, "DIR", "write one PNG per image", ARG_ALIAS("--sample-dir")},
        {"--save-npz", OPT_STR, &npz, "FILE", "ADM evaluator batch: arr_0 uint8 NHWC, arr_1 labels"},
        {"--save-npy", OPT_STR, &npy, "FILE", "raw float32 NCHW samples in [-1, 1]"},
        OPT_FORCE(&force),
        {"--init-noise", OPT_STR, &init_noise, "FILE.npy", "start from this float32 NCHW noise"},
        {"--vae", OPT_STR, &vae, "FILE", "latent models: the VAE that decodes their samples (diffusers safetensors)"},
        {"--init-image", OPT_STR, &init_image, "FILE|DIR", "image-to-image: start from this image (every image) or "
         "from each image of DIR (one output each)"},
        {"--strength", OPT_FLOAT, &strength, "S", "image-to-image: noise the input to t = S T and take the last "
         "round(S steps) steps (default 0.75; 1 with --mask; 1 = plain generation)", ARG_MIN(0), ARG_MAX(1)},
        {"--mask", OPT_STR, &mask, "M.png", "inpainting (with --init-image): white = regenerate, black = keep"},
        {"--resample", OPT_INT, &resample, "R", "inpainting: RePaint jumps per step (ddpm, ddim)", ARG_MIN(0),
         ARG_MAX(100)},
        {"--blend", OPT_STR, &blend, "A,B,W", "class blend: every image's label embedding is (1-W) e_A + W e_B"},
        OPT_THREADS(&threads),
        OPT_DEVICE(&device),
        OPT_PRECISION(&precision),
    };
    refuse_model_flags(argc, argv);
    args_parse("usage: mala sample [flags]\n\nGenerates class-conditional images (an unconditional model's: no --class,\n"
               "no guidance). Without --out, --out-dir, --save-npz or --save-npy it writes samples.png.\n"
               "Existing files are not replaced without --force (which also clears an --out-dir of an\n"
               "earlier run's NNNNNN_<class>.png images). --init-image starts from images (image-to-image;\n"
               "with --mask, inpainting), --blend mixes two classes (docs/sample.md).\n"
               "With --save-npz, --save-npy or --out-dir every batch is kept in OUTPUT.partial as it is\n"
               "sampled: the same command run again continues (other settings are refused). FILE.json\n"
               "beside an .npz / .npy records how it was made (mala info FILE.npz prints it).",
               opts, sizeof opts / sizeof opts[0], argc, argv, 1);
    if (sampler_kind_parse(sampler, &go.kind)) FATAL("--sampler %s: expected %s", sampler, sampler_kind_list());
    if (gen_cfg_channels_parse(cfg_channels, &go.cfg_channels))
        FATAL("--cfg-channels %s: expected all or a channel count 1..1024", cfg_channels);
    if (gen_cfg_interval_parse(cfg_interval, &go.cfg_lo, &go.cfg_hi))
        FATAL("--cfg-interval %s: expected LO,HI with 0 <= LO < HI (sigma), or none", cfg_interval);
    weights = weights_online("--weights", weights) ? "online" : "ema";  // "model" is DiT's "online"
    ckpt_torch_options(!strcmp(weights, "online"), heads);
    if (cls && labels) FATAL("--class and --labels exclude each other");
    LabelMode lmode = LABELS_BALANCED;
    if (label_mode && (cls || labels)) FATAL("--label-mode and %s exclude each other", cls ? "--class" : "--labels");
    if (label_mode && label_mode_parse(label_mode, &lmode))
        FATAL("--label-mode %s: expected balanced or random", label_mode);
    if (!out && !out_dir && !npz && !npy) out = "samples.png";
    const int nopts = sizeof opts / sizeof opts[0];
    if (!init_image) {
        const char *needs = mask ? "--mask" : args_given(opts, nopts, &strength) ? "--strength"
                          : args_given(opts, nopts, &resample) ? "--resample" : NULL;
        if (needs) FATAL("%s: needs --init-image FILE|DIR (the image to start from)", needs);
    }
    if (args_given(opts, nopts, &resample) && !mask) FATAL("--resample: applies to inpainting (--mask) only");
    if (init_image && !(strength > 0.0f)) FATAL("--strength %g: must be in (0, 1]", (double)strength);
    if (mask && !args_given(opts, nopts, &strength)) strength = 1.0f;
    if (blend && (cls || labels)) FATAL("--blend sets every image's class; drop %s", cls ? "--class" : "--labels");
    SampleInit si;
    sample_init_list(&si, init_image, mask);
    if (args_given(opts, sizeof opts / sizeof opts[0], &go.eta) && go.kind != SAMPLER_DDIM)
        FATAL("--eta: applies to --sampler ddim only (%s has no eta)", sampler);
    if (out && (strlen(out) < 4 || strcasecmp(out + strlen(out) - 4, ".png")))
        FATAL("--out %s: writes a PNG grid; give a file name ending in .png", out);
    set_threads(threads);
    // Under mpirun / srun the batches of --batch images go round-robin over the ranks, each
    // computed exactly as one process computes it (same images, same batch), then gathered:
    // rank 0 writes the same bytes one process writes.
    dist_init(&argc, &argv);
    const int rank = dist_rank(), world = dist_world(), lead = rank == 0;
    const Backend *be = backend_select(device, precision);
    if (!ckpt) ckpt = default_model_path();
    NetConfig pc;
    peek_config(ckpt, &pc);
    MalaErr err;
    if (gen_guidance_for(&pc, &go.cfg_scale, args_given(opts, sizeof opts / sizeof opts[0], &go.cfg_scale),
                         "--cfg-scale", &err))
        FATAL("%s: %s", ckpt, err.msg);
    if (pc.latent_scale > 0 && go.clip && args_given(opts, sizeof opts / sizeof opts[0], &go.clip))
        FATAL("--clip true: %s is a latent model, whose x0 (latents) is not bounded to [-1, 1] and is never clipped; "
              "drop --clip", ckpt);
    if (pc.num_classes == 0 && (cls || labels))
        FATAL("%s %s: %s is an unconditional model (num_classes 0): it samples without classes; drop %s",
              cls ? "--class" : "--labels", cls ? cls : labels, ckpt, cls ? "--class" : "--labels");
    size_t per_image = (size_t)pc.in_channels * pc.image_size * pc.image_size;
    int count = n;
    if (!count && labels) {
        count = 1;
        for (const char *p = labels; *p; p++) count += *p == ',';
    }
    if (si.npaths > 1 && count && count != si.npaths)
        FATAL("%s %d images: --init-image %s holds %d (one output each)", labels ? "--labels gives" : "--n asks for",
              count, init_image, si.npaths);
    if (si.npaths > 1) count = n = si.npaths;
    if (!count && si.npaths == 1) count = n = 1;  // one input image: one output unless --n says more
    if (!count) count = default_count(pc.num_classes, cls != NULL);
    args_check_memory("--n", count, (double)count * per_image * (sizeof(float) + 1), "the images");
    if (batch > count) batch = count;  // the generator is sized for the images asked for
    double gen_dev, gen_bytes = gen_memory_bytes(&pc, be, batch, &gen_dev);
    args_check_memory("--batch", batch, gen_bytes - gen_dev, "the model's weights and activations (2 passes per image "
                      "with guidance)");

    Generator g;
    if (generator_open(&g, ckpt, be, batch, &err)) FATAL("%s", err.msg);
    if (!strcmp(weights, "online") && !torch_file_sniff(ckpt)) use_online_weights(&g, ckpt);  // .pt: chosen on load
    char vae_buf[4200];
    int recorded = generator_recorded_vae(&g, ckpt, &vae, vae_buf, sizeof vae_buf, &err);
    if (recorded < 0) FATAL("%s", err.msg);
    if (recorded && lead) fprintf(stderr, "using the VAE recorded in %s: %s\n", ckpt, vae);
    if (generator_attach_vae(&g, vae, ckpt, &err)) FATAL("%s", err.msg);
    const NetConfig *c = &g.net->cfg;
    int K = c->num_classes;
    if ((out || out_dir) && generator_out_channels(&g) != 1 && generator_out_channels(&g) != 3)
        FATAL("%s: the model makes %d-channel images, which a PNG cannot hold; use --save-npy (or --save-npz)",
              out ? "--out" : "--out-dir", generator_out_channels(&g));
    int32_t *y = NULL;
    if (labels) {
        int got = parse_labels(labels, &g.classes, &y);
        if (n && n != got) FATAL("--n %d disagrees with the %d labels given", n, got);
        n = got;
    } else {
        int k = -1;
        if (cls && gen_prompt_class(&g.classes, cls, "--class", &k, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            generator_close(&g);
            return 1;
        }
        if (!n) n = default_count(K, cls != NULL);
        y = xmalloc(n * sizeof(int32_t));
        for (int i = 0; i < n; i++) y[i] = k >= 0 ? k : (int32_t)((int64_t)i * K / n);
        if (lmode == LABELS_RANDOM) gen_labels(y, lmode, seed, 0, n, K);
    }
    if (blend) {
        if (!K) FATAL("--blend %s: %s is an unconditional model (num_classes 0)", blend, ckpt);
        sample_parse_blend(blend, &g.classes, &go);
        for (int i = 0; i < n; i++) y[i] = go.blend_a;  // the label embedding is the blend's
    }
    size_t per = (size_t)c->in_channels * c->image_size * c->image_size;
    float *x = xmalloc(per * n * sizeof(float));
    if (init_noise) {
        NpyArray a;
        if (npy_load(init_noise, &a, &err)) FATAL("%s", err.msg);
        if (strcmp(a.dtype, "<f4") || a.ndim != 4 || a.shape[0] != n || a.shape[1] != c->in_channels ||
            a.shape[2] != c->image_size || a.shape[3] != c->image_size)
        {
            char shape[96] = "";
            for (int d = 0; d < a.ndim && d < 8; d++)
                snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "," : "", (long long)a.shape[d]);
            FATAL("%s: expected float32 [%d,%d,%d,%d] noise, got %s [%s]", init_noise, n, c->in_channels, c->image_size,
                  c->image_size, a.dtype, shape);
        }
        memcpy(x, a.data, per * n * sizeof(float));
        npy_free(&a);
    } else {
        generator_noise(&g, x, seed, 0, n);
    }
    // After every flag and input is validated (their errors say more than "exists") and before any
    // work: nothing is computed for an output that cannot be written.
    if (lead) {
        const char *const files[3][2] = {{"--out", out}, {"--save-npz", npz}, {"--save-npy", npy}};
        for (int i = 0; i < 3; i++)
            if (files[i][1]) out_check_file(files[i][0], files[i][1], force, NULL);
        if (out_dir) {
            int removed = out_check_dir("--out-dir", out_dir, force, is_sample_png);
            if (removed) fprintf(stderr, "--force: removed %d images of an earlier run from %s\n", removed, out_dir);
        }
    }
    sample_init_load(&si, &g, n, strength, resample);

    GenOpts used = go;  // as the sampler runs it
    used.clip = go.clip && !(c->latent_scale > 0);
    SamplingRecord rec = {ckpt, weights, c, &used, labels ? "list" : cls ? "class" : label_mode_name(lmode), y, n,
                          batch, seed, init_noise, be, g.vae ? vae : NULL};
    rec.init_image = init_image;
    rec.mask = mask;
    rec.strength = strength;
    rec.resample = resample;
    BatchStore store = {0};  // a long run's batches, kept beside the output that asks for all of them
    const char *keep = npz ? npz : npy ? npy : out_dir;
    if (keep) open_store(&store, &rec, keep, npz ? "--save-npz" : npy ? "--save-npy" : "--out-dir", per, force);
    int *done = xcalloc((size_t)(n + batch - 1) / batch, sizeof *done);
    SampleProgress pr = {.total_images = n, .t0 = now_seconds()};
    for (int b0 = 0; b0 < n; b0 += batch) {
        int mine = (b0 / batch) % world == rank, nb = n - b0 < batch ? n - b0 : batch;
        done[b0 / batch] = mine && store.kept && batch_store_load(&store, b0 / batch, x + per * b0, nb);
        pr.batches += mine && !done[b0 / batch];
    }
    progress_init(&pr.pg, stderr);
    for (int b0 = 0; b0 < n; b0 += batch) {
        if ((b0 / batch) % world != rank || done[b0 / batch]) continue;
        int nb = n - b0 < batch ? n - b0 : batch;
        pr.done_images = b0;
        pr.batch_end = b0 + nb;
        GenInit gi = si.gi;  // this batch's inputs
        if (si.init) gi.image += per * b0;
        if (gi.mask) gi.mask += (size_t)c->image_size * c->image_size * b0;
        if (generator_run_init(&g, &go, si.init ? &gi : NULL, x + per * b0, y + b0, nb, seed, b0,
                               lead ? on_step : NULL, &pr, &err))
            FATAL("%s", err.msg);
        if (store.dir[0]) batch_store_save(&store, b0 / batch, x + per * b0, nb);
        pr.batches_done++;
    }
    progress_break(&pr.pg);
    free(done);
    for (int b0 = 0; world > 1 && b0 < n; b0 += batch) {  // every batch from the rank that made it
        int nb = n - b0 < batch ? n - b0 : batch;
        dist_bcast(x + per * b0, (size_t)nb * per * sizeof(float), (b0 / batch) % world);
    }
    if (!lead) out = out_dir = npz = npy = NULL;  // rank 0 writes

    // the images: decoded batch by batch (a latent model's through its VAE), kept whole only
    // for the grid and the .npy
    const int oc = generator_out_channels(&g), os = generator_out_size(&g);
    const size_t oper = generator_out_floats(&g);
    if (out || npy) args_check_memory("--n", n, (double)n * oper * sizeof(float), "the decoded images");
    if (npz) args_check_memory("--n", n, (double)n * oper, "the .npz's uint8 images");
    float *img = out || npy ? xmalloc(oper * n * sizeof(float)) : NULL;
    float *chunk = img ? NULL : xmalloc(oper * batch * sizeof(float));
    uint8_t *u8 = npz ? xmalloc(oper * n) : NULL;
    progress_init(&pr.pg, stderr);
    for (int b0 = 0; (out || out_dir || npz || npy) && b0 < n; b0 += batch) {
        int nb = n - b0 < batch ? n - b0 : batch;
        float *dst = img ? img + oper * b0 : chunk;
        if (generator_decode(&g, x + per * b0, nb, dst, &err)) FATAL("%s", err.msg);
        if (g.vae) progress_update(&pr.pg, b0 + nb == n, "decoding images %d-%d of %d", b0 + 1, b0 + nb, n);
        for (int i = 0; out_dir && i < nb; i++) {
            char path[4096];
            const char *name = K ? g.classes.names[y[b0 + i]] : "uncond";
            if (si.npaths > 1) {  // --init-image DIR: the input's name without folder and extension, too
                const char *in = strrchr(si.paths[b0 + i], '/'), *dot = strrchr(in ? in + 1 : si.paths[b0 + i], '.');
                in = in ? in + 1 : si.paths[b0 + i];
                snprintf(path, sizeof path, "%s/%06d_%s_%.*s.png", out_dir, b0 + i, name, (int)(dot ? dot - in : 1000), in);
            } else {
                snprintf(path, sizeof path, "%s/%06d_%s.png", out_dir, b0 + i, name);
            }
            for (char *p = path + strlen(out_dir) + 1; *p; p++)
                if (*p == '/' || *p == ' ') *p = '_';
            char *params = png_params(&g, ckpt, vae, &used, y + b0 + i, 1, seed, b0 + i, &si);
            if (image_save_grid_text(path, dst + oper * i, 1, oc, os, os, 1, 0, GEN_PARAMS_KEYWORD, params, &err))
                FATAL("%s", err.msg);
            free(params);
        }
        if (u8) to_u8_nhwc(u8 + oper * b0, dst, nb, oc, os);
    }
    progress_break(&pr.pg);
    if (out) {
        char *params = png_params(&g, ckpt, vae, &used, y, n, seed, 0, &si);
        if (image_save_grid_text(out, img, n, oc, os, os, nrow > 0 ? nrow : 8, 2, GEN_PARAMS_KEYWORD, params, &err))
            FATAL("%s", err.msg);
        free(params);
        fprintf(stderr, "wrote %s (%d images)\n", out, n);
    }
    if (out_dir) fprintf(stderr, "wrote %d PNGs to %s\n", n, out_dir);
    if (npz) {
        int64_t *lab = xmalloc(n * sizeof(int64_t));
        for (int i = 0; i < n; i++) lab[i] = y[i];
        NpyArray arr[2];
        npy_wrap(&arr[0], "|u1", u8, 4, (int64_t[]){n, os, os, oc});
        npy_wrap(&arr[1], "<i8", lab, 1, (int64_t[]){n});
        const char *keys[2] = {"arr_0", "arr_1"};
        if (npz_save(npz, keys, arr, 2, &err)) FATAL("%s", err.msg);
        fprintf(stderr, "wrote %s (arr_0 uint8 [%d,%d,%d,%d], arr_1 labels)\n", npz, n, os, os, oc);
        free(lab);
    }
    if (npy) {
        NpyArray a;
        npy_wrap(&a, "<f4", img, 4, (int64_t[]){n, oc, os, os});
        if (npy_save(npy, &a, &err)) FATAL("%s", err.msg);
        fprintf(stderr, "wrote %s\n", npy);
    }
    if (lead && (npz || npy)) {  // how they were made, beside them
        Manifest *m = xcalloc(1, sizeof *m);
        manifest_str(m, "cmd", "mala sample");
        manifest_add_sampling(m, &rec);
        manifest_lit(m, "batch", "%d", batch);
        if (npz) manifest_write_beside(m, npz);
        if (npy) manifest_write_beside(m, npy);
        free(m);
    }
    if (lead) batch_store_finish(&store);
    free(img);
    free(chunk);
    free(u8);
    free(x);
    free(y);
    sample_init_free(&si);
    generator_close(&g);
    dist_finalize();
    return 0;
}

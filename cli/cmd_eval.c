// defines: cmd_eval, cmd_bench_inception
// `mala eval stats|fid|is` and `mala bench inception`: image batches (ADM .npz or a folder) through
// the FID Inception, then statistics, FID and IS. Results: one JSON line on stdout; progress and a
// readable summary on stderr.

#include <dirent.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/suggest.h"
#include "core/bench_stats.h"
#include "cli/commands.h"   // defines: args_parse, set_threads, cmd_eval
#include "core/progress.h"   // defines: Progress
#include "core/backend.h"    // defines: backend_select
#include "eval/fid.h"
#include "eval/eval_metrics.h"  // defines: FeatRows, json_pr_kid
#include "eval/fmnist_features.h"
#include "data/dataset.h"       // defines: Dataset (eval stats --data fashion-mnist)
#include "core/dist.h"       // defines: dist_init (eval fid|is --ckpt under mpirun)
#include "pipeline/generate.h"   // defines: Generator (eval fid --ckpt samples on the fly)
#include "pipeline/generate_shard.h"  // defines: ShardedGen (--ckpt: the batches sharded over the processes)
#include "formats/image_io.h"   // defines: image_load
#include "eval/inception.h"
#include "eval/eval_pass.h"  // defines: Extractor, eval_stats_of_path
#include "formats/json.h"       // defines: JsonBuf, json_write_line, json_printf_line
#include "formats/npy.h"
#include "cli/out_paths.h"  // defines: out_check_file, OPT_FORCE
#include "cpu/cpu_threads.h"
#include "cli/run_manifest.h"  // defines: SamplingRecord, manifest_partial_settings

#define DEFAULT_SPLITS 10

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------
typedef struct {
    const char *data, *out, *samples, *ref, *inception, *save_stats, *features, *classifier;
    int batch, threads, splits, limit, quick, force;
    SampleSpec gen;                      // used when gen.ckpt is set
    const char *sampler;
    const char *preset;                  // --ckpt: "dit" (sample_ddp.py's), "quick" or "custom"
    const char *cfg_channels;            // --cfg-channels as given, or NULL: the preset's
    const char *label_mode;              // --label-mode as given, or NULL: the preset's
    const char *partial;                 // --partial DIR: where the sampled batches are kept
    const char *cfg_interval;            // --cfg-interval LO,HI|none (NULL: none)
    const char *weights;                 // --ckpt of a training checkpoint: "ema" or "online"
    BatchStore store;                    // --ckpt: its folder (dir "" when none)
    int model_c;                         // --ckpt: the model's eps channels
    NetConfig model_cfg;                 // --ckpt: its configuration
} EvalArgs;

static const SampleSpec *sample_spec(const EvalArgs *a) { return a->gen.ckpt ? &a->gen : NULL; }
static const char *samples_name(const EvalArgs *a) { return a->gen.ckpt ? a->gen.ckpt : a->samples; }

static void json_str_field(JsonBuf *b, const char *key, const char *v) {
    json_buf_printf(b, ",\"%s\":", key);
    json_buf_string(b, v ? v : "", strlen(v ? v : ""));
}

// Prints the result line (formats/json.h: never with inf or nan in it); 1 when it cannot.
static int print_result(JsonBuf *b) {
    MalaErr err;
    int rc = json_write_line(stdout, b->buf, &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);
    json_buf_free(b);
    return rc ? 1 : 0;
}

// --ckpt: how the images were sampled, as JSON fields (the preset names DiT's FID-50K settings).
static void json_sampling_fields(JsonBuf *b, const EvalArgs *a) {
    if (!a->gen.ckpt) return;
    const GenOpts *o = &a->gen.opts;
    json_str_field(b, "preset", a->preset);
    json_str_field(b, "sampler", sampler_kind_name(o->kind));
    json_buf_printf(b, ",\"steps\":%d,\"cfg_scale\":%g,\"eta\":%g,\"clip\":%s,\"num\":%d", o->steps, o->cfg_scale,
                    o->eta, o->clip ? "true" : "false", a->gen.num);
    char ch[16];
    json_str_field(b, "cfg_channels", gen_cfg_channels_str(o->cfg_channels, a->model_c, ch, sizeof ch));
    json_str_field(b, "label_mode", label_mode_name(a->gen.labels));
    char iv[64];
    json_str_field(b, "cfg_interval", gen_cfg_interval_str(o, iv, sizeof iv));
}

// --ckpt's model configuration (its file's metadata); 1 after printing the error.
static int peek_model(const char *path, NetConfig *c) {
    MalaErr err;
    ClassNames cn;
    if (ckpt_file_config(path, c, &cn, &err)) {  // safetensors or a PyTorch .pt
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    class_names_free(&cn);
    return 0;
}

// The guided channels: --cfg-channels, else the preset's: DiT's 3 on a 4-channel latent model (its
// forward_with_cfg), all for --quick and every other model. 2 after printing the error.
static int resolve_cfg_channels(EvalArgs *a, const NetConfig *c) {
    a->model_c = c->in_channels;
    if (a->cfg_channels) {
        if (!gen_cfg_channels_parse(a->cfg_channels, &a->gen.opts.cfg_channels)) return 0;
        fprintf(stderr, "error: --cfg-channels %s: expected all or a channel count 1..1024\n", a->cfg_channels);
        return 2;
    }
    a->gen.opts.cfg_channels = !a->quick && c->in_channels == 4 && c->latent_scale > 0 ? 3 : 0;
    return 0;
}

// The labels: --label-mode, else the preset's (DiT's uniform random draws; --quick: balanced). 2
// after printing the error.
static int resolve_label_mode(EvalArgs *a) {
    a->gen.labels = a->quick ? LABELS_BALANCED : LABELS_RANDOM;
    if (!a->label_mode || !label_mode_parse(a->label_mode, &a->gen.labels)) return 0;
    fprintf(stderr, "error: --label-mode %s: expected balanced or random\n", a->label_mode);
    return 2;
}

// "inception":PATH or "classifier":PATH, and "features":NAME.
static void json_net_fields(JsonBuf *b, const Extractor *m) {
    json_str_field(b, "features", m->name);
    json_str_field(b, m->fm ? "classifier" : "inception", m->path);
}

// ---- manifests: how a result was made, in the JSON line and beside stats files ----
static int eval_total(const EvalArgs *a);
static int eval_shard_batch(const EvalArgs *a);

// features, features_file and the SHA-256 of the weights (when they are a file).
static void manifest_features(Manifest *mf, const Extractor *m) {
    manifest_str(mf, "features", "%s", m->name);
    manifest_str(mf, "features_file", "%s", m->path);
    if (is_regular_file(m->path)) manifest_add_file_hash(mf, "features_sha256", m->path);
}

// How the images were made: --ckpt's sampling (all: every member; else only what
// json_sampling_fields leaves out), or the samples file's hash; then the device and version.
static void manifest_images(Manifest *mf, const EvalArgs *a, int all) {
    const Backend *be = backend_select(a->gen.device, a->gen.precision);
    if (!a->gen.ckpt) {
        if (a->samples && is_regular_file(a->samples)) manifest_add_file_hash(mf, "samples_sha256", a->samples);
        manifest_add_runtime(mf, be);
        return;
    }
    GenOpts used = a->gen.opts;  // as the sampler ran it
    used.clip = used.clip && !(a->model_cfg.latent_scale > 0);
    SamplingRecord rec = {a->gen.ckpt, a->weights, &a->model_cfg, &used, label_mode_name(a->gen.labels), NULL,
                          eval_total(a), eval_shard_batch(a), a->gen.seed, NULL, be, a->gen.vae};
    if (all) {
        manifest_add_sampling(mf, &rec);
        manifest_lit(mf, "batch", "%d", rec.batch);
        return;
    }
    manifest_add_model(mf, &rec);
    manifest_remove(mf, "model");  // the line's "samples"
    manifest_lit(mf, "seed", "%llu", (unsigned long long)a->gen.seed);
    manifest_lit(mf, "batch", "%d", rec.batch);
    manifest_add_runtime(mf, be);
}

// The JSON line's manifest members: the images', the feature weights' and the reference's hashes.
static void json_manifest_fields(JsonBuf *b, const EvalArgs *a, const Extractor *m, const char *ref) {
    Manifest *mf = xcalloc(1, sizeof *mf);
    manifest_images(mf, a, 0);
    if (is_regular_file(m->path)) manifest_add_file_hash(mf, "features_sha256", m->path);
    if (ref && is_regular_file(ref)) manifest_add_file_hash(mf, "ref_sha256", ref);
    manifest_members(mf, b);
    free(mf);
}

// FILE.json beside a statistics file: the command, the images (data: a dataset, file or folder,
// when not sampled), the feature network and N.
static void write_stats_manifest(const char *path, const char *cmd, const EvalArgs *a, const char *data,
                                 const Extractor *m, int n) {
    Manifest *mf = xcalloc(1, sizeof *mf);
    manifest_str(mf, "cmd", "%s", cmd);
    if (data) {
        manifest_str(mf, "data", "%s", data);
        if (is_regular_file(data)) manifest_add_file_hash(mf, "data_sha256", data);
    } else if (!a->gen.ckpt && a->samples) {
        manifest_str(mf, "samples", "%s", a->samples);  // its hash: manifest_images
    }
    if (a->gen.ckpt) manifest_str(mf, "preset", "%s", a->preset);
    manifest_images(mf, a, 1);
    manifest_features(mf, m);
    manifest_lit(mf, "n", "%d", n);
    manifest_write_beside(mf, path);
    free(mf);
}

static int eval_stats(EvalArgs *a, Extractor *m) {
    RunResult r;
    FidStats *s = fid_stats_new(m->dim), *sp = m->inc ? fid_stats_new(INCEPTION_SPATIAL_DIM) : NULL;
    MalaErr err;
    int rc = eval_run_source(m, a->data, NULL, a->batch, a->limit, s, sp, 0, &r);
    if (!rc && (fid_stats_finalize(s, &err) || (sp && fid_stats_finalize(sp, &err)) ||
                stats_save_with_feats(s, sp, &r.feats, a->out, &err))) {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    }
    fid_stats_free(sp);
    if (rc) {
        fid_stats_free(s);
        feat_rows_free(&r.feats);
        return 1;
    }
    fprintf(stderr, "[eval] statistics of %d images -> %s (mu [%d], sigma [%d, %d], float64%s; feats [%d, %d], the "
                    "first images' features)\n", r.n, a->out, m->dim, m->dim, m->dim,
            m->inc ? "; sFID: mu_s [2023], sigma_s [2023, 2023]" : "", r.feats.n, m->dim);
    write_stats_manifest(a->out, "mala eval stats", a, a->data, m, r.n);
    JsonBuf b = {0};
    json_buf_puts(&b, "{\"cmd\":\"eval stats\"");
    json_str_field(&b, "data", a->data);
    json_str_field(&b, "out", a->out);
    json_net_fields(&b, m);
    json_manifest_fields(&b, a, m, NULL);
    json_buf_printf(&b, ",\"n\":%d,\"dim\":%d,\"feats\":%d,\"seconds\":%.3f,\"img_per_s\":%.2f}", r.n, m->dim,
                    r.feats.n, r.seconds, r.n / r.seconds);
    fid_stats_free(s);
    feat_rows_free(&r.feats);
    return print_result(&b);
}

// Other tools' names, Inception features only: torch-fidelity's keys in the JSON
// line, and the ADM evaluator's summary lines on stderr (evaluator.py prints "FID: ..." and so on).
// NAN: not computed.
typedef struct { double is_mean, is_std, fid, sfid, prec, recall, kid_mean, kid_std; } PeerMetrics;

static void peer_metrics_out(JsonBuf *b, const PeerMetrics *p) {
    static const char *const torch_fidelity[] = {"inception_score_mean", "inception_score_std",
                                                 "frechet_inception_distance", NULL, NULL, NULL,
                                                 "kernel_inception_distance_mean", "kernel_inception_distance_std"};
    static const char *const adm[] = {"Inception Score", NULL, "FID", "sFID", "Precision", "Recall", NULL, NULL};
    const double *v = &p->is_mean;
    for (int i = 0; i < 8; i++)
        if (torch_fidelity[i] && !isnan(v[i])) json_buf_printf(b, ",\"%s\":%.10g", torch_fidelity[i], v[i]);
    for (int i = 0; i < 8; i++)
        if (adm[i] && !isnan(v[i])) fprintf(stderr, "%s: %.10g\n", adm[i], v[i]);
}

// img/s of the feature network over the images it ran (none when both sides were statistics).
static void json_rate_fields(JsonBuf *b, double t0, int n, double seconds) {
    json_buf_printf(b, ",\"seconds\":%.3f", now_seconds() - t0);  // the whole command
    if (n > 0 && seconds > 0) json_buf_printf(b, ",\"img_per_s\":%.2f", n / seconds);
    json_buf_puts(b, "}");
}

static int eval_fid(EvalArgs *a, Extractor *m) {
    RunResult rs, rr;
    MalaErr err;
    double t0 = now_seconds();
    FidStats *ref_s, *s_s;  // the sFID statistics
    FidStats *ref = eval_stats_of_path(m, a->ref, NULL, a->batch, 0, 0, &rr, &ref_s);
    if (!ref) return 1;
    FidStats *s = eval_stats_of_path(m, a->samples, sample_spec(a), a->batch, a->limit, !m->fm, &rs, &s_s);
    if (!s) { fid_stats_free(ref); fid_stats_free(ref_s); feat_rows_free(&rr.feats); return 1; }
    int rc = 0, have_sfid = ref_s && s_s;  // a statistics file may lack mu_s / sigma_s
    double fid, sfid = 0, ism = 0, iss = 0;
    if (fid_from_stats(s, ref, &fid, &err)) { fprintf(stderr, "error: %s\n", err.msg); rc = 1; }
    if (!rc && have_sfid && fid_from_stats(s_s, ref_s, &sfid, &err)) { fprintf(stderr, "error: sFID: %s\n", err.msg); rc = 1; }
    int have_is = !rc && rs.logits && rs.n >= a->splits;
    if (have_is && inception_score(rs.logits, rs.n, INCEPTION_CLASSES, a->splits, &ism, &iss, &err)) {
        fprintf(stderr, "warning: no Inception Score: %s\n", err.msg);
        have_is = 0;
    }
    if (!rc) {
        const char *fd_key = m->fm ? "fd" : "fid";
        fprintf(stderr, "%s %.4f  (%d samples from %s vs %s)\n", m->fm ? "FD (fmnist features)" : "FID", fid, rs.n,
                samples_name(a), a->ref);
        if (have_sfid) fprintf(stderr, "sFID %.4f  (mixed_6/conv features, pytorch-fid's network)\n", sfid);
        if (have_is) fprintf(stderr, "IS  %.4f +- %.4f  (%d splits)\n", ism, iss, a->splits);
        if (rs.labelled)
            fprintf(stderr, "class accuracy %.4f  (%ld labelled samples)\n", (double)rs.correct / rs.labelled,
                    rs.labelled);
        else if (rs.no_acc[0]) fprintf(stderr, "note: no class accuracy: %s\n", rs.no_acc);
        if (rs.n && rs.n < m->dim)
            fprintf(stderr, "note: fewer samples (%d) than feature dimensions (%d): the covariance is rank "
                            "deficient and the distance is biased upwards%s\n", rs.n, m->dim,
                    m->fm ? "" : "; papers use 50K");
        JsonBuf b = {0};
        json_buf_puts(&b, "{\"cmd\":\"eval fid\"");
        json_str_field(&b, "samples", samples_name(a));
        json_str_field(&b, "ref", a->ref);
        json_net_fields(&b, m);
        json_sampling_fields(&b, a);
        json_manifest_fields(&b, a, m, a->ref);
        json_buf_printf(&b, ",\"n\":%d,\"%s\":%.6f", rs.n, fd_key, fid);
        if (rs.labelled) json_buf_printf(&b, ",\"class_acc\":%.6f", (double)rs.correct / rs.labelled);
        else if (rs.no_acc[0]) json_str_field(&b, "no_class_acc", rs.no_acc);
        if (have_sfid) json_buf_printf(&b, ",\"sfid\":%.6f", sfid);
        if (have_is) json_buf_printf(&b, ",\"is_mean\":%.6f,\"is_std\":%.6f,\"splits\":%d", ism, iss, a->splits);
        double prk[4] = {NAN, NAN, NAN, NAN};
        if (rr.feats.n && rs.feats.n && json_pr_kid(&b, &rr.feats, &rs.feats, prk, &err))
            fprintf(stderr, "warning: no precision/recall or KID: %s\n", err.msg);
        if (m->inc) {
            PeerMetrics pm = {have_is ? ism : NAN, have_is ? iss : NAN, fid, have_sfid ? sfid : NAN, prk[0], prk[1],
                              prk[2], prk[3]};
            peer_metrics_out(&b, &pm);
        }
        json_rate_fields(&b, t0, rs.n + rr.n, rs.seconds + rr.seconds);
        rc = print_result(&b);
    }
    // after the result, which a failed save must not hide
    if (a->save_stats && stats_save_with_feats(s, s_s, &rs.feats, a->save_stats, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    } else if (a->save_stats) {
        write_stats_manifest(a->save_stats, "mala eval fid --save-stats", a, NULL, m, rs.n);
    }
    free(rs.logits);
    feat_rows_free(&rs.feats);
    feat_rows_free(&rr.feats);
    fid_stats_free(s);
    fid_stats_free(ref);
    fid_stats_free(s_s);
    fid_stats_free(ref_s);
    return rc;
}

static int eval_is(EvalArgs *a, Extractor *m) {
    RunResult r;
    MalaErr err;
    if (eval_run_source(m, a->samples, sample_spec(a), a->batch, a->limit, NULL, NULL, 1, &r)) {
        free(r.logits);
        feat_rows_free(&r.feats);
        return 1;
    }
    feat_rows_free(&r.feats);
    double mean, std;
    int rc = 0;
    if (inception_score(r.logits, r.n, INCEPTION_CLASSES, a->splits, &mean, &std, &err)) {
        fprintf(stderr, "error: %s: %s\n", a->samples, err.msg);
        rc = 1;
    } else {
        fprintf(stderr, "IS %.4f +- %.4f  (%d samples from %s, %d splits)\n", mean, std, r.n, samples_name(a), a->splits);
        JsonBuf b = {0};
        json_buf_puts(&b, "{\"cmd\":\"eval is\"");
        json_str_field(&b, "samples", samples_name(a));
        json_str_field(&b, "inception", m->path);
        json_sampling_fields(&b, a);
        json_manifest_fields(&b, a, m, NULL);
        json_buf_printf(&b, ",\"n\":%d,\"is_mean\":%.6f,\"is_std\":%.6f,\"splits\":%d", r.n, mean, std, a->splits);
        PeerMetrics pm = {mean, std, NAN, NAN, NAN, NAN, NAN, NAN};
        peer_metrics_out(&b, &pm);
        json_buf_printf(&b, ",\"seconds\":%.3f,\"img_per_s\":%.2f}", r.seconds, r.n / r.seconds);
        rc = print_result(&b);
    }
    free(r.logits);
    return rc;
}

// --ckpt of an unconditional model: no guidance (gen_guidance_for). Nonzero after the error line.
static int eval_guidance(EvalArgs *a, int given) {
    NetConfig c;
    ClassNames cn;
    MalaErr err;
    if (ckpt_file_config(a->gen.ckpt, &c, &cn, &err)) return 0;  // reported where the model is read
    class_names_free(&cn);
    if (!gen_guidance_for(&c, &a->gen.opts.cfg_scale, given, "--cfg-scale", &err)) return 0;
    if (dist_rank() == 0) fprintf(stderr, "error: %s: %s\n", a->gen.ckpt, err.msg);
    return 1;
}

// The images --ckpt samples (--limit may use fewer), and their batches: the ones rank 0's
// sampler_next asks for, min(--batch, --sample-batch, the images used).
static int eval_total(const EvalArgs *a) { return a->limit > 0 && a->limit < a->gen.num ? a->limit : a->gen.num; }
static int eval_shard_batch(const EvalArgs *a) {
    int total = eval_total(a), batch = a->batch < total ? a->batch : total;
    return batch > a->gen.batch ? a->gen.batch : batch;
}

// Collective: the folder that keeps --ckpt's sampled batches (--partial, else beside --save-stats),
// created or continued (pipeline/batch_store.h); nothing without either.
static void open_eval_store(EvalArgs *a, const NetConfig *c) {
    char dir[4200];
    if (a->partial) snprintf(dir, sizeof dir, "%s", a->partial);
    else if (a->save_stats) batch_store_dir_for(dir, sizeof dir, a->save_stats);
    else {
        if (dist_rank() == 0 && eval_total(a) >= 10000)
            fprintf(stderr, "[eval] note: this run is not kept as it goes; --partial DIR (or --save-stats FILE) lets the "
                    "same command continue it after a crash\n");
        return;
    }
    Manifest *set = xcalloc(1, sizeof *set);
    GenOpts used = a->gen.opts;  // as the sampler runs it
    used.clip = used.clip && !(c->latent_scale > 0);
    SamplingRecord rec = {a->gen.ckpt, a->weights, c, &used, label_mode_name(a->gen.labels), NULL, eval_total(a),
                          eval_shard_batch(a), a->gen.seed, NULL, backend_select(a->gen.device, a->gen.precision)};
    manifest_partial_settings(set, &rec);
    batch_store_open(&a->store, dir, set, rec.n, rec.batch,
                     (size_t)c->in_channels * c->image_size * c->image_size, a->force,
                     a->partial ? "--partial" : "--save-stats");
    free(set);
    a->gen.store = &a->store;
    if (a->store.kept && dist_rank() == 0)
        fprintf(stderr, "[eval] continuing the partial run in %s: kept %d of %d images (their features are computed "
                "again)\n", dir, a->store.kept, rec.n);
}

// Ranks > 0 of `mpirun -np N mala eval fid|is --ckpt`: they sample their share of the batches for
// rank 0 (pipeline/generate_shard.h), which runs the Inception and prints the result.
static int eval_serve_samples(EvalArgs *a) {
    MalaErr err;
    Generator g;
    int total = eval_total(a), batch = eval_shard_batch(a);
    if (generator_open(&g, a->gen.ckpt, backend_select(a->gen.device, a->gen.precision), a->gen.batch, &err))
        FATAL("%s", err.msg);
    ShardedGen s;
    sharded_gen_init(&s, &g, &a->gen.opts, a->gen.seed, total, batch);
    s.labels = a->gen.labels;
    s.store = a->gen.store;
    if (sharded_gen_serve(&s, &err)) FATAL("%s", err.msg);
    sharded_gen_free(&s);
    generator_close(&g);
    dist_finalize();
    return 0;
}

static const char *kEvalUsage =
    "usage: mala eval stats --data fashion-mnist|FILE.npz|DIR --out stats.npz [flags]\n"
    "       mala eval fid --samples FILE.npz|DIR --ref stats.npz|FILE.npz|DIR [flags]\n"
    "       mala eval fid --ckpt MODEL --ref stats.npz [--quick] [sampling flags]\n"
    "       mala eval is --samples FILE.npz|DIR [flags]   (or --ckpt MODEL)\n"
    "       mala eval sweep --ref stats.npz --out DIR [--cfg-scale 1,1.5,2] [...]   (mala eval sweep --help)\n\n"
    "With --ckpt the images are sampled on the fly, quantised to uint8 as a sample batch file\n"
    "would be, and never stored. The sampling defaults are DiT's FID-50K (sample_ddp.py): 50,000\n"
    "images, DDPM 250 steps, guidance 1.5 (on 3 eps channels of a 4-channel latent model, as DiT's\n"
    "forward_with_cfg; all of other models), no clipping, uniform random labels (drawn from the\n"
    "seed per image); --quick is DDIM 50 steps, 10,000 images, all channels guided, balanced\n"
    "labels (i mod K; labelled \"preset\":\"quick\", not comparable with FID-50K).\n"
    "Flags given explicitly win over either preset.\n"
    "FID / IS as pytorch-fid and torch-fidelity compute them, with the FID Inception-v3\n"
    "(" INCEPTION_WEIGHTS_FILE ").\n"
    "Images: an ADM sample batch .npz (arr_0 uint8 [N, H, W, C]) or a folder of image files\n"
    "(searched recursively); any size, resized to 299x299. Statistics: .npz with mu and sigma\n"
    "(pytorch-fid's format; ADM reference batches work as --ref). Weights: --inception, else\n"
    "$MALA_INCEPTION, ./" INCEPTION_WEIGHTS_FILE ", ./assets/, ~/.cache/torch/hub/checkpoints/.\n"
    "--features fmnist: the bundled Fashion-MNIST classifier instead (assets/" FMNIST_FEAT_FILE ",\n"
    "no download; 1 x 32 x 32 or 28 x 28 images): \"fd\" (the Frechet distance of its 128-d features)\n"
    "and \"class_acc\" (labelled samples: --ckpt, or arr_1 of an .npz) in place of FID and IS.\n"
    "Both report precision/recall (k = 3, ADM evaluator) and KID (torch-fidelity) when the reference\n"
    "has features (images, or stats written by mala eval stats), on the first 10,000 of each side.";

// --ckpt: the generator's guided batch checked against the memory (at least its images in and out),
// and what will be sampled, said.
static void announce_sampling(const EvalArgs *a, const NetConfig *model_cfg) {
    args_check_memory("--sample-batch", a->gen.batch, gen_memory_bytes(model_cfg, backend_cpu(), a->gen.batch, NULL),
                      "the model's weights and activations (2 passes per image with guidance)");
    char ch[16];
    fprintf(stderr, "[eval] sampling %d images from %s: %s %d steps, guidance %g on %s eps channels%s, %s labels "
            "(%s)\n", a->gen.num, a->gen.ckpt, a->sampler, a->gen.opts.steps, a->gen.opts.cfg_scale,
            gen_cfg_channels_str(a->gen.opts.cfg_channels, a->model_c, ch, sizeof ch),
            a->gen.opts.clip ? ", clipped" : "", label_mode_name(a->gen.labels),
            !strcmp(a->preset, "dit") ? "DiT's FID-50K settings"
            : !strcmp(a->preset, "quick") ? "the QUICK preset: not comparable with DiT's FID-50K"
                                         : "custom settings, not DiT's FID-50K");
}

// The feature network --features names (the Fashion-MNIST classifier, or the FID Inception) on
// the device asked for; m->path points into buf. 1 after an error line.
static int open_extractor(const EvalArgs *a, Extractor *m, char *buf, size_t cap) {
    const Backend *be = backend_select(a->gen.device, a->gen.precision);
    if (!strcmp(a->features, "fmnist")) {
        if (!(m->path = eval_find_classifier(a->classifier, buf, cap))) return 1;
        MalaErr err;
        if (!(m->fm = fmnist_net_load(m->path, be, a->batch, &err))) {
            fprintf(stderr, "error: %s\n", err.msg);
            return 1;
        }
        m->dim = FMNIST_FEAT_DIM;
        m->classes = FMNIST_FEAT_CLASSES;
        fprintf(stderr, "[eval] Fashion-MNIST classifier from %s on %s (test accuracy %.4f)\n", m->path, be->name,
                fmnist_net_test_accuracy(m->fm));
    } else {
        if (!(m->path = eval_find_inception(a->inception, buf, cap))) return 1;
        // internal batch: memory ~14 MB per image
        if (!(m->inc = eval_load_inception(m->path, be, a->batch < 32 ? a->batch : 32))) return 1;
        m->dim = INCEPTION_DIM;
        m->classes = INCEPTION_CLASSES;
    }
    return 0;
}

int cmd_eval(int argc, char **argv) {
    const char *sub = argc >= 2 ? argv[1] : NULL;
    EvalArgs a = {.batch = 50, .threads = 0, .splits = DEFAULT_SPLITS, .sampler = "ddpm", .preset = "dit",
                  .features = "inception", .weights = "ema"};
    a.gen.opts = gen_opts_default();  // DiT's sample_ddp.py: DDPM 250 steps, guidance 1.5, clip_denoised=False
    a.gen.opts.cfg_scale = 1.5f;
    a.gen.opts.clip = 0;
    a.gen.num = 50000;
    a.gen.batch = 50;
    int torch_heads = 0;
    Opt opts[] = {
        {"--data", OPT_STR, &a.data, "PATH", "stats: images (.npz or folder)"},
        {"--out", OPT_STR, &a.out, "FILE", "stats: output .npz"},
        {"--samples", OPT_STR, &a.samples, "PATH", "fid / is: generated images (.npz or folder)"},
        {"--ref", OPT_STR, &a.ref, "PATH", "fid: reference statistics .npz, or reference images"},
        {"--save-stats", OPT_STR, &a.save_stats, "FILE", "fid: also save the samples' statistics"},
        OPT_FORCE(&a.force),
        {"--inception", OPT_STR, &a.inception, "FILE", "weights (.pth legacy torch or .safetensors; 'random' for smoke tests)"},
        {"--features", OPT_STR, &a.features, "inception|fmnist", "the feature network (default inception)"},
        {"--classifier", OPT_STR, &a.classifier, "FILE", "--features fmnist: the classifier's weights"},
        {"--batch", OPT_INT, &a.batch, "N", "images per Inception batch", ARG_MIN(1)},
        {"--splits", OPT_INT, &a.splits, "N", "IS splits", ARG_MIN(1)},
        {"--limit", OPT_INT, &a.limit, "N", "use only the first N samples (0 = all)", ARG_MIN(0)},
        OPT_THREADS(&a.threads),
        {"--ckpt", OPT_STR, &a.gen.ckpt, "FILE", "fid / is: sample from this model instead of --samples"},
        {"--quick", OPT_FLAG, &a.quick, NULL, "--ckpt: the quick preset, DDIM 50 steps and 10,000 images"},
        {"--vae", OPT_STR, &a.gen.vae, "FILE", "--ckpt of a latent model: the VAE that decodes its samples"},
        {"--heads", OPT_INT, &torch_heads, "N", "--ckpt of a PyTorch .pt: attention heads (default: its args, else "
         "DiT's preset)", ARG_MIN(1), ARG_MAX(1024)},
        {"--weights", OPT_STR, &a.weights, "ema|online", "--ckpt of a training checkpoint: its EMA or online weights "
         "(a PyTorch .pt's `ema` or `model`); default ema"},
        {"--num", OPT_INT, &a.gen.num, "N", "--ckpt: images to sample", ARG_MIN(1), ARG_ALIAS("--num-fid-samples")},
        {"--sample-batch", OPT_INT, &a.gen.batch, "B", "--ckpt: images per sampling batch", ARG_MIN(1),
         ARG_ALIAS("--per-proc-batch-size")},
        {"--sampler", OPT_STR, &a.sampler, sampler_kind_list(), "--ckpt: sampler"},
        {"--steps", OPT_INT, &a.gen.opts.steps, "N", "--ckpt: sampling steps", ARG_MIN(1), ARG_MAX(1000),
         ARG_ALIAS("--num-sampling-steps")},
        {"--cfg-scale", OPT_FLOAT, &a.gen.opts.cfg_scale, "W", "--ckpt: guidance scale (1 = none)", ARG_MIN(0), ARG_MAX(100)},
        {"--cfg-channels", OPT_STR, &a.cfg_channels, "N|all", "--ckpt: guided eps channels (default: 3 on 4-channel "
         "latent models as DiT, else all; --quick: all)"},
        {"--cfg-interval", OPT_STR, &a.cfg_interval, "LO,HI|none", "--ckpt: guide only where sigma = sqrt(1/abar - 1) "
         "is in (LO, HI] (default none: every step)"},
        {"--label-mode", OPT_STR, &a.label_mode, "balanced|random", "--ckpt: labels i mod K, or uniform draws from "
         "the seed per image (default random as DiT; --quick: balanced)"},
        {"--eta", OPT_FLOAT, &a.gen.opts.eta, "E", "--ckpt: DDIM eta", ARG_MIN(0), ARG_MAX(10)},
        {"--clip", OPT_BOOL, &a.gen.opts.clip, "BOOL", "--ckpt: clip predicted x0 to [-1, 1]"},
        {"--seed", OPT_U64, &a.gen.seed, "S", "--ckpt: noise seed", ARG_ALIAS("--global-seed")},
        {"--partial", OPT_STR, &a.partial, "DIR", "--ckpt: keep the sampled batches in DIR, so that the same command "
         "run again continues (default with --save-stats FILE: FILE.partial)"},
        {"--device", OPT_STR, &a.gen.device, "cpu|cuda", "backend of the Inception and the sampler (default: cuda if present)"},
        {"--precision", OPT_STR, &a.gen.precision, "fp32|bf16|tf32",
         "--ckpt: the sampler's matrix products, CPU fp32 or bf16, CUDA tf32 or fp32 (default: fp32 on the CPU, tf32 "
         "on CUDA; the Inception, and bf16's fmnist features, run in fp32)"},
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
        args_usage(kEvalUsage, opts, nopts);
        return sub ? 0 : 2;
    }
    if (!strcmp(sub, "sweep")) return cmd_eval_sweep(argc, argv);
    if (strcmp(sub, "stats") && strcmp(sub, "fid") && strcmp(sub, "is")) {
        static const char *const subs[] = {"stats", "fid", "is", "sweep"};
        const char *s = text_suggest(sub, subs, 4);
        fprintf(stderr, "error: unknown eval command '%s'%s%s%s (stats, fid, is or sweep; see mala eval --help)\n", sub,
                s ? "; did you mean " : "", s ? s : "", s ? "?" : "");
        return 2;
    }
    args_parse(kEvalUsage, opts, nopts, argc, argv, 2);
    a.weights = weights_online("--weights", a.weights) ? "online" : "ema";  // "model" is DiT's "online"
    ckpt_torch_options(!strcmp(a.weights, "online"), torch_heads);
    int given_sampler = args_given(opts, nopts, &a.sampler), given_steps = args_given(opts, nopts, &a.gen.opts.steps),
        given_num = args_given(opts, nopts, &a.gen.num);
    if (a.quick) {
        if (!given_sampler) a.sampler = "ddim";
        if (!given_steps) a.gen.opts.steps = 50;
        if (!given_num) a.gen.num = 10000;
    }
    int custom = given_sampler || given_steps || given_num || args_given(opts, nopts, &a.gen.opts.cfg_scale) ||
                 args_given(opts, nopts, &a.gen.opts.eta) || args_given(opts, nopts, &a.gen.opts.clip) ||
                 a.cfg_channels || a.label_mode || a.cfg_interval;
    a.preset = custom ? "custom" : a.quick ? "quick" : "dit";
    const char *missing = NULL;
    if (strcmp(a.features, "inception") && strcmp(a.features, "fmnist")) {
        fprintf(stderr, "error: --features %s: expected inception or fmnist\n", a.features);
        return 2;
    }
    if (!strcmp(a.features, "fmnist") && !strcmp(sub, "is")) {
        fprintf(stderr, "error: mala eval is needs the Inception (--features inception); with --features fmnist, "
                        "mala eval fid reports the class accuracy\n");
        return 2;
    }
    if (!strcmp(sub, "stats")) missing = !a.data ? "--data" : !a.out ? "--out" : NULL;
    else if (!strcmp(sub, "fid")) missing = !a.samples && !a.gen.ckpt ? "--samples or --ckpt" : !a.ref ? "--ref" : NULL;
    else missing = !a.samples && !a.gen.ckpt ? "--samples or --ckpt" : NULL;
    if (a.samples && a.gen.ckpt) {
        fprintf(stderr, "error: --samples and --ckpt exclude each other\n");
        return 2;
    }
    if (sampler_kind_parse(a.sampler, &a.gen.opts.kind)) {
        fprintf(stderr, "error: --sampler %s: expected %s\n", a.sampler, sampler_kind_list());
        return 2;
    }
    if (missing) {
        fprintf(stderr, "error: mala eval %s needs %s (see mala eval --help)\n", sub, missing);
        return 2;
    }
    args_check_memory("--batch", a.batch, (double)a.batch * (INCEPTION_DIM + INCEPTION_CLASSES) * sizeof(float),
                      "the Inception features of a batch");
    if (a.gen.ckpt && a.gen.batch > a.gen.num) a.gen.batch = a.gen.num;
    NetConfig model_cfg;
    if (a.gen.ckpt) {
        if (peek_model(a.gen.ckpt, &model_cfg)) return 1;
        a.model_cfg = model_cfg;
        int bad = resolve_cfg_channels(&a, &model_cfg);
        if (!bad) bad = resolve_label_mode(&a);
        if (!bad && a.cfg_interval && gen_cfg_interval_parse(a.cfg_interval, &a.gen.opts.cfg_lo, &a.gen.opts.cfg_hi)) {
            fprintf(stderr, "error: --cfg-interval %s: expected LO,HI with 0 <= LO < HI (sigma), or none\n",
                    a.cfg_interval);
            bad = 2;
        }
        if (bad) return bad;
    }
    dist_init(&argc, &argv);
    if (dist_world() > 1 && (!a.gen.ckpt || !strcmp(sub, "stats"))) {
        if (dist_rank() == 0)
            fprintf(stderr, "error: mala eval %s under mpirun: only sampling with --ckpt is shared out over the "
                    "processes; run it as one process\n", sub);
        dist_finalize();
        return 2;
    }
    if (a.gen.ckpt && eval_guidance(&a, args_given(opts, nopts, &a.gen.opts.cfg_scale))) {  // every rank alike
        dist_finalize();
        return 2;
    }
    if (dist_rank() > 0) {
        open_eval_store(&a, &model_cfg);  // collective: rank 0 opens it after checking its outputs
        return eval_serve_samples(&a);
    }
    if (!strcmp(sub, "stats")) out_check_file("--out", a.out, a.force, NULL);
    if (!strcmp(sub, "fid") && a.save_stats) out_check_file("--save-stats", a.save_stats, a.force, NULL);
    if (a.gen.ckpt && strcmp(sub, "stats")) open_eval_store(&a, &model_cfg);
    if (a.gen.ckpt) announce_sampling(&a, &model_cfg);
    set_threads(a.threads);
    char buf[1024];
    Extractor m = {.name = a.features};
    if (open_extractor(&a, &m, buf, sizeof buf)) return 1;
    int rc = !strcmp(sub, "stats") ? eval_stats(&a, &m) : !strcmp(sub, "fid") ? eval_fid(&a, &m) : eval_is(&a, &m);
    if (!rc) batch_store_finish(&a.store);  // the result is out: the kept batches go
    if (m.inc) inception_free(m.inc);
    fmnist_net_free(m.fm);
    dist_finalize();
    return rc;
}

// ---------------------------------------------------------------------------------------------
// Benchmark
// ---------------------------------------------------------------------------------------------
int cmd_bench_inception(int argc, char **argv) {
    int batch = 16, iters = 3, warmup = 1, size = 32, channels = 3, threads = 0;
    const char *weights = "random", *device = NULL, *precision = NULL;
    Opt opts[] = {
        {"--batch", OPT_INT, &batch, "N", "images per forward", ARG_MIN(1)},
        {"--iters", OPT_INT, &iters, "N", "timed forwards", ARG_MIN(1)},
        {"--warmup", OPT_INT, &warmup, "N", "untimed forwards first", ARG_MIN(0)},
        {"--size", OPT_INT, &size, "S", "input images S x S (resized to 299 inside, as in eval)", ARG_MIN(1), ARG_MAX(4096)},
        {"--channels", OPT_INT, &channels, "C", "1 or 3", ARG_MIN(1), ARG_MAX(3)},
        OPT_THREADS(&threads),
        {"--inception", OPT_STR, &weights, "FILE", "weights file, or 'random'"},
        OPT_DEVICE(&device),
        OPT_PRECISION(&precision),
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    args_parse("usage: mala bench inception [flags]\n\nFID Inception-v3 forward throughput (resize, pool3 and logits), one JSON line.\n"
               "PyTorch peer: /usr/bin/python3 tools/bench/bench_inception_torch.py --batch N --threads N",
               opts, nopts, argc, argv, 1);
    if (channels == 2) {
        fprintf(stderr, "error: --channels 2: expected 1 or 3\n");
        return 2;
    }
    args_check_memory("--batch", batch, (double)batch * channels * size * size * sizeof(float), "the input images");
    set_threads(threads);
    const Backend *be = backend_select(device, precision);  // (eval's FID keeps fp32: this times what bf16 would give)
    Inception *m = strcmp(weights, "random") ? NULL : inception_random(be, batch);
    if (!m) {
        MalaErr err;
        if (!(m = inception_load(weights, be, batch, &err))) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    }
    size_t per = (size_t)channels * size * size;
    float *img = xmalloc((size_t)batch * per * sizeof *img);
    eval_rand_fill(img, (size_t)batch * per, "bench/images", 0.0, 1.0);
    float *pool3 = xmalloc((size_t)batch * INCEPTION_DIM * sizeof *pool3);
    float *logits = xmalloc((size_t)batch * INCEPTION_CLASSES * sizeof *logits);
    MalaErr err;
    int rc = 0;
    for (int i = 0; i < warmup; i++) inception_forward(m, img, batch, channels, size, size, pool3, logits, &err);
    double *times = xmalloc((size_t)iters * sizeof *times);
    for (int i = 0; i < iters; i++) {
        double t0 = now_seconds();
        inception_forward(m, img, batch, channels, size, size, pool3, logits, &err);  // ends with a copy to the host
        times[i] = now_seconds() - t0;
    }
    const Spread sp = spread_of(times, iters);  // img/s: median, and the slowest and fastest forward
    free(times);
    double gflop = inception_flops(m) / ((double)(warmup + iters) * batch) / 1e9;
    fprintf(stderr, "FID Inception forward on %s: %.2f img/s median (%.2f .. %.2f; batch %d, %d threads, %dx%dx%d "
            "input), %.1f GFLOP/s\n", be->name, batch / sp.median, batch / sp.max, batch / sp.min, batch, num_threads(),
            channels, size, size, gflop * batch / sp.median);
    if (json_printf_line(stdout, &err, "{\"bench\":\"inception\",\"impl\":\"mala-c\",\"device\":\"%s\",\"precision\":\"%s\",\"batch\":%d,\"threads\":%d,"
           "\"input\":\"%dx%dx%d\",\"iters\":%d,"
           "\"img_per_s\":%.3f,\"img_per_s_min\":%.3f,\"img_per_s_max\":%.3f,\"best_img_per_s\":%.3f,"
           "\"gflop_per_image\":%.3f,\"gflop_per_s\":%.2f,\"peak_rss_mb\":%.0f}",
           be->name, be->precision(), batch, num_threads(), channels, size, size, iters, batch / sp.median, batch / sp.max, batch / sp.min,
           batch / sp.min, gflop, gflop * batch / sp.median, peak_rss_bytes() / 1048576.0)) {
        fprintf(stderr, "error: %s\n", err.msg);
        rc = 1;
    }
    free(img);
    free(pool3);
    free(logits);
    inception_free(m);
    return rc;
}

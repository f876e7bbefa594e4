// defines: eval_find_inception, eval_find_classifier, eval_load_inception, eval_run_source,
//          eval_is_stats_file, eval_stats_of_path
#include "eval/eval_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/progress.h"

const char *eval_find_inception(const char *given, char *buf, size_t cap) {
    if (given) return given;
    const char *env = getenv("MALA_INCEPTION");
    if (env && *env) return env;
    const char *home = getenv("HOME");
    const char *cands[3] = {INCEPTION_WEIGHTS_FILE, "assets/" INCEPTION_WEIGHTS_FILE, NULL};
    for (int i = 0; i < 2; i++)
        if (is_regular_file(cands[i])) return cands[i];
    if (home) {  // where pytorch-fid's torch.hub download puts it
        snprintf(buf, cap, "%s/.cache/torch/hub/checkpoints/%s", home, INCEPTION_WEIGHTS_FILE);
        if (is_regular_file(buf)) return buf;
    }
    fprintf(stderr, "error: no FID Inception weights found: pass --inception FILE or set MALA_INCEPTION "
                    "(looked for ./%s, ./assets/, ~/.cache/torch/hub/checkpoints/); the file is %s "
                    "(--inception random runs with random weights, for smoke tests only)\n",
            INCEPTION_WEIGHTS_FILE, INCEPTION_WEIGHTS_URL);
    return NULL;
}

// The Fashion-MNIST classifier: --classifier, $MALA_FMNIST_CLASSIFIER, ./assets/, ./, then the
// assets/ folder beside the executable.
const char *eval_find_classifier(const char *given, char *buf, size_t cap) {
    if (given) return given;
    const char *env = getenv("MALA_FMNIST_CLASSIFIER");
    if (env && *env) return env;
    if (is_regular_file("assets/" FMNIST_FEAT_FILE)) return "assets/" FMNIST_FEAT_FILE;
    if (is_regular_file(FMNIST_FEAT_FILE)) return FMNIST_FEAT_FILE;
    char exe[900];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, cap, "%s/assets/%s", exe, FMNIST_FEAT_FILE);
        if (is_regular_file(buf)) return buf;
    }
    fprintf(stderr, "error: no Fashion-MNIST classifier found: pass --classifier FILE or set MALA_FMNIST_CLASSIFIER "
                    "(looked for ./assets/%s, ./, and assets/ beside mala; tools/ref/train_fmnist_classifier.py makes it)\n",
            FMNIST_FEAT_FILE);
    return NULL;
}

Inception *eval_load_inception(const char *path, const Backend *be, int batch) {
    if (!strcmp(path, "random")) {
        fprintf(stderr, "warning: --inception random: random weights, the numbers are NOT FID/IS\n");
        return inception_random(be, batch);
    }
    MalaErr err;
    double t0 = now_seconds();
    Inception *m = inception_load(path, be, batch, &err);
    if (!m) {
        fprintf(stderr, "error: %s\n", err.msg);
        return NULL;
    }
    fprintf(stderr, "[eval] FID Inception-v3 from %s on %s (%.1f s)\n", path, be->name, now_seconds() - t0);
    return m;
}

// spatial: the Inception's sFID features, when not NULL (the classifier has none).
static int extract(Extractor *x, const float *img, int n, int c, int h, int w, float *feats, float *logits,
                   float *spatial, MalaErr *err) {
    if (x->fm) return fmnist_net_forward_u01(x->fm, img, n, c, h, w, feats, logits, err);
    return inception_forward_all(x->inc, img, n, c, h, w, feats, logits, spatial, err);
}

static void count_correct(RunResult *r, const float *logits, const int32_t *labels, int n, int K) {
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
            if (logits[(size_t)i * K + k] > logits[(size_t)i * K + best]) best = k;
        r->labelled++;
        r->correct += labels[i] == best;
    }
}

// stats / sstats (NULL: not wanted) get the features / the sFID features of every image (sstats:
// the Inception only).
int eval_run_source(Extractor *m, const char *path, const SampleSpec *sp, int batch, int limit, FidStats *stats,
                      FidStats *sstats, int want_logits, RunResult *r) {
    Source s;
    MalaErr err;
    memset(r, 0, sizeof *r);
    if (sp) path = sp->ckpt;
    if (sp ? source_open_sampler(&s, sp, &err) : source_open(&s, path, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        source_close(&s);
        return -1;
    }
    int total = limit > 0 && limit < s.n ? limit : s.n;
    // class accuracy only where the labels are the classifier's classes (a circle/square model's
    // labels 0 and 1 scored against T-shirt and Trouser would be a meaningless number)
    int score = 1;
    if (m->fm) {
        if (s.gen) score = fmnist_labels_match(s.gen->classes.names, s.gen->classes.n, s.h, s.c, r->no_acc,
                                               sizeof r->no_acc);
        else if (s.ds) score = fmnist_labels_match(s.ds->class_names, s.ds->num_classes, s.h, s.c, r->no_acc,
                                                   sizeof r->no_acc);
        else if (s.labels) score = fmnist_labels_match(NULL, -1, s.h, s.c, r->no_acc, sizeof r->no_acc);
    }
    if (s.gen) s.n = total;  // sampled as far as used (eval_serve_samples counts the same)
    if (m->fm) sstats = NULL;
    float *pool3 = xmalloc((size_t)batch * m->dim * sizeof *pool3);
    float *lg_batch = m->fm ? xmalloc((size_t)batch * m->classes * sizeof *lg_batch) : NULL;
    float *spatial = sstats ? xmalloc((size_t)batch * INCEPTION_SPATIAL_DIM * sizeof *spatial) : NULL;
    size_t lcap = want_logits ? (size_t)total : 0;
    if (want_logits) r->logits = xmalloc((lcap ? lcap : 1) * m->classes * sizeof *r->logits);
    double t0 = now_seconds();
    int n = 0, c = 0, h = 0, w = 0, rc = 0;
    Progress pg;
    progress_init(&pg, stderr);
    float *img;
    while (r->n < total && (img = source_next(&s, total - r->n < batch ? total - r->n : batch, &n, &c, &h, &w)) && n) {
        float *lg = want_logits ? r->logits + (size_t)r->n * m->classes : lg_batch;
        if (extract(m, img, n, c, h, w, pool3, lg, spatial, &err)) {
            progress_break(&pg);
            fprintf(stderr, "error: %s: %s\n", path, err.msg);
            rc = -1;
            break;
        }
        if (stats) fid_stats_add(stats, pool3, n);
        if (sstats) fid_stats_add(sstats, spatial, n);
        feat_rows_add(&r->feats, m->dim, pool3, n);
        if (m->fm && score && s.batch_labels) count_correct(r, lg, s.batch_labels, n, m->classes);
        r->n += n;
        double rate = r->n / (now_seconds() - t0);
        char eta[32];
        progress_format_eta(eta, sizeof eta, (total - r->n) / rate);
        progress_update(&pg, r->n == total, "[eval] %s: %d/%d images, %.1f img/s, ETA %s", path, r->n, total, rate,
                        eta);
    }
    progress_break(&pg);
    r->seconds = now_seconds() - t0;
    if (!rc && s.gen && r->n < total) {  // the sampler stopped early: no statistics of a part of the run
        r->cancelled = s.shard.cancelled;
        rc = -1;  // its error line (if not cancelled) is out
    }
    if (!rc && s.skipped) fprintf(stderr, "[eval] %s: %d unreadable files skipped\n", path, s.skipped);
    if (!rc && r->n == 0) {
        fprintf(stderr, "error: %s: no images could be read\n", path);
        rc = -1;
    }
    free(pool3);
    free(lg_batch);
    free(spatial);
    source_close(&s);
    return rc;
}

int eval_is_stats_file(const char *path) {
    char **keys;
    int n, mu = 0, sigma = 0;
    MalaErr err;
    if (npz_keys(path, &keys, &n, &err)) return 0;
    for (int i = 0; i < n; i++) {
        mu |= !strcmp(keys[i], "mu");
        sigma |= !strcmp(keys[i], "sigma");
    }
    npz_keys_free(keys, n);
    return mu && sigma;
}

// Stats of a path: a stats .npz is loaded, images are run through the network. *spatial gets the
// sFID statistics (the Inception only): computed from images, loaded from mu_s / sigma_s where the
// file has them (NULL where it does not, and for the classifier).
FidStats *eval_stats_of_path(Extractor *m, const char *path, const SampleSpec *sp, int batch, int limit,
                               int want_logits, RunResult *r, FidStats **spatial) {
    memset(r, 0, sizeof *r);
    *spatial = NULL;
    MalaErr err;
    if (!sp && eval_is_stats_file(path)) {
        FidStats *s = fid_stats_load(path, &err);
        if (s && s->dim != m->dim) {
            fprintf(stderr, "error: %s: %d-d statistics, but --features %s gives %d-d features (make them with "
                            "mala eval stats --features %s)\n", path, s->dim, m->name, m->dim, m->name);
            fid_stats_free(s);
            return NULL;
        }
        if (s && stats_load_feats(path, m->dim, &r->feats, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            fid_stats_free(s);
            return NULL;
        }
        if (!s) fprintf(stderr, "error: %s\n", err.msg);
        else fprintf(stderr, "[eval] reference statistics from %s%s\n", path,
                     r->feats.n ? "" : " (no feats in it: no precision/recall or KID)");
        if (s && m->inc && !(*spatial = fid_stats_load_keys(path, "mu_s", "sigma_s", &err)))
            fprintf(stderr, "[eval] %s: no sFID statistics (%s)\n", path, err.msg);
        return s;
    }
    FidStats *s = fid_stats_new(m->dim), *sp_stats = m->inc ? fid_stats_new(INCEPTION_SPATIAL_DIM) : NULL;
    int bad = eval_run_source(m, path, sp, batch, limit, s, sp_stats, want_logits, r);
    if (!bad && (fid_stats_finalize(s, &err) || (sp_stats && fid_stats_finalize(sp_stats, &err)))) {
        fprintf(stderr, "error: %s: %s\n", path, err.msg);
        bad = 1;
    }
    if (bad) {
        fid_stats_free(s);
        fid_stats_free(sp_stats);
        free(r->logits);
        r->logits = NULL;
        feat_rows_free(&r->feats);
        return NULL;
    }
    *spatial = sp_stats;
    return s;
}


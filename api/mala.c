// The public API (include/mala.h) over pipeline/generate.h, model/vae.h and eval/: handles, their
// errors, and nothing the command line does not also do. No state outside the handles but the
// one precision record below (the CPU's product precision is process-wide, cpu/cpu_gemm.c).
// defines: every mala_* function of include/mala.h
#define MALA_BUILD_LIB
#include "include/mala.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/backend.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_threads.h"
#include "eval/fid.h"
#include "eval/inception.h"
#include "formats/image_io.h"
#include "model/vae.h"
#include "pipeline/generate.h"

struct mala_context {
    const Backend *be;
    int serial;            // 1 on CUDA: calls hold cuda_lock
    char device[8], precision[8];
    int threads;
    pthread_mutex_t lock;  // err (calls from several threads may create handles from one context)
    MalaErr err;
};
struct mala_model {
    mala_context *ctx;
    Generator g;
    char path[4096], vae[4096];  // to open the file again for a larger batch
    MalaErr err;
};
struct mala_vae {
    mala_context *ctx;
    Vae *v;
    int max_size;
    MalaErr err;
};
struct mala_fid_stats { FidStats *s; };

// The CUDA backend keeps one cuBLAS handle and stream for the process (cuda/backend_cuda.cu):
// calls on CUDA contexts take turns.
static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;

// Live contexts and their precision: two contexts may not ask for different ones at once.
static pthread_mutex_t prec_lock = PTHREAD_MUTEX_INITIALIZER;
static int prec_users;
static char prec_name[8];

int mala_api_version(void) { return MALA_API_VERSION; }

mala_context_options mala_context_options_default(void) { return (mala_context_options){NULL, NULL, 0}; }

static void copy_err(char *dst, size_t cap, const char *msg) {
    if (dst && cap) snprintf(dst, cap, "%s", msg);
}

mala_context *mala_context_new(const mala_context_options *opt, char *err, size_t cap) {
    mala_context_options o = opt ? *opt : mala_context_options_default();
    char msg[MALA_ERR_LEN];
    if (o.device && strcmp(o.device, "cpu") && strcmp(o.device, "cuda") && strcmp(o.device, "auto")) {
        snprintf(msg, sizeof msg, "device %s: unknown device (expected cpu or cuda)", o.device);
        return copy_err(err, cap, msg), NULL;
    }
    if (o.precision && strcmp(o.precision, "fp32") && strcmp(o.precision, "tf32") && strcmp(o.precision, "bf16")) {
        snprintf(msg, sizeof msg, "precision %s: unknown precision (expected fp32, tf32 or bf16)", o.precision);
        return copy_err(err, cap, msg), NULL;
    }
    if (o.threads < 0) return copy_err(err, cap, "threads: must be 0 (every core) or more"), NULL;
    pthread_mutex_lock(&prec_lock);  // (also around the CUDA backend's first, unlocked, start-up)
    const char *why = NULL;
    const int want_cuda = o.device && !strcmp(o.device, "cuda");
    if (want_cuda && !backend_cuda(&why)) {
        snprintf(msg, sizeof msg, "device cuda: %s", why);
        pthread_mutex_unlock(&prec_lock);
        return copy_err(err, cap, msg), NULL;
    }
    if (o.precision && !strcmp(o.precision, "bf16") && !want_cuda && !backend_cuda(NULL)) {
        // (backend_select exits where the CPU cannot run bf16: ask first, and put fp32 back)
        const int ok = cpu_gemm_set_precision(GEMM_BF16);
        if (!prec_users || strcmp(prec_name, "bf16")) cpu_gemm_set_precision(GEMM_F32);
        if (!ok) {
            pthread_mutex_unlock(&prec_lock);
            return copy_err(err, cap, "precision bf16: this build or CPU cannot run bf16 products (oneDNN); use fp32"), NULL;
        }
    }
    const Backend *be = backend_select(o.device, o.precision);  // (validated above: it does not exit)
    const char *prec = be->precision();
    if (prec_users && strcmp(prec_name, prec)) {
        snprintf(msg, sizeof msg, "precision %s: another live context runs in %s (the CPU's product precision is "
                 "one per process)", prec, prec_name);
        be->set_precision(!strcmp(prec_name, "bf16") ? PREC_BF16 : !strcmp(prec_name, "tf32") ? PREC_TF32 : PREC_FP32);
        pthread_mutex_unlock(&prec_lock);
        return copy_err(err, cap, msg), NULL;
    }
    prec_users++;
    snprintf(prec_name, sizeof prec_name, "%s", prec);
    pthread_mutex_unlock(&prec_lock);
    mala_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return copy_err(err, cap, "out of memory"), NULL;
    ctx->be = be;
    ctx->serial = be != backend_cpu();
    ctx->threads = o.threads;
    snprintf(ctx->device, sizeof ctx->device, "%s", be->name);
    snprintf(ctx->precision, sizeof ctx->precision, "%s", prec);
    pthread_mutex_init(&ctx->lock, NULL);
    return ctx;
}

void mala_context_free(mala_context *ctx) {
    if (!ctx) return;
    pthread_mutex_lock(&prec_lock);
    prec_users--;
    pthread_mutex_unlock(&prec_lock);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

const char *mala_context_error(mala_context *ctx) {
    static _Thread_local char copy[MALA_ERR_LEN];
    pthread_mutex_lock(&ctx->lock);
    memcpy(copy, ctx->err.msg, sizeof copy);
    pthread_mutex_unlock(&ctx->lock);
    return copy;
}
const char *mala_context_device(const mala_context *ctx) { return ctx->device; }
const char *mala_context_precision(const mala_context *ctx) { return ctx->precision; }

static int ctx_fail(mala_context *ctx, const char *msg) {
    pthread_mutex_lock(&ctx->lock);
    snprintf(ctx->err.msg, sizeof ctx->err.msg, "%s", msg);
    pthread_mutex_unlock(&ctx->lock);
    return MALA_ERROR;
}

// Around every call that computes or frees backend memory: the thread count (OpenMP's is per
// calling thread; the BLAS library's is per process: the last call's), and CUDA's turn.
static void begin(const mala_context *ctx) {
    if (ctx->serial) pthread_mutex_lock(&cuda_lock);
    set_threads(ctx->threads);
}
static int end(const mala_context *ctx, int rc) {
    if (ctx->serial) pthread_mutex_unlock(&cuda_lock);
    return rc;
}

// ---- models ----

#define DEFAULT_BATCH 16

static int model_load(mala_context *ctx, const char *path, const char *vae, mala_model **out) {
    *out = NULL;
    if (!path) return ctx_fail(ctx, "mala_model_load: no path");
    mala_model *m = calloc(1, sizeof *m);
    if (!m) return ctx_fail(ctx, "out of memory");
    m->ctx = ctx;
    MalaErr err;
        if (generator_open(&m->g, path, ctx->be, DEFAULT_BATCH, &err)) {
        free(m);
        return ctx_fail(ctx, err.msg);
    }
    char buf[4200];
    if (generator_recorded_vae(&m->g, path, &vae, buf, sizeof buf, &err) < 0 ||
        generator_attach_vae(&m->g, vae, path, &err))
    {
        generator_close(&m->g);
        free(m);
        return ctx_fail(ctx, err.msg);
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->vae, sizeof m->vae, "%s", vae ? vae : "");
    *out = m;
    return MALA_OK;
}

static void model_free(mala_model *m) {
    if (!m) return;
    generator_close(&m->g);
    free(m);
}

const char *mala_model_error(const mala_model *m) { return m->err.msg; }

int mala_model_get_info(const mala_model *m, mala_model_info *info) {
    const NetConfig *c = &m->g.net->cfg;
    *info = (mala_model_info){backbone_name(c->backbone), c->num_classes, c->in_channels, c->image_size,
                              generator_out_channels(&m->g), generator_out_size(&m->g), c->latent_scale > 0};
    return MALA_OK;
}

const char *mala_model_class_name(const mala_model *m, int k) {
    return k >= 0 && k < m->g.classes.n ? m->g.classes.names[k] : NULL;
}

int mala_model_class_find(const mala_model *m, const char *name) { return class_names_find(&m->g.classes, name); }

// ---- generation ----

mala_gen_params mala_gen_params_default(void) {
    GenOpts o = gen_opts_default();
    return (mala_gen_params){.sampler = sampler_kind_name(o.kind), .steps = o.steps, .cfg_scale = o.cfg_scale,
                             .eta = o.eta, .clip = o.clip, .class_id = -1, .count = 16, .batch = DEFAULT_BATCH};
}

__attribute__((format(printf, 2, 3))) static int model_fail(mala_model *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err.msg, sizeof m->err.msg, fmt, ap);
    va_end(ap);
    return MALA_ERROR;
}

typedef struct {
    const mala_gen_params *p;
    int first, n, cancelled;
} StepCtx;

static int on_step(void *vctx, int i, int steps, const float *x0) {
    StepCtx *s = vctx;
    if (s->p->on_step(s->p->user, s->first, s->n, i, steps, x0)) return s->cancelled = 1;
    return 0;
}

// The parameters as GenOpts and labels, checked as `mala sample` checks its flags.
static int gen_setup(mala_model *m, const mala_gen_params *p, GenOpts *o, int32_t **labels) {
    const NetConfig *c = &m->g.net->cfg;
    const int K = c->num_classes;
    *o = gen_opts_default();
    if (!p->sampler || sampler_kind_parse(p->sampler, &o->kind))
        return model_fail(m, "sampler %s: expected %s", p->sampler ? p->sampler : "(null)", sampler_kind_list());
    if (p->steps < 1 || p->steps > 1000) return model_fail(m, "steps %d: expected 1..1000", p->steps);
    if (p->count < 1) return model_fail(m, "count %d: expected 1 or more", p->count);
    if (!(p->cfg_scale >= 0 && p->cfg_scale <= 100)) return model_fail(m, "cfg_scale %g: expected 0..100", (double)p->cfg_scale);
    if (!(p->eta >= 0 && p->eta <= 10)) return model_fail(m, "eta %g: expected 0..10", (double)p->eta);
    o->steps = p->steps;
    o->cfg_scale = p->cfg_scale;
    o->eta = p->eta;
    o->clip = p->clip != 0;
    MalaErr err;
    if (gen_guidance_for(c, &o->cfg_scale, 1, "cfg_scale", &err)) return model_fail(m, "%s", err.msg);
    if (!K && (p->labels || p->class_id >= 0 || p->blend))
        return model_fail(m, "labels: an unconditional model (num_classes 0) samples without classes");
    int32_t *y = malloc(sizeof(int32_t) * p->count);
    if (!y) return model_fail(m, "out of memory");
    for (int i = 0; i < p->count; i++) {
        int k = p->labels ? p->labels[i] : p->class_id >= 0 ? p->class_id : (int)((int64_t)i * K / p->count);
        if (K && (k < 0 || k >= K)) {
            free(y);
            return model_fail(m, "class %d: the model has classes 0..%d", k, K - 1);
        }
        y[i] = k;
    }
    if (p->blend) {
        if (p->blend_a < 0 || p->blend_a >= K || p->blend_b < 0 || p->blend_b >= K || !(p->blend_w >= 0 && p->blend_w <= 1)) {
            free(y);
            return model_fail(m, "blend %d,%d,%g: expected classes in 0..%d and a weight in [0, 1]", p->blend_a, p->blend_b, (double)p->blend_w, K - 1);
        }
        o->blend = 1;
        o->blend_a = p->blend_a;
        o->blend_b = p->blend_b;
        o->blend_w = p->blend_w;
        for (int i = 0; i < p->count; i++) y[i] = p->blend_a;  // the label embedding is the blend's
    }
    *labels = y;
    return MALA_OK;
}

// A generator sized for batch images: its arena is sized when it opens, so a larger batch opens
// the model's file again.
static int ensure_batch(mala_model *m, int batch) {
    if (batch <= m->g.max_batch) return MALA_OK;
    Generator g;
    MalaErr err;
    if (generator_open(&g, m->path, m->ctx->be, batch, &err)) return model_fail(m, "%s", err.msg);
    if (generator_attach_vae(&g, m->vae[0] ? m->vae : NULL, m->path, &err)) {
        generator_close(&g);
        return model_fail(m, "%s", err.msg);
    }
    generator_close(&m->g);
    m->g = g;
    return MALA_OK;
}

static int generate(mala_model *m, const mala_gen_params *p, float *out) {
    GenOpts o;
    int32_t *y = NULL;
    if (gen_setup(m, p, &o, &y)) return MALA_ERROR;
    int batch = p->batch > 0 ? p->batch : DEFAULT_BATCH;
    if (batch > p->count) batch = p->count;
        if (ensure_batch(m, batch)) return free(y), MALA_ERROR;
    const size_t per = generator_image_floats(&m->g), oper = generator_out_floats(&m->g);
    float *x = malloc(sizeof(float) * per * batch);
    if (!x) return free(y), model_fail(m, "out of memory");
    int rc = MALA_OK;
    for (int b0 = 0; b0 < p->count && rc == MALA_OK; b0 += batch) {
        int nb = p->count - b0 < batch ? p->count - b0 : batch;
        StepCtx sc = {p, b0, nb, 0};
        MalaErr err;
        generator_noise(&m->g, x, p->seed, b0, nb);
        if (generator_run(&m->g, &o, x, y + b0, nb, p->seed, b0, p->on_step ? on_step : NULL, &sc, &err))
            rc = model_fail(m, "%s", sc.cancelled ? "cancelled" : err.msg);
        else if (generator_decode(&m->g, x, nb, out + oper * b0, &err))
            rc = model_fail(m, "%s", err.msg);
    }
    free(x);
    free(y);
    return rc;
}

static int generate_u8(mala_model *m, const mala_gen_params *p, uint8_t *out) {
    const int C = generator_out_channels(&m->g), S = generator_out_size(&m->g);
    const size_t oper = generator_out_floats(&m->g);
    if (p->count < 1) return model_fail(m, "count %d: expected 1 or more", p->count);
    float *x = malloc(sizeof(float) * oper * p->count);
    if (!x) return model_fail(m, "out of memory");
    int rc = generate(m, p, x);
    for (int i = 0; rc == MALA_OK && i < p->count; i++)  // NCHW floats -> HWC bytes (image_io.h's rounding)
        for (int c = 0; c < C; c++)
            for (size_t k = 0; k < (size_t)S * S; k++)
                out[(i * (size_t)S * S + k) * C + c] = image_sample_to_u8(x[oper * i + (size_t)c * S * S + k]);
    free(x);
    return rc;
}

int mala_write_png_grid(mala_context *ctx, const char *path, const float *images, int n, int c, int s, int nrow) {
    MalaErr err;
    if (n < 1 || s < 1 || (c != 1 && c != 3)) {
        snprintf(err.msg, sizeof err.msg, "%s: %d images of %d channels, %dx%d: a PNG grid needs 1 or 3 channels "
                 "and at least one image", path, n, c, s, s);
        return ctx_fail(ctx, err.msg);
    }
    if (image_save_grid(path, images, n, c, s, s, nrow > 0 ? nrow : 8, 2, &err)) return ctx_fail(ctx, err.msg);
    return MALA_OK;
}

// ---- VAE ----

static int vae_load_h(mala_context *ctx, const char *path, int max_batch, int max_size, mala_vae **out) {
    *out = NULL;
    if (max_batch < 1 || max_size < 1) return ctx_fail(ctx, "mala_vae_load: max_batch and max_size must be 1 or more");
    mala_vae *v = calloc(1, sizeof *v);
    if (!v) return ctx_fail(ctx, "out of memory");
    MalaErr err;
        if (!(v->v = vae_load(path, ctx->be, max_batch, max_size, max_size, &err))) {
        free(v);
        return ctx_fail(ctx, err.msg);
    }
    v->ctx = ctx;
    v->max_size = max_size;
    *out = v;
    return MALA_OK;
}

static void vae_free_h(mala_vae *v) {
    if (!v) return;
    vae_free(v->v);
    free(v);
}

const char *mala_vae_error(const mala_vae *v) { return v->err.msg; }

int mala_vae_dims(const mala_vae *v, int *channels, int *latent, int *factor) {
    const VaeConfig *c = vae_config(v->v);
    if (channels) *channels = c->in_channels;
    if (latent) *latent = c->latent;
    if (factor) *factor = vae_factor(c);
    return MALA_OK;
}

static int vae_encode_h(mala_vae *v, const float *images, int n, int h, int w, float *mean, float *logvar) {
    return vae_encode(v->v, images, n, h, w, mean, logvar, &v->err) ? MALA_ERROR : MALA_OK;
}

static int vae_decode_h(mala_vae *v, const float *z, int n, int h, int w, float *images) {
    return vae_decode(v->v, z, n, h, w, images, &v->err) ? MALA_ERROR : MALA_OK;
}

// ---- FID ----

static int fid_stats_images(mala_context *ctx, const char *inception, const float *images, int n, int c, int h, int w,
                          mala_fid_stats **out) {
    *out = NULL;
    if (n < 2 || (c != 1 && c != 3) || h < 1 || w < 1)
        return ctx_fail(ctx, "mala_fid_stats_images: needs n >= 2 images of 1 or 3 channels");
    MalaErr err;
        Inception *net = inception_load(inception, ctx->be, 0, &err);
    if (!net) return ctx_fail(ctx, err.msg);
    const int B = inception_max_batch(net);
    const size_t per = (size_t)c * h * w;
    float *x01 = malloc(sizeof(float) * per * B), *pool = malloc(sizeof(float) * INCEPTION_DIM * B);
    FidStats *s = fid_stats_new(INCEPTION_DIM);
    int rc = x01 && pool ? 0 : mala_errf(&err, "out of memory");
    for (int b0 = 0; !rc && b0 < n; b0 += B) {
        int nb = n - b0 < B ? n - b0 : B;
        for (size_t k = 0; k < per * nb; k++) x01[k] = (images[per * b0 + k] + 1.0f) * 0.5f;  // [-1, 1] -> [0, 1]
        rc = inception_forward(net, x01, nb, c, h, w, pool, NULL, &err);
        if (!rc) fid_stats_add(s, pool, nb);
    }
    if (!rc) rc = fid_stats_finalize(s, &err);
    free(x01);
    free(pool);
    inception_free(net);
    mala_fid_stats *r = rc ? NULL : calloc(1, sizeof *r);
    if (!r) {
        fid_stats_free(s);
        return ctx_fail(ctx, rc ? err.msg : "out of memory");
    }
    r->s = s;
    *out = r;
    return MALA_OK;
}

int mala_fid_stats_load(mala_context *ctx, const char *path, mala_fid_stats **out) {
    *out = NULL;
    MalaErr err;
    FidStats *s = fid_stats_load(path, &err);
    if (!s) return ctx_fail(ctx, err.msg);
    mala_fid_stats *r = calloc(1, sizeof *r);
    if (!r) return fid_stats_free(s), ctx_fail(ctx, "out of memory");
    r->s = s;
    *out = r;
    return MALA_OK;
}

int mala_fid_stats_save(mala_context *ctx, const mala_fid_stats *s, const char *path) {
    MalaErr err;
    return fid_stats_save(s->s, path, &err) ? ctx_fail(ctx, err.msg) : MALA_OK;
}

void mala_fid_stats_free(mala_fid_stats *s) {
    if (!s) return;
    fid_stats_free(s->s);
    free(s);
}

static int fid(mala_context *ctx, const mala_fid_stats *a, const mala_fid_stats *b, double *fid) {
    MalaErr err;
        return fid_from_stats(a->s, b->s, fid, &err) ? ctx_fail(ctx, err.msg) : MALA_OK;
}

// ---- the calls that compute, each between begin and end ----

int mala_model_load(mala_context *ctx, const char *path, const char *vae, mala_model **out) {
    begin(ctx);
    return end(ctx, model_load(ctx, path, vae, out));
}
void mala_model_free(mala_model *m) {
    if (!m) return;
    mala_context *ctx = m->ctx;
    begin(ctx);
    model_free(m);
    end(ctx, 0);
}
int mala_generate(mala_model *m, const mala_gen_params *p, float *out) {
    begin(m->ctx);
    return end(m->ctx, generate(m, p, out));
}
int mala_generate_u8(mala_model *m, const mala_gen_params *p, uint8_t *out) {
    begin(m->ctx);
    return end(m->ctx, generate_u8(m, p, out));
}
int mala_vae_load(mala_context *ctx, const char *path, int max_batch, int max_size, mala_vae **out) {
    begin(ctx);
    return end(ctx, vae_load_h(ctx, path, max_batch, max_size, out));
}
void mala_vae_free(mala_vae *v) {
    if (!v) return;
    mala_context *ctx = v->ctx;
    begin(ctx);
    vae_free_h(v);
    end(ctx, 0);
}
int mala_vae_encode(mala_vae *v, const float *images, int n, int h, int w, float *mean, float *logvar) {
    begin(v->ctx);
    return end(v->ctx, vae_encode_h(v, images, n, h, w, mean, logvar));
}
int mala_vae_decode(mala_vae *v, const float *z, int n, int h, int w, float *images) {
    begin(v->ctx);
    return end(v->ctx, vae_decode_h(v, z, n, h, w, images));
}
int mala_fid_stats_images(mala_context *ctx, const char *inception, const float *images, int n, int c, int h, int w,
                          mala_fid_stats **out) {
    begin(ctx);
    return end(ctx, fid_stats_images(ctx, inception, images, n, c, h, w, out));
}
int mala_fid(mala_context *ctx, const mala_fid_stats *a, const mala_fid_stats *b, double *out) {
    begin(ctx);
    return end(ctx, fid(ctx, a, b, out));
}

// The public API's models and generation (include/mala.h) over pipeline/generate.h: the parameters
// checked as `mala sample` checks its flags, the same noise, batches and labels, so the same images.
// defines: mala_model_*, mala_gen_params_default, mala_generate, mala_generate_init, mala_generate_u8,
//          api_model_fail, api_gen_setup, api_chw_to_u8
#include "api/api_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/image_io.h"
#include "pipeline/gen_inputs.h"

// ---- models ----

#define DEFAULT_BATCH 16

static int model_load(mala_context *ctx, const char *path, const char *vae, mala_model **out) {
    *out = NULL;
    if (!path) return api_ctx_fail(ctx, "mala_model_load: no path");
    mala_model *m = calloc(1, sizeof *m);
    if (!m) return api_ctx_fail(ctx, "out of memory");
    m->ctx = ctx;
    MalaErr err;
        if (generator_open(&m->g, path, ctx->be, DEFAULT_BATCH, &err)) {
        free(m);
        return api_ctx_fail(ctx, err.msg);
    }
    char buf[4200];
    if (generator_recorded_vae(&m->g, path, &vae, buf, sizeof buf, &err) < 0 ||
        generator_attach_vae(&m->g, vae, path, &err))
    {
        generator_close(&m->g);
        free(m);
        return api_ctx_fail(ctx, err.msg);
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

int api_model_fail(mala_model *m, const char *fmt, ...) {
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
int api_gen_setup(mala_model *m, const mala_gen_params *p, GenOpts *o, int32_t **labels) {
    const NetConfig *c = &m->g.net->cfg;
    const int K = c->num_classes;
    *o = gen_opts_default();
    if (!p->sampler || sampler_kind_parse(p->sampler, &o->kind))
        return api_model_fail(m, "sampler %s: expected %s", p->sampler ? p->sampler : "(null)", sampler_kind_list());
    if (p->steps < 1 || p->steps > 1000) return api_model_fail(m, "steps %d: expected 1..1000", p->steps);
    if (p->count < 1) return api_model_fail(m, "count %d: expected 1 or more", p->count);
    if (!(p->cfg_scale >= 0 && p->cfg_scale <= 100)) return api_model_fail(m, "cfg_scale %g: expected 0..100", (double)p->cfg_scale);
    if (!(p->eta >= 0 && p->eta <= 10)) return api_model_fail(m, "eta %g: expected 0..10", (double)p->eta);
    o->steps = p->steps;
    o->cfg_scale = p->cfg_scale;
    o->eta = p->eta;
    o->clip = p->clip != 0;
    MalaErr err;
    if (gen_guidance_for(c, &o->cfg_scale, 1, "cfg_scale", &err)) return api_model_fail(m, "%s", err.msg);
    if (!K && (p->labels || p->class_id >= 0 || p->blend))
        return api_model_fail(m, "labels: an unconditional model (num_classes 0) samples without classes");
    int32_t *y = malloc(sizeof(int32_t) * p->count);
    if (!y) return api_model_fail(m, "out of memory");
    for (int i = 0; i < p->count; i++) {
        int k = p->labels ? p->labels[i] : p->class_id >= 0 ? p->class_id : (int)((int64_t)i * K / p->count);
        if (K && (k < 0 || k >= K)) {
            free(y);
            return api_model_fail(m, "class %d: the model has classes 0..%d", k, K - 1);
        }
        y[i] = k;
    }
    if (p->blend) {
        if (p->blend_a < 0 || p->blend_a >= K || p->blend_b < 0 || p->blend_b >= K || !(p->blend_w >= 0 && p->blend_w <= 1)) {
            free(y);
            return api_model_fail(m, "blend %d,%d,%g: expected classes in 0..%d and a weight in [0, 1]", p->blend_a, p->blend_b, (double)p->blend_w, K - 1);
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
    if (generator_open(&g, m->path, m->ctx->be, batch, &err)) return api_model_fail(m, "%s", err.msg);
    if (generator_attach_vae(&g, m->vae[0] ? m->vae : NULL, m->path, &err)) {
        generator_close(&g);
        return api_model_fail(m, "%s", err.msg);
    }
    generator_close(&m->g);
    m->g = g;
    return MALA_OK;
}

// The input image (and mask) of an image-to-image run of count images, as `mala sample
// --init-image FILE --mask FILE` prepares them (cli/sample_init.c): the pixels copied count times
// and encoded in one pass, the mask mapped to the model's grid once and copied.
typedef struct {
    float *image, *mask;
    GenInit gi;
} InitInputs;

static int init_prepare(mala_model *m, const mala_init_image *in, int count, InitInputs *ii) {
    memset(ii, 0, sizeof *ii);
    Generator *g = &m->g;
    const int oc = generator_out_channels(g), os = generator_out_size(g), S = g->net->cfg.image_size;
    const size_t oper = generator_out_floats(g), per = generator_image_floats(g);
    const char *iname = in->image_name ? in->image_name : "init image", *mname = in->mask_name ? in->mask_name : "mask";
    MalaErr err;
    if (!in->image || !in->image_len) return api_model_fail(m, "%s: no image bytes", iname);
    float *pix = malloc(sizeof(float) * oper * count);
    if (!pix) return api_model_fail(m, "out of memory");
    if (gen_decode_image(in->image, in->image_len, iname, oc, os, pix, &err)) {
        free(pix);
        return api_model_fail(m, "%s", err.msg);
    }
    for (int i = 1; i < count; i++) memcpy(pix + oper * i, pix, sizeof(float) * oper);
    ii->image = malloc(sizeof(float) * per * count);
    if (!ii->image || generator_encode(g, pix, count, ii->image, &err)) {
        free(pix);
        free(ii->image);
        return ii->image ? api_model_fail(m, "%s: %s", iname, err.msg) : api_model_fail(m, "out of memory");
    }
    free(pix);
    if (in->mask) {
        float *mk = malloc(sizeof(float) * os * os);
        ii->mask = malloc(sizeof(float) * S * S * count);
        if (!mk || !ii->mask || gen_decode_mask(in->mask, in->mask_len, mname, os, in->mask_invert, mk, &err)) {
            int oom = !mk || !ii->mask;
            free(mk);
            free(ii->mask);
            free(ii->image);
            return oom ? api_model_fail(m, "out of memory") : api_model_fail(m, "%s", err.msg);
        }
        generator_mask_to_grid(g, mk, 1, ii->mask);
        for (int i = 1; i < count; i++) memcpy(ii->mask + (size_t)S * S * i, ii->mask, sizeof(float) * S * S);
        free(mk);
    }
    ii->gi = (GenInit){.image = ii->image, .strength = in->strength, .mask = ii->mask, .resample = in->resample};
    return MALA_OK;
}

static int generate(mala_model *m, const mala_gen_params *p, const mala_init_image *init, float *out) {
    GenOpts o;
    int32_t *y = NULL;
    if (api_gen_setup(m, p, &o, &y)) return MALA_ERROR;
    int batch = p->batch > 0 ? p->batch : DEFAULT_BATCH;
    if (batch > p->count) batch = p->count;
    if (ensure_batch(m, batch)) return free(y), MALA_ERROR;
    InitInputs ii = {0};
    if (init && init_prepare(m, init, p->count, &ii)) return free(y), MALA_ERROR;
    const size_t per = generator_image_floats(&m->g), oper = generator_out_floats(&m->g);
    const size_t S2 = (size_t)m->g.net->cfg.image_size * m->g.net->cfg.image_size;
    float *x = malloc(sizeof(float) * per * batch);
    if (!x) return free(y), free(ii.image), free(ii.mask), api_model_fail(m, "out of memory");
    int rc = MALA_OK;
    for (int b0 = 0; b0 < p->count && rc == MALA_OK; b0 += batch) {
        int nb = p->count - b0 < batch ? p->count - b0 : batch;
        StepCtx sc = {p, b0, nb, 0};
        MalaErr err;
        GenInit gi = ii.gi;  // this batch's inputs
        if (init) gi.image += per * b0;
        if (gi.mask) gi.mask += S2 * b0;
        generator_noise(&m->g, x, p->seed, b0, nb);
        if (generator_run_init(&m->g, &o, init ? &gi : NULL, x, y + b0, nb, p->seed, b0, p->on_step ? on_step : NULL,
                               &sc, &err))
            rc = api_model_fail(m, "%s", sc.cancelled ? "cancelled" : err.msg);
        else if (generator_decode(&m->g, x, nb, out + oper * b0, &err))
            rc = api_model_fail(m, "%s", err.msg);
    }
    free(x);
    free(y);
    free(ii.image);
    free(ii.mask);
    return rc;
}

void api_chw_to_u8(const float *x, int C, int S, uint8_t *out) {
    for (int c = 0; c < C; c++)
        for (size_t k = 0; k < (size_t)S * S; k++) out[k * C + c] = image_sample_to_u8(x[(size_t)c * S * S + k]);
}

static int generate_u8(mala_model *m, const mala_gen_params *p, uint8_t *out) {
    const int C = generator_out_channels(&m->g), S = generator_out_size(&m->g);
    const size_t oper = generator_out_floats(&m->g);
    if (p->count < 1) return api_model_fail(m, "count %d: expected 1 or more", p->count);
    float *x = malloc(sizeof(float) * oper * p->count);
    if (!x) return api_model_fail(m, "out of memory");
    int rc = generate(m, p, NULL, x);
    for (int i = 0; rc == MALA_OK && i < p->count; i++) api_chw_to_u8(x + oper * i, C, S, out + (size_t)i * S * S * C);
    free(x);
    return rc;
}


// ---- the calls that compute, each between api_begin and api_end ----

int mala_model_load(mala_context *ctx, const char *path, const char *vae, mala_model **out) {
    api_begin(ctx);
    return api_end(ctx, model_load(ctx, path, vae, out));
}
void mala_model_free(mala_model *m) {
    if (!m) return;
    mala_context *ctx = m->ctx;
    api_begin(ctx);
    model_free(m);
    api_end(ctx, 0);
}
int mala_generate(mala_model *m, const mala_gen_params *p, float *out) {
    api_begin(m->ctx);
    return api_end(m->ctx, generate(m, p, NULL, out));
}
int mala_generate_init(mala_model *m, const mala_gen_params *p, const mala_init_image *init, float *out) {
    api_begin(m->ctx);
    return api_end(m->ctx, generate(m, p, init, out));
}
int mala_generate_u8(mala_model *m, const mala_gen_params *p, uint8_t *out) {
    api_begin(m->ctx);
    return api_end(m->ctx, generate_u8(m, p, out));
}

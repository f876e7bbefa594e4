// The public API's VAE (model/vae.h) and FID (eval/fid.h, eval/inception.h) handles (include/mala.h).
// defines: mala_vae_*, mala_fid_stats_*, mala_fid
#include "api/api_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "eval/inception.h"

// ---- VAE ----

static int vae_load_h(mala_context *ctx, const char *path, int max_batch, int max_size, mala_vae **out) {
    *out = NULL;
    if (max_batch < 1 || max_size < 1) return api_ctx_fail(ctx, "mala_vae_load: max_batch and max_size must be 1 or more");
    mala_vae *v = calloc(1, sizeof *v);
    if (!v) return api_ctx_fail(ctx, "out of memory");
    MalaErr err;
        if (!(v->v = vae_load(path, ctx->be, max_batch, max_size, max_size, &err))) {
        free(v);
        return api_ctx_fail(ctx, err.msg);
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
        return api_ctx_fail(ctx, "mala_fid_stats_images: needs n >= 2 images of 1 or 3 channels");
    MalaErr err;
        Inception *net = inception_load(inception, ctx->be, 0, &err);
    if (!net) return api_ctx_fail(ctx, err.msg);
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
        return api_ctx_fail(ctx, rc ? err.msg : "out of memory");
    }
    r->s = s;
    *out = r;
    return MALA_OK;
}

int mala_fid_stats_load(mala_context *ctx, const char *path, mala_fid_stats **out) {
    *out = NULL;
    MalaErr err;
    FidStats *s = fid_stats_load(path, &err);
    if (!s) return api_ctx_fail(ctx, err.msg);
    mala_fid_stats *r = calloc(1, sizeof *r);
    if (!r) return fid_stats_free(s), api_ctx_fail(ctx, "out of memory");
    r->s = s;
    *out = r;
    return MALA_OK;
}

int mala_fid_stats_save(mala_context *ctx, const mala_fid_stats *s, const char *path) {
    MalaErr err;
    return fid_stats_save(s->s, path, &err) ? api_ctx_fail(ctx, err.msg) : MALA_OK;
}

void mala_fid_stats_free(mala_fid_stats *s) {
    if (!s) return;
    fid_stats_free(s->s);
    free(s);
}

static int fid(mala_context *ctx, const mala_fid_stats *a, const mala_fid_stats *b, double *fid) {
    MalaErr err;
        return fid_from_stats(a->s, b->s, fid, &err) ? api_ctx_fail(ctx, err.msg) : MALA_OK;
}


// ---- the calls that compute, each between api_begin and api_end ----

int mala_vae_load(mala_context *ctx, const char *path, int max_batch, int max_size, mala_vae **out) {
    api_begin(ctx);
    return api_end(ctx, vae_load_h(ctx, path, max_batch, max_size, out));
}
void mala_vae_free(mala_vae *v) {
    if (!v) return;
    mala_context *ctx = v->ctx;
    api_begin(ctx);
    vae_free_h(v);
    api_end(ctx, 0);
}
int mala_vae_encode(mala_vae *v, const float *images, int n, int h, int w, float *mean, float *logvar) {
    api_begin(v->ctx);
    return api_end(v->ctx, vae_encode_h(v, images, n, h, w, mean, logvar));
}
int mala_vae_decode(mala_vae *v, const float *z, int n, int h, int w, float *images) {
    api_begin(v->ctx);
    return api_end(v->ctx, vae_decode_h(v, z, n, h, w, images));
}
int mala_fid_stats_images(mala_context *ctx, const char *inception, const float *images, int n, int c, int h, int w,
                          mala_fid_stats **out) {
    api_begin(ctx);
    return api_end(ctx, fid_stats_images(ctx, inception, images, n, c, h, w, out));
}
int mala_fid(mala_context *ctx, const mala_fid_stats *a, const mala_fid_stats *b, double *out) {
    api_begin(ctx);
    return api_end(ctx, fid(ctx, a, b, out));
}

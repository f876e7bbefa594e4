// The public API's context (include/mala.h): device, precision and threads, its errors, and the
// two process-wide records the API keeps (the CPU's product precision, cpu/cpu_gemm.c, is one per
// process; CUDA calls take turns); and mala_write_png_grid.
// defines: mala_api_version, mala_context_*, mala_write_png_grid, api_ctx_fail, api_begin, api_end
#include "api/api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_gemm.h"
#include "cpu/cpu_int8.h"
#include "cpu/cpu_threads.h"
#include "formats/image_io.h"

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
    if (o.precision && strcmp(o.precision, "fp32") && strcmp(o.precision, "tf32") && strcmp(o.precision, "bf16") &&
        strcmp(o.precision, "int8")) {
        snprintf(msg, sizeof msg, "precision %s: unknown precision (expected fp32, tf32, bf16 or int8)", o.precision);
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
    if (o.precision && !strcmp(o.precision, "int8")) {  // (backend_select exits where int8 cannot run)
        const char *no = want_cuda || (!(o.device && !strcmp(o.device, "cpu")) && backend_cuda(NULL))
                             ? "precision int8: int8 products run on the CPU only (CUDA int8 is not there yet); use device cpu"
                         : !cpu_int8_available() ? "precision int8: this build or CPU cannot run int8 products (oneDNN); use fp32"
                                                 : NULL;
        if (no) {
            pthread_mutex_unlock(&prec_lock);
            return copy_err(err, cap, no), NULL;
        }
    }
    const Backend *be = backend_select(o.device, o.precision);  // (validated above: it does not exit)
    const char *prec = be->precision();
    if (prec_users && strcmp(prec_name, prec)) {
        snprintf(msg, sizeof msg, "precision %s: another live context runs in %s (the CPU's product precision is "
                 "one per process)", prec, prec_name);
        be->set_precision(!strcmp(prec_name, "bf16") ? PREC_BF16 : !strcmp(prec_name, "tf32") ? PREC_TF32
                         : !strcmp(prec_name, "int8") ? PREC_INT8 : PREC_FP32);
        pthread_mutex_unlock(&prec_lock);
        return copy_err(err, cap, msg), NULL;
    }
    prec_users++;
    snprintf(prec_name, sizeof prec_name, "%s", prec);
    pthread_mutex_unlock(&prec_lock);
    mala_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return copy_err(err, cap, "out of memory"), NULL;
    ctx->be = be;
    ctx->serial = !backend_on_host(be);
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

int api_ctx_fail(mala_context *ctx, const char *msg) {
    pthread_mutex_lock(&ctx->lock);
    snprintf(ctx->err.msg, sizeof ctx->err.msg, "%s", msg);
    pthread_mutex_unlock(&ctx->lock);
    return MALA_ERROR;
}

void api_begin(const mala_context *ctx) {
    if (ctx->serial) pthread_mutex_lock(&cuda_lock);
    set_threads(ctx->threads);
}
int api_end(const mala_context *ctx, int rc) {
    if (ctx->serial) pthread_mutex_unlock(&cuda_lock);
    return rc;
}

int mala_write_png_grid(mala_context *ctx, const char *path, const float *images, int n, int c, int s, int nrow) {
    MalaErr err;
    if (n < 1 || s < 1 || (c != 1 && c != 3)) {
        snprintf(err.msg, sizeof err.msg, "%s: %d images of %d channels, %dx%d: a PNG grid needs 1 or 3 channels "
                 "and at least one image", path, n, c, s, s);
        return api_ctx_fail(ctx, err.msg);
    }
    if (image_save_grid(path, images, n, c, s, s, nrow > 0 ? nrow : 8, 2, &err)) return api_ctx_fail(ctx, err.msg);
    return MALA_OK;
}


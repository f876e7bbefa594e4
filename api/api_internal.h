// The public API's handles (include/mala.h) as api/*.c share them, and the helpers every call uses.
#ifndef MALA_API_INTERNAL_H
#define MALA_API_INTERNAL_H

#define MALA_BUILD_LIB
#include "include/mala.h"

#include <pthread.h>

#include "core/backend.h"
#include "eval/fid.h"
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

// Keeps msg as the context's last error (under its lock); MALA_ERROR.
int api_ctx_fail(mala_context *ctx, const char *msg);
// Around every call that computes or frees backend memory: the thread count (OpenMP's is per
// calling thread; the BLAS library's is per process: the last call's), and CUDA's turn (the CUDA
// backend keeps one cuBLAS handle and stream for the process, cuda/backend_cuda.cu). api_end
// returns rc.
void api_begin(const mala_context *ctx);
int api_end(const mala_context *ctx, int rc);
// Keeps the formatted message as the model's last error; MALA_ERROR.
int api_model_fail(mala_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// p as GenOpts and the count's labels (malloc'd), checked as `mala sample` checks its flags.
int api_gen_setup(mala_model *m, const mala_gen_params *p, GenOpts *o, int32_t **labels);
// One image's CHW floats in [-1, 1] -> HWC bytes (image_io.h's rounding).
void api_chw_to_u8(const float *x, int C, int S, uint8_t *out);

#endif

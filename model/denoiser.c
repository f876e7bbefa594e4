// defines: denoiser_fn
#include "denoiser.h"

void denoiser_fn(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n) {
    Dit *m = ctx;
    CHECK(n <= m->max_batch, "denoise batch %d exceeds %d", n, m->max_batch);
    dit_forward(m, out, x, t, y, n);
}

// defines: denoiser_init, denoiser_free, denoiser_fn
#include "denoiser.h"

void denoiser_init(Denoiser *d, Dit *m) {
    const Backend *be = m->be;
    size_t hw = (size_t)m->cfg.image_size * m->cfg.image_size;
    d->m = m;
    d->max_n = m->max_batch;
    d->d_x = be->alloc((size_t)d->max_n * m->cfg.in_channels * hw * sizeof(float));
    d->d_out = be->alloc((size_t)d->max_n * m->out_channels * hw * sizeof(float));
    d->d_t = be->alloc((size_t)d->max_n * sizeof(float));
    d->d_y = be->alloc((size_t)d->max_n * sizeof(int32_t));
}

void denoiser_free(Denoiser *d) {
    const Backend *be = d->m->be;
    be->release(d->d_x); be->release(d->d_out); be->release(d->d_t); be->release(d->d_y);
}

void denoiser_fn(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n) {
    Denoiser *d = ctx;
    Dit *m = d->m;
    const Backend *be = m->be;
    size_t hw = (size_t)m->cfg.image_size * m->cfg.image_size;
    CHECK(n <= d->max_n, "denoise batch %d exceeds %d", n, d->max_n);
    be->to_device(d->d_x, x, (size_t)n * m->cfg.in_channels * hw * sizeof(float));
    be->to_device(d->d_t, t, (size_t)n * sizeof(float));
    be->to_device(d->d_y, y, (size_t)n * sizeof(int32_t));
    dit_forward(m, d->d_out, d->d_x, d->d_t, d->d_y, n);
    be->to_host(out, d->d_out, (size_t)n * m->out_channels * hw * sizeof(float));
}

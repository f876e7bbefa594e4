// Adapter from a Dit to the samplers' DenoiseFn: moves x, t, y to the backend, runs the forward
// pass and brings the output back. Buffers are allocated once for max_n images.
#ifndef MALA_DENOISER_H
#define MALA_DENOISER_H

#include <stdint.h>

#include "dit.h"

typedef struct {
    Dit *m;
    int max_n;
    float *d_x, *d_t, *d_out;
    int32_t *d_y;
} Denoiser;

void denoiser_init(Denoiser *d, Dit *m);  // max_n = m->max_batch
void denoiser_free(Denoiser *d);
// DenoiseFn signature (sampler.h): out [n, C_out, S, S] for x [n, C, S, S].
void denoiser_fn(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n);

#endif

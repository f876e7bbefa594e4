// Adapter from a Dit to the samplers' DenoiseFn: every array is already in the model's backend
// memory (sampler.h), so it is the forward pass alone.
#ifndef MALA_DENOISER_H
#define MALA_DENOISER_H

#include <stdint.h>

#include "dit.h"

// DenoiseFn signature (sampler.h) with ctx = the Dit: out [n, C_out, S, S] for x [n, C, S, S].
void denoiser_fn(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n);

#endif

// A latent model's cheap step preview: a linear map of the latent channels to RGB at every latent
// cell, upsampled by the VAE's factor (nearest) and clamped to [-1, 1], in place of a VAE decode,
// as stable-diffusion.cpp's `--preview proj` and ComfyUI's latent previews do.
#ifndef MALA_LATENT_PREVIEW_H
#define MALA_LATENT_PREVIEW_H

#include <stdint.h>

#include "core/common.h"

typedef struct Vae Vae;  // model/vae.h

#define LATENT_PROJ_MAX_IN 16
#define LATENT_PROJ_MAX_OUT 4

// out[o] = b[o] + sum_c w[o][c] z[c], z the VAE's scaled latents (z_raw * scaling_factor, the
// space a diffusion model samples in when its latent_scale is the VAE's); out in [-1, 1].
typedef struct {
    int cin, cout, factor;
    float w[LATENT_PROJ_MAX_OUT][LATENT_PROJ_MAX_IN];
    float b[LATENT_PROJ_MAX_OUT];
    float r2[LATENT_PROJ_MAX_OUT];  // a fit's R^2 per output channel (latent_proj_fit); 0 for published factors
} LatentProj;

// The SD-VAE's (4 latent channels, RGB, factor 8) published factors.
void latent_proj_sd(LatentProj *p);
// Fits the projection of VAE v by least squares: `count` random latents z ~ N(0, 1) of g x g cells
// (seed) decoded through v, each decoded f x f block averaged to one RGB value per cell, and
// out = b + W z solved over all cells (normal equations). 0, or -1 with err set.
int latent_proj_fit(LatentProj *p, Vae *v, int g, int count, uint64_t seed, MalaErr *err);
// z [n, cin, h, w] times `scale` (the factor from the caller's latents to the VAE's scaled ones)
// -> out [n, cout, h * factor, w * factor]: each cell's projected colour, clamped, on its block.
void latent_proj_apply(const LatentProj *p, const float *z, int n, int h, int w, float scale, float *out);

#endif

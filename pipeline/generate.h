// Image generation: a network, the diffusion and a sampler joined. The one sampling API that
// `mala sample`, `mala eval`, `mala bench sample`, the training preview and the viewer call; it
// sits above model/ and sampler/ and is the only place that wires them together.
#ifndef MALA_GENERATE_H
#define MALA_GENERATE_H

#include <stdint.h>

#include "model/checkpoint.h"
#include "sampler/sampler.h"
#include "pipeline/latent_preview.h"

typedef struct Vae Vae;  // model/vae.h

typedef struct {
    Net *net;
    ClassNames classes;
    Diffusion base;
    Sampler s;
    int max_batch;
    uint64_t noise_seed;   // per-step noise of the run in progress (see generator_run)
    int64_t noise_first;
    int run_n;             // images in the run in progress
    float *d_x;            // backend copy of the images being sampled [max_batch, C, S, S]
    float *x0_host;        // host copy of the predicted x0 for the caller's on_step
    float *d_known, *d_mask, *d_work;  // inpainting: the known image, the mask and scratch [max_batch, C, S, S]
                                       // (backend memory, allocated by the first inpainting run)
    SamplerStepFn user_step; void *user_ctx;
    Vae *vae;              // latent models: the decoder of their samples (generator_attach_vae)
    int out_c, out_s;      // the decoded images' channels and size
    LatentProj proj;       // latent models: the step preview's projection (generator_preview)
    int proj_ready;
    long vae_decodes;      // VAE decoder passes so far (generator_decode, and a projection's fit)
} Generator;

typedef struct {
    SamplerKind kind;
    int steps;
    float cfg_scale, eta;
    int clip;
    int cfg_channels;  // guided eps channels (0 = all; DiT's forward_with_cfg: 3); sampler.h
    float cfg_lo, cfg_hi;  // guidance interval in sigma, (lo, hi]; hi <= 0: every step (sampler.h)
    // class blend (model/net.h): every image's label embedding is (1 - blend_w) e_a + blend_w e_b,
    // the null one kept for guidance; blend 0: off
    int blend, blend_a, blend_b;
    float blend_w;
} GenOpts;

// Image-to-image (SDEdit) and inpainting (RePaint) of one run (pipeline/generate_init.c,
// docs/sample.md "Image-to-image"). image: the input [n, C, S, S] in the model's space (the
// VAE's scaled latents for a latent model: generator_encode), host. strength in (0, 1]: the run
// takes the last k = max(1, round(strength N)) of the N steps of the sampler's schedule (as
// diffusers' img2img, rounded), after noising the image with the run's noise x to the level of
// the first of them: x = sqrt(abar) image + sqrt(1 - abar) x. k = N is plain generation: x stays
// the noise, so strength 1 gives the same images as no input. mask [n, 1, S, S] (host; 1
// regenerate, 0 keep; NULL: none) with resample R jumps per step (DDPM, DDIM).
typedef struct {
    const float *image;
    float strength;
    const float *mask;
    int resample;
} GenInit;
// The steps a run with strength s takes of N: max(1, round(s N)) (round half up).
int gen_init_steps(float strength, int N);
// For generate.c (the sampler's kind and steps already set): checks in against o and the model,
// noises x for a skip, uploads the known image and mask and sets the sampler's init. 0 or -1.
int gen_init_prepare(Generator *g, const GenOpts *o, const GenInit *in, float *x, int n, MalaErr *err);
GenOpts gen_opts_default(void);  // DiT's sample.py: DDPM, 250 steps, guidance 4, clip on
// An unconditional model (num_classes 0) has no guidance: *cfg_scale becomes 1 when the flag `flag`
// was not given, and a given scale other than 1 is refused (-1, err names the flag). 0 otherwise.
int gen_guidance_for(const NetConfig *c, float *cfg_scale, int given, const char *flag, MalaErr *err);
// --cfg-channels N|all: "all" -> 0, N (1 .. 1024) -> N; 0 on success, -1 on anything else.
int gen_cfg_channels_parse(const char *s, int *out);
// The channels a run with cfg_channels guides on a C-channel model, as text: "all" (0, or N >= C) or N.
const char *gen_cfg_channels_str(int cfg_channels, int C, char *buf, size_t cap);
// --cfg-interval LO,HI (0 <= LO < HI, in sigma) or "none" (lo = hi = 0); 0 on success.
int gen_cfg_interval_parse(const char *s, float *lo, float *hi);
// "LO,HI" or "none".
const char *gen_cfg_interval_str(const GenOpts *o, char *buf, size_t cap);
// Opens `path` (EMA weights when present) for batches of up to max_batch images.
int generator_open(Generator *g, const char *path, const Backend *be, int max_batch, MalaErr *err);
// The same with the network mode: NET_INFER_ATTN keeps each block's attention inputs of the last
// forward (net_attn_row; the viewer's maps), at the cost of depth x 5H floats per token and image.
int generator_open_mode(Generator *g, const char *path, const Backend *be, int max_batch, int mode, MalaErr *err);
// A generator over a new network of configuration c with zero weights: the caller fills g->net->w
// (net_init_weights, or a copy of a trainer's EMA).
void generator_new(Generator *g, const NetConfig *c, const ClassNames *cn, const Backend *be, int max_batch);
// Floats of one image [C, S, S].
size_t generator_image_floats(const Generator *g);
void generator_close(Generator *g);
// Fills noise [n, C, S, S] (host) for images first..first+n-1 of a run seeded by seed: image i's
// noise depends only on (seed, i), so batching does not change the images, and it is the host's
// Philox on every backend, so the same seed starts from the same x_T on CPU and CUDA.
void generator_noise(const Generator *g, float *noise, uint64_t seed, int64_t first, int n);
// x (host): in the initial noise, out the samples in [-1, 1], for images first..first+n-1 of a
// run seeded by seed. The per-step noise of image i (DDPM, DDIM with eta > 0) depends only on
// (seed, first + i, step) on a given backend, so batching changes nothing. on_step (may be NULL)
// sees the predicted x0 (host memory) after every step and may cancel (returns 1). An unconditional
// model (num_classes 0) takes label 0 (its one embedding) and guidance 1 only.
int generator_run(Generator *g, const GenOpts *o, float *x, const int32_t *y, int n, uint64_t seed, int64_t first,
                  SamplerStepFn on_step, void *ctx, MalaErr *err);
// The same from an input image (in NULL: generator_run); on_step counts the steps taken.
int generator_run_init(Generator *g, const GenOpts *o, const GenInit *in, float *x, const int32_t *y, int n,
                       uint64_t seed, int64_t first, SamplerStepFn on_step, void *ctx, MalaErr *err);

// ---- latent models (docs/design.md §8; pipeline/decode.c) ----
// A latent model (cfg.latent_scale > 0) samples scaled VAE latents; its images come from
// generator_decode through the VAE attached here (sized for up to 8 images per pass), and its
// sampling never clips x0 (DiT's latents use clip off). vae_path NULL for a latent model, or given
// for a pixel model, is an error naming --vae (model: the model file's name for the message).
int generator_attach_vae(Generator *g, const char *vae_path, const char *model, MalaErr *err);
// For a latent model given no VAE (*vae NULL): the one its training run recorded (run.vae in the
// model file) goes into buf and *vae. 1 when it was taken (the caller says so), 0 when nothing
// changed (a pixel model, a VAE given, none recorded), -1 when the recorded file cannot be read.
int generator_recorded_vae(const Generator *g, const char *model, const char **vae, char *buf, size_t cap,
                           MalaErr *err);
// The same by file, before a generator is open (the viewer's checks): run.vae of model into buf;
// 1 when recorded and readable, 0 when none is recorded, -1 when it cannot be read.
int gen_model_recorded_vae(const char *model, char *buf, size_t cap, MalaErr *err);
// An output image: the decoded one for a latent model, the model's own for a pixel model.
int generator_out_channels(const Generator *g);
int generator_out_size(const Generator *g);
size_t generator_out_floats(const Generator *g);
// generator_run's samples x [n, C, S, S] -> images out [n, out_C, out_S, out_S] in the [-1, 1]
// scale: decoded through the VAE, or copied for a pixel model (out may be x then).
int generator_decode(Generator *g, const float *x, int n, float *out, MalaErr *err);
// A step preview of x [n, C, S, S] as images out [n, out_C, out_S, out_S] in [-1, 1] that costs
// no decode: a latent model's latents through a linear latent-to-RGB projection, each latent cell
// upsampled (nearest) to its block of pixels and clamped (pipeline/latent_preview.h): the SD-VAE's
// published factors, or for any other VAE a least-squares fit made once, on the first preview,
// from 4 random 8x8 latents decoded. A pixel model's x is copied (out may be x then).
int generator_preview(Generator *g, const float *x, int n, float *out, MalaErr *err);
// The inverse for inputs: images [n, out_C, out_S, out_S] in [-1, 1] -> the model's space x
// [n, C, S, S]: through the VAE's encoder (the posterior mean times latent_scale; deterministic)
// for a latent model, copied for a pixel model (x may be img then).
int generator_encode(Generator *g, const float *img, int n, float *x, MalaErr *err);
// A mask over output pixels [n, 1, out_S, out_S] (0 keep, 1 regenerate) -> the model's grid
// [n, 1, S, S]: a latent cell is regenerated when any pixel of its f x f block is (max pooling,
// so no pixel meant to change is frozen); a pixel model's mask is copied (out may be mask then).
void generator_mask_to_grid(const Generator *g, const float *mask, int n, float *out);

#endif

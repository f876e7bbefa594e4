// DDPM (ancestral), DDIM and DPM-Solver++(2M) samplers over respaced timesteps, with
// classifier-free guidance.
// A sampler sees only a denoise callback, never the network:
//
//   denoise(ctx, out, x, t, y, n): out [n, Cout, S, S] for x [n, C, S, S] at timesteps t[n] (the
//   ORIGINAL timestep values, as floats) and labels y[n]; y == num_classes is the null class.
//   Cout = 2C when learn_sigma (eps | v, learned range), else C (fixed-small variance).
//
// Every array the sampler and its callbacks see (x, out, t, y, noise, x0) lives in the backend's
// memory (device memory on CUDA): a run copies only the labels in; the update of each step is
// the backend's sampler_step op: x0 from the model's eps, then a linear combination of x, x0, eps
// and the previous step's x0 with per-step coefficients (sampler_step_coefs), so a solver is a
// table of coefficients and a multistep solver's state (the previous x0) stays in backend memory.
//
// DPM-Solver++(2M) (Lu et al. 2022, "DPM-Solver++", Algorithm 2; the official dpm_solver's
// multistep 'dpmsolver' update and diffusers' DPMSolverMultistepScheduler with algorithm_type
// dpmsolver++, solver_order 2, lower_order_final, final_sigmas_type "zero") on the discrete
// process: alpha = sqrt(abar), sigma = sqrt(1 - abar), lambda = log(alpha / sigma). N steps are N
// network evaluations at the timesteps round(k (999 / N)), k = N .. 1 (DiT's space_timesteps(1000,
// [N + 1]) without its t = 0: the official dpm_solver's time-uniform grid and diffusers'
// "linspace" spacing), the step after the last one going to the data (sigma = 0). DDPM and DDIM
// use space_timesteps(1000, [N]) and evaluate at t = 0 too. From s (index i) to t (index i-1),
// h = lambda_t - lambda_s, phi = expm1(-h):
//   first step:  x_t = (sigma_t / sigma_s) x - alpha_t phi x0
//   later steps: r = (lambda_s - lambda_prev) / h, D = (1 + 1/(2r)) x0 - (1/(2r)) x0_prev,
//                x_t = (sigma_t / sigma_s) x - alpha_t phi D
//   last step (to sigma = 0, first order): x = x0.
// With N = 1000 there is no spare point: all 1000 are evaluated, the last from t = 0. It is
// deterministic (eta is ignored) and uses the eps channels only.
//
// Guidance with scale w != 1: one call per step on a batch of 2n = [x; x] with labels
// [y; null]; eps = eps_u + w (eps_c - eps_u) on the first cfg_channels channels (0 or >= C: all
// C), the other eps channels and the variance channels come from the conditional half (DiT's
// forward_with_cfg with its 3: eps, rest = out[:, :3], out[:, 3:]). w == 1 calls denoise with n only.
// A guidance interval (Kynkaenniemi et al. 2024, "Applying guidance in a limited interval improves
// sample and distribution quality"): guidance only at the steps whose sigma = sqrt(1/abar - 1)
// (the VP process's noise-to-signal ratio, EDM's sigma) lies in (cfg_lo, cfg_hi]; the other steps
// are one conditional pass of n, as w == 1.
//
// Noise: the caller supplies x_T (in x). Per-step noise (DDPM; DDIM with eta > 0) comes from the
// backend's rand_normal under cfg.seed (stream 1024 * run + step, runs counted from init), or from
// a noise hook when one is set. No noise at the last step (t == 0). All buffers are allocated
// once in sampler_init; a run allocates nothing.
#ifndef MALA_SAMPLER_H
#define MALA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "core/backend.h"
#include "sampler/diffusion.h"

typedef void (*DenoiseFn)(void *ctx, float *out, const float *x, const float *t, const int32_t *y, int n);
// Called after every step with the current predicted x0 [n, C, S, S] in backend memory
// (conditional, guided, clipped when clipping is on). step_index counts 0 .. num_steps-1.
// Non-zero cancels the run.
typedef int (*SamplerStepFn)(void *ctx, int step_index, int num_steps, const float *x0_pred);
// Optional replacement of the per-step noise: fill out[count] (backend memory, count = n*C*S*S)
// with standard normals for step step_index. Only called on steps that add noise.
typedef void (*SamplerNoiseFn)(void *ctx, float *out, size_t count, int step_index);

// Inpainting's extra draws (sampler/inpaint.c): fill out[count] (backend memory) with standard
// normals for step step_index, draw number draw >= 1 (distinct from the step noise and each other).
typedef void (*SamplerDrawFn)(void *ctx, float *out, size_t count, int step_index, int draw);

// Image-to-image and inpainting (sampler/inpaint.c; docs/sample.md "Image-to-image").
//   skip: SDEdit. The first skip steps of the schedule are not run: x holds the image noised to
//     the process's index top - skip (sampler_start_abar), and the run goes on from there (a
//     multistep solver's first step there is first order). Progress counts the steps run.
//   known, mask: RePaint (Lugmayr et al. 2022). After every step x = m x + (1 - m) x_known, with
//     x_known the known image noised to the level the step reached (the data itself after the last
//     step) by draw 3j + 1 of the step (j: the pass); m = mask (1 regenerate, 0 keep). resample: R
//     jumps per step (DDPM, DDIM): the merged x goes back one step, x_i = sqrt(abar_i / abar_t) x +
//     sqrt(1 - abar_i / abar_t) z (draw 3j + 2), and the step runs again with its noise from draw
//     3j + 3: R + 1 passes in all (none after the last step). DPM-Solver++ takes the merge but no
//     jumps (its multistep history would not match).
typedef struct {
    int skip;
    const float *known, *mask;  // [n, C, S, S] backend memory; known NULL: no inpainting
    float *work;                // [n, C, S, S] backend scratch
    int resample;
    SamplerDrawFn draw; void *draw_ctx;  // NULL: rand_normal under cfg.seed
} SamplerInit;

typedef enum { SAMPLER_DDPM = 0, SAMPLER_DDIM = 1, SAMPLER_DPMPP_2M = 2, SAMPLER_KIND_COUNT } SamplerKind;

int sampler_kind_parse(const char *name, SamplerKind *out);   // a sampler_kind_name (any case); 0 on success
const char *sampler_kind_name(SamplerKind k);                 // "ddpm", "ddim", "dpm++2m"; NULL out of range
const char *sampler_kind_label(SamplerKind k);                // "DDPM", "DDIM", "DPM++2M": for display
const char *sampler_kind_list(void);                          // "ddpm|ddim|dpm++2m", for usage and errors

#define SAMPLER_CANCELLED 1   // sampler_run's return when on_step asked to stop

typedef struct {
    SamplerKind kind;     // DDPM (default), DDIM or DPM-Solver++(2M)
    int num_steps;        // respaced steps (1 .. T); 0 = all T
    float cfg_scale;      // guidance scale w; 1 = no guidance (one pass of n)
    int cfg_channels;     // eps channels guided (0 = all; DiT guides 3): the rest are conditional
    double cfg_lo, cfg_hi;// guidance only where sigma is in (cfg_lo, cfg_hi]; cfg_hi <= 0: every step
    float eta;            // DDIM noise (0 = deterministic)
    int clip_denoised;    // clip predicted x0 to [-1, 1] (pixel models: on; latents: off)
    int learn_sigma;      // model output has 2C channels (eps | v)
    int num_classes;      // labels 0 .. num_classes-1; num_classes = null class
    uint64_t seed;        // per-step noise without a noise hook
} SamplerConfig;

SamplerConfig sampler_config_default(void);   // DDPM, 250 steps, w 1, eta 0, clip on, learn_sigma on, 1000 classes

typedef struct {
    SamplerConfig cfg;    // kind, cfg_scale, eta, clip_denoised may change between runs
    Diffusion sp;         // the respaced process (sp.timestep_map: original timesteps)
    Diffusion sp_dpm;     // DPM-Solver++'s: num_steps + 1 timesteps (<= T), its index 0 never evaluated
    int max_n, C, S, cout;
    size_t hw;
    DenoiseFn denoise; void *denoise_ctx;
    SamplerStepFn on_step; void *step_ctx;
    SamplerNoiseFn noise_fn; void *noise_ctx;
    const Backend *be;
    // backend workspace, allocated once: model input/output for 2*max_n, timesteps, labels, x0,
    // the previous step's x0 (multistep solvers; swapped with x0 after each step), noise
    float *xin, *out, *tin, *x0, *x0_prev, *noise;
    int32_t *yin;
    int32_t *y_host;         // host staging for the labels
    int64_t denoise_calls;   // callback calls made (all runs)
    uint64_t runs;           // runs started (the default noise's stream)
    SamplerInit init;        // image-to-image / inpainting of the next runs (zero: plain generation)
} Sampler;

int sampler_init(Sampler *s, const Backend *be, const Diffusion *base, const SamplerConfig *cfg, int max_n, int C,
                 int S, DenoiseFn denoise, void *denoise_ctx, MalaErr *err);
void sampler_set_progress(Sampler *s, SamplerStepFn on_step, void *ctx);
void sampler_set_noise(Sampler *s, SamplerNoiseFn noise_fn, void *ctx);
// Image-to-image / inpainting for the following runs (NULL: plain generation again). sampler_run
// refuses a skip outside 0..num_steps-1 and jumps with DPM-Solver++.
void sampler_set_init(Sampler *s, const SamplerInit *in);
// The alpha-bar x must be noised to when the first `skip` steps are skipped (the current kind's process).
double sampler_start_abar(const Sampler *s, int skip);
// Respace to another step count (rebuilds sp and sp_dpm; the workspace stays).
int sampler_set_steps(Sampler *s, const Diffusion *base, int num_steps, MalaErr *err);
// x [n, C, S, S] (backend memory): in x_T (or the noised image, SamplerInit.skip), out x_0. y[n] labels (host). Returns 0, SAMPLER_CANCELLED (x then holds the
// partially denoised state), or -1 with err set.
int sampler_run(Sampler *s, float *x, const int32_t *y, int n, MalaErr *err);
// The constants of the update at index i of the process d (sampler_update in diffusion_math.h):
// kind, eta, cfg_scale, clip_denoised and learn_sigma from cfg; noisy: whether z is added (the
// sampler passes i > 0 for DDPM, i > 0 and eta > 0 for DDIM, 0 for DPM-Solver++). A multistep
// kind reads index i + 1 as its previous step (none at i = T-1, the first step).
// For DPM-Solver++ d is the N + 1 point process (sp_dpm; sampler_process): index
// d->num_timesteps - cfg->num_steps (1, or 0 when d has no more points than steps) steps to the data.
SamplerStepCoefs sampler_step_coefs(const Diffusion *d, const SamplerConfig *cfg, int i, int guided, int noisy);
// The process the current kind steps through: sp_dpm for DPM-Solver++, else sp.
const Diffusion *sampler_process(const Sampler *s);
void sampler_free(Sampler *s);

#endif

// Gaussian diffusion as ADM / DiT `diffusion/` define it: beta schedules, the per-timestep
// coefficient tables (float64), timestep respacing, q_sample, the posterior q(x_{t-1}|x_t,x_0),
// learned-range variances and the training loss (MSE on eps + VB on the variance) with its
// gradient w.r.t. the model output.
//
// Conventions
// - Images are float32 NCHW [n, C, H, W]; hw = H * W. Coefficients are float64 and every
//   per-element formula is evaluated in double, then rounded once to float32.
// - Model output is [n, Cout, H, W]: Cout = 2C with learned variance ("learned range": the first
//   C channels are eps, the last C channels v in [-1, 1]), Cout = C with the fixed-small
//   (posterior) variance.
// - t is an index into this process's tables (0 .. T-1). A respaced process keeps
//   timestep_map[i]: the original timestep the network must be given for index i.
#ifndef MALA_DIFFUSION_H
#define MALA_DIFFUSION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "core/diffusion_math.h"

typedef enum { BETA_LINEAR = 0, BETA_COSINE = 1 } BetaSchedule;

typedef struct {
    int num_timesteps;            // T of this process (n for a respaced one)
    int original_num_timesteps;   // T of the process it was respaced from (== T when not)
    BetaSchedule schedule;
    double vb_scale;              // VB weight in the loss: T_original / 1000 (ADM RESCALED_MSE)
    int32_t *timestep_map;        // [T] original timestep for each index
    // [T] each, float64, names as in ADM's GaussianDiffusion
    double *betas, *log_betas, *alphas_cumprod, *alphas_cumprod_prev, *alphas_cumprod_next;
    double *sqrt_alphas_cumprod, *sqrt_one_minus_alphas_cumprod, *log_one_minus_alphas_cumprod;
    double *sqrt_recip_alphas_cumprod, *sqrt_recipm1_alphas_cumprod;
    double *posterior_variance, *posterior_log_variance_clipped;
    double *posterior_mean_coef1, *posterior_mean_coef2;
    double *coefs;                // [T][DIFF_COEFS] rows for the backend ops (diffusion_math.h)
    double *mem_;                 // one block holding all the arrays above
} Diffusion;

// "linear" / "cosine" (also DiT's "squaredcos_cap_v2"); 0 on success.
int beta_schedule_parse(const char *name, BetaSchedule *out);
const char *beta_schedule_name(BetaSchedule s);

// betas[T]: linear = linspace(1e-4 * 1000/T, 0.02 * 1000/T, T) as numpy computes it; cosine =
// improved DDPM's alpha-bar cos^2((t + 0.008) / 1.008 * pi / 2) with betas capped at 0.999.
int diffusion_make_betas(double *betas, BetaSchedule s, int T, MalaErr *err);

// Build / free. All init functions leave *d zeroed on failure; diffusion_free(zeroed) is fine.
int diffusion_init(Diffusion *d, BetaSchedule s, int T, MalaErr *err);
int diffusion_init_from_betas(Diffusion *d, const double *betas, int T, MalaErr *err);
// The process every model of this program is trained and sampled with: DiT's create_diffusion
// (linear betas, T = 1000).
void diffusion_init_dit(Diffusion *d);
void diffusion_free(Diffusion *d);

// ADM's space_timesteps(T, [n]) for one section: out[n] ascending original timesteps
// start + round(cur), cur += (T-1)/(n-1) accumulated in double as ADM does, Python's
// round-half-to-even. n == T gives all; n == 1 gives {T-1} (one step from pure noise: ADM's {0}
// cannot sample). 1 <= n <= T.
int diffusion_space_timesteps(int32_t *out, int T, int n, MalaErr *err);

// The process over the n respaced timesteps of base: betas rebuilt from alpha-bar ratios
// (beta_i = 1 - abar[t_i] / abar[t_{i-1}]), timestep_map[i] = base->timestep_map[t_i].
int diffusion_init_respaced(Diffusion *d, const Diffusion *base, int n, MalaErr *err);

// x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise, per sample t[b]; per = C * hw.
void diffusion_q_sample(const Diffusion *d, float *xt, const float *x0, const float *noise,
                        const int32_t *t, int n, size_t per);

// Posterior mean coef1_t x0 + coef2_t x_t (its variance and clipped log variance are the tables).
void diffusion_q_posterior_mean(const Diffusion *d, float *mean, const float *x0, const float *xt,
                                const int32_t *t, int n, size_t per);

// ADM's p_mean_variance for an eps model: pred_x0 = sqrt(1/abar) x_t - sqrt(1/abar - 1) eps,
// clipped to [-1, 1] when clip; mean = posterior mean from pred_x0; log_var learned-range from
// the v channels (learn_sigma) or the clipped posterior log variance. Any output may be NULL.
void diffusion_p_mean_variance(const Diffusion *d, float *mean, float *log_var, float *pred_x0,
                               const float *model_out, const float *xt, const int32_t *t,
                               int n, int C, size_t hw, int learn_sigma, int clip);

// ADM's training loss for an eps model (loss type MSE, learned-range variance when learn_sigma):
//   x_t = q_sample(x0, t, noise) (rounded to float32, as the network saw it)
//   mse_b = mean over C*hw of (noise - eps_pred)^2
//   vb_b  = vb_scale * mean over C*hw of KL(q(x_{t-1}|x_t,x0) || p(x_{t-1}|x_t)) / ln 2, where p's
//           mean uses a stop-gradient eps_pred (no clipping); at t == 0 the discretised Gaussian
//           NLL of x0 (bins 2/255, tanh-approximated normal cdf) instead; 0 without learn_sigma
//   loss_b = mse_b + vb_b;   returns mean_b loss_b.
// grad (may be NULL) = d(mean_b loss_b) / d(model_out), same shape as model_out, overwritten.
// loss_per / mse_per / vb_per [n] may be NULL.
double diffusion_training_loss(const Diffusion *d, float *grad, double *loss_per, double *mse_per,
                               double *vb_per, const float *model_out, const float *x0,
                               const float *noise, const int32_t *t, int n, int C, size_t hw,
                               int learn_sigma);

#endif

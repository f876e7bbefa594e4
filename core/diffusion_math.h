// Per-element diffusion math shared by the host reference (sampler/diffusion.c), the CPU backend
// and the CUDA kernels: the ADM training-loss terms and their gradients, and one sampler update
// (DDPM, DDIM, DPM-Solver++). Everything is evaluated in double and rounded once to float32, as
// ADM's float64 tables are. Formulas: ADM guided_diffusion/gaussian_diffusion.py and losses.py (cited per function).
#ifndef MALA_DIFFUSION_MATH_H
#define MALA_DIFFUSION_MATH_H

#include <stdint.h>

#include "core/ops_math.h"

// One row of per-timestep coefficients (DIFF_COEFS doubles per timestep index), the form in which
// the backend's diffusion ops read a process's tables.
enum {
    DC_SQRT_AB,          // sqrt(abar_t)
    DC_SQRT_1M_AB,       // sqrt(1 - abar_t)
    DC_SQRT_RECIP_AB,    // sqrt(1 / abar_t)
    DC_SQRT_RECIPM1_AB,  // sqrt(1 / abar_t - 1)
    DC_POST_C1,          // posterior mean coefficient of x0
    DC_POST_C2,          // posterior mean coefficient of x_t
    DC_POST_LOGVAR,      // log posterior variance, clipped (learned range minimum)
    DC_LOG_BETA,         // log beta_t (learned range maximum)
    DC_TIMESTEP,         // the original timestep the network is given
    DIFF_COEFS
};

// Learned-range log variance for a network value v in [-1, 1]: f = (v + 1) / 2,
// f log(beta_t) + (1 - f) log(posterior variance clipped).
MALA_HD double learned_log_var(double v, double min_log, double max_log) {
    double f = (v + 1.0) / 2.0;
    return f * max_log + (1.0 - f) * min_log;
}

// ADM's approx_standard_normal_cdf: 0.5 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and its
// derivative.
MALA_HD double approx_cdf(double x) {
    return 0.5 * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
MALA_HD double approx_cdf_grad(double x) {
    double th = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 - th * th) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

// -log p(x0 in its 2/255 bin) under N(mean, exp(log_scale)^2) and d(nll)/d(log_scale)
// (ADM discretized_gaussian_log_likelihood). Edge bins: x0 < -0.999 integrates from -inf,
// x0 > 0.999 to +inf; probabilities are clamped at 1e-12 (no gradient through the clamp).
// Thresholds compare in float32 like torch.
MALA_HD double discretized_nll(float x0, double mean, double log_scale, double *dnll_ds) {
    double cx = (double)x0 - mean;
    double inv = exp(-log_scale);
    double plus_in = inv * (cx + 1.0 / 255.0), min_in = inv * (cx - 1.0 / 255.0);
    double lp, dlp;
    if (x0 < -0.999f) {
        double cdf_plus = approx_cdf(plus_in);
        lp = log(cdf_plus > 1e-12 ? cdf_plus : 1e-12);
        dlp = cdf_plus > 1e-12 ? -approx_cdf_grad(plus_in) * plus_in / cdf_plus : 0.0;
    } else if (x0 > 0.999f) {
        double om = 1.0 - approx_cdf(min_in);
        lp = log(om > 1e-12 ? om : 1e-12);
        dlp = om > 1e-12 ? approx_cdf_grad(min_in) * min_in / om : 0.0;
    } else {
        double delta = approx_cdf(plus_in) - approx_cdf(min_in);
        lp = log(delta > 1e-12 ? delta : 1e-12);
        dlp = delta > 1e-12
            ? (-approx_cdf_grad(plus_in) * plus_in + approx_cdf_grad(min_in) * min_in) / delta : 0.0;
    }
    *dnll_ds = -dlp;
    return -lp;
}

// x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise, rounded once (q_sample).
MALA_HD float q_sample_f(const double *k, float x0, float noise) {
    return (float)(k[DC_SQRT_AB] * x0 + k[DC_SQRT_1M_AB] * noise);
}

// The VB term of one element at timestep row k (t0: t == 0) and its derivative with respect to
// the network's variance value v. p's mean uses the stop-gradient eps (no clipping):
//   t > 0:  KL(q(x_{t-1} | x_t, x0) || p(x_{t-1} | x_t))  (normal_kl, natural log)
//   t == 0: the discretised Gaussian NLL of x0.
MALA_HD double vb_term(const double *k, int t0, float x0, float noise, float eps, float v, double *dterm_dv) {
    const double min_log = k[DC_POST_LOGVAR], max_log = k[DC_LOG_BETA];
    const double xt = q_sample_f(k, x0, noise);  // what the network saw
    const double px0 = k[DC_SQRT_RECIP_AB] * xt - k[DC_SQRT_RECIPM1_AB] * eps;
    const double model_mean = k[DC_POST_C1] * px0 + k[DC_POST_C2] * xt;
    const double lv = learned_log_var(v, min_log, max_log);
    const double dlv_dv = 0.5 * (max_log - min_log);
    double term, dterm_dlv;
    if (t0) {
        double dnll_ds;
        term = discretized_nll(x0, model_mean, 0.5 * lv, &dnll_ds);
        dterm_dlv = 0.5 * dnll_ds;
    } else {
        double true_mean = k[DC_POST_C1] * x0 + k[DC_POST_C2] * xt;
        double dm = true_mean - model_mean;
        double e1 = exp(min_log - lv), e2 = dm * dm * exp(-lv);
        term = 0.5 * (-1.0 + lv - min_log + e1 + e2);
        dterm_dlv = 0.5 * (1.0 - e1 - e2);
    }
    *dterm_dv = dterm_dlv * dlv_dv;
    return term;
}

// One sampler step's constants at respaced index i (computed on the host by sampler.c,
// sampler_step_coefs). Every solver's step has one form: predict x0 from the model's eps, then a
// linear combination of x, x0, the eps consistent with the (clipped) x0, the previous step's x0
// (multistep solvers) and noise. A term is evaluated only when its coefficient is non-zero.
enum { STEP_NOISE_NONE = 0, STEP_NOISE_FIXED = 1, STEP_NOISE_LEARNED = 2 };
typedef struct {
    double sra, srm1;       // prediction: x0 = sqrt(1/abar) x - sqrt(1/abar - 1) eps
    double w;               // guidance scale
    int guided, clip, learn_sigma;
    double c_x0, c_x, c_eps, c_prev;  // the combination's coefficients (see sampler_update)
    int noise;              // STEP_NOISE_*: none, sigma z, or the learned-range std times z
    double sigma;           // STEP_NOISE_FIXED's std
    double min_log, max_log;// STEP_NOISE_LEARNED's range bounds
    int guide_c;            // guided: channels 0 .. guide_c-1 take the guided eps, the rest the conditional
                            // one (DiT's forward_with_cfg guides 3); 0 = every channel. The op picks eu = ec there.
} SamplerStepCoefs;

// One element of the update (ADM p_sample / ddim_sample with classifier-free guidance, and the
// multistep solvers):
//   eps  = eps_u + w (eps_c - eps_u) when guided, else eps_c
//   x0   = sqrt(1/abar) x - sqrt(1/abar - 1) eps, clipped to [-1, 1] when clip
//   eps' = (sqrt(1/abar) x - x0) / sqrt(1/abar - 1)
//   x'   = c_x0 x0 + c_x x + c_eps eps' + c_prev x0_prev + std z
//   std  = sigma (FIXED), exp(learned_log_var(v) / 2) (LEARNED), none (NONE)
// DDPM: c_x0, c_x = the posterior mean coefficients; DDIM: c_x0 = sqrt(abar_prev), c_eps =
// sqrt(1 - abar_prev - sigma^2); DPM-Solver++(2M): sampler_step_coefs. Returns x'; *x0_out = x0.
MALA_HD float sampler_update(const SamplerStepCoefs *k, float x, float ec, float eu, float v, float z,
                             float prev, float *x0_out) {
    double eps = k->guided ? (double)eu + k->w * ((double)ec - eu) : (double)ec;
    double xv = x;
    double px0 = k->sra * xv - k->srm1 * eps;
    if (k->clip) px0 = px0 < -1.0 ? -1.0 : (px0 > 1.0 ? 1.0 : px0);
    double xn = k->c_x0 * px0;
    if (k->c_x != 0.0) xn += k->c_x * xv;
    if (k->c_eps != 0.0) xn += k->c_eps * ((k->sra * xv - px0) / k->srm1);
    if (k->c_prev != 0.0) xn += k->c_prev * (double)prev;
    if (k->noise == STEP_NOISE_FIXED) xn += k->sigma * z;
    else if (k->noise == STEP_NOISE_LEARNED) xn += exp(0.5 * learned_log_var(v, k->min_log, k->max_log)) * z;
    *x0_out = (float)px0;
    return (float)xn;
}

// Training draws from two uniform 32-bit words: t = floor(bits_t T / 2^32) (Lemire's
// multiply-shift, bias < T / 2^32), and the CFG label dropout bits_drop < drop * 2^32.
MALA_HD int32_t timestep_from_bits(uint32_t bits, int T) { return (int32_t)(((uint64_t)bits * (uint64_t)T) >> 32); }
MALA_HD int label_dropped(uint32_t bits, float drop) { return (double)bits < (double)drop * 4294967296.0; }

#endif

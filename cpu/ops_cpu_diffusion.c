// CPU ops for the diffusion process, the samplers and randomness (contracts in backend.h; the
// per-element math in diffusion_math.h is shared with the CUDA kernels).
// defines: cpu_fill, cpu_rand_normal, cpu_rand_bits, cpu_diffusion_prepare, cpu_diffusion_loss,
//          cpu_sampler_step
#include "cpu/ops_cpu.h"
#include "core/rng.h"

void cpu_fill(float *x, float v, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

void cpu_rand_normal(float *out, int rows, size_t cols, uint64_t seed, uint64_t stream0, uint64_t stride) {
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        Rng g;
        rng_seed_stream(&g, seed, stream0 + (uint64_t)r * stride);
        rng_normal_fill(&g, out + (size_t)r * cols, cols);
    }
}

void cpu_rand_bits(uint32_t *out, size_t n, uint64_t seed, uint64_t stream) {
    Rng g;
    rng_seed_stream(&g, seed, stream);
    for (size_t i = 0; i < n; i++) out[i] = rng_u32(&g);
}

void cpu_diffusion_prepare(float *xt, float *tf, int32_t *t, int32_t *y, const uint32_t *bits, const float *x0,
                           const float *noise, const int32_t *y_in, const double *coefs, int T, float drop,
                           int null_class, int B, size_t per) {
    for (int b = 0; b < B; b++) {
        t[b] = timestep_from_bits(bits[b], T);
        y[b] = label_dropped(bits[B + b], drop) ? null_class : y_in[b];
        const double *k = coefs + (size_t)t[b] * DIFF_COEFS;
        tf[b] = (float)k[DC_TIMESTEP];
        for (size_t i = 0; i < per; i++) xt[b * per + i] = q_sample_f(k, x0[b * per + i], noise[b * per + i]);
    }
}

// Per sample b: mse_b = mean (noise - eps)^2 over D = C hw; vb_b = vb_scale mean(term) / ln 2.
// Gradients of mean_b (mse_b + vb_b): d/d eps = -2 (noise - eps) / (D B); d/d v = vb_scale
// dterm/dv / (D ln2 B).
void cpu_diffusion_loss(float *grad, double *mse, double *vb, const float *out, const float *x0, const float *noise,
                        const int32_t *t, const double *coefs, double vb_scale, int B, int C, size_t hw,
                        int learn_sigma) {
    const int cout = learn_sigma ? 2 * C : C;
    const size_t D = (size_t)C * hw;
    const double ln2 = 0.6931471805599453;
    const double g_mse = 2.0 / ((double)D * B), g_vb = vb_scale / ((double)D * ln2 * B);
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        const double *k = coefs + (size_t)t[b] * DIFF_COEFS;
        double sm = 0.0, sv = 0.0;
        for (int c = 0; c < C; c++) {
            const size_t o = ((size_t)b * C + c) * hw;
            const float *eps = out + ((size_t)b * cout + c) * hw;
            float *geps = grad ? grad + ((size_t)b * cout + c) * hw : NULL;
            for (size_t i = 0; i < hw; i++) {
                double diff = (double)noise[o + i] - eps[i];
                sm += diff * diff;
                if (geps) geps[i] = (float)(-g_mse * diff);
            }
            if (!learn_sigma) continue;
            const float *v = out + ((size_t)b * cout + C + c) * hw;
            float *gv = grad ? grad + ((size_t)b * cout + C + c) * hw : NULL;
            for (size_t i = 0; i < hw; i++) {
                double dterm;
                sv += vb_term(k, t[b] == 0, x0[o + i], noise[o + i], eps[i], v[i], &dterm);
                if (gv) gv[i] = (float)(g_vb * dterm);
            }
        }
        mse[b] = sm / (double)D;
        vb[b] = learn_sigma ? vb_scale * sv / ((double)D * ln2) : 0.0;
    }
}

void cpu_sampler_step(float *x, float *x0, const float *x0_prev, const float *out, const float *z,
                      const SamplerStepCoefs *k, int n, int C, size_t hw) {
    const int cout = k->learn_sigma ? 2 * C : C;
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < n; b++) {
        for (int c = 0; c < C; c++) {
            const size_t o = ((size_t)b * C + c) * hw;
            const float *ec = out + ((size_t)b * cout + c) * hw;
            const int guide = k->guided && (k->guide_c <= 0 || c < k->guide_c);
            const float *eu = guide ? out + ((size_t)(n + b) * cout + c) * hw : ec;
            const float *v = k->learn_sigma ? out + ((size_t)b * cout + C + c) * hw : ec;
            for (size_t p = 0; p < hw; p++)
                x[o + p] = sampler_update(k, x[o + p], ec[p], eu[p], v[p], k->noise ? z[o + p] : 0.0f,
                                          k->c_prev != 0.0 ? x0_prev[o + p] : 0.0f, &x0[o + p]);
        }
    }
}

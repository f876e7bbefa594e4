// Diffusion ops on the device: a training step's inputs (timesteps, label dropout, q_sample), the
// ADM loss with its gradient, and the sampler update. The per-element math is diffusion_math.h,
// the same functions the CPU backend runs, in double.
// defines: cuda_diffusion_prepare, cuda_diffusion_loss, cuda_sampler_step
#include "cuda/cuda_common.cuh"

#define LOSS_BLOCK 256

__global__ void k_diffusion_prepare(float *xt, float *tf, int32_t *t, int32_t *y, const uint32_t *bits,
                                    const float *x0, const float *noise, const int32_t *y_in, const double *coefs,
                                    int T, float drop, int null_class, int B, size_t per) {
    GRID_STRIDE(i, (size_t)B * per) {
        const int b = (int)(i / per);
        const int32_t tb = timestep_from_bits(bits[b], T);
        const double *k = coefs + (size_t)tb * DIFF_COEFS;
        xt[i] = q_sample_f(k, x0[i], noise[i]);
        if (i % per == 0) {  // one thread per sample writes its scalars (y in place over y_in)
            t[b] = tb;
            tf[b] = (float)k[DC_TIMESTEP];
            y[b] = label_dropped(bits[B + b], drop) ? null_class : y_in[b];
        }
    }
}

void cuda_diffusion_prepare(float *xt, float *tf, int32_t *t, int32_t *y, const uint32_t *bits, const float *x0,
                            const float *noise, const int32_t *y_in, const double *coefs, int T, float drop,
                            int null_class, int B, size_t per) {
    if (B <= 0 || !per) return;
    k_diffusion_prepare<<<grid1d((size_t)B * per), CU_BLOCK>>>(xt, tf, t, y, bits, x0, noise, y_in, coefs, T, drop,
                                                               null_class, B, per);
    KERNEL_CHECK();
}

// Block b: sample b. Each thread sums its strided share of the C*hw elements in double, then a
// fixed-order shared-memory tree gives mse_b and the VB sum (deterministic, no atomics).
__global__ void k_diffusion_loss(float *grad, double *mse, double *vb, const float *out, const float *x0,
                                 const float *noise, const int32_t *t, const double *coefs, double vb_scale, int B,
                                 int C, size_t hw, int learn_sigma) {
    __shared__ double sm[LOSS_BLOCK], sv[LOSS_BLOCK];
    const int b = blockIdx.x, cout = learn_sigma ? 2 * C : C;
    const size_t D = (size_t)C * hw;
    const double ln2 = 0.6931471805599453;
    const double g_mse = 2.0 / ((double)D * B), g_vb = vb_scale / ((double)D * ln2 * B);
    const int tb = t[b];
    const double *k = coefs + (size_t)tb * DIFF_COEFS;
    const float *ob = out + (size_t)b * cout * hw, *x0b = x0 + (size_t)b * D, *nb = noise + (size_t)b * D;
    float *gb = grad + (size_t)b * cout * hw;
    double am = 0.0, av = 0.0;
    for (size_t i = threadIdx.x; i < D; i += LOSS_BLOCK) {
        const double diff = (double)nb[i] - ob[i];  // eps channels come first: index i is (c, p)
        am += diff * diff;
        gb[i] = (float)(-g_mse * diff);
        if (learn_sigma) {
            double dterm;
            av += vb_term(k, tb == 0, x0b[i], nb[i], ob[i], ob[D + i], &dterm);
            gb[D + i] = (float)(g_vb * dterm);
        }
    }
    sm[threadIdx.x] = am;
    sv[threadIdx.x] = av;
    __syncthreads();
    for (int s = LOSS_BLOCK / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sm[threadIdx.x] += sm[threadIdx.x + s];
            sv[threadIdx.x] += sv[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        mse[b] = sm[0] / (double)D;
        vb[b] = learn_sigma ? vb_scale * sv[0] / ((double)D * ln2) : 0.0;
    }
}

void cuda_diffusion_loss(float *grad, double *mse, double *vb, const float *out, const float *x0, const float *noise,
                         const int32_t *t, const double *coefs, double vb_scale, int B, int C, size_t hw,
                         int learn_sigma) {
    if (B <= 0) return;
    k_diffusion_loss<<<B, LOSS_BLOCK>>>(grad, mse, vb, out, x0, noise, t, coefs, vb_scale, B, C, hw, learn_sigma);
    KERNEL_CHECK();
}

__global__ void k_sampler_step(float *x, float *x0, const float *x0_prev, const float *out, const float *z,
                               SamplerStepCoefs k, int n, int C, size_t hw) {
    const size_t D = (size_t)C * hw, cols = (size_t)(k.learn_sigma ? 2 * C : C) * hw;
    GRID_STRIDE(i, (size_t)n * D) {
        const size_t b = i / D, j = i % D;  // j = c * hw + p: the eps channels of row b
        const float ec = out[b * cols + j];
        const int guide = k.guided && (k.guide_c <= 0 || j / hw < (size_t)k.guide_c);
        const float eu = guide ? out[(n + b) * cols + j] : ec;
        const float v = k.learn_sigma ? out[b * cols + D + j] : 0.0f;
        x[i] = sampler_update(&k, x[i], ec, eu, v, k.noise ? z[i] : 0.0f, k.c_prev != 0.0 ? x0_prev[i] : 0.0f, &x0[i]);
    }
}

void cuda_sampler_step(float *x, float *x0, const float *x0_prev, const float *out, const float *z,
                       const SamplerStepCoefs *k, int n, int C, size_t hw) {
    if (n <= 0 || C <= 0 || !hw) return;
    k_sampler_step<<<grid1d((size_t)n * C * hw), CU_BLOCK>>>(x, x0, x0_prev, out, z, *k, n, C, hw);
    KERNEL_CHECK();
}

// Per-element math shared by the CPU and CUDA backends, so the CPU tests also cover the GPU
// arithmetic. Every function is static inline and usable from host and device code.
#ifndef MALA_OPS_MATH_H
#define MALA_OPS_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define MALA_HD __host__ __device__ __forceinline__
#else
#define MALA_HD static inline
#endif

#define MALA_LN_EPS 1e-6f
#define MALA_ATTN_EPS 1e-6f

// tanh as a [13/6] rational function on [-7.9053, 7.9053] (the form Eigen uses; clamped
// outside, where tanh is +-1 in float32). Pure arithmetic, so GELU loops vectorise; within
// 3.3e-7 of tanh everywhere (tested).
MALA_HD float tanh_f(float x) {
    const float c = 7.90531110763549805f;
    x = x > c ? c : x < -c ? -c : x;  // NaN passes through
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

// exp(x) as pure arithmetic, so loops over it vectorise (no libm call): Cephes' expf, x = n ln2
// + r with |r| <= ln2/2, e^r by its degree-7 polynomial, times 2^n built in the exponent bits.
// Within 2 ulp of expf; 0 below -87.3 (where expf is subnormal), exp(88.3) above 88.3, NaN
// passes through.
MALA_HD float pow2i_f(int n) {  // 2^n for -126 <= n <= 127
#ifdef __CUDA_ARCH__
    return __uint_as_float((unsigned)(n + 127) << 23);
#else
    union { unsigned i; float f; } u;
    u.i = (unsigned)(n + 127) << 23;
    return u.f;
#endif
}
MALA_HD float exp_f(float x) {
    const float xc = x > 88.3f ? 88.3f : x < -87.3f ? -87.3f : x == x ? x : 0.0f;  // NaN: 0 until the end
    const float n = floorf(xc * 1.44269504088896341f + 0.5f);
    const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;  // ln2 in two parts
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e = (p * (r * r) + r + 1.0f) * pow2i_f((int)n);
    return x != x ? x : x < -87.3f ? 0.0f : e;
}

// erf(x) by Abramowitz & Stegun 7.1.26, the form PyTorch's vectorised CPU erf uses:
// erf(|x|) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^{-x^2}, t = 1 / (1 + p |x|);
// absolute error below 1.5e-7 in exact arithmetic, 5e-7 in float (tested).
MALA_HD float erf_f(float x) {
    const float ax = fabsf(x), t = 1.0f / (1.0f + 0.3275911f * ax);
    float q = 1.061405429f;
    q = q * t - 1.453152027f;
    q = q * t + 1.421413741f;
    q = q * t - 0.284496736f;
    q = q * t + 0.254829592f;
    const float e = 1.0f - q * t * exp_f(-ax * ax);
    return x < 0.0f ? -e : e;
}

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
MALA_HD float gelu_f(float x) {
    const float c = 0.7978845608028654f;
    float u = c * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanh_f(u));
}
MALA_HD float gelu_grad_f(float x) {
    const float c = 0.7978845608028654f;
    float u = c * (x + 0.044715f * x * x * x);
    float th = tanh_f(u);
    float du = c * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}
// Exact GELU: x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)); derivative Phi(x) + x phi(x) with
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi) (PyTorch's GeluBackward, approximate="none").
MALA_HD float gelu_erf_f(float x) { return 0.5f * x * (1.0f + erf_f(x * 0.70710678118654752f)); }
MALA_HD float gelu_erf_grad_f(float x) {
    const float cdf = 0.5f * (1.0f + erf_f(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * exp_f(-0.5f * x * x);
    return cdf + x * pdf;
}
MALA_HD float sigmoid_f(float x) { return 1.0f / (1.0f + exp_f(-x)); }
MALA_HD float silu_f(float x) { return x * sigmoid_f(x); }
MALA_HD float silu_grad_f(float x) { float s = sigmoid_f(x); return s * (1.0f + x * (1.0f - s)); }
// phi(x) = ELU(x) + 1; its derivative from the output y = phi(x): 1 for x > 0 (y > 1), else exp(x) = y.
MALA_HD float elu1_f(float x) { return x > 0.0f ? x + 1.0f : exp_f(x); }
MALA_HD float elu1_grad_from_y(float y) { return y > 1.0f ? 1.0f : y; }
// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))  (PyTorch's stable form); its derivative
// sigmoid(-x) from the output y = logsigmoid(x): 1 - exp(y) = -expm1(y).
MALA_HD float logsigmoid_f(float x) { return fminf(x, 0.0f) - log1pf(expf(-fabsf(x))); }
MALA_HD float logsigmoid_grad_from_y(float y) { return -expm1f(y); }

// RoPE frequency m of a head of dimension d (d/4 frequencies, torch.linspace(0, 1, d/4)):
// w_m = 10000^(-m / (d/4 - 1)); a single frequency (d == 4) is 1.
MALA_HD float rope_freq(int m, int d) {
    int nf = d / 4;
    float e = nf > 1 ? (float)m / (float)(nf - 1) : 0.0f;
    return powf(10000.0f, -e);
}

// AdamW element update (torch.optim.AdamW, decoupled weight decay). bc1 = 1 - beta1^t,
// bc2 = 1 - beta2^t. Returns the new parameter.
MALA_HD float adamw_f(float p, float g, float *m, float *v, float lr, float b1, float b2, float eps,
                      float wd, float bc1, float bc2) {
    p -= lr * wd * p;
    *m = b1 * *m + (1.0f - b1) * g;
    *v = b2 * *v + (1.0f - b2) * g * g;
    float denom = sqrtf(*v) / sqrtf(bc2) + eps;
    return p - (lr / bc1) * (*m / denom);
}

#endif

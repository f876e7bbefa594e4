// defines: latent_proj_sd, latent_proj_fit, latent_proj_apply
// A latent model's step preview without the VAE (pipeline/latent_preview.h): one small matrix per
// latent cell: a preview of DiT-XL/2's 32x32x4 latents takes 12k multiply-adds, where the
// VAE's decoder runs its convolutions over the full 256x256 image (vae_decode_macs).
#include <math.h>
#include <string.h>

#include "pipeline/latent_preview.h"
#include "core/rng.h"
#include "model/vae.h"

// The SD 1.x VAE (sd-vae-ft-ema / -mse, the VAE of DiT): the least-squares fit of its scaled
// latents (z * 0.18215) to RGB in [-1, 1] that ComfyUI ships for its SD 1.5 latent previews
// (comfy/latent_formats.py, SD15.latent_rgb_factors; no bias). Rows: latent channel; columns: R, G, B.
static const float SD_FACTORS[4][3] = {
    {0.3512f, 0.2297f, 0.3227f},
    {0.3250f, 0.4974f, 0.2350f},
    {-0.2829f, 0.1762f, 0.2721f},
    {-0.2120f, -0.2616f, -0.7177f},
};

void latent_proj_sd(LatentProj *p) {
    memset(p, 0, sizeof *p);
    p->cin = 4;
    p->cout = 3;
    p->factor = 8;
    for (int c = 0; c < 4; c++)
        for (int o = 0; o < 3; o++) p->w[o][c] = SD_FACTORS[c][o];
}

// Solves A x = b in place (A [n, n] row-major, Gaussian elimination with partial pivoting);
// 0, or -1 when A is singular.
static int solve(double *A, double *b, int n) {
    for (int k = 0; k < n; k++) {
        int piv = k;
        for (int i = k + 1; i < n; i++)
            if (fabs(A[i * n + k]) > fabs(A[piv * n + k])) piv = i;
        if (fabs(A[piv * n + k]) < 1e-12) return -1;
        if (piv != k) {
            for (int j = 0; j < n; j++) {
                double t = A[k * n + j];
                A[k * n + j] = A[piv * n + j];
                A[piv * n + j] = t;
            }
            double t = b[k];
            b[k] = b[piv];
            b[piv] = t;
        }
        for (int i = k + 1; i < n; i++) {
            double f = A[i * n + k] / A[k * n + k];
            for (int j = k; j < n; j++) A[i * n + j] -= f * A[k * n + j];
            b[i] -= f * b[k];
        }
    }
    for (int k = n - 1; k >= 0; k--) {
        for (int j = k + 1; j < n; j++) b[k] -= A[k * n + j] * b[j];
        b[k] /= A[k * n + k];
    }
    return 0;
}

int latent_proj_fit(LatentProj *p, Vae *v, int g, int count, uint64_t seed, MalaErr *err) {
    const VaeConfig *vc = vae_config(v);
    const int C = vc->latent, O = vc->out_channels, f = vae_factor(vc), G = g * f, K = C + 1;
    if (C > LATENT_PROJ_MAX_IN || O > LATENT_PROJ_MAX_OUT)
        return mala_errf(err, "latent preview: %d latent and %d image channels (at most %d and %d)", C, O,
                         LATENT_PROJ_MAX_IN, LATENT_PROJ_MAX_OUT);
    const int batch = vae_max_batch(v) < count ? vae_max_batch(v) : count;
    const size_t zn = (size_t)C * g * g, xn = (size_t)O * G * G;
    float *z = xmalloc((size_t)batch * zn * sizeof(float)), *x = xmalloc((size_t)batch * xn * sizeof(float));
    double AtA[(LATENT_PROJ_MAX_IN + 1) * (LATENT_PROJ_MAX_IN + 1)] = {0}, Atb[LATENT_PROJ_MAX_OUT][LATENT_PROJ_MAX_IN + 1] = {{0}};
    double sy[LATENT_PROJ_MAX_OUT] = {0}, syy[LATENT_PROJ_MAX_OUT] = {0};
    int rc = 0;
    long cells = 0;
    for (int done = 0; done < count && !rc; done += batch) {
        const int n = count - done < batch ? count - done : batch;
        for (int i = 0; i < n; i++) {
            Rng r;
            rng_seed_stream(&r, seed, (uint64_t)(done + i));
            rng_normal_fill(&r, z + (size_t)i * zn, zn);
        }
        if ((rc = vae_decode(v, z, n, g, g, x, err))) break;
        for (int i = 0; i < n; i++)
            for (int cy = 0; cy < g; cy++)
                for (int cx = 0; cx < g; cx++) {
                    double a[LATENT_PROJ_MAX_IN + 1];
                    for (int c = 0; c < C; c++) a[c] = z[(size_t)i * zn + ((size_t)c * g + cy) * g + cx];
                    a[C] = 1;
                    for (int r = 0; r < K; r++)
                        for (int s = 0; s < K; s++) AtA[r * K + s] += a[r] * a[s];
                    for (int o = 0; o < O; o++) {
                        double m = 0;  // the decoded block's mean, clamped as a shown image is
                        for (int py = 0; py < f; py++)
                            for (int px = 0; px < f; px++) {
                                float t = x[(size_t)i * xn + ((size_t)o * G + cy * f + py) * G + cx * f + px];
                                m += t < -1 ? -1 : t > 1 ? 1 : t;
                            }
                        m /= (double)f * f;
                        for (int r = 0; r < K; r++) Atb[o][r] += a[r] * m;
                        sy[o] += m;
                        syy[o] += m * m;
                    }
                    cells++;
                }
    }
    memset(p, 0, sizeof *p);
    p->cin = C;
    p->cout = O;
    p->factor = f;
    for (int o = 0; o < O && !rc; o++) {
        double A[(LATENT_PROJ_MAX_IN + 1) * (LATENT_PROJ_MAX_IN + 1)], sol[LATENT_PROJ_MAX_IN + 1];
        memcpy(A, AtA, sizeof A);
        for (int r = 0; r < K; r++) A[r * K + r] += 1e-6;  // a whisker of ridge: a flat channel stays solvable
        memcpy(sol, Atb[o], K * sizeof(double));
        if (solve(A, sol, K)) {
            rc = mala_errf(err, "latent preview: the fit for image channel %d is singular", o);
            break;
        }
        for (int c = 0; c < C; c++) p->w[o][c] = (float)sol[c];
        p->b[o] = (float)sol[C];
        // R^2 = 1 - SSE / SST, SSE = y'y - 2 sol'A'y + sol'A'A sol
        double sse = syy[o], sst = syy[o] - sy[o] * sy[o] / (double)cells;
        for (int r = 0; r < K; r++) {
            sse -= 2 * sol[r] * Atb[o][r];
            for (int s = 0; s < K; s++) sse += sol[r] * AtA[r * K + s] * sol[s];
        }
        p->r2[o] = sst > 0 ? (float)(1 - sse / sst) : 0;
    }
    free(z);
    free(x);
    return rc ? -1 : 0;
}

void latent_proj_apply(const LatentProj *p, const float *z, int n, int h, int w, float scale, float *out) {
    const int f = p->factor, H = h * f, W = w * f;
    const size_t zn = (size_t)p->cin * h * w, on = (size_t)p->cout * H * W;
    for (int i = 0; i < n; i++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const float *zi = z + i * zn + (size_t)y * w + x;
                for (int o = 0; o < p->cout; o++) {
                    float v = p->b[o];
                    for (int c = 0; c < p->cin; c++) v += p->w[o][c] * (scale * zi[(size_t)c * h * w]);
                    v = v < -1 ? -1 : v > 1 ? 1 : v;
                    float *dst = out + i * on + (size_t)o * H * W + (size_t)y * f * W + (size_t)x * f;
                    for (int py = 0; py < f; py++)
                        for (int px = 0; px < f; px++) dst[(size_t)py * W + px] = v;
                }
            }
}

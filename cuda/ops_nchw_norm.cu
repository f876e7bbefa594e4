// Normalisations and per-channel adaLN on NCHW maps: GroupNorm (a block per (image, group), its
// values contiguous), LayerNorm over channels (a thread per pixel, channels summed in order as
// on the CPU), their affine gradients (a block per channel), modulate2d and the gated residual
// (a block per (image, channel) plane for the sums over pixels). All reductions are fixed-order
// block trees (block_sum), so results repeat bit for bit.
// defines: cuda_groupnorm_fwd, cuda_groupnorm_bwd, cuda_layernorm2d_fwd, cuda_layernorm2d_bwd,
//          cuda_modulate2d_fwd, cuda_modulate2d_bwd, cuda_gate_residual2d_fwd, cuda_gate_residual2d_bwd
#include "cuda/cuda_common.cuh"

// ---------------------------------------------------------------------------------------------
// GroupNorm: group (b, g) is x[bg * n .. (bg+1) * n), n = C/G * HW

__global__ void k_groupnorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w,
                                const float *bias, int C, int HW, int G, float eps) {
    __shared__ float red[33];
    const int bg = blockIdx.x, Cg = C / G, c0 = bg % G * Cg;
    const size_t n = (size_t)Cg * HW, o = (size_t)bg * n;
    float s = 0.0f;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) s += x[o + i];
    const float m = block_sum(s, red) / (float)n;
    float v = 0.0f;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) { const float d = x[o + i] - m; v += d * d; }
    const float r = 1.0f / sqrtf(block_sum(v, red) / (float)n + eps);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        const int c = c0 + (int)(i / (size_t)HW);
        out[o + i] = (x[o + i] - m) * r * (w ? w[c] : 1.0f) + (bias ? bias[c] : 0.0f);
    }
    if (threadIdx.x == 0) { mean[bg] = m; rstd[bg] = r; }
}

// dx += r (u - mean(u) - xh mean(u xh)), u = dout w, xh = (x - m) r over the group
__global__ void k_groupnorm_bwd_dx(float *dx, const float *dout, const float *x, const float *mean, const float *rstd,
                                   const float *w, int C, int HW, int G) {
    __shared__ float red[33];
    const int bg = blockIdx.x, Cg = C / G, c0 = bg % G * Cg;
    const size_t n = (size_t)Cg * HW, o = (size_t)bg * n;
    const float m = mean[bg], r = rstd[bg];
    float su = 0.0f, suxh = 0.0f;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float u = dout[o + i] * (w ? w[c0 + (int)(i / (size_t)HW)] : 1.0f);
        su += u;
        suxh += u * ((x[o + i] - m) * r);
    }
    const float mu = block_sum(su, red) / (float)n, muxh = block_sum(suxh, red) / (float)n;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float u = dout[o + i] * (w ? w[c0 + (int)(i / (size_t)HW)] : 1.0f);
        dx[o + i] += r * (u - mu - (x[o + i] - m) * r * muxh);
    }
}

// dw[c] += sum_{b,p} dout xh, db[c] += sum_{b,p} dout; one block per channel. G > 0: GroupNorm's
// statistics (index b*G + c/(C/G)); G == 0: LayerNorm2d's (index b*HW + p).
__global__ void k_norm_affine_grads(float *dw, float *db, const float *dout, const float *x, const float *mean,
                                    const float *rstd, int B, int C, int HW, int G) {
    __shared__ float red[33];
    const int c = blockIdx.x;
    const size_t n = (size_t)B * HW;
    float sw = 0.0f, sb = 0.0f;
    for (size_t q = threadIdx.x; q < n; q += blockDim.x) {
        const size_t b = q / (size_t)HW, p = q % (size_t)HW, i = (b * C + c) * HW + p;
        const size_t st = G ? b * G + c / (C / G) : q;
        sw += dout[i] * ((x[i] - mean[st]) * rstd[st]);
        sb += dout[i];
    }
    sw = block_sum(sw, red);
    sb = block_sum(sb, red);
    if (threadIdx.x == 0) {
        if (dw) dw[c] += sw;
        if (db) db[c] += sb;
    }
}

void cuda_groupnorm_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                        int B, int C, int HW, int G, float eps) {
    CU_REQUIRE(G > 0 && C % G == 0 && B >= 0 && HW > 0, "groupnorm_fwd: C=%d not divisible by G=%d (or bad shape)", C,
               G);
    if (!B) return;
    k_groupnorm_fwd<<<B * G, CU_BLOCK>>>(out, mean, rstd, x, w, bias, C, HW, G, eps);
    KERNEL_CHECK();
}

void cuda_groupnorm_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                        const float *rstd, const float *w, int B, int C, int HW, int G) {
    CU_REQUIRE(G > 0 && C % G == 0 && B >= 0 && HW > 0, "groupnorm_bwd: C=%d not divisible by G=%d (or bad shape)", C,
               G);
    if (!B) return;
    if (dx) {
        k_groupnorm_bwd_dx<<<B * G, CU_BLOCK>>>(dx, dout, x, mean, rstd, w, C, HW, G);
        KERNEL_CHECK();
    }
    if (dw || db) {
        k_norm_affine_grads<<<C, CU_BLOCK>>>(dw, db, dout, x, mean, rstd, B, C, HW, G);
        KERNEL_CHECK();
    }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm over channels: one thread per pixel t = b*HW + p, its channels HW apart (adjacent
// threads read adjacent floats)

__global__ void k_layernorm2d_fwd(float *out, float *mean, float *rstd, const float *x, const float *w,
                                  const float *bias, int C, int HW, float eps, size_t total) {
    GRID_STRIDE(t, total) {
        const size_t o = (t / (size_t)HW) * C * HW + t % (size_t)HW;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[o + (size_t)c * HW];
        m /= (float)C;
        float v = 0.0f;
        for (int c = 0; c < C; c++) { const float d = x[o + (size_t)c * HW] - m; v += d * d; }
        const float r = 1.0f / sqrtf(v / (float)C + eps);
        for (int c = 0; c < C; c++)
            out[o + (size_t)c * HW] = (x[o + (size_t)c * HW] - m) * r * (w ? w[c] : 1.0f) + (bias ? bias[c] : 0.0f);
        mean[t] = m;
        rstd[t] = r;
    }
}

__global__ void k_layernorm2d_bwd_dx(float *dx, const float *dout, const float *x, const float *mean,
                                     const float *rstd, const float *w, int C, int HW, size_t total) {
    GRID_STRIDE(t, total) {
        const size_t o = (t / (size_t)HW) * C * HW + t % (size_t)HW;
        const float m = mean[t], r = rstd[t];
        float su = 0.0f, suxh = 0.0f;
        for (int c = 0; c < C; c++) {
            const size_t i = o + (size_t)c * HW;
            const float u = dout[i] * (w ? w[c] : 1.0f);
            su += u;
            suxh += u * ((x[i] - m) * r);
        }
        su /= (float)C;
        suxh /= (float)C;
        for (int c = 0; c < C; c++) {
            const size_t i = o + (size_t)c * HW;
            dx[i] += r * (dout[i] * (w ? w[c] : 1.0f) - su - (x[i] - m) * r * suxh);
        }
    }
}

void cuda_layernorm2d_fwd(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                          int B, int C, int HW, float eps) {
    CU_REQUIRE(B >= 0 && C > 0 && HW > 0, "layernorm2d_fwd: bad shape B%d C%d HW%d", B, C, HW);
    const size_t total = (size_t)B * HW;
    if (!total) return;
    k_layernorm2d_fwd<<<grid1d(total), CU_BLOCK>>>(out, mean, rstd, x, w, bias, C, HW, eps, total);
    KERNEL_CHECK();
}

void cuda_layernorm2d_bwd(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                          const float *rstd, const float *w, int B, int C, int HW) {
    CU_REQUIRE(B >= 0 && C > 0 && HW > 0, "layernorm2d_bwd: bad shape B%d C%d HW%d", B, C, HW);
    const size_t total = (size_t)B * HW;
    if (!total) return;
    if (dx) {
        k_layernorm2d_bwd_dx<<<grid1d(total), CU_BLOCK>>>(dx, dout, x, mean, rstd, w, C, HW, total);
        KERNEL_CHECK();
    }
    if (dw || db) {
        k_norm_affine_grads<<<C, CU_BLOCK>>>(dw, db, dout, x, mean, rstd, B, C, HW, 0);
        KERNEL_CHECK();
    }
}

// ---------------------------------------------------------------------------------------------
// modulate2d: out[b,c,p] = x (1 + scale[b*ms + c]) + shift[b*ms + c]; gated residual x += gate y

__global__ void k_modulate2d_fwd(float *out, const float *x, const float *shift, const float *scale, int C, int HW,
                                 int ms, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t bc = i / (size_t)HW, j = (bc / C) * (size_t)ms + bc % C;
        out[i] = x[i] * (1.0f + scale[j]) + shift[j];
    }
}

// One block per (b, c) plane: dx element-wise, the plane sums of dout and dout x.
__global__ void k_modulate2d_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                                 const float *scale, int C, int HW, int ms) {
    __shared__ float red[33];
    const size_t bc = blockIdx.x, o = bc * HW, j = (bc / C) * (size_t)ms + bc % C;
    const float s1 = 1.0f + scale[j];
    float ssh = 0.0f, ssc = 0.0f;
    for (int p = threadIdx.x; p < HW; p += blockDim.x) {
        const float g = dout[o + p];
        if (dx) dx[o + p] += g * s1;
        ssh += g;
        ssc += g * x[o + p];
    }
    ssh = block_sum(ssh, red);
    ssc = block_sum(ssc, red);
    if (threadIdx.x == 0) {
        if (dshift) dshift[j] += ssh;
        if (dscale) dscale[j] += ssc;
    }
}

__global__ void k_gate_residual2d_fwd(float *x, const float *y, const float *gate, int C, int HW, int ms,
                                      size_t total) {
    GRID_STRIDE(i, total) {
        const size_t bc = i / (size_t)HW;
        x[i] += gate[(bc / C) * (size_t)ms + bc % C] * y[i];
    }
}

// dy += gate dx; dgate += sum_p dx y (one block per plane)
__global__ void k_gate_residual2d_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate,
                                      int C, int HW, int ms) {
    __shared__ float red[33];
    const size_t bc = blockIdx.x, o = bc * HW, j = (bc / C) * (size_t)ms + bc % C;
    const float gt = gate[j];
    float acc = 0.0f;
    for (int p = threadIdx.x; p < HW; p += blockDim.x) {
        if (dy) dy[o + p] += gt * dx[o + p];
        acc += dx[o + p] * y[o + p];
    }
    acc = block_sum(acc, red);
    if (threadIdx.x == 0 && dgate) dgate[j] += acc;
}

void cuda_modulate2d_fwd(float *out, const float *x, const float *shift, const float *scale, int B, int C, int HW,
                         int ms) {
    const size_t total = (size_t)B * C * HW;
    if (!total) return;
    k_modulate2d_fwd<<<grid1d(total), CU_BLOCK>>>(out, x, shift, scale, C, HW, ms, total);
    KERNEL_CHECK();
}

void cuda_modulate2d_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                         const float *scale, int B, int C, int HW, int ms) {
    if (B <= 0 || C <= 0 || HW <= 0) return;
    k_modulate2d_bwd<<<B * C, CU_BLOCK>>>(dx, dshift, dscale, dout, x, scale, C, HW, ms);
    KERNEL_CHECK();
}

void cuda_gate_residual2d_fwd(float *x, const float *y, const float *gate, int B, int C, int HW, int ms) {
    const size_t total = (size_t)B * C * HW;
    if (!total) return;
    k_gate_residual2d_fwd<<<grid1d(total), CU_BLOCK>>>(x, y, gate, C, HW, ms, total);
    KERNEL_CHECK();
}

void cuda_gate_residual2d_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate, int B,
                              int C, int HW, int ms) {
    if (B <= 0 || C <= 0 || HW <= 0) return;
    k_gate_residual2d_bwd<<<B * C, CU_BLOCK>>>(dy, dgate, dx, y, gate, C, HW, ms);
    KERNEL_CHECK();
}

// LayerNorm (no affine, eps 1e-6), RMSNorm with swish gate (DiG's GLA output norm) and the adaLN
// pieces: modulate and the gated residual.
// defines: cuda_layernorm_fwd, cuda_layernorm_bwd, cuda_norm_init, cuda_rmsnorm_gate_fwd,
//          cuda_rmsnorm_gate_bwd, cuda_modulate_fwd, cuda_modulate_bwd, cuda_layernorm_modulate_fwd,
//          cuda_gate_residual_fwd,
//          cuda_gate_residual_bwd
#include "cuda/cuda_common.cuh"

#define ROWS_PER_BLOCK (CU_BLOCK / 32)  // one warp per row
#define RED_ROWS 16                     // threadIdx.y extent of the column-sum kernels

// ---------------------------------------------------------------------------------------------
// LayerNorm, one warp per row: mean, then the (biased) variance about it, as the CPU does.

__global__ void k_layernorm_fwd(float *out, float *rstd, const float *x, int N, int C) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= N) return;  // whole warp leaves together
    const float *xr = x + (size_t)row * C;
    float *o = out + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += xr[c];
    const float mean = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) { float d = xr[c] - mean; v += d * d; }
    const float r = 1.0f / sqrtf(warp_sum(v) / (float)C + MALA_LN_EPS);
    for (int c = lane; c < C; c += 32) o[c] = (xr[c] - mean) * r;
    if (lane == 0) rstd[row] = r;
}

void cuda_layernorm_fwd(float *out, float *rstd, const float *x, int N, int C) {
    if (N <= 0) return;
    k_layernorm_fwd<<<cdiv(N, ROWS_PER_BLOCK), CU_BLOCK>>>(out, rstd, x, N, C);
    KERNEL_CHECK();
}

// dx += rstd * (dout - mean(dout) - out * mean(dout * out))
__global__ void k_layernorm_bwd(float *dx, const float *dout, const float *out, const float *rstd, int N, int C) {
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *g = dout + (size_t)row * C, *y = out + (size_t)row * C;
    float *d = dx + (size_t)row * C;
    float mg = 0.0f, mgy = 0.0f;
    for (int c = lane; c < C; c += 32) { mg += g[c]; mgy += g[c] * y[c]; }
    mg = warp_sum(mg) / (float)C;
    mgy = warp_sum(mgy) / (float)C;
    const float r = rstd[row];
    for (int c = lane; c < C; c += 32) d[c] += r * (g[c] - mg - y[c] * mgy);
}

void cuda_layernorm_bwd(float *dx, const float *dout, const float *out, const float *rstd, int N, int C) {
    if (N <= 0) return;
    k_layernorm_bwd<<<cdiv(N, ROWS_PER_BLOCK), CU_BLOCK>>>(dx, dout, out, rstd, N, C);
    KERNEL_CHECK();
}

// ---------------------------------------------------------------------------------------------
// RMSNorm with swish gate, one warp per (row, head) of width d (w = row * heads + h):
//   out = y w silu(gate),  y = x r,  r = 1 / sqrt(mean x^2 + eps)

__global__ void k_rmsnorm_gate_fwd(float *out, float *rstd, const float *x, const float *gate, const float *w,
                                   int heads, int d, int ldg, float eps, size_t nwarps) {
    const size_t wi = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (wi >= nwarps) return;  // whole warp leaves together
    const size_t n = wi / heads, h = wi % heads, H = (size_t)heads * d;
    const float *xr = x + n * H + h * d, *gr = gate + n * (size_t)ldg + h * d;
    float *o = out + n * H + h * d;
    float ss = 0.0f;
    for (int c = lane; c < d; c += 32) ss += xr[c] * xr[c];
    const float r = 1.0f / sqrtf(warp_sum(ss) / (float)d + eps);
    for (int c = lane; c < d; c += 32) o[c] = xr[c] * r * w[c] * silu_f(gr[c]);
    if (lane == 0) rstd[wi] = r;
}

// dx += r (u - y mean(u y)), u = dout w silu(gate);  dgate += dout y w silu'(gate)
__global__ void k_rmsnorm_gate_bwd(float *dx, float *dgate, const float *dout, const float *x, const float *gate,
                                   const float *w, const float *rstd, int heads, int d, int ldg, size_t nwarps) {
    const size_t wi = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (wi >= nwarps) return;
    const size_t n = wi / heads, h = wi % heads, H = (size_t)heads * d;
    const size_t xo = n * H + h * d, go = n * (size_t)ldg + h * d;
    const float r = rstd[wi];
    float m = 0.0f;
    for (int c = lane; c < d; c += 32) m += dout[xo + c] * w[c] * silu_f(gate[go + c]) * (x[xo + c] * r);
    m = warp_sum(m) / (float)d;
    for (int c = lane; c < d; c += 32) {
        const float y = x[xo + c] * r, g = gate[go + c], u = dout[xo + c] * w[c] * silu_f(g);
        if (dx) dx[xo + c] += r * (u - y * m);
        if (dgate) dgate[go + c] += dout[xo + c] * y * w[c] * silu_grad_f(g);
    }
}

// dw[c] = sum over the R = N*heads rows of dout y silu(gate), in two fixed-order stages: block
// (32-column tile, part p) sums its part's rows into part_sums[p][c] (threadIdx.y strides over
// rows, partials meet in shared memory), then a column sum over the parts adds them into dw.
#define RMS_PART_FLOATS (1 << 18)
#define RMS_MAX_PARTS 256
static float *g_rms_parts;  // RMS_PART_FLOATS floats, allocated once by cuda_norm_init

void cuda_norm_init(void) {
    if (!g_rms_parts) CUDA_CHECK(cudaMalloc(&g_rms_parts, RMS_PART_FLOATS * sizeof(float)));
}

__global__ void k_rmsnorm_gate_dw(float *part_sums, const float *dout, const float *x, const float *gate,
                                  const float *rstd, int heads, int d, int ldg, size_t R, size_t per) {
    __shared__ float part[RED_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x, p = blockIdx.y;
    float acc = 0.0f;
    if (c < d) {
        const size_t r1 = (p + 1) * per < R ? (p + 1) * per : R;
        for (size_t wi = p * per + threadIdx.y; wi < r1; wi += RED_ROWS) {
            const size_t n = wi / heads, h = wi % heads, xo = n * (size_t)heads * d + h * d + c;
            acc += dout[xo] * (x[xo] * rstd[wi]) * silu_f(gate[n * (size_t)ldg + h * d + c]);
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < d) {
        float t = 0.0f;
        for (int y = 0; y < RED_ROWS; y++) t += part[y][threadIdx.x];
        part_sums[(size_t)p * d + c] = t;
    }
}

void cuda_rmsnorm_gate_fwd(float *out, float *rstd, const float *x, const float *gate, const float *w, int N,
                           int heads, int d, int ldg, float eps) {
    const size_t nwarps = (size_t)N * heads;
    if (!nwarps || d <= 0) return;
    k_rmsnorm_gate_fwd<<<cdiv((long long)nwarps, ROWS_PER_BLOCK), CU_BLOCK>>>(out, rstd, x, gate, w, heads, d, ldg,
                                                                             eps, nwarps);
    KERNEL_CHECK();
}

void cuda_rmsnorm_gate_bwd(float *dx, float *dgate, float *dw, const float *dout, const float *x,
                           const float *gate, const float *w, const float *rstd, int N, int heads, int d, int ldg) {
    const size_t R = (size_t)N * heads;
    if (!R || d <= 0) return;
    if (dx || dgate) {
        k_rmsnorm_gate_bwd<<<cdiv((long long)R, ROWS_PER_BLOCK), CU_BLOCK>>>(dx, dgate, dout, x, gate, w, rstd,
                                                                             heads, d, ldg, R);
        KERNEL_CHECK();
    }
    if (dw) {
        CU_REQUIRE(d <= RMS_PART_FLOATS, "rmsnorm_gate_bwd: head width %d above %d", d, RMS_PART_FLOATS);
        size_t parts = (R + 63) / 64;  // at least 64 rows a part
        if (parts > RMS_MAX_PARTS) parts = RMS_MAX_PARTS;
        if (parts > (size_t)(RMS_PART_FLOATS / d)) parts = RMS_PART_FLOATS / d;
        const size_t per = (R + parts - 1) / parts;
        dim3 grid(cdiv(d, 32), (unsigned)parts), block(32, RED_ROWS);
        k_rmsnorm_gate_dw<<<grid, block>>>(g_rms_parts, dout, x, gate, rstd, heads, d, ldg, R, per);
        KERNEL_CHECK();
        cuda_colsum(dw, 0, g_rms_parts, (int)parts, d, d, 0, 1, 1.0f, true);
    }
}

// ---------------------------------------------------------------------------------------------
// modulate: out[b,l,c] = x * (1 + scale[b*ms + c]) + shift[b*ms + c]

__global__ void k_modulate_fwd(float *out, const float *x, const float *shift, const float *scale, int L, int C,
                               int ms, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t c = i % (size_t)C, b = i / ((size_t)L * C);
        const size_t j = b * (size_t)ms + c;
        out[i] = x[i] * (1.0f + scale[j]) + shift[j];
    }
}

void cuda_modulate_fwd(float *out, const float *x, const float *shift, const float *scale, int B, int L, int C,
                       int ms) {
    const size_t total = (size_t)B * L * C;
    if (!total) return;
    k_modulate_fwd<<<grid1d(total), CU_BLOCK>>>(out, x, shift, scale, L, C, ms, total);
    KERNEL_CHECK();
}

// Per (batch, 32-column tile) block, threadIdx.y strides over tokens: element-wise dx, and the
// token sums for dshift / dscale reduced in shared memory in a fixed order.

__global__ void k_modulate_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                               const float *scale, int L, int C, int ms) {
    __shared__ float ssh[RED_ROWS][33], ssc[RED_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x, b = blockIdx.y;
    float ash = 0.0f, asc = 0.0f;
    if (c < C) {
        const float sc1 = 1.0f + scale[(size_t)b * ms + c];
        for (int l = threadIdx.y; l < L; l += RED_ROWS) {
            const size_t r = ((size_t)b * L + l) * C + c;
            const float g = dout[r];
            if (dx) dx[r] = g * sc1;
            ash += g;
            asc += g * x[r];
        }
    }
    ssh[threadIdx.y][threadIdx.x] = ash;
    ssc[threadIdx.y][threadIdx.x] = asc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float tsh = 0.0f, tsc = 0.0f;
        for (int y = 0; y < RED_ROWS; y++) { tsh += ssh[y][threadIdx.x]; tsc += ssc[y][threadIdx.x]; }
        if (dshift) dshift[(size_t)b * ms + c] += tsh;
        if (dscale) dscale[(size_t)b * ms + c] += tsc;
    }
}

void cuda_modulate_bwd(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                       const float *scale, int B, int L, int C, int ms) {
    if (B <= 0 || C <= 0) return;
    dim3 grid(cdiv(C, 32), B), block(32, RED_ROWS);
    k_modulate_bwd<<<grid, block>>>(dx, dshift, dscale, dout, x, scale, L, C, ms);
    KERNEL_CHECK();
}

// The two kernels one after the other (the CPU fuses them into one pass); without xhat the
// normalised rows go to out and are modulated in place.
void cuda_layernorm_modulate_fwd(float *out, float *xhat, float *rstd, const float *x, const float *shift,
                                 const float *scale, int B, int L, int C, int ms) {
    float *h = xhat ? xhat : out;
    cuda_layernorm_fwd(h, rstd, x, B * L, C);
    cuda_modulate_fwd(out, h, shift, scale, B, L, C, ms);
}

// ---------------------------------------------------------------------------------------------
// gated residual: x[b,l,c] += gate[b*ms + c] * y[b,l,c]

__global__ void k_gate_residual_fwd(float *x, const float *y, const float *gate, int L, int C, int ms,
                                    size_t total) {
    GRID_STRIDE(i, total) {
        const size_t c = i % (size_t)C, b = i / ((size_t)L * C);
        x[i] += gate[b * (size_t)ms + c] * y[i];
    }
}

void cuda_gate_residual_fwd(float *x, const float *y, const float *gate, int B, int L, int C, int ms) {
    const size_t total = (size_t)B * L * C;
    if (!total) return;
    k_gate_residual_fwd<<<grid1d(total), CU_BLOCK>>>(x, y, gate, L, C, ms, total);
    KERNEL_CHECK();
}

// dy = gate * dx (overwrites);  dgate += sum_l dx * y
__global__ void k_gate_residual_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate,
                                    int L, int C, int ms) {
    __shared__ float sg[RED_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x, b = blockIdx.y;
    float acc = 0.0f;
    if (c < C) {
        const float gt = gate[(size_t)b * ms + c];
        for (int l = threadIdx.y; l < L; l += RED_ROWS) {
            const size_t r = ((size_t)b * L + l) * C + c;
            if (dy) dy[r] = gt * dx[r];
            acc += dx[r] * y[r];
        }
    }
    sg[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C && dgate) {
        float t = 0.0f;
        for (int yy = 0; yy < RED_ROWS; yy++) t += sg[yy][threadIdx.x];
        dgate[(size_t)b * ms + c] += t;
    }
}

void cuda_gate_residual_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate, int B,
                            int L, int C, int ms) {
    if (B <= 0 || C <= 0) return;
    dim3 grid(cdiv(C, 32), B), block(32, RED_ROWS);
    k_gate_residual_bwd<<<grid, block>>>(dy, dgate, dx, y, gate, L, C, ms);
    KERNEL_CHECK();
}

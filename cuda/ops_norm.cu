// LayerNorm (no affine, eps 1e-6) and the adaLN pieces: modulate and the gated residual.
// defines: cuda_layernorm_fwd, cuda_layernorm_bwd, cuda_modulate_fwd, cuda_modulate_bwd,
//          cuda_gate_residual_fwd, cuda_gate_residual_bwd
#include "cuda_common.cuh"

#define ROWS_PER_BLOCK (CU_BLOCK / 32)  // one warp per row

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
#define RED_ROWS 16

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
            if (dx) dx[r] += g * sc1;
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

// dy += gate * dx;  dgate += sum_l dx * y
__global__ void k_gate_residual_bwd(float *dy, float *dgate, const float *dx, const float *y, const float *gate,
                                    int L, int C, int ms) {
    __shared__ float sg[RED_ROWS][33];
    const int c = blockIdx.x * 32 + threadIdx.x, b = blockIdx.y;
    float acc = 0.0f;
    if (c < C) {
        const float gt = gate[(size_t)b * ms + c];
        for (int l = threadIdx.y; l < L; l += RED_ROWS) {
            const size_t r = ((size_t)b * L + l) * C + c;
            if (dy) dy[r] += gt * dx[r];
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

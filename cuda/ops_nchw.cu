// Index maps on NCHW maps: pixel (un)shuffle, nearest x2 upsampling, channel block copies, and
// the map <-> token-row transposes (32 x 32 tiles through shared memory). One thread per
// destination element; where a backward sums (upsampling), it gathers in the CPU's order.
// defines: cuda_pixel_shuffle_*, cuda_pixel_unshuffle_*, cuda_upsample2x_*, cuda_channel_copy_*,
//          cuda_nchw_to_tokens_*, cuda_tokens_to_nchw_*
#include "cuda/cuda_common.cuh"

// ---------------------------------------------------------------------------------------------
// Pixel shuffle: hi[b, c, h*r + i, w*r + j] <-> lo[b, (c*r + i)*r + j, h, w]. One thread per hi
// element t; to_hi picks the direction, add accumulates (a permutation: no two threads meet).

__global__ void k_shuffle(float *hi, float *lo, int C, int H, int W, int r, int to_hi, int add, size_t total) {
    const int Wh = W * r, Hh = H * r;
    GRID_STRIDE(t, total) {
        const int xx = (int)(t % (size_t)Wh);
        const size_t u = t / (size_t)Wh;
        const int y = (int)(u % (size_t)Hh);
        const size_t bc = u / (size_t)Hh;
        const size_t l = ((bc * r + y % r) * r + xx % r) * H * W + (size_t)(y / r) * W + xx / r;
        if (to_hi) hi[t] = add ? hi[t] + lo[l] : lo[l];
        else lo[l] = add ? lo[l] + hi[t] : hi[t];
    }
}

static void shuffle(float *hi, float *lo, int B, int C, int H, int W, int r, int to_hi, int add, const char *op) {
    CU_REQUIRE(B >= 0 && C > 0 && H > 0 && W > 0 && r > 0, "%s: bad shape B%d C%d %dx%d r%d", op, B, C, H, W, r);
    const size_t total = (size_t)B * C * H * r * W * r;
    if (!total) return;
    k_shuffle<<<grid1d(total), CU_BLOCK>>>(hi, lo, C, H, W, r, to_hi, add, total);
    KERNEL_CHECK();
}

void cuda_pixel_shuffle_fwd(float *hi, const float *lo, int B, int C, int H, int W, int r) {
    shuffle(hi, (float *)lo, B, C, H, W, r, 1, 0, "pixel_shuffle_fwd");
}
void cuda_pixel_shuffle_bwd(float *dlo, const float *dhi, int B, int C, int H, int W, int r) {
    shuffle((float *)dhi, dlo, B, C, H, W, r, 0, 1, "pixel_shuffle_bwd");
}
void cuda_pixel_unshuffle_fwd(float *lo, const float *hi, int B, int C, int H, int W, int r) {
    shuffle((float *)hi, lo, B, C, H, W, r, 0, 0, "pixel_unshuffle_fwd");
}
void cuda_pixel_unshuffle_bwd(float *dhi, const float *dlo, int B, int C, int H, int W, int r) {
    shuffle(dhi, (float *)dlo, B, C, H, W, r, 1, 1, "pixel_unshuffle_bwd");
}

// ---------------------------------------------------------------------------------------------
// Nearest x2 upsampling

__global__ void k_upsample2x_fwd(float *out, const float *x, int H, int W, size_t total) {
    GRID_STRIDE(t, total) {
        const int xx = (int)(t % (size_t)(2 * W));
        const size_t u = t / (size_t)(2 * W);
        const int y = (int)(u % (size_t)(2 * H));
        out[t] = x[((u / (size_t)(2 * H)) * H + y / 2) * W + xx / 2];
    }
}

// dx[h, w] += dout[2h, 2w] + dout[2h, 2w+1] + dout[2h+1, 2w] + dout[2h+1, 2w+1], in that order
__global__ void k_upsample2x_bwd(float *dx, const float *dout, int H, int W, size_t total) {
    GRID_STRIDE(t, total) {
        const int w = (int)(t % (size_t)W);
        const size_t u = t / (size_t)W;
        const int h = (int)(u % (size_t)H);
        const float *g0 = dout + ((u / (size_t)H) * 2 * H + 2 * h) * (size_t)(2 * W) + 2 * w, *g1 = g0 + 2 * W;
        dx[t] += ((g0[0] + g0[1]) + g1[0]) + g1[1];
    }
}

void cuda_upsample2x_fwd(float *out, const float *x, int B, int C, int H, int W) {
    const size_t total = (size_t)B * C * 4 * H * W;
    if (!total) return;
    k_upsample2x_fwd<<<grid1d(total), CU_BLOCK>>>(out, x, H, W, total);
    KERNEL_CHECK();
}

void cuda_upsample2x_bwd(float *dx, const float *dout, int B, int C, int H, int W) {
    const size_t total = (size_t)B * C * H * W;
    if (!total) return;
    k_upsample2x_bwd<<<grid1d(total), CU_BLOCK>>>(dx, dout, H, W, total);
    KERNEL_CHECK();
}

// ---------------------------------------------------------------------------------------------
// Channel block copy: dst[b, d0 + c, p] (= or +=) src[b, s0 + c, p]

__global__ void k_channel_copy(float *dst, int dC, int d0, const float *src, int sC, int s0, int C, int HW, int add,
                               size_t total) {
    GRID_STRIDE(t, total) {
        const size_t p = t % (size_t)HW, bc = t / (size_t)HW, b = bc / C, c = bc % C;
        const float v = src[(b * sC + s0 + c) * HW + p];
        float *d = dst + (b * dC + d0 + c) * HW + p;
        *d = add ? *d + v : v;
    }
}

static void channel_copy(float *dst, int dC, int d0, const float *src, int sC, int s0, int C, int B, int HW, int add,
                         const char *op) {
    CU_REQUIRE(C >= 0 && d0 >= 0 && s0 >= 0 && d0 + C <= dC && s0 + C <= sC,
               "%s: channels %d+%d of %d from %d+%d of %d out of range", op, d0, C, dC, s0, C, sC);
    const size_t total = (size_t)B * C * HW;
    if (!total) return;
    k_channel_copy<<<grid1d(total), CU_BLOCK>>>(dst, dC, d0, src, sC, s0, C, HW, add, total);
    KERNEL_CHECK();
}

void cuda_channel_copy_fwd(float *dst, int dC, int d0, const float *src, int sC, int s0, int C, int B, int HW) {
    channel_copy(dst, dC, d0, src, sC, s0, C, B, HW, 0, "channel_copy_fwd");
}
void cuda_channel_copy_bwd(float *dsrc, int sC, int s0, const float *ddst, int dC, int d0, int C, int B, int HW) {
    channel_copy(dsrc, sC, s0, ddst, dC, d0, C, B, HW, 1, "channel_copy_bwd");
}

// ---------------------------------------------------------------------------------------------
// Transposes: per image (blockIdx.z), src [R, Q] -> dst [Q, R], dst[q*R + r] (= or +=) src[r*Q + q].
// Block (32, 8) per 32 x 32 tile; the padded tile row avoids shared-memory bank conflicts.

__global__ void k_transpose(float *dst, const float *src, int R, int Q, int add) {
    __shared__ float tile[32][33];
    const size_t off = (size_t)blockIdx.z * R * Q;
    const int q0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int dy = threadIdx.y; dy < 32; dy += 8) {
        const int r = r0 + dy, q = q0 + threadIdx.x;
        if (r < R && q < Q) tile[dy][threadIdx.x] = src[off + (size_t)r * Q + q];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < 32; dy += 8) {
        const int q = q0 + dy, r = r0 + threadIdx.x;
        if (q < Q && r < R) {
            const size_t o = off + (size_t)q * R + r;
            dst[o] = add ? dst[o] + tile[threadIdx.x][dy] : tile[threadIdx.x][dy];
        }
    }
}

static void transpose(float *dst, const float *src, int B, int R, int Q, int add) {
    if (B <= 0 || R <= 0 || Q <= 0) return;
    CU_REQUIRE(B <= 65535 && cdiv(R, 32) <= 65535, "transpose: %d images of %d rows exceed the grid", B, R);
    dim3 grid(cdiv(Q, 32), cdiv(R, 32), B), block(32, 8);
    k_transpose<<<grid, block>>>(dst, src, R, Q, add);
    KERNEL_CHECK();
}

void cuda_nchw_to_tokens_fwd(float *tokens, const float *x, int B, int C, int HW) { transpose(tokens, x, B, C, HW, 0); }
void cuda_nchw_to_tokens_bwd(float *dx, const float *dtokens, int B, int C, int HW) {
    transpose(dx, dtokens, B, HW, C, 1);
}
void cuda_tokens_to_nchw_fwd(float *x, const float *tokens, int B, int C, int HW) { transpose(x, tokens, B, HW, C, 0); }
void cuda_tokens_to_nchw_bwd(float *dtokens, const float *dx, int B, int C, int HW) {
    transpose(dtokens, dx, B, C, HW, 1);
}

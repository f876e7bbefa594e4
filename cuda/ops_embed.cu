// Patches, position / timestep / label embeddings.
// defines: cuda_patchify_fwd, cuda_patchify_bwd, cuda_unpatchify_fwd, cuda_unpatchify_bwd,
//          cuda_add_pos, cuda_timestep_embed, cuda_embed_fwd, cuda_embed_bwd
#include <math.h>

#include "cuda/cuda_common.cuh"

// ---------------------------------------------------------------------------------------------
// Patches. Token t = gi*g + gj of a g x g grid (g = S/p) covers pixels (gi*p + i, gj*p + j).
//   patchify:   patches[b, t, (c*p + i)*p + j]  <->  img[b, c, gi*p + i, gj*p + j]
//   unpatchify: tokens[b, t, (i*p + j)*C + c]   <->  img[b, c, gi*p + i, gj*p + j]
// Both maps are bijections, so the backward scatters without collisions. One thread per token
// element.

// The image index of element x of token t in batch b; order 0: (c, i, j) rows (patchify),
// order 1: (i, j, c) rows (unpatchify).
__device__ __forceinline__ size_t patch_pix(size_t e, int C, int S, int p, int order) {
    const int g = S / p, K = C * p * p;
    const int x = (int)(e % (size_t)K);
    const size_t bt = e / (size_t)K, b = bt / ((size_t)g * g);
    const int t = (int)(bt % ((size_t)g * g)), gi = t / g, gj = t % g;
    int c, i, j;
    if (order == 0) { c = x / (p * p); i = (x / p) % p; j = x % p; }
    else            { c = x % C; j = (x / C) % p; i = x / (C * p); }
    return ((b * C + c) * S + (size_t)gi * p + i) * S + (size_t)gj * p + j;
}

// tok[e] (= or +=) img[pix(e)]: patchify forward (set), unpatchify backward (add)
__global__ void k_tok_from_img(float *tok, const float *img, int C, int S, int p, int order, int add, size_t total) {
    GRID_STRIDE(e, total) {
        const float v = img[patch_pix(e, C, S, p, order)];
        tok[e] = add ? tok[e] + v : v;
    }
}
// img[pix(e)] (= or +=) tok[e]: unpatchify forward (set), patchify backward (add)
__global__ void k_img_from_tok(float *img, const float *tok, int C, int S, int p, int order, int add, size_t total) {
    GRID_STRIDE(e, total) {
        const size_t o = patch_pix(e, C, S, p, order);
        img[o] = add ? img[o] + tok[e] : tok[e];
    }
}

static size_t patch_total(int B, int C, int S, int p) {
    CU_REQUIRE(p > 0 && S % p == 0, "patchify: image size %d not a multiple of patch %d", S, p);
    return (size_t)B * C * S * S;  // = B * T * C*p*p
}

void cuda_patchify_fwd(float *patches, const float *img, int B, int C, int S, int p) {
    const size_t n = patch_total(B, C, S, p);
    if (!n) return;
    k_tok_from_img<<<grid1d(n), CU_BLOCK>>>(patches, img, C, S, p, 0, 0, n);
    KERNEL_CHECK();
}
void cuda_patchify_bwd(float *dimg, const float *dpatches, int B, int C, int S, int p) {
    const size_t n = patch_total(B, C, S, p);
    if (!n) return;
    k_img_from_tok<<<grid1d(n), CU_BLOCK>>>(dimg, dpatches, C, S, p, 0, 1, n);
    KERNEL_CHECK();
}
void cuda_unpatchify_fwd(float *img, const float *tokens, int B, int C, int S, int p) {
    const size_t n = patch_total(B, C, S, p);
    if (!n) return;
    k_img_from_tok<<<grid1d(n), CU_BLOCK>>>(img, tokens, C, S, p, 1, 0, n);
    KERNEL_CHECK();
}
void cuda_unpatchify_bwd(float *dtokens, const float *dimg, int B, int C, int S, int p) {
    const size_t n = patch_total(B, C, S, p);
    if (!n) return;
    k_tok_from_img<<<grid1d(n), CU_BLOCK>>>(dtokens, dimg, C, S, p, 1, 1, n);
    KERNEL_CHECK();
}

// ---------------------------------------------------------------------------------------------
// x[b,l,c] += pos[l,c]

__global__ void k_add_pos(float *x, const float *pos, size_t LC, size_t total) {
    GRID_STRIDE(i, total) x[i] += pos[i % LC];
}

void cuda_add_pos(float *x, const float *pos, int B, int L, int C) {
    const size_t LC = (size_t)L * C, total = (size_t)B * LC;
    if (!total) return;
    k_add_pos<<<grid1d(total), CU_BLOCK>>>(x, pos, LC, total);
    KERNEL_CHECK();
}

// ---------------------------------------------------------------------------------------------
// Timestep embedding, DiT's float32 formula: out[b] = [cos(t f_i), sin(t f_i)], i < half,
// f_i = exp(-ln(10000) i / half); a zero last column when dim is odd. ln(10000) comes from the
// host's logf and exp is evaluated in double then rounded, so f_i is the correctly rounded float
// the CPU's expf gives (the argument t f_i reaches ~1000, where an ulp of f_i matters).

__global__ void k_timestep_embed(float *out, const float *t, float ln_period, int dim, size_t total) {
    const int half = dim / 2;
    GRID_STRIDE(e, total) {
        const size_t b = e / (size_t)dim;
        const int i = (int)(e % (size_t)dim);
        if (i >= 2 * half) { out[e] = 0.0f; continue; }
        const int m = i < half ? i : i - half;
        const float arg = -ln_period * (float)m / (float)half;
        const float f = (float)exp((double)arg);
        const float a = t[b] * f;
        out[e] = i < half ? cosf(a) : sinf(a);
    }
}

void cuda_timestep_embed(float *out, const float *t, int B, int dim) {
    const size_t total = (size_t)B * dim;
    if (!total) return;
    k_timestep_embed<<<grid1d(total), CU_BLOCK>>>(out, t, logf(10000.0f), dim, total);
    KERNEL_CHECK();
}

// ---------------------------------------------------------------------------------------------
// Label embedding: out[b] = table[y[b]];  dtable[y[b]] += dout[b] (atomicAdd: a batch may repeat a
// label).

__global__ void k_embed_fwd(float *out, const float *table, const int32_t *y, int C, size_t total) {
    GRID_STRIDE(e, total) out[e] = table[(size_t)y[e / (size_t)C] * C + e % (size_t)C];
}
__global__ void k_embed_bwd(float *dtable, const float *dout, const int32_t *y, int C, size_t total) {
    GRID_STRIDE(e, total) atomicAdd(dtable + (size_t)y[e / (size_t)C] * C + e % (size_t)C, dout[e]);
}

void cuda_embed_fwd(float *out, const float *table, const int32_t *y, int B, int C) {
    const size_t total = (size_t)B * C;
    if (!total) return;
    k_embed_fwd<<<grid1d(total), CU_BLOCK>>>(out, table, y, C, total);
    KERNEL_CHECK();
}
void cuda_embed_bwd(float *dtable, const float *dout, const int32_t *y, int B, int C) {
    const size_t total = (size_t)B * C;
    if (!total) return;
    k_embed_bwd<<<grid1d(total), CU_BLOCK>>>(dtable, dout, y, C, total);
    KERNEL_CHECK();
}

// The op table: every numerical op the model, the trainer and the samplers run, as function
// pointers chosen at run time (CPU now, CUDA where a GPU exists). Pointers passed to these ops
// live in the backend's memory (alloc/to_device/to_host move data in and out).
//
// Conventions
// - Row-major. Activations are [B, L, C] (batch, tokens, channels); a "row" is one token.
// - Attention heads: head h of an [.., H]-channel row owns channels h*d .. h*d+d-1 (d = H/heads),
//   as PyTorch's reshape(B, L, heads, d) does. The fused qkv row is [q(H) | k(H) | v(H)].
// - Token l of a gh x gw grid sits at row l / gw, column l % gw.
// - Backward ops ADD into every gradient buffer they are given (the caller zeroes them), except
//   where a comment says "in place" or "overwrites" (activation gradients that have one writer:
//   no zeroing pass over them). A NULL gradient pointer means "not needed".
#ifndef MALA_BACKEND_H
#define MALA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/diffusion_math.h"

typedef struct Backend Backend;

// The attention kinds of attn_row (the same numbers as the model's AttnKind).
enum { ATTN_ROW_MALA = 0, ATTN_ROW_SOFTMAX = 1, ATTN_ROW_LINEAR = 2 };

// Per-call attention geometry. qkv rows have stride 3H; qkr (roped q', k') rows have stride 2H;
// out rows have stride H.
typedef struct {
    int B, L, H, heads;  // batch, tokens, hidden, heads (d = H / heads)
    int gh, gw;          // token grid (gh * gw == L), for RoPE and LePE
} AttnShape;

// Gated linear attention geometry (DiG's token mixer: fla's GLA). Head h of a q, k or g row owns
// channels h*dk .. h*dk+dk-1, of a v or o row channels h*dv .. h*dv+dv-1. Every tensor has its own
// row stride (floats), so q, k, v, g can be column slices of one fused projection's output; each
// gradient has the stride of its tensor (dout that of o).
typedef struct {
    int B, L, heads, dk, dv;      // batch, tokens, heads, per-head key and value widths
    int ldq, ldk, ldv, ldg, ldo;  // row strides of q, k, v, g and o
} GlaShape;

// 2-D convolution geometry on NCHW maps: PyTorch's Conv2d(Cin, Cout, (kh, kw), stride) applied to
// x [B, Cin, H, W] zero-padded by pt rows on top, pb below, pl columns on the left and pr on the
// right (F.pad(x, (pl, pr, pt, pb)), then an unpadded conv; Conv2d(padding=p) is all four = p).
// The output is [B, Cout, Ho, Wo], Ho = (H + pt + pb - kh) / stride + 1, Wo = (W + pl + pr - kw) /
// stride + 1 (conv_plan.h computes them).
typedef struct {
    int B, Cin, H, W;    // input
    int Cout, kh, kw;    // weight [Cout, Cin, kh, kw] (PyTorch's layout)
    int stride;          // the same in both axes
    int pt, pb, pl, pr;  // zero padding: top, bottom, left, right
} ConvShape;

// Backend.set_precision's modes (0 and 1 as before: reduced and full fp32).
// PREC_INT8 (the CPU only, for sampling): linear_fwd_quant in int8, every other product in fp32.
enum { PREC_REDUCED = 0, PREC_FP32 = 1, PREC_BF16 = 2, PREC_TF32 = 3, PREC_INT8 = 4 };

struct Backend {
    const char *name;

    // ---- memory ----
    void *(*alloc)(size_t bytes);                 // zero-filled; aborts on failure
    void (*release)(void *p);
    void (*to_device)(void *dst, const void *src, size_t bytes);
    void (*to_host)(void *dst, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);  // device to device
    void (*zero)(void *p, size_t bytes);
    void (*sync)(void);
    // Matrix products (and the CPU's convolutions) in the backend's reduced precision (fp32 = 0: TF32 on
    // CUDA, its default; bf16 inputs with fp32 accumulation on the CPU, which needs oneDNN) or in full fp32
    // (1, the CPU's default).
    // The argument is a mode: PREC_FP32 (1), PREC_REDUCED (0: the reduced precision last chosen; TF32
    // on CUDA until PREC_BF16 chooses bf16 there), PREC_BF16 (2) or PREC_TF32 (3: fp32 on the CPU).
    void (*set_precision)(int mode);
    const char *(*precision)(void);  // "tf32", "bf16", "int8" or "fp32": what the products run in now
    // GFLOP/s of this backend's matrix product (cpu_sgemm: oneDNN or OpenBLAS; cuBLAS in the current precision)
    // on a DiT-S/2-shaped product (8192x384 times 384x1152): the ceiling `mala bench train` reports.
    double (*gemm_gflops)(void);
    // Parameters were written outside the optimiser's ops (loading, initialisation): a backend keeping
    // reduced-precision copies of weights (the CPU's bf16 shadows) makes them again before their next use.
    void (*weights_changed)(void);

    // ---- dense ----
    // out[N,Dout] = in[N,Din] W[Dout,Din]^T + b[Dout]   (b may be NULL)
    void (*linear_fwd)(float *out, const float *in, const float *w, const float *b, int N, int Din, int Dout);
    // din[N,Din] = din_beta din + dout W (din_beta 0 overwrites din, 1 adds into it);
    // dw[Dout,Din] += dout^T in;  db[Dout] += sum_n dout[n]
    void (*linear_bwd)(float *din, float *dw, float *db, const float *dout, const float *in,
                       const float *w, int N, int Din, int Dout, float din_beta);
    // linear_fwd for a transformer block's large linears (attention qkv, gate and projection; MLP fc1
    // and fc2), the ones a backend may run quantised: at PREC_INT8 the CPU runs them as int8 x int8
    // products with int32 sums (per-output-channel weight scales, per-token activation scales;
    // cpu/cpu_int8.h); at every other precision, and on CUDA, exactly linear_fwd.
    void (*linear_fwd_quant)(float *out, const float *in, const float *w, const float *b, int N, int Din, int Dout);
    // The same product from weights held in int8 only (a network sampling at PREC_INT8 keeps no fp32
    // copy of these linears, model/net.h): qw[Dout, Din] int8 rows and their scales sw[Dout], W = qw
    // times sw by rows (core/quant8.h), the activations quantised per token as linear_fwd_quant does.
    // On the CPU it gives the bits linear_fwd_quant gives at PREC_INT8 from weights whose quantisation
    // is (qw, sw). CUDA has no int8 (backend_select refuses PREC_INT8 there, so no network holds int8
    // weights there): it refuses.
    void (*linear_fwd_q8)(float *out, const float *in, const int8_t *qw, const float *sw, const float *b, int N,
                          int Din, int Dout);

    // ---- normalisation and adaLN ----
    // LayerNorm over C without affine, eps 1e-6: out = (x - mean) * rstd; rstd[N] kept for backward.
    void (*layernorm_fwd)(float *out, float *rstd, const float *x, int N, int C);
    // dx += rstd * (dout - mean(dout) - out * mean(dout * out))   (uses the normalised output)
    void (*layernorm_bwd)(float *dx, const float *dout, const float *out, const float *rstd, int N, int C);
    // out[b,l,c] = x[b,l,c] * (1 + scale[b*ms + c]) + shift[b*ms + c]   (ms: row stride of shift/scale)
    void (*modulate_fwd)(float *out, const float *x, const float *shift, const float *scale,
                         int B, int L, int C, int ms);
    // layernorm_fwd then modulate_fwd in one pass, with their arithmetic (the same bits):
    // out = LN(x) (1 + scale) + shift; xhat = LN(x) is kept only when xhat is non-NULL.
    void (*layernorm_modulate_fwd)(float *out, float *xhat, float *rstd, const float *x, const float *shift,
                                   const float *scale, int B, int L, int C, int ms);
    // dx = dout (1 + scale) (overwrites);  dshift += sum_l dout;  dscale += sum_l dout x
    void (*modulate_bwd)(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                         const float *scale, int B, int L, int C, int ms);
    // x[b,l,c] += gate[b*ms + c] * y[b,l,c]   (the adaLN-Zero gated residual, in place on x)
    void (*gate_residual_fwd)(float *x, const float *y, const float *gate, int B, int L, int C, int ms);
    // dy = gate * dx (overwrites);  dgate += sum_l dx * y     (dx itself passes through unchanged)
    void (*gate_residual_bwd)(float *dy, float *dgate, const float *dx, const float *y, const float *gate,
                              int B, int L, int C, int ms);

    // ---- elementwise ----
    // gelu_bwd, gelu_erf_bwd and silu_bwd overwrite dx: dx = dout * f'(x). The forwards may run in
    // place (out == x).
    void (*gelu_fwd)(float *out, const float *x, size_t n);          // tanh approximation
    void (*gelu_bwd)(float *dx, const float *dout, const float *x, size_t n);
    // Exact GELU (nn.GELU(), approximate="none"): out = 0.5 x (1 + erf(x / sqrt 2));
    // dx = dout (Phi(x) + x phi(x)), Phi and phi the standard normal cdf and density.
    void (*gelu_erf_fwd)(float *out, const float *x, size_t n);
    void (*gelu_erf_bwd)(float *dx, const float *dout, const float *x, size_t n);
    void (*silu_fwd)(float *out, const float *x, size_t n);
    void (*silu_bwd)(float *dx, const float *dout, const float *x, size_t n);
    void (*add)(float *out, const float *a, const float *b, size_t n);  // out = a + b
    void (*mul_fwd)(float *out, const float *a, const float *b, size_t n);  // out = a * b
    void (*mul_bwd)(float *da, float *db, const float *dout, const float *a, const float *b, size_t n);
    // phi(x) = ELU(x) + 1, in place on `cols` leading channels of `rows` rows with stride ld.
    void (*elu1_fwd)(float *x, int rows, int cols, int ld);
    // In place: g = g * phi'(x), computed from y = phi(x): phi' = 1 if y > 1 else y.
    void (*elu1_bwd)(float *g, const float *y, int rows, int cols, int ld);

    // ---- attention ----
    // 2-D RoPE (docs/design.md §1) of the q and k parts of qkv (phi already applied) into qkr [B,L,2H].
    void (*rope_fwd)(float *qkr, const float *qkv, AttnShape s);
    // elu1_fwd on the q and k parts of qkv (in place) and rope_fwd from them, in one pass.
    void (*elu1_rope_fwd)(float *qkr, float *qkv, AttnShape s);
    // dqkv (q,k parts) += R^T dqkr
    void (*rope_bwd)(float *dqkv, const float *dqkr, AttnShape s);
    // Floats of the `cache` each attention kind needs: what the forward keeps for the backward plus
    // the backward's scratch. The backward may overwrite the scratch part but leaves the forward's
    // part intact (running it twice gives the same gradients).
    size_t (*mala_cache_floats)(AttnShape s);
    size_t (*linattn_cache_floats)(AttnShape s);
    size_t (*softmax_cache_floats)(AttnShape s);
    // MALA core (docs/design.md §1). qkv holds q' = phi(q), k' = phi(k) and v; qkr holds rope(q'), rope(k')
    // or is NULL (no RoPE: q', k' are used). out[B,L,H] is overwritten.
    void (*mala_fwd)(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
    void (*mala_bwd)(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                     float *cache, AttnShape s);
    // Plain linear attention: out_i = rope(q'_i) sum_j rope(k'_j) v_j^T / (q'_i . sum_j k'_j + 1e-6).
    void (*linattn_fwd)(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
    void (*linattn_bwd)(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                        float *cache, AttnShape s);
    // Softmax attention (DiT): softmax(q k^T / sqrt(d)) v on raw q, k (or on qkr when non-NULL).
    void (*softmax_fwd)(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
    void (*softmax_bwd)(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                        float *cache, AttnShape s);
    // One explicit attention row (the viewer's map): the scores of query token `query` of image b
    // over that image's L tokens, for head `head` (0..heads-1) or the mean over all heads (head < 0),
    // into row[L] (overwritten), with the query's features scaled by a for this row only (a = 1: the
    // model's own row). qkv/qkr are as the forward of `kind` takes them (kind: ATTN_ROW_*):
    //   MALA:    A_j = beta (s/L) (a qr) . kr_j - gamma, z = s (a q') . kbar, beta = 1 + 1/(z + eps),
    //            gamma = z / L   (z without RoPE; rows sum to z / (z + eps) ~ 1 without RoPE)
    //   linear:  A_j = (a qr) . kr_j / ((a q') . sum_l k'_l + eps)
    //   softmax: A_j = softmax_j(s (a q) . k_j)   (on qr, kr when qkr is non-NULL)
    // O(L d) per head: the L x L matrix is never formed.
    void (*attn_row)(float *row, const float *qkv, const float *qkr, AttnShape s, int kind, int b, int head,
                     int query, float a);
    // Depthwise k x k cross-correlation over the gh x gw token grid (odd k, zero padding k/2) plus
    // bias, ADDED to out [B, gh*gw, C] (rows of stride C); x rows have stride ldx; weight [C,1,k,k]
    // (PyTorch's Conv2d(C, C, k, groups=C)), bias [C] or NULL:
    //   out[b,(r,c),ch] += bias[ch] + sum_{ky,kx} w[ch,ky,kx] x[b,(r+ky-k/2, c+kx-k/2),ch]
    // LePE passes the v part of qkv (x = qkv + 2H, ldx = 3H); DiG's conv after each block passes
    // its activations (ldx = C) into a zeroed out.
    void (*dwconv_fwd)(float *out, const float *x, int ldx, const float *w, const float *b, int k, int B,
                       int gh, int gw, int C);
    // dx (stride ldx) += ..., dw += ..., db += ...
    void (*dwconv_bwd)(float *dx, float *dw, float *db, const float *dout, const float *x, int ldx,
                       const float *w, int k, int B, int gh, int gw, int C);

    // ---- gated linear attention and the rest of DiG's block ----
    // The forget gate's log-decay, in place on `cols` leading channels of `rows` rows with stride
    // ld: x = logsigmoid(x) / norm (fla: F.logsigmoid(gk) / gate_logit_normalizer, 16 in DiG).
    void (*logsigmoid_fwd)(float *x, int rows, int cols, int ld, float norm);
    // In place: g = g * sigmoid(-x) / norm, from y = logsigmoid(x) / norm (sigmoid(-x) = -expm1(norm y)).
    void (*logsigmoid_bwd)(float *g, const float *y, int rows, int cols, int ld, float norm);
    // Floats of gla's cache: the forward's chunk-start states plus the backward's scratch (which
    // the backward may overwrite; the forward's part stays intact).
    size_t (*gla_cache_floats)(GlaShape s);
    // GLA core per (batch, head), with g <= 0 the log-decay (from logsigmoid_fwd), scale = dk^-1/2:
    //   S_t = diag(exp(g_t)) S_{t-1} + k_t^T v_t   (S_0 = 0, S_t dk x dv),   o_t = scale q_t S_t
    // (o overwritten). Computed in chunks with state passing, O(L dk dv); the chunked form and why
    // it cannot overflow for any g <= 0 are in the backends' GLA files.
    void (*gla_fwd)(float *o, float *cache, const float *q, const float *k, const float *v, const float *g,
                    GlaShape s);
    // dq, dk, dv, dg += the gradients of sum(o * dout); with b_t = sum_{s<=t} g_s the whole-sequence
    // log-decay, dL/db_t = q_t dq_t - k_t dk_t, so dg_t = sum_{s>=t} (q_s dq_s - k_s dk_s).
    void (*gla_bwd)(float *dq, float *dk, float *dv, float *dg, const float *dout, const float *q,
                    const float *k, const float *v, const float *g, float *cache, GlaShape s);
    // RMSNorm with swish output gate per head-row of width d (fla's FusedRMSNormSwishGate); x and
    // out are [N, heads*d] (contiguous), gate rows have stride ldg, w [d] is shared by the heads:
    //   out = y w silu(gate),  y = x r,  r = 1 / sqrt(mean_c x^2 + eps)   (rstd[N*heads] = r kept)
    void (*rmsnorm_gate_fwd)(float *out, float *rstd, const float *x, const float *gate, const float *w,
                             int N, int heads, int d, int ldg, float eps);
    // With u = dout w silu(gate):  dx += r (u - y mean_c(u y));  dgate += dout y w silu'(gate);
    // dw += sum over rows and heads of dout y silu(gate).
    void (*rmsnorm_gate_bwd)(float *dx, float *dgate, float *dw, const float *dout, const float *x,
                             const float *gate, const float *w, const float *rstd, int N, int heads, int d,
                             int ldg);
    // SwiGLU on one fused [N, 2F] projection (fla's GLAMLP: gate, y = gate_proj(x).chunk(2, -1)):
    //   out[n,f] = silu(ab[n,f]) * ab[n,F+f]   (out [N,F])
    void (*swiglu_fwd)(float *out, const float *ab, int N, int F);
    // dab[n,f] += dout silu'(a) b;  dab[n,F+f] += dout silu(a)
    void (*swiglu_bwd)(float *dab, const float *dout, const float *ab, int N, int F);
    // DiG's scan directions on [B, L, C] (L = gh*gw; out != x): flip reverses the token order; then
    // transpose reads the gh x gw grid by columns, so out is a gw x gh grid:
    //   y[l] = flip ? x[L-1-l] : x[l];   out[l] = transpose ? y[(l % gh) * gw + l / gh] : y[l]
    // (PyTorch: x.flip(1), then x.reshape(B, gh, gw, C).transpose(1, 2).flatten(1, 2)).
    void (*permute_tokens_fwd)(float *out, const float *x, int B, int gh, int gw, int C, int flip,
                               int transpose);
    // The inverse permutation, added: dx[b, src(l)] += dout[b, l]  (same gh, gw, flip, transpose)
    void (*permute_tokens_bwd)(float *dx, const float *dout, int B, int gh, int gw, int C, int flip,
                               int transpose);

    // ---- NCHW maps (convolutional backbones, the VAE) ----
    // Activations [B, C, H, W] row-major, HW = H * W; pixel p = y * W + x of channel c of image b
    // is x[(b * C + c) * HW + p]. SiLU on a map is silu_fwd/bwd on its B*C*HW floats.
    //
    // Floats of conv2d's scratch that one conv2d_fwd or conv2d_bwd call on shape s uses when given
    // that much: the im2col column matrix of one chunk (several whole images, or a block of one
    // image's output rows), bounded whatever B, H and W are (the CPU asks for 2^20 floats, CUDA
    // for 2^23, or one output row, Cin*kh*kw*Wo, where that is more); 0 for 1x1 stride-1
    // unpadded convs, which read x as it is.
    size_t (*conv2d_workspace_floats)(ConvShape s);
    // out[b,co,oy,ox] = bias[co] + sum_{ci,ky,kx} w[co,ci,ky,kx] x[b, ci, oy*stride-pt+ky, ox*stride-pl+kx]
    // (x = 0 outside the image; bias [Cout] or NULL; out overwritten). Computed per chunk as
    // im2col, then out_chunk = W[Cout, Cin*kh*kw] col. work holds work_floats floats of scratch:
    // any amount from one output row's columns up (chunks shrink to fit it), less is refused.
    // (The CPU's oneDNN convolutions, cpu/cpu_gemm.h, leave the scratch unused.)
    void (*conv2d_fwd)(float *out, const float *x, const float *w, const float *bias, ConvShape s, float *work,
                       size_t work_floats);
    // With the same geometry (any of dx, dw, db may be NULL):
    //   dx[b,ci,iy,ix] += sum over the (co,ky,kx,oy,ox) that read it of w[co,ci,ky,kx] dout[b,co,oy,ox]
    //                     (col = W^T dout_chunk, then col2im in a fixed order),
    //   dw[co,ci,ky,kx] += sum_{b,oy,ox} dout[b,co,oy,ox] x[b, ci, oy*stride-pt+ky, ox*stride-pl+kx],
    //   db[co] += sum_{b,oy,ox} dout[b,co,oy,ox].
    void (*conv2d_bwd)(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                       ConvShape s, float *work, size_t work_floats);
    // GroupNorm (nn.GroupNorm(G, C, eps)) on x [B, C, HW]: group g of image b holds channels
    // g*C/G .. (g+1)*C/G - 1; over its C/G*HW values mean and rstd = 1 / sqrt(var + eps) (biased
    // variance), kept in mean, rstd [B*G] for the backward;
    //   out = (x - mean) rstd w[c] + bias[c]   (w, bias [C]; NULL means 1 and 0).
    void (*groupnorm_fwd)(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                          int B, int C, int HW, int G, float eps);
    // With xh = (x - mean) rstd and u = dout w over the n = C/G*HW values of a group:
    //   dx += rstd (u - sum(u)/n - xh sum(u xh)/n);  dw[c] += sum_{b,p} dout xh;  db[c] += sum_{b,p} dout
    void (*groupnorm_bwd)(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                          const float *rstd, const float *w, int B, int C, int HW, int G);
    // LayerNorm over the channels of each pixel (DiC's LayerNorm2d: nn.LayerNorm(C) on the
    // channels-last map): per (b, p), mean and rstd = 1 / sqrt(var + eps) over the C values
    // x[b, :, p], kept in mean, rstd [B*HW];  out = (x - mean) rstd w[c] + bias[c]  (NULL: 1, 0).
    void (*layernorm2d_fwd)(float *out, float *mean, float *rstd, const float *x, const float *w, const float *bias,
                            int B, int C, int HW, float eps);
    // As groupnorm_bwd with the pixel's C values as the group (n = C).
    void (*layernorm2d_bwd)(float *dx, float *dw, float *db, const float *dout, const float *x, const float *mean,
                            const float *rstd, const float *w, int B, int C, int HW);
    // Pixel shuffle by r between lo [B, C*r*r, H, W] and hi [B, C, H*r, W*r] (C, H, W: the
    // channels of hi and the size of lo), nn.PixelShuffle(r)'s order:
    //   hi[b, c, h*r + i, w*r + j] = lo[b, (c*r + i)*r + j, h, w]
    // pixel_unshuffle (nn.PixelUnshuffle(r)) is the inverse map, hi -> lo. The backward ops add
    // through the inverse map: dlo += shuffle^-1(dhi), dhi += unshuffle^-1(dlo).
    void (*pixel_shuffle_fwd)(float *hi, const float *lo, int B, int C, int H, int W, int r);
    void (*pixel_shuffle_bwd)(float *dlo, const float *dhi, int B, int C, int H, int W, int r);
    void (*pixel_unshuffle_fwd)(float *lo, const float *hi, int B, int C, int H, int W, int r);
    void (*pixel_unshuffle_bwd)(float *dhi, const float *dlo, int B, int C, int H, int W, int r);
    // Nearest-neighbour x2 upsampling (F.interpolate(scale_factor=2, mode="nearest")) of x
    // [B, C, H, W]: out[b, c, y, x] = x[b, c, y/2, x/2], out [B, C, 2H, 2W];
    // dx[b,c,h,w] += the four dout values it was copied to.
    void (*upsample2x_fwd)(float *out, const float *x, int B, int C, int H, int W);
    void (*upsample2x_bwd)(float *dx, const float *dout, int B, int C, int H, int W);
    // Channel block copy (concatenation, split): dst[b, d0 + c, p] = src[b, s0 + c, p] for c < C,
    // p < HW, where dst has dC channels and src sC. Its backward adds the other way:
    // dsrc[b, s0 + c, p] += ddst[b, d0 + c, p].
    void (*channel_copy_fwd)(float *dst, int dC, int d0, const float *src, int sC, int s0, int C, int B, int HW);
    void (*channel_copy_bwd)(float *dsrc, int sC, int s0, const float *ddst, int dC, int d0, int C, int B, int HW);
    // Per-channel adaLN on maps (rows of shift/scale/gate have stride ms, as modulate_fwd's):
    //   out[b,c,p] = x[b,c,p] (1 + scale[b*ms + c]) + shift[b*ms + c]
    void (*modulate2d_fwd)(float *out, const float *x, const float *shift, const float *scale, int B, int C, int HW,
                           int ms);
    // dx += dout (1 + scale);  dshift[b*ms+c] += sum_p dout;  dscale[b*ms+c] += sum_p dout x
    void (*modulate2d_bwd)(float *dx, float *dshift, float *dscale, const float *dout, const float *x,
                           const float *scale, int B, int C, int HW, int ms);
    // x[b,c,p] += gate[b*ms + c] y[b,c,p]   (in place on x)
    void (*gate_residual2d_fwd)(float *x, const float *y, const float *gate, int B, int C, int HW, int ms);
    // dy += gate dx;  dgate[b*ms+c] += sum_p dx y   (dx passes through unchanged)
    void (*gate_residual2d_bwd)(float *dy, float *dgate, const float *dx, const float *y, const float *gate, int B,
                                int C, int HW, int ms);
    // Maps as token rows and back: tokens [B, HW, C] with tokens[b, p, c] = x[b, c, p] (so the
    // attention ops run on a map's pixels). The backwards add through the inverse transpose.
    void (*nchw_to_tokens_fwd)(float *tokens, const float *x, int B, int C, int HW);
    void (*nchw_to_tokens_bwd)(float *dx, const float *dtokens, int B, int C, int HW);
    void (*tokens_to_nchw_fwd)(float *x, const float *tokens, int B, int C, int HW);
    void (*tokens_to_nchw_bwd)(float *dtokens, const float *dx, int B, int C, int HW);

    // ---- ReLU, pooling and resizing on NCHW maps (the FID Inception). The pools and the resize
    // are evaluation ops, forward only; ReLU has its backward. ----
    // out = max(x, 0) (out may be x);  dx += dout where out > 0 (from the forward's output).
    void (*relu_fwd)(float *out, const float *x, size_t n);
    void (*relu_bwd)(float *dx, const float *dout, const float *out, size_t n);
    // k x k pooling of x [B, C, H, W] with stride s and padding p (p <= k/2) into out [B, C, Ho, Wo],
    // Ho = (H + 2p - k) / s + 1, Wo likewise (floor, as ceil_mode=False). Only the window cells inside
    // the image count: max is F.max_pool2d(x, k, s, p) (padding acts as -inf), avg is
    // F.avg_pool2d(x, k, s, p, count_include_pad=False) (the divisor is the number of cells inside).
    void (*maxpool2d_fwd)(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p);
    void (*avgpool2d_fwd)(float *out, const float *x, int B, int C, int H, int W, int k, int s, int p);
    // out[b*C + c] = mean over p of x[b, c, p]  (F.adaptive_avg_pool2d(x, 1); summed in double)
    void (*mean_hw_fwd)(float *out, const float *x, int B, int C, int HW);
    // Bilinear resize of x [B, C, H, W] to out [B, C, Ho, Wo] as F.interpolate(mode="bilinear",
    // align_corners=False) computes it on the CPU: per axis ratio = float(in) / float(out), source
    // position r = max(ratio (o + 0.5) - 0.5, 0) in double, i0 = floor r, i1 = min(i0 + 1, in - 1),
    // weights (1 - l, l) with l = float(r - i0) (equal sizes copy); rows then columns:
    //   out = (x[i0y, i0x] lx0 + x[i0y, i1x] lx1) ly0 + (x[i1y, i0x] lx0 + x[i1y, i1x] lx1) ly1.
    void (*resize_bilinear_fwd)(float *out, const float *x, int B, int C, int H, int W, int Ho, int Wo);

    // ---- embeddings and patches ----
    // img [B,C,S,S] -> patches [B, T, C*p*p] with T = (S/p)^2, each row ordered (c, i, j) as a
    // flattened conv weight [H, C, p, p] expects.
    void (*patchify_fwd)(float *patches, const float *img, int B, int C, int S, int p);
    void (*patchify_bwd)(float *dimg, const float *dpatches, int B, int C, int S, int p);
    // tokens [B, T, p*p*C] ordered (i, j, c) -> img [B,C,S,S]   (DiT's unpatchify)
    void (*unpatchify_fwd)(float *img, const float *tokens, int B, int C, int S, int p);
    void (*unpatchify_bwd)(float *dtokens, const float *dimg, int B, int C, int S, int p);
    // x[b,l,c] += pos[l,c]
    void (*add_pos)(float *x, const float *pos, int B, int L, int C);
    // out[B, dim] = [cos(t * f), sin(t * f)], f_i = exp(-ln(10000) i / (dim/2)); t is not trained,
    // so there is no backward.
    void (*timestep_embed)(float *out, const float *t, int B, int dim);
    // out[b] = table[y[b]]  /  dtable[y[b]] += dout[b]
    void (*embed_fwd)(float *out, const float *table, const int32_t *y, int B, int C);
    void (*embed_bwd)(float *dtable, const float *dout, const int32_t *y, int B, int C);

    // ---- optimiser ----
    // AdamW step t (1-based) as torch.optim.AdamW: p -= lr*wd*p; m,v moments; bias-corrected update.
    void (*adamw)(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                  float beta2, float eps, float wd, int t);
    void (*ema)(float *e, const float *p, size_t n, float decay);  // e = decay e + (1-decay) p
    // Sum of squares of x into *out (host double), for the gradient norm.
    double (*sumsq)(const float *x, size_t n);
    void (*scale)(float *x, float a, size_t n);  // x *= a
    void (*fill)(float *x, float v, size_t n);   // x = v

    // ---- randomness (counter-based: the same seed and stream give the same numbers on the same
    // backend, whatever the launch; the CPU's Philox and cuRAND's give different numbers) ----
    // Row r of out [rows, cols]: standard normals of stream stream0 + r * stride.
    void (*rand_normal)(float *out, int rows, size_t cols, uint64_t seed, uint64_t stream0, uint64_t stride);
    // Uniform 32-bit words of one stream.
    void (*rand_bits)(uint32_t *out, size_t n, uint64_t seed, uint64_t stream);

    // ---- diffusion (coefs: [T][DIFF_COEFS] per-timestep rows, diffusion_math.h) ----
    // One training step's inputs for B samples of `per` floats: t[b] = timestep_from_bits(bits[b], T),
    // y[b] = null_class when label_dropped(bits[B + b], drop) else y_in[b], tf[b] = the network's
    // timestep of t[b], xt = q_sample(x0, noise) at t[b].
    void (*diffusion_prepare)(float *xt, float *tf, int32_t *t, int32_t *y, const uint32_t *bits,
                              const float *x0, const float *noise, const int32_t *y_in, const double *coefs,
                              int T, float drop, int null_class, int B, size_t per);
    // ADM training loss (diffusion.h, diffusion_training_loss) of model output out [B, Cout, hw]
    // (Cout = 2C when learn_sigma): mse[b], vb[b] per-sample terms (double, overwritten), grad =
    // d(mean_b (mse_b + vb_b)) / d out (overwritten). x_t is recomputed from x0 and noise.
    void (*diffusion_loss)(float *grad, double *mse, double *vb, const float *out, const float *x0,
                           const float *noise, const int32_t *t, const double *coefs, double vb_scale,
                           int B, int C, size_t hw, int learn_sigma);
    // One sampler update (sampler_update in diffusion_math.h: x0 from eps, then a linear combination
    // with per-step coefficients k) of x [n, C, hw] in place; x0 [n, C, hw] gets the predicted x0.
    // out: model output of the step, [n, Cout, hw] or, guided, [2n, Cout, hw] (conditional rows,
    // then unconditional); x0_prev: a multistep solver's previous x0 [n, C, hw] (read only when
    // k->c_prev != 0; it may be NULL otherwise, and must not be x0); z: noise [n, C, hw] (read only
    // when k->noise != STEP_NOISE_NONE).
    void (*sampler_step)(float *x, float *x0, const float *x0_prev, const float *out, const float *z,
                         const SamplerStepCoefs *k, int n, int C, size_t hw);
};

// Every op slot of the table, in order. backend_check() refuses a table with an empty slot, and
// backend_select.c asserts at build time that this list covers the whole struct.
#define MALA_BACKEND_SLOTS(X) \
    X(alloc) X(release) X(to_device) X(to_host) X(copy) X(zero) X(sync) X(set_precision) X(precision) \
    X(gemm_gflops) X(weights_changed) \
    X(linear_fwd) X(linear_bwd) X(linear_fwd_quant) X(linear_fwd_q8) X(layernorm_fwd) X(layernorm_bwd) X(modulate_fwd) X(layernorm_modulate_fwd) \
    X(modulate_bwd) X(gate_residual_fwd) X(gate_residual_bwd) X(gelu_fwd) X(gelu_bwd) X(gelu_erf_fwd) \
    X(gelu_erf_bwd) X(silu_fwd) X(silu_bwd) X(add) X(mul_fwd) X(mul_bwd) X(elu1_fwd) X(elu1_bwd) X(rope_fwd) X(elu1_rope_fwd) \
    X(rope_bwd) X(mala_cache_floats) \
    X(linattn_cache_floats) X(softmax_cache_floats) X(mala_fwd) X(mala_bwd) X(linattn_fwd) X(linattn_bwd) \
    X(softmax_fwd) X(softmax_bwd) X(attn_row) X(dwconv_fwd) X(dwconv_bwd) X(logsigmoid_fwd) X(logsigmoid_bwd) \
    X(gla_cache_floats) X(gla_fwd) X(gla_bwd) X(rmsnorm_gate_fwd) X(rmsnorm_gate_bwd) X(swiglu_fwd) \
    X(swiglu_bwd) X(permute_tokens_fwd) X(permute_tokens_bwd) \
    X(conv2d_workspace_floats) X(conv2d_fwd) X(conv2d_bwd) X(groupnorm_fwd) X(groupnorm_bwd) X(layernorm2d_fwd) \
    X(layernorm2d_bwd) X(pixel_shuffle_fwd) X(pixel_shuffle_bwd) X(pixel_unshuffle_fwd) X(pixel_unshuffle_bwd) \
    X(upsample2x_fwd) X(upsample2x_bwd) X(channel_copy_fwd) X(channel_copy_bwd) X(modulate2d_fwd) \
    X(modulate2d_bwd) X(gate_residual2d_fwd) X(gate_residual2d_bwd) X(nchw_to_tokens_fwd) X(nchw_to_tokens_bwd) \
    X(tokens_to_nchw_fwd) X(tokens_to_nchw_bwd) \
    X(relu_fwd) X(relu_bwd) X(maxpool2d_fwd) X(avgpool2d_fwd) X(mean_hw_fwd) X(resize_bilinear_fwd) \
    X(patchify_fwd) X(patchify_bwd) \
    X(unpatchify_fwd) X(unpatchify_bwd) X(add_pos) X(timestep_embed) X(embed_fwd) X(embed_bwd) X(adamw) X(ema) \
    X(sumsq) X(scale) X(fill) X(rand_normal) X(rand_bits) X(diffusion_prepare) X(diffusion_loss) \
    X(sampler_step)

// Exits with a message naming the first empty slot of be (a backend missing an op fails at
// start-up, not as a NULL call).
void backend_check(const Backend *be);

// The CPU backend: named only by the selection below, the CPU backend itself and the front ends
// (cli/, viewer/, tests, tools); tools/check_layers.sh refuses it elsewhere. Library code asks
// for backend_host / backend_on_host, so it never assumes which backends exist.
const Backend *backend_cpu(void);
// The backend whose buffers are host memory, for work that needs no device: planning a network's
// shapes and memory, host-side steps, a caller that passes no backend.
const Backend *backend_host(void);
// 1 when be's buffers are host memory (to_host and to_device are plain copies).
int backend_on_host(const Backend *be);
// NULL with a one-line reason in *why when this build or machine has no CUDA device.
const Backend *backend_cuda(const char **why);
// device: "cpu", "cuda" or NULL (auto: cuda when present, else cpu); precision: NULL (the device's
// default: fp32 on the CPU, tf32 on CUDA), "fp32" (full fp32 products), "tf32" (CUDA's TF32 tensor
// cores; the CPU has none and stays fp32) or "bf16" (bf16 inputs to the products, fp32 accumulation:
// oneDNN's products and convolutions on the CPU, cuBLAS's on CUDA) or "int8" (sampling on the CPU:
// linear_fwd_quant on int8, the rest fp32). Exits with a clear message when cuda is asked for and
// unavailable, on bf16 or int8 where it cannot run (int8 on CUDA), or on an unknown name.
const Backend *backend_select(const char *device, const char *precision);

#endif

// CPU attention ops: phi = ELU+1, 2-D RoPE, the MALA core, plain linear attention, softmax
// attention (DiT baseline). Contracts are in backend.h, the math in docs/design.md §1.
// defines: cpu_elu1_fwd, cpu_elu1_bwd, cpu_rope_fwd, cpu_elu1_rope_fwd, cpu_rope_bwd, cpu_mala_cache_floats,
//          cpu_linattn_cache_floats, cpu_softmax_cache_floats, cpu_mala_fwd, cpu_mala_bwd,
//          cpu_linattn_fwd, cpu_linattn_bwd, cpu_softmax_fwd, cpu_softmax_bwd
//
// Layout reminders (backend.h): qkv rows are [q(H) | k(H) | v(H)] with stride 3H, qkr rows are
// [rope(q') (H) | rope(k') (H)] with stride 2H, out rows have stride H; head h owns channels
// h*d .. h*d+d-1 of each part.
//
// Parallelism: the linear attentions (MALA, linear) run in one OpenMP region over (batch, head), the linear attentions' token products as
// single-threaded cpu_sgemm calls inside it; softmax attention likewise, one (batch, head) per task
// (its per-head products, 256 x 256 x 64 in DiT-S/2, are too small to split well over threads).
// Calls below ~64K multiply-adds stay on the calling thread. Nothing is allocated per call: scratch lives on the stack (the linear attentions' backward: d^2 + 2 d +
// 128 d floats per thread; softmax backward: at most max(16K, L) floats per thread).
#include "cpu/ops_cpu.h"

#include "cpu/cpu_gemm.h"
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_threads.h"  // defines: cpu_small_work
#include "core/ops_math.h"

// ---------------------------------------------------------------------------------------------
// Small vector kernels (d-long rows; `omp simd` lets the compiler vectorise the reductions).

static inline float dotf(const float *restrict a, const float *restrict b, int n) {
    float s = 0.0f;
    #pragma omp simd reduction(+:s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// y += a x
static inline void axpyf(float *restrict y, float a, const float *restrict x, int n) {
    #pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

// Pointers of one (batch, head) slice. q/k/v: q', k', v in qkv (stride ld = 3H); qr/kr: the roped
// copies in qkr (stride ldr = 2H), or q'/k' themselves when there is no RoPE.
typedef struct {
    const float *q, *k, *v, *qr, *kr;
    size_t ld, ldr;
} HeadIn;

// Gradient targets of one (batch, head) slice; any may be NULL. Without RoPE dqr/dkr alias dq/dk.
typedef struct {
    float *dq, *dk, *dv, *dqr, *dkr;
} HeadGrad;

static void check_shape(AttnShape s, const char *op) {
    CHECK(s.heads > 0 && s.H % s.heads == 0, "%s: H=%d not divisible by heads=%d", op, s.H, s.heads);
    CHECK(s.gh * s.gw == s.L, "%s: grid %dx%d does not hold L=%d tokens", op, s.gh, s.gw, s.L);
}

static HeadIn head_in(const float *qkv, const float *qkr, AttnShape s, int b, int h) {
    const int H = s.H, d = H / s.heads;
    HeadIn in;
    in.ld = (size_t)3 * H;
    in.q = qkv + (size_t)b * s.L * in.ld + (size_t)h * d;
    in.k = in.q + H;
    in.v = in.q + 2 * H;
    if (qkr) {
        in.ldr = (size_t)2 * H;
        in.qr = qkr + (size_t)b * s.L * in.ldr + (size_t)h * d;
        in.kr = in.qr + H;
    } else {
        in.ldr = in.ld;
        in.qr = in.q;
        in.kr = in.k;
    }
    return in;
}

static HeadGrad head_grad(float *dqkv, float *dqkr, int has_rope, AttnShape s, int b, int h) {
    const int H = s.H, d = H / s.heads;
    HeadGrad g = {0};
    if (dqkv) {
        g.dq = dqkv + (size_t)b * s.L * 3 * H + (size_t)h * d;
        g.dk = g.dq + H;
        g.dv = g.dq + 2 * H;
    }
    if (has_rope) {
        if (dqkr) {
            g.dqr = dqkr + (size_t)b * s.L * 2 * H + (size_t)h * d;
            g.dkr = g.dqr + H;
        }
    } else {
        g.dqr = g.dq;
        g.dkr = g.dk;
    }
    return g;
}

// ---------------------------------------------------------------------------------------------
// phi = ELU + 1

MALA_ELEMENTWISE_CLONES void cpu_elu1_fwd(float *x, int rows, int cols, int ld) {
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)rows * cols) == 0)
    for (int r = 0; r < rows; r++) {
        float *p = x + (size_t)r * ld;
        #pragma omp simd
        for (int c = 0; c < cols; c++) p[c] = elu1_f(p[c]);
    }
}

MALA_ELEMENTWISE_CLONES void cpu_elu1_bwd(float *g, const float *y, int rows, int cols, int ld) {
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)rows * cols) == 0)
    for (int r = 0; r < rows; r++) {
        float *gp = g + (size_t)r * ld;
        const float *yp = y + (size_t)r * ld;
        #pragma omp simd
        for (int c = 0; c < cols; c++) gp[c] *= elu1_grad_from_y(yp[c]);
    }
}

// ---------------------------------------------------------------------------------------------
// 2-D RoPE. Pair p of a head (channels 2p, 2p+1), p < d/2: for p < d/4 the angle is row * w_p,
// otherwise col * w_{p - d/4}. The cos/sin of a token are computed once and reused over the batch
// and all heads.

static void rope_token_table(float *cs, float *sn, int l, int gw, int d) {
    const int nf = d / 4;
    const float row = (float)(l / gw), col = (float)(l % gw);
    for (int m = 0; m < nf; m++) {
        float w = rope_freq(m, d);
        float ar = row * w, ac = col * w;
        cs[m] = cosf(ar);
        sn[m] = sinf(ar);
        cs[nf + m] = cosf(ac);
        sn[nf + m] = sinf(ac);
    }
}

// RoPE of one token's q and k (src: its qkv row) into its qkr row.
static inline void rope_row(float *dst, const float *src, const float *cs, const float *sn, int H, int nh, int d) {
    const int np = d / 2;
    for (int part = 0; part < 2; part++)
        for (int h = 0; h < nh; h++) {
            const float *x = src + (size_t)part * H + (size_t)h * d;
            float *o = dst + (size_t)part * H + (size_t)h * d;
            for (int p = 0; p < np; p++) {
                float a = x[2 * p], c = x[2 * p + 1];
                o[2 * p] = a * cs[p] - c * sn[p];
                o[2 * p + 1] = c * cs[p] + a * sn[p];
            }
        }
}

void cpu_rope_fwd(float *qkr, const float *qkv, AttnShape s) {
    check_shape(s, "rope_fwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh, np = d / 2;
    CHECK(d % 4 == 0, "rope_fwd: head dim %d must be a multiple of 4", d);
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * L * H) == 0)
    for (int l = 0; l < L; l++) {
        float cs[np], sn[np];
        rope_token_table(cs, sn, l, s.gw, d);
        for (int b = 0; b < B; b++)
            rope_row(qkr + ((size_t)b * L + l) * 2 * H, qkv + ((size_t)b * L + l) * 3 * H, cs, sn, H, nh, d);
    }
}

MALA_ELEMENTWISE_CLONES void cpu_elu1_rope_fwd(float *qkr, float *qkv, AttnShape s) {
    check_shape(s, "elu1_rope_fwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh, np = d / 2;
    CHECK(d % 4 == 0, "elu1_rope_fwd: head dim %d must be a multiple of 4", d);
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * L * H) == 0)
    for (int l = 0; l < L; l++) {
        float cs[np], sn[np];
        rope_token_table(cs, sn, l, s.gw, d);
        for (int b = 0; b < B; b++) {
            float *src = qkv + ((size_t)b * L + l) * 3 * H;
            #pragma omp simd
            for (int c = 0; c < 2 * H; c++) src[c] = elu1_f(src[c]);
            rope_row(qkr + ((size_t)b * L + l) * 2 * H, src, cs, sn, H, nh, d);
        }
    }
}

void cpu_rope_bwd(float *dqkv, const float *dqkr, AttnShape s) {
    check_shape(s, "rope_bwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh, np = d / 2;
    CHECK(d % 4 == 0, "rope_bwd: head dim %d must be a multiple of 4", d);
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * L * H) == 0)
    for (int l = 0; l < L; l++) {
        float cs[np], sn[np];
        rope_token_table(cs, sn, l, s.gw, d);
        for (int b = 0; b < B; b++) {
            for (int part = 0; part < 2; part++) {
                const float *src = dqkr + ((size_t)b * L + l) * 2 * H + (size_t)part * H;
                float *dst = dqkv + ((size_t)b * L + l) * 3 * H + (size_t)part * H;
                for (int h = 0; h < nh; h++) {
                    const float *g = src + (size_t)h * d;
                    float *o = dst + (size_t)h * d;
                    for (int p = 0; p < np; p++) {
                        float ga = g[2 * p], gc = g[2 * p + 1];
                        o[2 * p] += ga * cs[p] + gc * sn[p];
                        o[2 * p + 1] += gc * cs[p] - ga * sn[p];
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Cache sizes. Per (batch, head), in this order:
//   MALA:    z[L], KV[d*d] (already scaled by s/L), kbar[d], vbar[d]
//   linear:  den[L] (q'.ksum + eps), KV[d*d] (unscaled), ksum[d]
//   softmax: P[L*L] (the probabilities)

static size_t mala_per_head(int L, int d) { return (size_t)L + (size_t)d * d + 2 * (size_t)d; }
static size_t lin_per_head(int L, int d) { return (size_t)L + (size_t)d * d + (size_t)d; }

size_t cpu_mala_cache_floats(AttnShape s) {
    return (size_t)s.B * s.heads * mala_per_head(s.L, s.H / s.heads);
}
size_t cpu_linattn_cache_floats(AttnShape s) {
    return (size_t)s.B * s.heads * lin_per_head(s.L, s.H / s.heads);
}
size_t cpu_softmax_cache_floats(AttnShape s) {
    return (size_t)s.B * s.heads * (size_t)s.L * s.L;
}

// ---------------------------------------------------------------------------------------------
// The two kernelised linear attentions in one implementation, per (batch, head), with one kind
// of constants each (docs/design.md §1):
//   MALA:   kvec = kbar = mean_j k'_j, z_i = s q'_i . kbar, KV = (s/L) sum_j kr_j v_j^T,
//           vbar = mean_j v_j, out_i = beta_i (qr_i KV) - z_i vbar,  beta_i = 1 + 1/(z_i + eps)
//   linear: kvec = ksum = sum_j k'_j, den_i = q'_i . ksum + eps, KV = sum_j kr_j v_j^T,
//           out_i = (qr_i KV) / den_i
// i.e. stat_i = zs q'_i . kvec + zoff and out_i = alpha(stat_i) (qr_i KV) - [MALA] stat_i vbar.

typedef struct {
    int mala;            // MALA (beta, gamma) or plain division normalisation
    float kv_scale;      // MALA s/L, linear 1
    float kvec_scale;    // MALA 1/L (kbar), linear 1 (ksum)
    float zs, zoff;      // stat_i = zs q'_i . kvec + zoff: MALA (s, 0), linear (1, eps)
} LinAttn;

static LinAttn lin_attn(int mala, int L, int d) {
    const float sc = 1.0f / sqrtf((float)d), invL = 1.0f / (float)L;
    if (mala) return (LinAttn){1, sc * invL, invL, sc, 0.0f};
    return (LinAttn){0, 1.0f, 1.0f, 1.0f, MALA_ATTN_EPS};
}

// alpha(stat): MALA beta = 1 + 1/(z + eps), linear 1/den; inv = the reciprocal both use.
static inline float lin_alpha(const LinAttn *k, float stat, float *inv) {
    *inv = 1.0f / (k->mala ? stat + MALA_ATTN_EPS : stat);
    return k->mala ? 1.0f + *inv : *inv;
}

// Cache per (batch, head): stat[L], KV[d*d] (scaled), kvec[d], and for MALA vbar[d]. The
// products over tokens are sgemm calls on the head's strided slices (single-threaded inside
// the region over heads).
static void linear_family_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s,
                              int mala) {
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    const LinAttn K = lin_attn(mala, L, d);
    const size_t per = mala ? mala_per_head(L, d) : lin_per_head(L, d);
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * L * H * d) == 0)
    for (int bh = 0; bh < B * nh; bh++) {
        const int b = bh / nh, h = bh % nh;
        HeadIn in = head_in(qkv, qkr, s, b, h);
        float *stat = cache + (size_t)bh * per, *KV = stat + L, *kvec = KV + (size_t)d * d;
        float *vbar = mala ? kvec + d : NULL;
        memset(kvec, 0, sizeof(float) * (mala ? 2 : 1) * (size_t)d);
        for (int j = 0; j < L; j++) {
            axpyf(kvec, 1.0f, in.k + (size_t)j * in.ld, d);
            if (mala) axpyf(vbar, 1.0f, in.v + (size_t)j * in.ld, d);
        }
        for (int c = 0; c < d; c++) kvec[c] *= K.kvec_scale;
        if (mala)
            for (int c = 0; c < d; c++) vbar[c] *= K.kvec_scale;
        // KV = kv_scale Kr^T V
        cpu_sgemm(1, 0, d, d, L, K.kv_scale, in.kr, (int)in.ldr, in.v, (int)in.ld, 0.0f, KV, d);
        // out = Qr KV, then per token alpha_i out_i [- stat_i vbar]
        float *ob = out + (size_t)b * L * H + (size_t)h * d;
        cpu_sgemm(0, 0, L, d, d, 1.0f, in.qr, (int)in.ldr, KV, d, 0.0f, ob, H);
        for (int i = 0; i < L; i++) {
            const float st = K.zs * dotf(in.q + (size_t)i * in.ld, kvec, d) + K.zoff;
            float inv;
            const float alpha = lin_alpha(&K, st, &inv);
            stat[i] = st;
            float *o = ob + (size_t)i * H;
            if (mala) {
                #pragma omp simd
                for (int c = 0; c < d; c++) o[c] = alpha * o[c] - st * vbar[c];
            } else {
                #pragma omp simd
                for (int c = 0; c < d; c++) o[c] *= alpha;
            }
        }
    }
}

// Tokens per block of the backward (its scratch: two blocks of d-long rows on the stack).
#define LIN_BWD_ROWS 64

// Backward, with G_i = dout_i, P_i = KV G_i (so G_i . (qr_i KV) = qr_i . P_i):
//   dqr_i += alpha_i P_i;   dKV = kv_scale sum_i qr_i (alpha_i G_i)^T;
//   dstat_i = -(qr_i . P_i) inv_i^2  [MALA: - G_i . vbar];   [MALA: dvbar = -sum_i z_i G_i / L]
//   dq'_i += zs dstat_i kvec;  dkvec = kvec_scale zs sum_i dstat_i q'_i;
//   dkr_j += dKV v_j;  dv_j += dKV^T kr_j [+ dvbar];  dk'_j += dkvec.
// P = G KV^T and dKV are sgemm calls per block of LIN_BWD_ROWS tokens, dkr += V dKV^T and
// dv += Kr dKV one call each over all tokens.
static void linear_family_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                              const float *cache, AttnShape s, int mala) {
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    const LinAttn K = lin_attn(mala, L, d);
    const size_t per = mala ? mala_per_head(L, d) : lin_per_head(L, d);
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * L * H * d) == 0)
    for (int bh = 0; bh < B * nh; bh++) {
        const int b = bh / nh, h = bh % nh;
        HeadIn in = head_in(qkv, qkr, s, b, h);
        HeadGrad g = head_grad(dqkv, dqkr, qkr != NULL, s, b, h);
        const float *stat = cache + (size_t)bh * per, *KV = stat + L, *kvec = KV + (size_t)d * d;
        const float *vbar = mala ? kvec + d : NULL;
        const float *G0 = dout + (size_t)b * L * H + (size_t)h * d;
        const int need_dkv = g.dkr || g.dv;
        float dKV[need_dkv ? d * d : 1], dkvec[d], dvbar[d];
        float P[LIN_BWD_ROWS * d], Ga[need_dkv ? LIN_BWD_ROWS * d : 1];
        memset(dkvec, 0, sizeof dkvec);
        memset(dvbar, 0, sizeof dvbar);
        for (int i0 = 0; i0 < L; i0 += LIN_BWD_ROWS) {
            const int n = L - i0 < LIN_BWD_ROWS ? L - i0 : LIN_BWD_ROWS;
            const float *Gb = G0 + (size_t)i0 * H;
            cpu_sgemm(0, 1, n, d, d, 1.0f, Gb, H, KV, d, 0.0f, P, d);
            for (int t = 0; t < n; t++) {
                const int i = i0 + t;
                const float *G = Gb + (size_t)t * H, *qri = in.qr + (size_t)i * in.ldr, *Pi = P + (size_t)t * d;
                float inv;
                const float alpha = lin_alpha(&K, stat[i], &inv);
                float dstat = -(inv * inv) * dotf(qri, Pi, d);
                if (mala) {
                    dstat -= dotf(G, vbar, d);
                    axpyf(dvbar, -stat[i], G, d);
                }
                if (g.dqr) axpyf(g.dqr + (size_t)i * in.ldr, alpha, Pi, d);
                if (g.dq) axpyf(g.dq + (size_t)i * in.ld, K.zs * dstat, kvec, d);
                axpyf(dkvec, K.zs * dstat, in.q + (size_t)i * in.ld, d);
                if (need_dkv) {
                    float *ga = Ga + (size_t)t * d;
                    #pragma omp simd
                    for (int c = 0; c < d; c++) ga[c] = alpha * G[c];
                }
            }
            // dKV (+)= kv_scale Qr_block^T (alpha G)_block
            if (need_dkv)
                cpu_sgemm(1, 0, d, d, n, K.kv_scale, in.qr + (size_t)i0 * in.ldr, (int)in.ldr, Ga, d, i0 ? 1.0f : 0.0f,
                          dKV, d);
        }
        for (int c = 0; c < d; c++) dkvec[c] *= K.kvec_scale;
        if (mala)
            for (int c = 0; c < d; c++) dvbar[c] *= K.kvec_scale;
        if (g.dkr)
            cpu_sgemm(0, 1, L, d, d, 1.0f, in.v, (int)in.ld, dKV, d, 1.0f, g.dkr, (int)in.ldr);
        if (g.dv) {
            cpu_sgemm(0, 0, L, d, d, 1.0f, in.kr, (int)in.ldr, dKV, d, 1.0f, g.dv, (int)in.ld);
            if (mala)
                for (int j = 0; j < L; j++) axpyf(g.dv + (size_t)j * in.ld, 1.0f, dvbar, d);
        }
        if (g.dk)
            for (int j = 0; j < L; j++) axpyf(g.dk + (size_t)j * in.ld, 1.0f, dkvec, d);
    }
}

void cpu_mala_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s) {
    check_shape(s, "mala_fwd");
    linear_family_fwd(out, cache, qkv, qkr, s, 1);
}

void cpu_mala_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                  float *cache, AttnShape s) {
    check_shape(s, "mala_bwd");
    linear_family_bwd(dqkv, dqkr, dout, qkv, qkr, cache, s, 1);
}

void cpu_linattn_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s) {
    check_shape(s, "linattn_fwd");
    linear_family_fwd(out, cache, qkv, qkr, s, 0);
}

void cpu_linattn_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                     float *cache, AttnShape s) {
    check_shape(s, "linattn_bwd");
    linear_family_bwd(dqkv, dqkr, dout, qkv, qkr, cache, s, 0);
}

// ---------------------------------------------------------------------------------------------
// Softmax attention: S = s Q K^T, P = softmax_rows(S), out = P V, per (batch, head). Q, K are the
// raw q, k of qkv, or the q, k parts of qkr when given.

void cpu_softmax_fwd(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s) {
    check_shape(s, "softmax_fwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    const float sc = 1.0f / sqrtf((float)d);
    const size_t LL = (size_t)L * L;
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * nh * LL * d) == 0)
    for (int bh = 0; bh < B * nh; bh++) {
        const int b = bh / nh, h = bh % nh;
        HeadIn in = head_in(qkv, qkr, s, b, h);
        float *P = cache + (size_t)bh * LL;
        cpu_sgemm(0, 1, L, L, d, sc, in.qr, (int)in.ldr, in.kr, (int)in.ldr, 0.0f, P, L);
        for (int r = 0; r < L; r++) {
            float *p = P + (size_t)r * L;
            float mx = p[0], sum = 0.0f;
            #pragma omp simd reduction(max:mx)
            for (int j = 1; j < L; j++) mx = p[j] > mx ? p[j] : mx;
            #pragma omp simd
            for (int j = 0; j < L; j++) p[j] = exp_f(p[j] - mx);
            #pragma omp simd reduction(+:sum)
            for (int j = 0; j < L; j++) sum += p[j];
            const float inv = 1.0f / sum;
            #pragma omp simd
            for (int j = 0; j < L; j++) p[j] *= inv;
        }
        cpu_sgemm(0, 0, L, d, L, 1.0f, P, L, in.v, (int)in.ld, 0.0f, out + (size_t)b * L * H + (size_t)h * d, H);
    }
}

// Backward per head, in row blocks of the L x L matrices (stack scratch <= 16K floats):
//   dP = G V^T;  dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik);
//   dQ += s dS K;  dK += s dS^T Q;  dV += P^T G.
#define SOFTMAX_SCRATCH 16384
void cpu_softmax_bwd(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr,
                     float *cache, AttnShape s) {
    check_shape(s, "softmax_bwd");
    const int B = s.B, L = s.L, H = s.H, nh = s.heads, d = H / nh;
    const float sc = 1.0f / sqrtf((float)d);
    const size_t LL = (size_t)L * L;
    int rb = SOFTMAX_SCRATCH / L;
    rb = rb < 1 ? 1 : rb > L ? L : rb;
    #pragma omp parallel for schedule(static) if (cpu_small_work((size_t)B * nh * LL * d) == 0)
    for (int bh = 0; bh < B * nh; bh++) {
        float scr[(size_t)rb * L];  // (this thread's)
        const int b = bh / nh, h = bh % nh;
        HeadIn in = head_in(qkv, qkr, s, b, h);
        HeadGrad g = head_grad(dqkv, dqkr, qkr != NULL, s, b, h);
        const float *P = cache + (size_t)bh * LL, *G = dout + (size_t)b * L * H + (size_t)h * d;
        if (g.dv)
            cpu_sgemm(1, 0, L, d, L, 1.0f, P, L, G, H, 1.0f, g.dv, (int)in.ld);
        if (!g.dqr && !g.dkr) continue;
        for (int i0 = 0; i0 < L; i0 += rb) {
            const int n = L - i0 < rb ? L - i0 : rb;
            cpu_sgemm(0, 1, n, L, d, 1.0f, G + (size_t)i0 * H, H, in.v, (int)in.ld, 0.0f, scr, L);
            for (int r = 0; r < n; r++) {
                const float *pr = P + (size_t)(i0 + r) * L;
                float *dr = scr + (size_t)r * L;
                const float rs = dotf(pr, dr, L);
                #pragma omp simd
                for (int j = 0; j < L; j++) dr[j] = pr[j] * (dr[j] - rs);
            }
            if (g.dqr)
                cpu_sgemm(0, 0, n, d, L, sc, scr, L, in.kr, (int)in.ldr, 1.0f, g.dqr + (size_t)i0 * in.ldr,
                          (int)in.ldr);
            if (g.dkr)
                cpu_sgemm(1, 0, L, d, n, sc, scr, L, in.qr + (size_t)i0 * in.ldr, (int)in.ldr, 1.0f, g.dkr,
                          (int)in.ldr);
        }
    }
}

// CPU gated linear attention (DiG's token mixer: fla's GLA) and its forget gate's logsigmoid.
// Contracts are in backend.h.
// defines: cpu_logsigmoid_fwd, cpu_logsigmoid_bwd, cpu_gla_cache_floats, cpu_gla_fwd, cpu_gla_bwd
//
// The recurrence S_t = diag(exp(g_t)) S_{t-1} + k_t^T v_t, o_t = scale q_t S_t runs in chunks of
// C = GLA_CHUNK tokens. Within a chunk (local index i = 0..n-1, S0 the state entering it,
// q^ = scale q, b_i = sum_{m<=i} g_m the chunk-local cumulative log-decay, b_n = b_{n-1}):
//   o_i = (q^_i . exp(b_i)) S0 + sum_{j<=i} A_ij v_j,   A_ij = sum_e q^_ie k_je D_ije,
//   D_ije = exp(b_ie - b_je) = prod_{j<m<=i} exp(g_me),
//   S1 = diag(exp(b_n)) S0 + sum_j (k_j . exp(b_n - b_j))^T v_j.
// Numerical safety: g <= 0, so b never increases along a chunk and every exponential above has a
// non-positive argument: no factor exceeds 1 and nothing can overflow, for g down to -inf (a
// weight that underflows to 0 is below about 1e-38 in exact arithmetic too). The
// factored form (q exp(b_i)) . (k exp(-b_j)) of the GLA paper is avoided: exp(-b_j) overflows
// once a chunk's decay passes -88, i.e. 16 tokens at g = logsigmoid(-89)/16. D, exp(b_i) and
// exp(b_n - b_i) are formed as running products of a_m = exp(g_m) <= 1 (one exp per element,
// then one multiply per factor; a product of at most 16 factors is within 16 ulp).
//
// Backward, chunks in reverse, dS the gradient of the state leaving the chunk (0 after the last):
//   dq^_i = exp(b_i) . (S0 do_i) + sum_{j<=i} P_ij (k_j . D_ij),       P_ij = do_i . v_j
//   dk_j  = exp(b_n - b_j) . (dS v_j) + sum_{i>=j} P_ij (q^_i . D_ij)
//   dv_j  = (k_j . exp(b_n - b_j)) dS + sum_{i>=j} A_ij do_i
//   dS   <- diag(exp(b_n)) dS + sum_i (q^_i . exp(b_i))^T do_i
//   dq = scale dq^, and dg_t = sum_{s>=t} (q_s dq_s - k_s dk_s) over the whole sequence (with
//   B_t = sum_{s<=t} g_s, o depends on g only through exp(B_t - B_s) for s <= t, so
//   dL/dB_t = q_t dq_t - k_t dk_t and g_t moves every B_s with s >= t).
//
// Cache: the state entering every chunk, [B][heads][nchunks][dk][dv] (the first one is zero).
// The backward's scratch is on the stack of each (batch, head) task: dS (dk dv floats) and the
// chunk's rows (about 8 C max(dk, dv) floats). Work is one OpenMP task per (batch, head), each
// sequential in a fixed order, so results do not depend on the thread count.
#include "cpu/ops_cpu.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "cpu/cpu_clones.h"
#include "core/ops_math.h"

#define GLA_CHUNK 16

// ---------------------------------------------------------------------------------------------
// logsigmoid(x) / norm, in place on strided rows

MALA_ELEMENTWISE_CLONES void cpu_logsigmoid_fwd(float *x, int rows, int cols, int ld, float norm) {
    #pragma omp parallel for schedule(static) if ((size_t)rows * cols >= ((size_t)1 << 16))
    for (int r = 0; r < rows; r++) {
        float *p = x + (size_t)r * ld;
        for (int c = 0; c < cols; c++) p[c] = logsigmoid_f(p[c]) / norm;
    }
}

MALA_ELEMENTWISE_CLONES void cpu_logsigmoid_bwd(float *g, const float *y, int rows, int cols, int ld, float norm) {
    #pragma omp parallel for schedule(static) if ((size_t)rows * cols >= ((size_t)1 << 16))
    for (int r = 0; r < rows; r++) {
        float *gp = g + (size_t)r * ld;
        const float *yp = y + (size_t)r * ld;
        for (int c = 0; c < cols; c++) gp[c] *= logsigmoid_grad_from_y(norm * yp[c]) / norm;
    }
}

// ---------------------------------------------------------------------------------------------
// Small vector kernels

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

// o[c] += sum_e x[e] M[e, c]   (M rows x cols, row-major)
static inline void vecmat_add(float *restrict o, const float *restrict x, const float *restrict M, int rows,
                              int cols) {
    int e = 0;
    for (; e + 4 <= rows; e += 4) {
        const float *m0 = M + (size_t)e * cols, *m1 = m0 + cols, *m2 = m1 + cols, *m3 = m2 + cols;
        const float a0 = x[e], a1 = x[e + 1], a2 = x[e + 2], a3 = x[e + 3];
        #pragma omp simd
        for (int c = 0; c < cols; c++) o[c] += (a0 * m0[c] + a1 * m1[c]) + (a2 * m2[c] + a3 * m3[c]);
    }
    for (; e < rows; e++) axpyf(o, x[e], M + (size_t)e * cols, cols);
}

// M[e, c] = f[e] M[e, c] + sum_{t<n} x[t][e] y[t][c]   (decay, then n rank-1 terms, 4 at a time)
static void decay_rank_update(float *restrict M, const float *restrict f, const float *x, int ldx,
                              const float *y, size_t ldy, int n, int rows, int cols) {
    for (int e = 0; e < rows; e++) {
        float *row = M + (size_t)e * cols;
        const float fe = f[e];
        #pragma omp simd
        for (int c = 0; c < cols; c++) row[c] *= fe;
        int t = 0;
        for (; t + 4 <= n; t += 4) {
            const float b0 = x[(size_t)t * ldx + e], b1 = x[(size_t)(t + 1) * ldx + e];
            const float b2 = x[(size_t)(t + 2) * ldx + e], b3 = x[(size_t)(t + 3) * ldx + e];
            const float *y0 = y + (size_t)t * ldy, *y1 = y0 + ldy, *y2 = y1 + ldy, *y3 = y2 + ldy;
            #pragma omp simd
            for (int c = 0; c < cols; c++) row[c] += (b0 * y0[c] + b1 * y1[c]) + (b2 * y2[c] + b3 * y3[c]);
        }
        for (; t < n; t++) axpyf(row, x[(size_t)t * ldx + e], y + (size_t)t * ldy, cols);
    }
}

// ---------------------------------------------------------------------------------------------
// One chunk of one (batch, head), copied into contiguous n x dk tables with its decay factors:
//   qh = scale q, kc = k, a = exp(g), gq_i = exp(b_i), gk_i = exp(b_n - b_i), qg = qh . gq,
//   kd = kc . gk, gn = exp(b_n).
// gq and gk are running products of a (gq_i = gq_{i-1} a_i, gk_i = gk_{i+1} a_{i+1}): one exp per
// element, and every factor is <= 1.

typedef struct {
    float *qh, *kc, *a, *gq, *gk, *qg, *kd, *gn;
} Chunk;

static void chunk_load(const Chunk *c, const float *q, int ldq, const float *k, int ldk, const float *g, int ldg,
                       int n, int dk, float scale) {
    for (int i = 0; i < n; i++) {
        const float *qi = q + (size_t)i * ldq, *ki = k + (size_t)i * ldk, *gi = g + (size_t)i * ldg;
        float *a = c->a + i * dk, *qh = c->qh + i * dk, *kc = c->kc + i * dk;
        for (int e = 0; e < dk; e++) {
            a[e] = expf(gi[e]);
            qh[e] = scale * qi[e];
            kc[e] = ki[e];
        }
    }
    for (int e = 0; e < dk; e++) c->gq[e] = c->a[e];
    for (int i = 1; i < n; i++)
        for (int e = 0; e < dk; e++) c->gq[i * dk + e] = c->gq[(i - 1) * dk + e] * c->a[i * dk + e];
    for (int e = 0; e < dk; e++) c->gk[(n - 1) * dk + e] = 1.0f;
    for (int i = n - 2; i >= 0; i--)
        for (int e = 0; e < dk; e++) c->gk[i * dk + e] = c->gk[(i + 1) * dk + e] * c->a[(i + 1) * dk + e];
    for (int x = 0; x < n * dk; x++) {
        c->qg[x] = c->qh[x] * c->gq[x];
        c->kd[x] = c->kc[x] * c->gk[x];
    }
    for (int e = 0; e < dk; e++) c->gn[e] = c->gq[(n - 1) * dk + e];
}

#define CHUNK_TABLES(c, dk)                                                                           \
    float qh_[GLA_CHUNK * (dk)], kc_[GLA_CHUNK * (dk)], a_[GLA_CHUNK * (dk)], gq_[GLA_CHUNK * (dk)],  \
        gk_[GLA_CHUNK * (dk)], qg_[GLA_CHUNK * (dk)], kd_[GLA_CHUNK * (dk)], gn_[dk];                 \
    Chunk c = {qh_, kc_, a_, gq_, gk_, qg_, kd_, gn_}

static void check_gla(GlaShape s, const char *op) {
    CHECK(s.B >= 0 && s.L >= 0 && s.heads > 0 && s.dk > 0 && s.dv > 0, "%s: bad shape B%d L%d heads%d dk%d dv%d",
          op, s.B, s.L, s.heads, s.dk, s.dv);
    CHECK(s.ldq >= s.heads * s.dk && s.ldk >= s.heads * s.dk && s.ldg >= s.heads * s.dk &&
              s.ldv >= s.heads * s.dv && s.ldo >= s.heads * s.dv,
          "%s: a row stride is below heads * head width (ldq %d ldk %d ldg %d ldv %d ldo %d)", op, s.ldq, s.ldk,
          s.ldg, s.ldv, s.ldo);
}

static int gla_chunks(int L) { return (L + GLA_CHUNK - 1) / GLA_CHUNK; }

size_t cpu_gla_cache_floats(GlaShape s) {
    return (size_t)s.B * s.heads * gla_chunks(s.L) * (size_t)s.dk * s.dv;
}

// Work below about this many multiply-adds stays on the calling thread.
static inline int gla_small(GlaShape s) {
    return (size_t)s.B * s.L * s.heads * s.dk * s.dv < ((size_t)1 << 16);
}

// ---------------------------------------------------------------------------------------------
// Forward

void cpu_gla_fwd(float *o, float *cache, const float *q, const float *k, const float *v, const float *g,
                 GlaShape s) {
    check_gla(s, "gla_fwd");
    const int L = s.L, nh = s.heads, dk = s.dk, dv = s.dv, nc = gla_chunks(L);
    const float scale = 1.0f / sqrtf((float)dk);
    const size_t sdim = (size_t)dk * dv;
    #pragma omp parallel for schedule(static) if (!gla_small(s))
    for (int bh = 0; bh < s.B * nh; bh++) {
        const int b = bh / nh, h = bh % nh;
        const size_t row0 = (size_t)b * L;
        const float *qb = q + row0 * s.ldq + (size_t)h * dk, *kb = k + row0 * s.ldk + (size_t)h * dk;
        const float *gb = g + row0 * s.ldg + (size_t)h * dk, *vb = v + row0 * s.ldv + (size_t)h * dv;
        float *ob = o + row0 * s.ldo + (size_t)h * dv, *st = cache + (size_t)bh * nc * sdim;
        CHUNK_TABLES(c, dk);
        float w[dk];
        if (nc) memset(st, 0, sizeof(float) * sdim);
        for (int ci = 0; ci < nc; ci++) {
            const int t0 = ci * GLA_CHUNK, n = L - t0 < GLA_CHUNK ? L - t0 : GLA_CHUNK;
            const float *S = st + (size_t)ci * sdim, *vc = vb + (size_t)t0 * s.ldv;
            float *oc = ob + (size_t)t0 * s.ldo;
            chunk_load(&c, qb + (size_t)t0 * s.ldq, s.ldq, kb + (size_t)t0 * s.ldk, s.ldk, gb + (size_t)t0 * s.ldg,
                       s.ldg, n, dk, scale);
            // inter-chunk: o_i = (q^_i . exp(b_i)) S0
            for (int i = 0; i < n; i++) {
                float *oi = oc + (size_t)i * s.ldo;
                memset(oi, 0, sizeof(float) * dv);
                vecmat_add(oi, c.qg + i * dk, S, dk, dv);
            }
            // intra-chunk: o_i += (q^_i . w) v_j for j <= i, with w = k_j . D_ij built along i
            for (int j = 0; j < n; j++) {
                memcpy(w, c.kc + j * dk, sizeof w);
                const float *vj = vc + (size_t)j * s.ldv;
                for (int i = j; i < n; i++) {
                    if (i > j) {
                        const float *ai = c.a + i * dk;
                        #pragma omp simd
                        for (int e = 0; e < dk; e++) w[e] *= ai[e];
                    }
                    axpyf(oc + (size_t)i * s.ldo, dotf(c.qh + i * dk, w, dk), vj, dv);
                }
            }
            // state passing: S1 = diag(exp(b_n)) S0 + sum_j kd_j^T v_j
            if (ci + 1 < nc) {
                float *S1 = st + (size_t)(ci + 1) * sdim;
                memcpy(S1, S, sizeof(float) * sdim);
                decay_rank_update(S1, c.gn, c.kd, dk, vc, (size_t)s.ldv, n, dk, dv);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Backward

void cpu_gla_bwd(float *dq, float *dk, float *dv, float *dg, const float *dout, const float *q, const float *k,
                 const float *v, const float *g, float *cache, GlaShape s) {
    check_gla(s, "gla_bwd");
    if (!dq && !dk && !dv && !dg) return;
    const int L = s.L, nh = s.heads, DK = s.dk, DV = s.dv, nc = gla_chunks(L);
    const float scale = 1.0f / sqrtf((float)DK);
    const size_t sdim = (size_t)DK * DV;
    #pragma omp parallel for schedule(static) if (!gla_small(s))
    for (int bh = 0; bh < s.B * nh; bh++) {
        const int b = bh / nh, h = bh % nh;
        const size_t row0 = (size_t)b * L;
        const size_t oq = row0 * s.ldq + (size_t)h * DK, ok = row0 * s.ldk + (size_t)h * DK;
        const size_t og = row0 * s.ldg + (size_t)h * DK, ov = row0 * s.ldv + (size_t)h * DV;
        const size_t oo = row0 * s.ldo + (size_t)h * DV;
        const float *st = cache + (size_t)bh * nc * sdim;
        CHUNK_TABLES(c, DK);
        float dS[sdim], r[DK], z[DK], w[DK], dqh[GLA_CHUNK * DK], dkl[GLA_CHUNK * DK], dvl[GLA_CHUNK * DV];
        memset(dS, 0, sizeof dS);
        memset(r, 0, sizeof r);
        for (int ci = nc - 1; ci >= 0; ci--) {
            const int t0 = ci * GLA_CHUNK, n = L - t0 < GLA_CHUNK ? L - t0 : GLA_CHUNK;
            const float *S0 = st + (size_t)ci * sdim, *vc = v + ov + (size_t)t0 * s.ldv;
            const float *doc = dout + oo + (size_t)t0 * s.ldo;
            chunk_load(&c, q + oq + (size_t)t0 * s.ldq, s.ldq, k + ok + (size_t)t0 * s.ldk, s.ldk,
                       g + og + (size_t)t0 * s.ldg, s.ldg, n, DK, scale);
            // inter-chunk: dq^_i = exp(b_i) . (S0 do_i); dk_i = exp(b_n - b_i) . (dS v_i); dv_i = kd_i dS
            for (int i = 0; i < n; i++) {
                const float *doi = doc + (size_t)i * s.ldo, *vi = vc + (size_t)i * s.ldv;
                for (int e = 0; e < DK; e++) {
                    dqh[i * DK + e] = c.gq[i * DK + e] * dotf(S0 + (size_t)e * DV, doi, DV);
                    dkl[i * DK + e] = c.gk[i * DK + e] * dotf(dS + (size_t)e * DV, vi, DV);
                }
                memset(dvl + i * DV, 0, sizeof(float) * DV);
                vecmat_add(dvl + i * DV, c.kd + i * DK, dS, DK, DV);
            }
            // intra-chunk, pair (i >= j): z = D_ij, w = k_j . z, A = q^_i . w, P = do_i . v_j
            for (int j = 0; j < n; j++) {
                const float *vj = vc + (size_t)j * s.ldv, *kj = c.kc + j * DK;
                float *dkj = dkl + j * DK, *dvj = dvl + j * DV;
                for (int e = 0; e < DK; e++) z[e] = 1.0f;
                for (int i = j; i < n; i++) {
                    const float *qi = c.qh + i * DK, *doi = doc + (size_t)i * s.ldo;
                    float *dqi = dqh + i * DK;
                    if (i > j) {
                        const float *ai = c.a + i * DK;
                        #pragma omp simd
                        for (int e = 0; e < DK; e++) z[e] *= ai[e];
                    }
                    #pragma omp simd
                    for (int e = 0; e < DK; e++) w[e] = kj[e] * z[e];
                    const float A = dotf(qi, w, DK), P = dotf(doi, vj, DV);
                    axpyf(dqi, P, w, DK);
                    #pragma omp simd
                    for (int e = 0; e < DK; e++) dkj[e] += P * (qi[e] * z[e]);
                    axpyf(dvj, A, doi, DV);
                }
            }
            // the gradient of the state entering this chunk: dS <- diag(exp(b_n)) dS + sum_i qg_i^T do_i
            if (ci > 0) decay_rank_update(dS, c.gn, c.qg, DK, doc, (size_t)s.ldo, n, DK, DV);
            // results; dg_t = sum_{s>=t} (q^_s dq^_s - k_s dk_s), running backwards
            for (int i = n - 1; i >= 0; i--) {
                const size_t t = (size_t)(t0 + i);
                if (dq) axpyf(dq + oq + t * s.ldq, scale, dqh + i * DK, DK);
                if (dk) axpyf(dk + ok + t * s.ldk, 1.0f, dkl + i * DK, DK);
                if (dv) axpyf(dv + ov + t * s.ldv, 1.0f, dvl + i * DV, DV);
                if (dg) {
                    float *dgi = dg + og + t * s.ldg;
                    for (int e = 0; e < DK; e++) {
                        r[e] += c.qh[i * DK + e] * dqh[i * DK + e] - c.kc[i * DK + e] * dkl[i * DK + e];
                        dgi[e] += r[e];
                    }
                }
            }
        }
    }
}

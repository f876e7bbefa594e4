// Gated linear attention (DiG's token mixer: fla's GLA), the chunked form of the CPU's
// cpu/ops_cpu_gla.c (whose header derives it) with chunks of GC = 16 tokens:
//   o_i = (q^_i . exp(b_i)) S0 + sum_{j<=i} A_ij v_j,   A_ij = sum_e q^_ie k_je exp(b_ie - b_je),
//   S1 = diag(exp(b_n)) S0 + sum_j (k_j . exp(b_n - b_j))^T v_j,
// q^ = dk^-1/2 q, b the chunk-local cumulative log-decay. Every exponential has a non-positive
// argument (g <= 0), so nothing overflows for any g. The pairwise exp(b_ie - b_je) are evaluated
// directly here (the threads of a block take one pair each).
//
// Work split: one block of 256 threads per (batch, head, 32-column tile of v), walking the chunks
// in order with the tile's dk x 32 slice of the state in shared memory (column f of the state
// only ever meets column f of v, o and dS). The intra-chunk scores, which do not depend on v, are
// recomputed by each tile. dk <= GMAXK = 64.
//
// Backward, chunks in reverse with dS the gradient of the state leaving the chunk:
//   dq^_i = exp(b_i) . (S0 do_i) + sum_{j<=i} P_ij (k_j . D_ij),        P_ij = do_i . v_j
//   dk_j  = exp(b_n - b_j) . (dS v_j) + sum_{i>=j} P_ij (q^_i . D_ij),  D_ije = exp(b_ie - b_je)
//   dv_j  = (k_j . exp(b_n - b_j)) dS + sum_{i>=j} A_ij do_i
//   dS   <- diag(exp(b_n)) dS + sum_i (q^_i . exp(b_i))^T do_i
// P, S0 do_i and dS v_j sum over v's columns, so each tile writes its partial dq, dk into the
// scratch part of the cache; a second kernel (one thread per (batch, head, channel)) adds the
// partials in tile order, adds dq and dk, and runs dg_t = sum_{s>=t} (q_s dq_s - k_s dk_s)
// backwards over the sequence. dv columns belong to one tile and are added directly. No atomics:
// the results do not depend on scheduling.
//
// Cache layout (floats, regions rounded up to 64):
//   states [B][heads][nchunks][dk][dv]   the state entering each chunk (forward; the first is 0)
//   dq_part, dk_part [ntiles][B*L][heads*dk]   backward scratch (overwritten by every backward)
// defines: cuda_gla_cache_floats, cuda_gla_fwd, cuda_gla_bwd
#include "cuda/cuda_common.cuh"

#define GC 16      // chunk length
#define GFT 32     // v columns per block
#define GMAXK 64   // largest dk
#define GK1 (GMAXK + 1)  // padded row length of the chunk x dk tables (no bank conflicts)
#define GF1 (GFT + 1)    // padded row length of the state tiles

struct GlaCache {
    float *states, *dq_part, *dk_part;
};

static int gla_chunks(int L) { return (L + GC - 1) / GC; }
static int gla_tiles(int dv) { return (dv + GFT - 1) / GFT; }

static size_t gla_layout(float *base, GlaShape s, GlaCache *c) {
    const size_t nstate = (size_t)s.B * s.heads * gla_chunks(s.L) * s.dk * s.dv;
    const size_t npart = (size_t)gla_tiles(s.dv) * s.B * s.L * s.heads * s.dk;
    c->states = base;
    c->dq_part = base ? base + up64(nstate) : NULL;
    c->dk_part = base ? base + up64(nstate) + up64(npart) : NULL;
    return up64(nstate) + 2 * up64(npart);
}

size_t cuda_gla_cache_floats(GlaShape s) { GlaCache c; return gla_layout(NULL, s, &c); }

static void gla_check(GlaShape s, const char *op) {
    CU_REQUIRE(s.B >= 0 && s.L >= 0 && s.heads > 0 && s.dk > 0 && s.dv > 0, "%s: bad shape B%d L%d heads%d dk%d dv%d",
               op, s.B, s.L, s.heads, s.dk, s.dv);
    CU_REQUIRE(s.dk <= GMAXK, "%s: head key width %d above the CUDA kernel's %d", op, s.dk, GMAXK);
    CU_REQUIRE(s.ldq >= s.heads * s.dk && s.ldk >= s.heads * s.dk && s.ldg >= s.heads * s.dk &&
                   s.ldv >= s.heads * s.dv && s.ldo >= s.heads * s.dv,
               "%s: a row stride is below heads * head width", op);
}

// ---------------------------------------------------------------------------------------------
// A chunk's q, k and decays in shared memory, shared by the two kernels.

struct ChunkTiles {
    float qh[GC][GK1];  // scale q
    float kc[GC][GK1];  // k
    float bq[GC][GK1];  // g, then the cumulative b
    float qg[GC][GK1];  // qh exp(b)
    float kd[GC][GK1];  // k exp(b_n - b)
    float gn[GMAXK];    // exp(b_n)
};

// Loads rows t0 .. t0+n-1 of q, k, g (batch row pointers at head h) and forms b, qg, kd, gn.
// Called by all threads; ends with a barrier.
__device__ void chunk_tiles(ChunkTiles *c, const float *q, const float *k, const float *g, GlaShape s, int t0,
                            int n, float scale) {
    const int dk = s.dk, tid = threadIdx.x;
    for (int x = tid; x < n * dk; x += blockDim.x) {
        const int i = x / dk, e = x % dk;
        const size_t t = (size_t)(t0 + i);
        c->qh[i][e] = scale * q[t * s.ldq + e];
        c->kc[i][e] = k[t * s.ldk + e];
        c->bq[i][e] = g[t * s.ldg + e];
    }
    __syncthreads();
    if (tid < dk) {
        float b = 0.0f;
        for (int i = 0; i < n; i++) {
            b += c->bq[i][tid];
            c->bq[i][tid] = b;
        }
        c->gn[tid] = expf(b);
    }
    __syncthreads();
    for (int x = tid; x < n * dk; x += blockDim.x) {
        const int i = x / dk, e = x % dk;
        c->qg[i][e] = c->qh[i][e] * expf(c->bq[i][e]);
        c->kd[i][e] = c->kc[i][e] * expf(c->bq[n - 1][e] - c->bq[i][e]);
    }
    __syncthreads();
}

// A[i][j] = sum_e qh_ie k_je exp(b_ie - b_je) for j <= i < n, else 0 (one pair per thread).
__device__ __forceinline__ float chunk_score(const ChunkTiles *c, int i, int j, int dk) {
    float a = 0.0f;
    for (int e = 0; e < dk; e++) a += c->qh[i][e] * c->kc[j][e] * expf(c->bq[i][e] - c->bq[j][e]);
    return a;
}

// ---------------------------------------------------------------------------------------------
// Forward: grid (ntiles, B*heads), 256 threads.

__global__ void __launch_bounds__(CU_BLOCK) k_gla_fwd(float *o, float *states, const float *q, const float *k,
                                                      const float *v, const float *g, GlaShape s, float scale) {
    __shared__ ChunkTiles c;
    __shared__ float S[GMAXK][GF1], vt[GC][GFT], A[GC][GC + 1];
    const int tid = threadIdx.x, bh = blockIdx.y, nh = s.heads, b = bh / nh, h = bh % nh;
    const int dk = s.dk, dv = s.dv, f0 = blockIdx.x * GFT, ft = dv - f0 < GFT ? dv - f0 : GFT;
    const int L = s.L, nc = (L + GC - 1) / GC;
    const size_t row0 = (size_t)b * L;
    const float *qb = q + row0 * s.ldq + (size_t)h * dk, *kb = k + row0 * s.ldk + (size_t)h * dk;
    const float *gb = g + row0 * s.ldg + (size_t)h * dk, *vb = v + row0 * s.ldv + (size_t)h * dv + f0;
    float *ob = o + row0 * s.ldo + (size_t)h * dv + f0;
    float *st = states + (size_t)bh * nc * dk * dv + f0;
    for (int x = tid; x < GMAXK * GFT; x += blockDim.x) S[x / GFT][x % GFT] = 0.0f;
    __syncthreads();
    for (int ci = 0; ci < nc; ci++) {
        const int t0 = ci * GC, n = L - t0 < GC ? L - t0 : GC;
        float *stc = st + (size_t)ci * dk * dv;
        for (int x = tid; x < dk * GFT; x += blockDim.x) {
            const int e = x / GFT, f = x % GFT;
            if (f < ft) stc[(size_t)e * dv + f] = S[e][f];  // the state entering this chunk
        }
        for (int x = tid; x < GC * GFT; x += blockDim.x) {
            const int i = x / GFT, f = x % GFT;
            vt[i][f] = i < n && f < ft ? vb[(size_t)(t0 + i) * s.ldv + f] : 0.0f;
        }
        chunk_tiles(&c, qb, kb, gb, s, t0, n, scale);
        {
            const int i = tid / GC, j = tid % GC;  // GC * GC == CU_BLOCK
            A[i][j] = i < n && j <= i ? chunk_score(&c, i, j, dk) : 0.0f;
        }
        __syncthreads();
        for (int x = tid; x < GC * GFT; x += blockDim.x) {
            const int i = x / GFT, f = x % GFT;
            if (i >= n || f >= ft) continue;
            float acc = 0.0f;
            for (int e = 0; e < dk; e++) acc += c.qg[i][e] * S[e][f];
            for (int j = 0; j <= i; j++) acc += A[i][j] * vt[j][f];
            ob[(size_t)(t0 + i) * s.ldo + f] = acc;
        }
        __syncthreads();  // S was read above
        for (int x = tid; x < dk * GFT; x += blockDim.x) {
            const int e = x / GFT, f = x % GFT;
            float acc = c.gn[e] * S[e][f];
            for (int j = 0; j < n; j++) acc += c.kd[j][e] * vt[j][f];
            S[e][f] = acc;
        }
        __syncthreads();
    }
}

// ---------------------------------------------------------------------------------------------
// Backward, part 1: grid (ntiles, B*heads), 256 threads, chunks in reverse. Writes the tile's
// partial dq (already times scale) and dk, adds dv.

__global__ void __launch_bounds__(CU_BLOCK) k_gla_bwd(float *dq_part, float *dk_part, float *dv, const float *dout,
                                                      const float *states, const float *q, const float *k,
                                                      const float *v, const float *g, GlaShape s, float scale,
                                                      int want_qk) {
    __shared__ ChunkTiles c;
    __shared__ float S0[GMAXK][GF1], dS[GMAXK][GF1], vt[GC][GFT], dt[GC][GFT], A[GC][GC + 1], P[GC][GC + 1];
    const int tid = threadIdx.x, bh = blockIdx.y, nh = s.heads, b = bh / nh, h = bh % nh;
    const int dk = s.dk, dv_ = s.dv, f0 = blockIdx.x * GFT, ft = dv_ - f0 < GFT ? dv_ - f0 : GFT;
    const int L = s.L, nc = (L + GC - 1) / GC, hk = nh * dk;
    const size_t row0 = (size_t)b * L;
    const float *qb = q + row0 * s.ldq + (size_t)h * dk, *kb = k + row0 * s.ldk + (size_t)h * dk;
    const float *gb = g + row0 * s.ldg + (size_t)h * dk, *vb = v + row0 * s.ldv + (size_t)h * dv_ + f0;
    const float *db = dout + row0 * s.ldo + (size_t)h * dv_ + f0;
    const float *st = states + (size_t)bh * nc * dk * dv_ + f0;
    const size_t part0 = (size_t)blockIdx.x * s.B * L * hk + row0 * hk + (size_t)h * dk;
    for (int x = tid; x < GMAXK * GFT; x += blockDim.x) dS[x / GFT][x % GFT] = 0.0f;
    __syncthreads();
    for (int ci = nc - 1; ci >= 0; ci--) {
        const int t0 = ci * GC, n = L - t0 < GC ? L - t0 : GC;
        const float *stc = st + (size_t)ci * dk * dv_;
        for (int x = tid; x < dk * GFT; x += blockDim.x) {
            const int e = x / GFT, f = x % GFT;
            S0[e][f] = f < ft ? stc[(size_t)e * dv_ + f] : 0.0f;
        }
        for (int x = tid; x < GC * GFT; x += blockDim.x) {
            const int i = x / GFT, f = x % GFT;
            const bool in = i < n && f < ft;
            vt[i][f] = in ? vb[(size_t)(t0 + i) * s.ldv + f] : 0.0f;
            dt[i][f] = in ? db[(size_t)(t0 + i) * s.ldo + f] : 0.0f;
        }
        chunk_tiles(&c, qb, kb, gb, s, t0, n, scale);
        {
            const int i = tid / GC, j = tid % GC;
            const bool in = i < n && j <= i;
            float p = 0.0f;
            if (in)
                for (int f = 0; f < ft; f++) p += dt[i][f] * vt[j][f];
            A[i][j] = in ? chunk_score(&c, i, j, dk) : 0.0f;
            P[i][j] = p;
        }
        __syncthreads();
        if (want_qk)
            for (int x = tid; x < n * dk; x += blockDim.x) {
                const int i = x / dk, e = x % dk;
                // dq^_ie = exp(b_ie) (S0 do_i)_e + sum_{j<=i} P_ij k_je D_ije
                float sd = 0.0f;
                for (int f = 0; f < ft; f++) sd += S0[e][f] * dt[i][f];
                float acc = expf(c.bq[i][e]) * sd;
                for (int j = 0; j <= i; j++) acc += P[i][j] * c.kc[j][e] * expf(c.bq[i][e] - c.bq[j][e]);
                dq_part[part0 + (size_t)(t0 + i) * hk + e] = scale * acc;
                // dk_ie = exp(b_ne - b_ie) (dS v_i)_e + sum_{m>=i} P_mi qh_me D_mie
                float sv = 0.0f;
                for (int f = 0; f < ft; f++) sv += dS[e][f] * vt[i][f];
                acc = expf(c.bq[n - 1][e] - c.bq[i][e]) * sv;
                for (int m = i; m < n; m++) acc += P[m][i] * c.qh[m][e] * expf(c.bq[m][e] - c.bq[i][e]);
                dk_part[part0 + (size_t)(t0 + i) * hk + e] = acc;
            }
        if (dv)
            for (int x = tid; x < GC * GFT; x += blockDim.x) {
                const int j = x / GFT, f = x % GFT;
                if (j >= n || f >= ft) continue;
                // dv_jf = sum_e kd_je dS_ef + sum_{i>=j} A_ij do_if
                float acc = 0.0f;
                for (int e = 0; e < dk; e++) acc += c.kd[j][e] * dS[e][f];
                for (int i = j; i < n; i++) acc += A[i][j] * dt[i][f];
                dv[(row0 + t0 + j) * s.ldv + (size_t)h * dv_ + f0 + f] += acc;
            }
        __syncthreads();  // dS was read above
        for (int x = tid; x < dk * GFT; x += blockDim.x) {
            const int e = x / GFT, f = x % GFT;
            float acc = c.gn[e] * dS[e][f];
            for (int i = 0; i < n; i++) acc += c.qg[i][e] * dt[i][f];
            dS[e][f] = acc;
        }
        __syncthreads();
    }
}

// Backward, part 2: one thread per (batch, head, channel e), tokens in reverse: the tiles'
// partials summed in tile order; dq, dk added; dg_t += sum_{s>=t} (q_s dq_s - k_s dk_s).
__global__ void k_gla_dg(float *dq, float *dk, float *dg, const float *dq_part, const float *dk_part,
                         const float *q, const float *k, GlaShape s, int ntiles) {
    const size_t total = (size_t)s.B * s.heads * s.dk;
    GRID_STRIDE(x, total) {
        const int hk = s.heads * s.dk, ce = (int)(x % (size_t)hk);  // channel h*dk + e
        const size_t b = x / (size_t)hk, tstride = (size_t)s.B * s.L * hk;
        float r = 0.0f;
        for (int t = s.L - 1; t >= 0; t--) {
            const size_t row = b * s.L + t, p = row * hk + ce;
            float dqv = 0.0f, dkv = 0.0f;
            for (int tile = 0; tile < ntiles; tile++) {
                dqv += dq_part[tile * tstride + p];
                dkv += dk_part[tile * tstride + p];
            }
            if (dq) dq[row * s.ldq + ce] += dqv;
            if (dk) dk[row * s.ldk + ce] += dkv;
            r += q[row * s.ldq + ce] * dqv - k[row * s.ldk + ce] * dkv;
            if (dg) dg[row * s.ldg + ce] += r;
        }
    }
}

// ---------------------------------------------------------------------------------------------

void cuda_gla_fwd(float *o, float *cache, const float *q, const float *k, const float *v, const float *g,
                  GlaShape s) {
    gla_check(s, "gla_fwd");
    if (s.B <= 0 || s.L <= 0) return;
    GlaCache c;
    gla_layout(cache, s, &c);
    dim3 grid(gla_tiles(s.dv), s.B * s.heads);
    k_gla_fwd<<<grid, CU_BLOCK>>>(o, c.states, q, k, v, g, s, 1.0f / sqrtf((float)s.dk));
    KERNEL_CHECK();
}

void cuda_gla_bwd(float *dq, float *dk, float *dv, float *dg, const float *dout, const float *q, const float *k,
                  const float *v, const float *g, float *cache, GlaShape s) {
    gla_check(s, "gla_bwd");
    if (s.B <= 0 || s.L <= 0 || (!dq && !dk && !dv && !dg)) return;
    GlaCache c;
    gla_layout(cache, s, &c);  // the forward's states are only read
    const int want_qk = dq || dk || dg, ntiles = gla_tiles(s.dv);
    dim3 grid(ntiles, s.B * s.heads);
    k_gla_bwd<<<grid, CU_BLOCK>>>(c.dq_part, c.dk_part, dv, dout, c.states, q, k, v, g, s,
                                  1.0f / sqrtf((float)s.dk), want_qk);
    KERNEL_CHECK();
    if (want_qk) {
        const size_t total = (size_t)s.B * s.heads * s.dk;
        k_gla_dg<<<grid1d(total), CU_BLOCK>>>(dq, dk, dg, c.dq_part, c.dk_part, q, k, s, ntiles);
        KERNEL_CHECK();
    }
}

// The CPU backend's products: oneDNN matmul (fp32, or bf16 inputs with fp32 accumulation and
// output) or OpenBLAS sgemm (cpu_gemm.h).
// defines: cpu_sgemm, cpu_sgemm_wt, cpu_gemm_select, cpu_gemm_impl, cpu_conv_impl, cpu_gemm_name, cpu_conv_name,
//          cpu_gemm_precision, cpu_gemm_set_precision
#include "cpu/cpu_gemm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "cpu/cpu_dnnl.h"
#include "cpu/cpu_bf16.h"

#include <cblas.h>  // last: OpenBLAS defines a macro named like common parameters

static GemmImpl gemm_impl = GEMM_OPENBLAS;
static ConvImpl conv_impl = CONV_IM2COL;
static GemmPrec gemm_prec = GEMM_F32;

static int dnnl_usable(void) {
#ifdef MALA_DNNL
    return cpu_dnnl_engine() != NULL;
#else
    return 0;
#endif
}

// MALA_GEMM / MALA_CONV: unset means oneDNN where usable; an unknown value is refused.
static int env_choice(const char *name, const char *openblas_word) {
    const char *v = getenv(name);
    if (!v || !*v || !strcmp(v, "dnnl")) return 1;
    if (!strcmp(v, openblas_word)) return 0;
    FATAL("%s=%s: expected dnnl or %s", name, v, openblas_word);
}

static void choose_from_env(void) {
    const int g = env_choice("MALA_GEMM", "openblas"), c = env_choice("MALA_CONV", "im2col");
    const int ok = (g || c) && dnnl_usable();
    const char *asked = getenv("MALA_GEMM") && !strcmp(getenv("MALA_GEMM"), "dnnl") ? "MALA_GEMM=dnnl"
                        : getenv("MALA_CONV") && !strcmp(getenv("MALA_CONV"), "dnnl") ? "MALA_CONV=dnnl" : NULL;
    if (asked && !ok) fprintf(stderr, "mala: %s, but this build has no usable oneDNN: OpenBLAS and im2col\n", asked);
    gemm_impl = g && ok ? GEMM_DNNL : GEMM_OPENBLAS;
    conv_impl = c && ok ? CONV_DNNL : CONV_IM2COL;
}

// (the first product may come from inside an OpenMP region)
static void choose_once(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, choose_from_env);
}

int cpu_gemm_select(int gemm, int conv) {
    choose_once();
    const int ok = dnnl_usable();
    if (gemm >= 0) gemm_impl = gemm == GEMM_DNNL && ok ? GEMM_DNNL : GEMM_OPENBLAS;
    if (conv >= 0) conv_impl = conv == CONV_DNNL && ok ? CONV_DNNL : CONV_IM2COL;
    return ok || (gemm != GEMM_DNNL && conv != CONV_DNNL);
}

GemmImpl cpu_gemm_impl(void) { choose_once(); return gemm_impl; }
ConvImpl cpu_conv_impl(void) { choose_once(); return conv_impl; }
const char *cpu_gemm_name(void) { return cpu_gemm_impl() == GEMM_DNNL ? "dnnl" : "openblas"; }
const char *cpu_conv_name(void) { return cpu_conv_impl() == CONV_DNNL ? "dnnl" : "im2col"; }
GemmPrec cpu_gemm_precision(void) { return gemm_prec; }

int cpu_gemm_set_precision(GemmPrec p) {
    if (p == GEMM_BF16 && (cpu_gemm_impl() != GEMM_DNNL || !dnnl_usable())) return 0;
    gemm_prec = p;
    return 1;
}

static void blas_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
                lda, B, ldb, beta, C, ldc);
}

#ifdef MALA_DNNL
// A matmul's primitive and its operands' descriptors (row-major, strides carry the transposes).
typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, scratch;
} Matmul;

enum { K_OP, K_PREC, K_TA, K_TB, K_M, K_N, K_K, K_LDA, K_LDB, K_LDC, K_ALPHA, K_BETA, K_NTHR };
#define OP_MATMUL 1

static int32_t float_bits(float f) {
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}

static float bits_float(int32_t i) {
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

// rows x cols, row stride ld; trans: the matrix is stored transposed (cols x rows, stride ld).
static dnnl_memory_desc_t mat_md(int rows, int cols, int ld, int trans, dnnl_data_type_t dt) {
    dnnl_memory_desc_t md;
    const dnnl_dims_t dims = {rows, cols};
    const dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    cpu_dnnl_ok(dnnl_memory_desc_init_by_strides(&md, 2, dims, dt, strides), "memory_desc_init (matmul)");
    return md;
}

// alpha as output scale, beta as a sum post-op (dst = alpha A B + beta dst).
static dnnl_primitive_attr_t matmul_attr(float alpha, float beta) {
    dnnl_primitive_attr_t attr = cpu_dnnl_attr();
    if (alpha != 1.0f) cpu_dnnl_ok(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha), "output_scales");
    if (beta != 0.0f) {
        dnnl_post_ops_t po;
        cpu_dnnl_ok(dnnl_post_ops_create(&po), "post_ops_create");
        cpu_dnnl_ok(dnnl_post_ops_append_sum(po, beta), "append_sum");
        cpu_dnnl_ok(dnnl_primitive_attr_set_post_ops(attr, po), "set_post_ops");
        dnnl_post_ops_destroy(po);
    }
    return attr;
}

// NULL where oneDNN has no implementation (the call then goes to OpenBLAS; said once).
static void *make_matmul(const DnnlKey *k, void *ctx) {
    const int32_t *v = k->v;
    const dnnl_data_type_t in = v[K_PREC] == GEMM_BF16 ? dnnl_bf16 : dnnl_f32;
    Matmul *m = xcalloc(1, sizeof *m);
    m->a = mat_md(v[K_M], v[K_K], v[K_LDA], v[K_TA], in);
    m->b = mat_md(v[K_K], v[K_N], v[K_LDB], v[K_TB], in);
    m->c = mat_md(v[K_M], v[K_N], v[K_LDC], 0, dnnl_f32);
    dnnl_matmul_desc_t d;
    cpu_dnnl_ok(dnnl_matmul_desc_init(&d, &m->a, &m->b, NULL, &m->c), "matmul_desc_init");
    dnnl_primitive_attr_t attr = matmul_attr(bits_float(v[K_ALPHA]), bits_float(v[K_BETA]));
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &d, attr, cpu_dnnl_engine(), NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st == dnnl_success) {
        cpu_dnnl_ok(dnnl_primitive_create(&m->prim, pd), "primitive_create (matmul)");
        m->scratch = cpu_dnnl_scratch_md(pd);
        dnnl_primitive_desc_destroy(pd);
        return m;
    }
    // (bf16 never falls back to fp32 unsaid)
    if (in == dnnl_bf16)
        FATAL("--precision bf16: oneDNN has no bf16 matmul for %dx%dx%d on this CPU; use --precision fp32", v[K_M],
              v[K_N], v[K_K]);
    fprintf(stderr, "mala: oneDNN has no matmul for %dx%dx%d (trans %d%d); OpenBLAS computes it\n", v[K_M], v[K_N],
            v[K_K], v[K_TA], v[K_TB]);
    free(m);
    return NULL;
}

// The primitive for this call's configuration. The thread count is part of it: oneDNN plans its
// blocking for the threads it will have.
static const Matmul *matmul_for(int ta, int tb, int M, int N, int K, float alpha, int lda, int ldb, float beta,
                                int ldc) {
    DnnlKey k = {{0}};
    int32_t *v = k.v;
    v[K_OP] = OP_MATMUL;
    v[K_PREC] = cpu_gemm_precision();
    v[K_TA] = !!ta, v[K_TB] = !!tb, v[K_M] = M, v[K_N] = N, v[K_K] = K;
    v[K_LDA] = lda, v[K_LDB] = ldb, v[K_LDC] = ldc;
    v[K_ALPHA] = float_bits(alpha), v[K_BETA] = float_bits(beta);
    v[K_NTHR] = cpu_dnnl_threads();
    return cpu_dnnl_cache_get(&k, make_matmul, NULL);
}

static int run_matmul(const Matmul *m, const void *A, const void *B, float *C) {
    if (!m) return 0;
    const int args[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    dnnl_memory_t mems[3] = {cpu_dnnl_mem(&m->a, A), cpu_dnnl_mem(&m->b, B), cpu_dnnl_mem(&m->c, C)};
    cpu_dnnl_exec(m->prim, &m->scratch, 3, args, mems);
    return 1;
}

// The stored matrix (rows x cols, stride ld) of an operand: op(X) is rows x cols, or cols x rows when trans.
typedef struct {
    int rows, cols, ld;
} Stored;

static Stored stored(int trans, int r, int c, int ld) { return trans ? (Stored){c, r, ld} : (Stored){r, c, ld}; }

static void fill_packed(void *dst, const void *src, void *ctx) {
    const Stored *s = ctx;
    cpu_bf16_pack(dst, src, s->rows, s->cols, s->ld);
}

// bf16: A into the calling thread's buffer, B into its buffer or, weight, from B's shadow; both dense.
static int matmul_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc, int weight) {
    Stored sa = stored(ta, M, K, lda), sb = stored(tb, K, N, ldb);
    uint16_t *a = cpu_bf16_scratch(0, (size_t)M * K * sizeof(uint16_t));
    cpu_bf16_pack(a, A, sa.rows, sa.cols, sa.ld);
    const size_t nb = (size_t)K * N * sizeof(uint16_t);
    const void *b;
    if (weight) {
        const uint64_t layout = (uint64_t)sb.rows << 40 ^ (uint64_t)sb.cols << 20 ^ (uint64_t)sb.ld;
        b = cpu_bf16_shadow(B, layout, nb, fill_packed, &sb);
    } else {
        uint16_t *bb = cpu_bf16_scratch(1, nb);
        cpu_bf16_pack(bb, B, sb.rows, sb.cols, sb.ld);
        b = bb;
    }
    return run_matmul(matmul_for(ta, tb, M, N, K, alpha, sa.cols, sb.cols, beta, ldc), a, b, C);
}

static int matmul_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc, int weight) {
    if (cpu_gemm_precision() == GEMM_BF16)
        return matmul_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, weight);
    return run_matmul(matmul_for(ta, tb, M, N, K, alpha, lda, ldb, beta, ldc), A, B, C);
}
#endif

static void gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, int weight) {
    if (M <= 0 || N <= 0) return;
    choose_once();  // (in a build without oneDNN too: MALA_GEMM=dnnl is then answered once)
#ifdef MALA_DNNL
    // (K = 0 or alpha = 0: C = beta C, which OpenBLAS does without reading A and B)
    if (K > 0 && alpha != 0.0f && cpu_gemm_impl() == GEMM_DNNL &&
        matmul_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, weight))
        return;
#endif
    blas_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cpu_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc) {
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 0);
}

void cpu_sgemm_wt(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc) {
    gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 1);
}

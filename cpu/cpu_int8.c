// int8 linears through oneDNN's s8 x s8 -> s32 matmul (cpu_int8.h).
// defines: cpu_int8_available, cpu_int8_set, cpu_int8_on, cpu_int8_quantise_rows, cpu_int8_linear_fwd,
//          cpu_int8_linear_fwd_q8
#include "cpu/cpu_int8.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/quant8.h"
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_clones.h"
#include "cpu/cpu_dnnl.h"
#include "cpu/cpu_gemm.h"

static int int8_on;

int cpu_int8_available(void) {
#ifdef MALA_DNNL
    return cpu_gemm_impl() == GEMM_DNNL && cpu_dnnl_engine() != NULL;
#else
    return 0;
#endif
}

int cpu_int8_set(int on) {
    if (on && !cpu_int8_available()) return 0;
    int8_on = !!on;
    return 1;
}

int cpu_int8_on(void) { return int8_on; }

void cpu_int8_quantise_rows(int8_t *q, float *scale, const float *x, int rows, int cols, int ld) {
    #pragma omp parallel for schedule(static) if ((size_t)rows * cols >= ((size_t)1 << 15))
    for (int r = 0; r < rows; r++) scale[r] = quant8_row(q + (size_t)r * cols, x + (size_t)r * ld, cols);
}

#ifdef MALA_DNNL
// The weight shadow: O scales (padded to 64 bytes), then the O x I int8 values.
static size_t scales_bytes(int O) { return ((size_t)O * sizeof(float) + 63) & ~(size_t)63; }

typedef struct {
    int O, I;
} WShape;

static void fill_weights(void *dst, const void *src, void *ctx) {
    const WShape *s = ctx;
    cpu_int8_quantise_rows((int8_t *)dst + scales_bytes(s->O), dst, src, s->O, s->I, s->I);
}

typedef struct {
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c, scratch;
} Matmul;

enum { K_OP, K_N, K_I, K_O, K_NTHR };
#define OP_MATMUL_S8 2  // (cpu_gemm.c's fp32/bf16 matmul is 1)

static void *make_matmul(const DnnlKey *k, void *ctx) {
    const int32_t *v = k->v;
    Matmul *m = xcalloc(1, sizeof *m);
    const dnnl_dims_t da = {v[K_N], v[K_I]}, sa = {v[K_I], 1};
    const dnnl_dims_t db = {v[K_I], v[K_O]}, sb = {1, v[K_I]};  // W^T: the stored [O, I] read transposed
    const dnnl_dims_t dc = {v[K_N], v[K_O]}, sc = {v[K_O], 1};
    cpu_dnnl_ok(dnnl_memory_desc_init_by_strides(&m->a, 2, da, dnnl_s8, sa), "memory_desc_init (int8 src)");
    cpu_dnnl_ok(dnnl_memory_desc_init_by_strides(&m->b, 2, db, dnnl_s8, sb), "memory_desc_init (int8 weights)");
    cpu_dnnl_ok(dnnl_memory_desc_init_by_strides(&m->c, 2, dc, dnnl_s32, sc), "memory_desc_init (int32 dst)");
    dnnl_matmul_desc_t d;
    cpu_dnnl_ok(dnnl_matmul_desc_init(&d, &m->a, &m->b, NULL, &m->c), "matmul_desc_init (int8)");
    dnnl_primitive_attr_t attr = cpu_dnnl_attr();
    dnnl_primitive_desc_t pd;
    const dnnl_status_t st = dnnl_primitive_desc_create(&pd, &d, attr, cpu_dnnl_engine(), NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        FATAL("--precision int8: oneDNN has no int8 matmul for %dx%dx%d on this CPU; use --precision fp32", v[K_N],
              v[K_O], v[K_I]);
    cpu_dnnl_ok(dnnl_primitive_create(&m->prim, pd), "primitive_create (int8 matmul)");
    m->scratch = cpu_dnnl_scratch_md(pd);
    dnnl_primitive_desc_destroy(pd);
    return m;
}
#endif

#ifdef MALA_DNNL
// out[n, o] = acc[n, o] sa[n] sw[o] + b[o], in place over acc. Per element only, so its AVX-512
// clone gives the same bits.
static MALA_ELEMENTWISE_CLONES void dequantise_rows(float *out, const int32_t *acc, const float *sa, const float *sw,
                                                    const float *b, int N, int O) {
    #pragma omp parallel for schedule(static) if ((size_t)N * O >= ((size_t)1 << 15))
    for (int n = 0; n < N; n++) {
        float *row = out + (size_t)n * O;
        const int32_t *arow = acc + (size_t)n * O;
        const float s = sa[n];
        if (b)
            for (int o = 0; o < O; o++) row[o] = (float)arow[o] * (s * sw[o]) + b[o];
        else
            for (int o = 0; o < O; o++) row[o] = (float)arow[o] * (s * sw[o]);
    }
}

// out = the int8 product of in (quantised per token here) and the weights' int8 rows qw with their
// scales sw, dequantised, plus b.
static void linear_q8(float *out, const float *in, const int8_t *qw, const float *sw, const float *b, int N, int I,
                      int O) {
    int8_t *qa = cpu_bf16_scratch(2, (size_t)N * I);
    float *sa = cpu_bf16_scratch(3, (size_t)N * sizeof(float));
    cpu_int8_quantise_rows(qa, sa, in, N, I, I);

    DnnlKey k = {{0}};
    k.v[K_OP] = OP_MATMUL_S8, k.v[K_N] = N, k.v[K_I] = I, k.v[K_O] = O, k.v[K_NTHR] = cpu_dnnl_threads();
    const Matmul *m = cpu_dnnl_cache_get(&k, make_matmul, NULL);
    // (the int32 sums in out's own memory, dequantised in place: each element read, then written as a float)
    int32_t *acc = (int32_t *)(void *)out;
    const int args[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    dnnl_memory_t mems[3] = {cpu_dnnl_mem(&m->a, qa), cpu_dnnl_mem(&m->b, qw), cpu_dnnl_mem(&m->c, acc)};
    cpu_dnnl_exec(m->prim, &m->scratch, 3, args, mems);

    dequantise_rows(out, acc, sa, sw, b, N, O);
}
#endif

int cpu_int8_linear_fwd(float *out, const float *in, const float *w, const float *b, int N, int I, int O) {
#ifdef MALA_DNNL
    if (!cpu_int8_available()) return 0;
    if (N <= 0 || O <= 0) return 1;
    CHECK(I > 0, "int8 linear: %d inputs", I);
    WShape ws = {O, I};
    // (bit 63 keeps these apart from the bf16 shadows' layouts of the same pointer)
    const uint64_t layout = 1ull << 63 | (uint64_t)O << 32 | (uint64_t)I;
    const char *shadow = cpu_bf16_shadow(w, layout, scales_bytes(O) + (size_t)O * I, fill_weights, &ws);
    linear_q8(out, in, (const int8_t *)(shadow + scales_bytes(O)), (const float *)shadow, b, N, I, O);
    return 1;
#else
    (void)out, (void)in, (void)w, (void)b, (void)N, (void)I, (void)O;
    return 0;
#endif
}

int cpu_int8_linear_fwd_q8(float *out, const float *in, const int8_t *qw, const float *sw, const float *b, int N,
                           int I, int O) {
#ifdef MALA_DNNL
    if (!cpu_int8_available()) return 0;
    if (N <= 0 || O <= 0) return 1;
    CHECK(I > 0, "int8 linear: %d inputs", I);
    linear_q8(out, in, qw, sw, b, N, I, O);
    return 1;
#else
    (void)out, (void)in, (void)qw, (void)sw, (void)b, (void)N, (void)I, (void)O;
    return 0;
#endif
}

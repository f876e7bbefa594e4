// conv2d through oneDNN's convolution primitives (forward, backward data, backward weights) on
// the backend's NCHW / OIHW arrays (cpu_gemm.h). With blocked layouts (the default) oneDNN picks
// its own (nChw16c, ...): each call reorders the inputs into them and the outputs back, the
// accumulating outputs (dx, dw) by a reorder that adds into the caller's array. The reorder
// buffers are grow-only, one per argument and OpenMP thread (dw runs on groups of images in
// parallel, see ops_cpu_conv.c).
// bf16 (cpu_gemm_precision): the primitives read bf16 inputs and write fp32 outputs; the reorders
// into them round the fp32 inputs to bf16 (nearest even), and the weights' reorder is kept as
// their bf16 shadow (cpu_bf16.h), made once per optimiser step.
// defines: cpu_dnnl_conv2d_fwd, cpu_dnnl_conv2d_dx, cpu_dnnl_conv2d_dw, cpu_dnnl_conv_blocked
#include "cpu/cpu_gemm.h"

#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/common.h"
#include "core/conv_plan.h"
#include "cpu/cpu_dnnl.h"
#include "cpu/cpu_bf16.h"

static int blocked_layout = 1;
void cpu_dnnl_conv_blocked(int blocked) { blocked_layout = !!blocked; }

#ifndef MALA_DNNL
int cpu_dnnl_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s) { return 0; }
int cpu_dnnl_conv2d_dx(float *dx, const float *dout, const float *w, ConvShape s) { return 0; }
int cpu_dnnl_conv2d_dw(float *dw, const float *dout, const float *x, ConvShape s) { return 0; }
#else

enum { OP_FWD = 2, OP_BWD_DATA, OP_BWD_W };  // (1 is cpu_gemm.c's matmul)
enum { K_OP, K_PREC, K_B, K_CIN, K_H, K_W, K_COUT, K_KH, K_KW, K_STRIDE, K_PT, K_PB, K_PL, K_PR, K_BIAS, K_BLOCKED,
       K_NTHR };

#define MAX_ARGS 3
// A primitive and, per argument, its DNNL_ARG_*, whether the primitive writes it, the caller's
// layout, the primitive's, and the reorder between them (NULL when they are the same).
typedef struct {
    dnnl_primitive_t prim;
    int n, acc;  // acc: outputs are added into the caller's arrays
    int shadow;  // 1 + the argument read from its bf16 shadow (the weights in bf16), 0 none
    int arg[MAX_ARGS], out[MAX_ARGS];
    dnnl_memory_desc_t user[MAX_ARGS], inner[MAX_ARGS], scratch, rscratch[MAX_ARGS];
    dnnl_primitive_t reorder[MAX_ARGS];
} Conv;

static dnnl_memory_desc_t dt_md(int nd, const dnnl_dims_t dims, dnnl_data_type_t dt, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    cpu_dnnl_ok(dnnl_memory_desc_init_by_tag(&md, nd, dims, dt, tag), "memory_desc_init (conv)");
    return md;
}

static dnnl_memory_desc_t tag_md(int nd, const dnnl_dims_t dims, dnnl_format_tag_t tag) {
    return dt_md(nd, dims, dnnl_f32, tag);
}

// The data types of x, w and out in the primitive of op (bf16: its inputs bf16, its output fp32;
// the forward hint of a backward primitive as the forward's).
static void conv_types(const int32_t *v, int op, dnnl_data_type_t dt[3]) {
    const int bf = v[K_PREC] == GEMM_BF16;
    dt[0] = dt[1] = dt[2] = dnnl_f32;
    if (!bf) return;
    dt[0] = op == OP_BWD_DATA ? dnnl_f32 : dnnl_bf16;
    dt[1] = op == OP_BWD_W ? dnnl_f32 : dnnl_bf16;
    dt[2] = op == OP_FWD ? dnnl_f32 : dnnl_bf16;
}

// The caller's layouts (any = 0) or "let the primitive choose" (any = 1) of x, w and out, in the
// types of op's primitive (op 0: the caller's, fp32).
static void conv_mds(const int32_t *v, int any, int op, dnnl_memory_desc_t *x, dnnl_memory_desc_t *w,
                     dnnl_memory_desc_t *y) {
    const ConvShape s = {v[K_B], v[K_CIN], v[K_H], v[K_W], v[K_COUT], v[K_KH], v[K_KW], v[K_STRIDE],
                         v[K_PT], v[K_PB], v[K_PL], v[K_PR]};
    const dnnl_dims_t dx = {s.B, s.Cin, s.H, s.W}, dw = {s.Cout, s.Cin, s.kh, s.kw},
                      dy = {s.B, s.Cout, conv_out_h(s), conv_out_w(s)};
    dnnl_data_type_t dt[3] = {dnnl_f32, dnnl_f32, dnnl_f32};
    if (op) conv_types(v, op, dt);
    *x = dt_md(4, dx, dt[0], any ? dnnl_format_tag_any : dnnl_nchw);
    *w = dt_md(4, dw, dt[1], any ? dnnl_format_tag_any : dnnl_oihw);
    *y = dt_md(4, dy, dt[2], any ? dnnl_format_tag_any : dnnl_nchw);
}

// NULL where oneDNN has no implementation.
static dnnl_primitive_desc_t create_pd(const void *desc, dnnl_primitive_desc_t hint) {
    dnnl_primitive_attr_t attr = cpu_dnnl_attr();
    dnnl_primitive_desc_t pd;
    const dnnl_status_t st = dnnl_primitive_desc_create(&pd, desc, attr, cpu_dnnl_engine(), hint);
    dnnl_primitive_attr_destroy(attr);
    return st == dnnl_success ? pd : NULL;
}

static dnnl_primitive_desc_t fwd_pd(const int32_t *v, int with_bias) {
    dnnl_memory_desc_t x, w, y, b;
    conv_mds(v, v[K_BLOCKED], OP_FWD, &x, &w, &y);
    const dnnl_dims_t db = {v[K_COUT]};
    b = tag_md(1, db, dnnl_x);
    const dnnl_dims_t st = {v[K_STRIDE], v[K_STRIDE]}, pl = {v[K_PT], v[K_PL]}, pr = {v[K_PB], v[K_PR]};
    dnnl_convolution_desc_t d;
    cpu_dnnl_ok(dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &x, &w,
                                                   with_bias ? &b : NULL, &y, st, pl, pr), "conv fwd desc");
    return create_pd(&d, NULL);
}

static dnnl_primitive_desc_t bwd_pd(const int32_t *v, dnnl_primitive_desc_t hint) {
    dnnl_memory_desc_t x, w, y;
    conv_mds(v, v[K_BLOCKED], v[K_OP], &x, &w, &y);
    const dnnl_dims_t st = {v[K_STRIDE], v[K_STRIDE]}, pl = {v[K_PT], v[K_PL]}, pr = {v[K_PB], v[K_PR]};
    dnnl_convolution_desc_t d;
    if (v[K_OP] == OP_BWD_DATA)
        cpu_dnnl_ok(dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &x, &w, &y, st, pl, pr),
                    "conv bwd data desc");
    else
        cpu_dnnl_ok(dnnl_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &x, &w, NULL, &y, st,
                                                                pl, pr), "conv bwd weights desc");
    return create_pd(&d, hint);
}

// Argument i: DNNL_ARG_* arg (query what) in the caller's layout user, written by the primitive when out.
static void add_arg(Conv *c, dnnl_primitive_desc_t pd, int arg, dnnl_query_t what, dnnl_memory_desc_t user, int out) {
    const int i = c->n++;
    c->arg[i] = arg, c->out[i] = out, c->user[i] = user;
    c->inner[i] = *dnnl_primitive_desc_query_md(pd, what, 0);
    if (dnnl_memory_desc_equal(&c->inner[i], &user)) return;
    dnnl_primitive_attr_t attr = cpu_dnnl_attr();
    if (out && c->acc) {  // the reorder back adds into the caller's array
        dnnl_post_ops_t po;
        cpu_dnnl_ok(dnnl_post_ops_create(&po), "post_ops_create");
        cpu_dnnl_ok(dnnl_post_ops_append_sum(po, 1.0f), "append_sum");
        cpu_dnnl_ok(dnnl_primitive_attr_set_post_ops(attr, po), "set_post_ops");
        dnnl_post_ops_destroy(po);
    }
    dnnl_engine_t e = cpu_dnnl_engine();
    dnnl_primitive_desc_t rpd;
    cpu_dnnl_ok(out ? dnnl_reorder_primitive_desc_create(&rpd, &c->inner[i], e, &user, e, attr)
                    : dnnl_reorder_primitive_desc_create(&rpd, &user, e, &c->inner[i], e, attr), "reorder pd");
    cpu_dnnl_ok(dnnl_primitive_create(&c->reorder[i], rpd), "reorder primitive");
    c->rscratch[i] = cpu_dnnl_scratch_md(rpd);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_primitive_attr_destroy(attr);
}

static void *make_conv(const DnnlKey *k, void *ctx) {
    const int32_t *v = k->v;
    const int op = v[K_OP];
    dnnl_primitive_desc_t hint = fwd_pd(v, op == OP_FWD && v[K_BIAS]);
    dnnl_primitive_desc_t pd = hint && op != OP_FWD ? bwd_pd(v, hint) : hint;
    if (!pd && v[K_PREC] == GEMM_BF16)  // (bf16 never falls back to fp32 unsaid)
        FATAL("--precision bf16: oneDNN has no bf16 convolution (op %d) on this CPU; use --precision fp32", op);
    if (!pd) {
        fprintf(stderr, "mala: oneDNN has no convolution (op %d) for this shape; im2col computes it\n", op);
        if (hint) dnnl_primitive_desc_destroy(hint);
        return NULL;
    }
    Conv *c = xcalloc(1, sizeof *c);
    c->acc = op != OP_FWD;
    dnnl_memory_desc_t x, w, y;
    conv_mds(v, 0, 0, &x, &w, &y);
    if (op == OP_FWD) {
        add_arg(c, pd, DNNL_ARG_SRC, dnnl_query_src_md, x, 0);
        add_arg(c, pd, DNNL_ARG_WEIGHTS, dnnl_query_weights_md, w, 0);
        add_arg(c, pd, DNNL_ARG_DST, dnnl_query_dst_md, y, 1);
    } else if (op == OP_BWD_DATA) {
        add_arg(c, pd, DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, y, 0);
        add_arg(c, pd, DNNL_ARG_WEIGHTS, dnnl_query_weights_md, w, 0);
        add_arg(c, pd, DNNL_ARG_DIFF_SRC, dnnl_query_diff_src_md, x, 1);
    } else {
        add_arg(c, pd, DNNL_ARG_SRC, dnnl_query_src_md, x, 0);
        add_arg(c, pd, DNNL_ARG_DIFF_DST, dnnl_query_diff_dst_md, y, 0);
        add_arg(c, pd, DNNL_ARG_DIFF_WEIGHTS, dnnl_query_diff_weights_md, w, 1);
    }
    if (v[K_PREC] == GEMM_BF16 && op != OP_BWD_W) c->shadow = 2;  // (w is argument 1 of fwd and bwd data)
    cpu_dnnl_ok(dnnl_primitive_create(&c->prim, pd), "conv primitive");
    c->scratch = cpu_dnnl_scratch_md(pd);
    if (pd != hint) dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_desc_destroy(hint);
    return c;
}

static const Conv *conv_for(int op, ConvShape s, int with_bias) {
    DnnlKey k = {{0}};
    int32_t *v = k.v;
    v[K_OP] = op, v[K_PREC] = cpu_gemm_precision();
    v[K_B] = s.B, v[K_CIN] = s.Cin, v[K_H] = s.H, v[K_W] = s.W, v[K_COUT] = s.Cout, v[K_KH] = s.kh, v[K_KW] = s.kw;
    v[K_STRIDE] = s.stride, v[K_PT] = s.pt, v[K_PB] = s.pb, v[K_PL] = s.pl, v[K_PR] = s.pr;
    v[K_BIAS] = with_bias, v[K_BLOCKED] = blocked_layout;
    v[K_NTHR] = cpu_dnnl_threads();
    return cpu_dnnl_cache_get(&k, make_conv, NULL);
}

// The calling thread's grow-only buffer number i (one per argument position).
#define MAX_THREADS 256
static void *arena(int i, size_t bytes) {
    static void *buf[MAX_THREADS][MAX_ARGS];
    static size_t cap[MAX_THREADS][MAX_ARGS];
#ifdef _OPENMP
    const int t = omp_get_thread_num();
#else
    const int t = 0;
#endif
    CHECK(t < MAX_THREADS, "conv2d: thread %d beyond %d", t, MAX_THREADS);
    if (bytes > cap[t][i]) {
        free(buf[t][i]);
        if (posix_memalign(&buf[t][i], 64, bytes)) FATAL("out of memory allocating %zu bytes", bytes);
        cap[t][i] = bytes;
    }
    return buf[t][i];
}

// Argument i of c from the caller's layout into the primitive's (back = 0) or back (1).
static void reorder(const Conv *c, int i, int back, const void *from, void *to) {
    const dnnl_memory_desc_t *from_md = back ? &c->inner[i] : &c->user[i], *to_md = back ? &c->user[i] : &c->inner[i];
    const int args[2] = {DNNL_ARG_FROM, DNNL_ARG_TO};
    dnnl_memory_t mems[2] = {cpu_dnnl_mem(from_md, from), cpu_dnnl_mem(to_md, to)};
    cpu_dnnl_exec(c->reorder[i], &c->rscratch[i], 2, args, mems);
}

typedef struct {
    const Conv *c;
    int i;
} ShadowFill;

static void fill_reordered(void *dst, const void *src, void *ctx) {
    const ShadowFill *f = ctx;
    reorder(f->c, f->i, 0, src, dst);
}

// Runs c on the caller's arrays ptr[i] (argument order of make_conv), reordering around it, and
// adds bias (fwd only, plain [Cout]) as an extra argument.
static void run_conv(const Conv *c, void *const *ptr, const float *bias) {
    void *buf[MAX_ARGS];
    for (int i = 0; i < c->n; i++) {
        if (i == c->shadow - 1 && c->reorder[i]) {  // (the primitive, through c, names the layout)
            ShadowFill f = {c, i};
            buf[i] = (void *)cpu_bf16_shadow(ptr[i], (uint64_t)(uintptr_t)c, dnnl_memory_desc_get_size(&c->inner[i]),
                                             fill_reordered, &f);
            continue;
        }
        const int own = c->reorder[i] || (c->out[i] && c->acc);
        buf[i] = own ? arena(i, dnnl_memory_desc_get_size(&c->inner[i])) : ptr[i];
        if (c->reorder[i] && !c->out[i]) reorder(c, i, 0, ptr[i], buf[i]);
    }
    int args[MAX_ARGS + 1];
    dnnl_memory_t mems[MAX_ARGS + 1];
    for (int i = 0; i < c->n; i++) args[i] = c->arg[i], mems[i] = cpu_dnnl_mem(&c->inner[i], buf[i]);
    int n = c->n;
    dnnl_memory_desc_t bmd;
    if (bias) {
        const dnnl_dims_t db = {c->user[1].dims[0]};  // weights' O
        bmd = tag_md(1, db, dnnl_x);
        args[n] = DNNL_ARG_BIAS, mems[n++] = cpu_dnnl_mem(&bmd, bias);
    }
    cpu_dnnl_exec(c->prim, &c->scratch, n, args, mems);
    for (int i = 0; i < c->n; i++) {
        if (!c->out[i]) continue;
        if (c->reorder[i]) {
            reorder(c, i, 1, buf[i], ptr[i]);
        } else if (c->acc) {
            float *dst = ptr[i];
            const float *src = buf[i];
            const size_t nf = dnnl_memory_desc_get_size(&c->inner[i]) / sizeof(float);
            #pragma omp parallel for schedule(static) if (nf >= ((size_t)1 << 15))
            for (size_t j = 0; j < nf; j++) dst[j] += src[j];
        }
    }
}

int cpu_dnnl_conv2d_fwd(float *out, const float *x, const float *w, const float *bias, ConvShape s) {
    const Conv *c = conv_for(OP_FWD, s, bias != NULL);
    if (!c) return 0;
    void *ptr[3] = {(void *)x, (void *)w, out};
    run_conv(c, ptr, bias);
    return 1;
}

int cpu_dnnl_conv2d_dx(float *dx, const float *dout, const float *w, ConvShape s) {
    const Conv *c = conv_for(OP_BWD_DATA, s, 0);
    if (!c) return 0;
    void *ptr[3] = {(void *)dout, (void *)w, dx};
    run_conv(c, ptr, NULL);
    return 1;
}

int cpu_dnnl_conv2d_dw(float *dw, const float *dout, const float *x, ConvShape s) {
    const Conv *c = conv_for(OP_BWD_W, s, 0);
    if (!c) return 0;
    void *ptr[3] = {(void *)x, (void *)dout, dw};
    run_conv(c, ptr, NULL);
    return 1;
}
#endif

// OpenBLAS against oneDNN in one process: GFLOP/s of the CPU backend's products on
// DiT-S/2's and DiT-T's linear-layer shapes (forward N.T, input gradient N.N, weight gradient
// T.N with beta 1) and of a DiC-S-like 3x3 convolution on each conv route, fp32 and bf16 (oneDNN,
// the backend's --precision bf16: activations converted per call, weights from their bf16
// shadows, as in a training step), the variants interleaved, medians of REPS rounds.
//
//   make build/bench_gemm && OMP_NUM_THREADS=2 ./build/bench_gemm [reps]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend.h"
#include "cpu/blas_core.h"
#include "core/common.h"
#include "core/conv_plan.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_bf16.h"

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static float *filled(size_t n, float scale) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = scale * (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f * scale;
    return p;
}

// ---- products: M tokens, K in, N out; pass 0 forward C = A W^T, 1 dA = dC W, 2 dW += dC^T A ----
typedef struct { int M, K, N; const char *name; } Lin;

static double time_pass(const Lin *l, int pass, const float *A, const float *W, const float *G, float *C, float *dA,
                        float *dW) {
    const double t0 = now_seconds();
    if (pass == 0) cpu_sgemm_wt(0, 1, l->M, l->N, l->K, 1.0f, A, l->K, W, l->K, 0.0f, C, l->N);
    if (pass == 1) cpu_sgemm_wt(0, 0, l->M, l->K, l->N, 1.0f, G, l->N, W, l->K, 0.0f, dA, l->K);
    if (pass == 2) cpu_sgemm(1, 0, l->N, l->K, l->M, 1.0f, G, l->N, A, l->K, 1.0f, dW, l->K);
    return now_seconds() - t0;
}

static void bench_products(int reps) {
    static const Lin shapes[] = {{8192, 384, 1152, "DiT-S/2 qkv"}, {8192, 1536, 384, "DiT-S/2 fc2"},
                                 {8192, 384, 384, "DiT-S/2 proj"}, {1024, 128, 384, "DiT-T qkv"}};
    static const char *pass_name[] = {"fwd A.W^T", "dA  dC.W ", "dW  dC^T.A"};
    printf("products (GFLOP/s, median of %d interleaved rounds)\n", reps);
    printf("%-14s %16s %-11s %10s %10s %10s %7s %7s\n", "layer", "M x K x N", "pass", "openblas", "dnnl", "dnnl bf16",
           "dnnl/ob", "bf16/f32");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const Lin *l = &shapes[s];
        float *A = filled((size_t)l->M * l->K, 1), *W = filled((size_t)l->N * l->K, 0.1f);
        float *G = filled((size_t)l->M * l->N, 1), *C = filled((size_t)l->M * l->N, 1);
        float *dA = filled((size_t)l->M * l->K, 1), *dW = filled((size_t)l->N * l->K, 1);
        const double flop = 2.0 * l->M * l->K * l->N;
        for (int pass = 0; pass < 3; pass++) {
            double t[3][64];
            for (int r = -1; r < reps; r++)  // round -1: warm-up (primitive creation, page faults, W's shadow)
                for (int impl = 0; impl < 3; impl++) {
                    cpu_gemm_select(impl ? GEMM_DNNL : GEMM_OPENBLAS, -1);
                    cpu_gemm_set_precision(impl == 2 ? GEMM_BF16 : GEMM_F32);
                    const double dt = time_pass(l, pass, A, W, G, C, dA, dW);
                    if (r >= 0) t[impl][r] = dt;
                }
            cpu_gemm_set_precision(GEMM_F32);
            const double gb = flop / median(t[0], reps) / 1e9, gd = flop / median(t[1], reps) / 1e9;
            const double gh = flop / median(t[2], reps) / 1e9;
            printf("%-14s %5dx%4dx%4d %-11s %10.1f %10.1f %10.1f %7.2f %7.2f\n", l->name, l->M, l->K, l->N,
                   pass_name[pass], gb, gd, gh, gd / gb, gh / gd);
        }
        cpu_bf16_forget(W, (size_t)l->N * l->K * sizeof(float));
        free(A), free(W), free(G), free(C), free(dA), free(dW);
    }
}

// ---- convolutions: routes 0 im2col+openblas, 1 im2col+dnnl matmul, 2 dnnl conv blocked, 3 nchw,
// 4 dnnl conv blocked in bf16 ----
#define ROUTES 5
static void select_route(int route) {
    cpu_gemm_select(route == 0 ? GEMM_OPENBLAS : GEMM_DNNL, route >= 2 ? CONV_DNNL : CONV_IM2COL);
    cpu_dnnl_conv_blocked(route != 3);
    cpu_gemm_set_precision(route == 4 ? GEMM_BF16 : GEMM_F32);
}

static void bench_convs(int reps) {
    static const ConvShape shapes[] = {{32, 96, 32, 32, 96, 3, 3, 1, 1, 1, 1, 1},
                                       {32, 192, 16, 16, 192, 3, 3, 1, 1, 1, 1, 1},
                                       {32, 384, 8, 8, 384, 3, 3, 1, 1, 1, 1, 1}};
    static const char *route_name[] = {"im2col+openblas", "im2col+dnnl", "dnnl blocked", "dnnl nchw", "dnnl bf16"};
    const Backend *be = backend_cpu();
    printf("\nconvolutions, DiC-S-like 3x3 pad 1, batch 32 (GFLOP/s, median of %d interleaved rounds)\n", reps);
    printf("%-20s %-4s %16s %16s %16s %16s %16s %8s\n", "layer", "pass", route_name[0], route_name[1], route_name[2],
           route_name[3], route_name[4], "bf16/f32");
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const ConvShape s = shapes[k];
        const size_t nx = (size_t)s.B * s.Cin * s.H * s.W, nw = (size_t)s.Cout * s.Cin * 9;
        const size_t no = (size_t)s.B * s.Cout * conv_out_h(s) * conv_out_w(s), nwork = be->conv2d_workspace_floats(s);
        float *x = filled(nx, 1), *w = filled(nw, 0.1f), *out = filled(no, 1), *g = filled(no, 1);
        float *dx = filled(nx, 1), *dw = filled(nw, 1), *work = filled(nwork ? nwork : 1, 1);
        const double flop = 2.0 * no * s.Cin * 9;
        double t[2][ROUTES][64];
        for (int r = -1; r < reps; r++)
            for (int route = 0; route < ROUTES; route++) {
                select_route(route);
                double t0 = now_seconds();
                be->conv2d_fwd(out, x, w, NULL, s, work, nwork);
                const double tf = now_seconds() - t0;
                t0 = now_seconds();
                be->conv2d_bwd(dx, dw, NULL, g, x, w, s, work, nwork);
                const double tb = now_seconds() - t0;
                if (r >= 0) t[0][route][r] = tf, t[1][route][r] = tb;
            }
        char name[64];
        snprintf(name, sizeof name, "%dx%dx%d->%d", s.Cin, s.H, s.W, s.Cout);
        for (int pass = 0; pass < 2; pass++) {
            printf("%-20s %-4s", name, pass ? "bwd" : "fwd");
            const double f = pass ? 2 * flop : flop;  // bwd: dx and dw
            double g[ROUTES];
            for (int route = 0; route < ROUTES; route++)
                printf(" %16.1f", g[route] = f / median(t[pass][route], reps) / 1e9);
            printf(" %8.2f\n", g[4] / g[2]);
        }
        cpu_gemm_set_precision(GEMM_F32);
        cpu_bf16_forget(w, nw * sizeof(float));
        free(x), free(w), free(out), free(g), free(dx), free(dw), free(work);
    }
}

int main(int argc, char **argv) {
    // OpenBLAS's kernels as mala picks them (cli/main.c), and passive OpenMP waits: both read at load
    const char *core = blas_core_for_cpu();
    if (!getenv("MALA_NO_REEXEC") && (!getenv("OMP_WAIT_POLICY") || (!getenv("OPENBLAS_CORETYPE") && core))) {
        if (!getenv("OMP_WAIT_POLICY")) setenv("OMP_WAIT_POLICY", "passive", 1);
        if (!getenv("OPENBLAS_CORETYPE") && core) setenv("OPENBLAS_CORETYPE", core, 1);
        setenv("MALA_NO_REEXEC", "1", 1);
        execv("/proc/self/exe", argv);
    }
    const int reps = argc > 1 ? atoi(argv[1]) : 7;
    if (reps < 1 || reps > 64) FATAL("bench_gemm: reps %d, expected 1..64", reps);
    if (!cpu_gemm_select(GEMM_DNNL, CONV_DNNL)) FATAL("bench_gemm: this build has no usable oneDNN");
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("threads %d, OPENBLAS_CORETYPE %s\n", num_threads(), ct ? ct : "unset");
    bench_products(reps);
    bench_convs(reps);
    return 0;
}

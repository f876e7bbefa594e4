// `mala bench gemm`: the CPU backend's linear-layer forward (out = x W^T) in fp32, bf16 and int8,
// measured in this process on DiT-S/2's block shapes, the three precisions interleaved round by
// round, medians of --repeats rounds. Each is the whole call as sampling makes it: bf16 converts x
// per call and reads W's bf16 copy; int8 quantises x per token, reads W's int8 copy and
// dequantises the int32 sums (cpu/cpu_int8.h). One JSON line per shape.
// defines: cmd_bench_gemm
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/bench_stats.h"
#include "core/common.h"
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_int8.h"
#include "cpu/cpu_threads.h"
#include "formats/json.h"

static float *filled(size_t n, float scale, uint64_t seed) {
    float *p = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = scale * ((float)((i * 2654435761u + seed) % 1000) / 1000.0f - 0.5f);
    return p;
}

static double time_one(int prec, int M, int K, int N, const float *x, const float *w, float *out) {
    const double t0 = now_seconds();
    if (prec == 2) cpu_int8_linear_fwd(out, x, w, NULL, M, K, N);
    else cpu_sgemm_wt(0, 1, M, N, K, 1.0f, x, K, w, K, 0.0f, out, N);
    return now_seconds() - t0;
}

int cmd_bench_gemm(int argc, char **argv) {
    int repeats = 5, threads = 0, tokens = 8192;
    Opt opts[] = {
        {"--repeats", OPT_INT, &repeats, "R", "timed rounds (after one warm-up round)", ARG_MIN(1), ARG_MAX(101)},
        {"--tokens", OPT_INT, &tokens, "M", "rows of x (tokens in a batch)", ARG_MIN(1), ARG_MAX(1 << 20)},
        OPT_THREADS(&threads),
    };
    args_parse("usage: mala bench gemm [flags]\n\nGFLOP/s of the CPU's linear forward (x W^T) in fp32, bf16 and "
               "int8 on DiT-S/2's\nblock shapes (qkv, proj, fc1, fc2), interleaved; one JSON line per shape.",
               opts, 3, argc, argv, 1);
    set_threads(threads);
    if (!cpu_gemm_select(GEMM_DNNL, -1) || !cpu_int8_available())
        FATAL("mala bench gemm: the products run on OpenBLAS here (no usable oneDNN): bf16 and int8 need oneDNN");
    static const struct { int K, N; const char *name; } shapes[] = {
        {384, 1152, "qkv"}, {384, 384, "proj"}, {384, 1536, "fc1"}, {1536, 384, "fc2"}};
    static const char *prec_name[3] = {"fp32", "bf16", "int8"};
    double *t = xcalloc((size_t)3 * repeats, sizeof(double));
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int M = tokens, K = shapes[s].K, N = shapes[s].N;
        float *x = filled((size_t)M * K, 2.0f, 1), *w = filled((size_t)N * K, 0.1f, 2);
        float *out = xmalloc((size_t)M * N * sizeof(float));
        for (int r = -1; r < repeats; r++)  // round -1: primitives made, weight copies made, pages touched
            for (int p = 0; p < 3; p++) {
                cpu_gemm_set_precision(p == 1 ? GEMM_BF16 : GEMM_F32);
                const double dt = time_one(p, M, K, N, x, w, out);
                if (r >= 0) t[p * repeats + r] = dt;
            }
        cpu_gemm_set_precision(GEMM_F32);
        const double flop = 2.0 * M * K * N;
        double g[3];
        for (int p = 0; p < 3; p++) g[p] = flop / spread_of(t + p * repeats, repeats).median / 1e9;
        MalaErr err;
        if (json_printf_line(stdout, &err, "{\"bench\":\"gemm\",\"layer\":\"DiT-S/2 %s\",\"m\":%d,\"k\":%d,\"n\":%d,"
                             "\"threads\":%d,\"repeats\":%d,\"%s_gflops\":%.1f,\"%s_gflops\":%.1f,\"%s_gflops\":%.1f,"
                             "\"bf16_over_fp32\":%.2f,\"int8_over_fp32\":%.2f}",
                             shapes[s].name, M, K, N, num_threads(), repeats, prec_name[0], g[0], prec_name[1], g[1],
                             prec_name[2], g[2], g[1] / g[0], g[2] / g[0]))
            FATAL("%s", err.msg);
        cpu_bf16_forget(w, (size_t)N * K * sizeof(float));
        free(x), free(w), free(out);
    }
    free(t);
    return 0;
}

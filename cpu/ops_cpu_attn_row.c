// CPU explicit attention row (backend.h attn_row): one query's scores over the L tokens of one
// image, per head or averaged over heads, with the query scaled by a. docs/design.md §1 gives the scores:
//   MALA    A_j = beta (s/L) (a qr).kr_j - gamma,  z = s (a q').kbar,  beta = 1 + 1/(z+eps),  gamma = z/L
//   linear  A_j = (a qr).kr_j / ((a q').ksum + eps)
//   softmax A_j = exp(s (a q).k_j - m) / sum_l exp(s (a q).k_l - m),  m the row maximum
// O(L d) per head (one pass for kbar / ksum, one for the dot products); no L x L matrix.
// defines: cpu_attn_row
#include "cpu/ops_cpu.h"

#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/ops_math.h"

static float dot_n(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// acc[j] += A_j of head h.
static void head_row(float *acc, const float *qkv, const float *qkr, AttnShape s, int kind, int b, int h,
                     int query, float a) {
    const int L = s.L, H = s.H, d = H / s.heads;
    const size_t ld = (size_t)3 * H, ldr = qkr ? (size_t)2 * H : ld;
    const float *q = qkv + ((size_t)b * L) * ld + (size_t)h * d, *k = q + H;
    const float *qr = qkr ? qkr + ((size_t)b * L) * ldr + (size_t)h * d : q, *kr = qkr ? qr + H : k;
    const float sc = 1.0f / sqrtf((float)d);
    const float *qi = q + (size_t)query * ld, *qri = qr + (size_t)query * ldr;
    if (kind == ATTN_ROW_SOFTMAX) {
        float m = -INFINITY, sum = 0.0f;
        for (int j = 0; j < L; j++) m = fmaxf(m, sc * a * dot_n(qri, kr + (size_t)j * ldr, d));
        for (int j = 0; j < L; j++) sum += expf(sc * a * dot_n(qri, kr + (size_t)j * ldr, d) - m);
        for (int j = 0; j < L; j++) acc[j] += expf(sc * a * dot_n(qri, kr + (size_t)j * ldr, d) - m) / sum;
        return;
    }
    // kvec = sum_l k'_l (MALA: its mean), stat = (a q') . kvec (MALA: times s)
    float stat = 0.0f;
    for (int c = 0; c < d; c++) {
        float kc = 0.0f;
        for (int l = 0; l < L; l++) kc += k[(size_t)l * ld + c];
        stat += a * qi[c] * (kind == ATTN_ROW_MALA ? kc / (float)L : kc);
    }
    if (kind == ATTN_ROW_MALA) {
        const float z = sc * stat, beta = 1.0f + 1.0f / (z + MALA_ATTN_EPS), gamma = z / (float)L;
        for (int j = 0; j < L; j++) acc[j] += beta * (sc / (float)L) * a * dot_n(qri, kr + (size_t)j * ldr, d) - gamma;
    } else {
        const float den = stat + MALA_ATTN_EPS;
        for (int j = 0; j < L; j++) acc[j] += a * dot_n(qri, kr + (size_t)j * ldr, d) / den;
    }
}

void cpu_attn_row(float *row, const float *qkv, const float *qkr, AttnShape s, int kind, int b, int head, int query,
                  float a) {
    CHECK(s.heads > 0 && s.H % s.heads == 0, "attn_row: H=%d not divisible by heads=%d", s.H, s.heads);
    CHECK(kind == ATTN_ROW_MALA || kind == ATTN_ROW_SOFTMAX || kind == ATTN_ROW_LINEAR, "attn_row: unknown kind %d",
          kind);
    CHECK(b >= 0 && b < s.B && query >= 0 && query < s.L && head < s.heads,
          "attn_row: image %d, query %d or head %d out of range (B=%d, L=%d, heads=%d)", b, query, head, s.B, s.L,
          s.heads);
    memset(row, 0, sizeof(float) * (size_t)s.L);
    const int h0 = head < 0 ? 0 : head, h1 = head < 0 ? s.heads : head + 1;
    for (int h = h0; h < h1; h++) head_row(row, qkv, qkr, s, kind, b, h, query, a);
    if (head < 0)
        for (int j = 0; j < s.L; j++) row[j] /= (float)s.heads;
}

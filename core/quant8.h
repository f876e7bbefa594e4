// Symmetric int8 quantisation of one row (a weight's output channel, an activation's token):
// scale = max |x| / 127, q = x / scale rounded to nearest (ties to even) in [-127, 127]; an
// all-zero row has scale 0 and quantises to 0. A NaN is left out of the max and quantises to 0;
// an infinity makes the scale infinite and the row's finite values 0 (so the row dequantises to
// NaN, as its fp32 product would be). One definition for the CPU's int8 products
// (cpu/cpu_int8.c) and the q8 model files (model/checkpoint.c), so that a q8 file's values,
// dequantised (q * scale) and quantised again, give back the same int8 values.
// defines: quant8_amax, quant8_scale_row, quant8_row
#ifndef MALA_QUANT8_H
#define MALA_QUANT8_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

// The largest |x| over a row, NaNs left out. With the sign bit cleared, a float's bits order as
// its magnitude (infinity 0x7f800000 included) and a NaN's bits lie above infinity's, so the
// maximum is an unsigned integer maximum: eight lanes at a time where AVX2 is there (a float max
// that leaves NaNs out is not vectorised by compilers, and a serial one costs several times the
// rest of the quantisation).
static inline float quant8_amax(const float *restrict x, int n) {
    uint32_t m = 0;
    int i = 0;
#ifdef __AVX2__
    const __m256i mag = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    __m256i vm0 = _mm256_setzero_si256(), vm1 = vm0;
    for (; i + 16 <= n; i += 16) {
        __m256i b0 = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(x + i)), mag);
        __m256i b1 = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(x + i + 8)), mag);
        b0 = _mm256_andnot_si256(_mm256_cmpgt_epi32(b0, inf), b0);  // (signed compare: both below 2^31)
        b1 = _mm256_andnot_si256(_mm256_cmpgt_epi32(b1, inf), b1);
        vm0 = _mm256_max_epu32(vm0, b0);
        vm1 = _mm256_max_epu32(vm1, b1);
    }
    uint32_t lanes[8];
    _mm256_storeu_si256((__m256i *)(void *)lanes, _mm256_max_epu32(vm0, vm1));
    for (int k = 0; k < 8; k++) m = lanes[k] > m ? lanes[k] : m;
#endif
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, sizeof b);
        b &= 0x7fffffffu;
        b = b > 0x7f800000u ? 0u : b;
        m = b > m ? b : m;
    }
    float amax;
    memcpy(&amax, &m, sizeof amax);
    return amax;
}

// q[i] = x[i] * inv rounded to nearest, ties to even, clamped to [-127, 127], a NaN product to 0.
static inline void quant8_scale_row(int8_t *restrict q, const float *restrict x, float inv, int n) {
    int i = 0;
#ifdef __AVX2__
    // 32 values a round: the products rounded by the current rounding mode (to nearest, ties to
    // even, as nearbyintf below), saturated to 16 and then 8 bits (exact: already in range), and
    // the packs' lane interleaving undone by one permutation.
    const __m256 vinv = _mm256_set1_ps(inv), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; i + 32 <= n; i += 32) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            __m256 p = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), vinv);
            p = _mm256_and_ps(p, _mm256_cmp_ps(p, p, _CMP_ORD_Q));  // NaN -> 0
            p = _mm256_max_ps(_mm256_min_ps(p, hi), lo);
            v[k] = _mm256_cvtps_epi32(p);
        }
        const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
        _mm256_storeu_si256((__m256i *)(void *)(q + i), _mm256_permutevar8x32_epi32(w, order));
    }
#endif
    for (; i < n; i++) {
        float v = nearbyintf(x[i] * inv);
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        q[i] = (int8_t)(int)(v == v ? v : 0.0f);  // (NaN to int is undefined)
    }
}

// Returns the scale.
static inline float quant8_row(int8_t *restrict q, const float *restrict x, int n) {
    const float amax = quant8_amax(x, n);
    if (!(amax > 0.0f)) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    quant8_scale_row(q, x, 127.0f / amax, n);
    return amax / 127.0f;
}

#endif

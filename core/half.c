// defines: half_to_f32, half_to_f32_n, f32_to_half, bf16_to_f32, f32_to_bf16
#include "core/half.h"

#include <string.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

static uint32_t f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
static float bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }

float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000 | (mant << 13));
    if (exp) return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
    return bits_f32(sign | f32_bits((float)mant * 0x1p-24f));  // zero or subnormal: exact
}

void half_to_f32_n(const void *src, float *dst, size_t n) {
    const uint8_t *s = src;
    size_t i = 0;
#ifdef __F16C__
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
#endif
    for (; i < n; i++) dst[i] = half_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
}

uint16_t f32_to_half(float f) {
    uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000, a = x & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));  // NaN, made quiet
    if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);  // >= 65520 rounds to inf
    if (a >= 0x38800000) {                                  // normal half
        uint32_t r = a - 0x38000000;                        // rebias 127 -> 15
        r += 0xfff + ((r >> 13) & 1);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a <= 0x33000000) return (uint16_t)sign;  // <= 2^-25 rounds to zero (the tie is even)
    // Subnormal half: value / 2^-24, rounded to nearest even.
    uint32_t mant = (a & 0x7fffff) | 0x800000, shift = 126 - (a >> 23);
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x0040);  // NaN, made quiet
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

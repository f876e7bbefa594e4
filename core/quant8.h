// Symmetric int8 quantisation of one row (a weight's output channel, an activation's token):
// scale = max |x| / 127, q = x / scale rounded to nearest (ties to even) in [-127, 127]; an
// all-zero row has scale 0 and quantises to 0. A NaN is left out of the max and quantises to 0;
// an infinity makes the scale infinite and the row's finite values 0 (so the row dequantises to
// NaN, as its fp32 product would be). One definition for the CPU's int8 products
// (cpu/cpu_int8.c) and the q8 model files (model/checkpoint.c), so that a q8 file's values,
// dequantised (q * scale) and quantised again, give back the same int8 values.
// defines: quant8_row
#ifndef MALA_QUANT8_H
#define MALA_QUANT8_H

#include <math.h>
#include <stdint.h>
#include <string.h>

// Returns the scale. Written so that the compiler vectorises both loops.
static inline float quant8_row(int8_t *restrict q, const float *restrict x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    if (!(amax > 0.0f)) {
        memset(q, 0, (size_t)n);
        return 0.0f;
    }
    const float inv = 127.0f / amax;
    for (int i = 0; i < n; i++) {
        float v = nearbyintf(x[i] * inv);
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        q[i] = (int8_t)(int)(v == v ? v : 0.0f);  // (NaN to int is undefined)
    }
    return amax / 127.0f;
}

#endif

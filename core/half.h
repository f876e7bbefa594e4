// IEEE half (binary16) and bfloat16 <-> float32, the one set of conversions every file format
// here uses (safetensors F16/BF16, .npy '<f2', legacy torch HalfStorage / BFloat16Storage).
// Widening is exact (subnormal halves included). Narrowing rounds to nearest even, overflows to
// infinity and keeps infinities and NaNs (NaNs come back quiet, with the sign kept).
#ifndef MALA_HALF_H
#define MALA_HALF_H

#include <stdint.h>

float half_to_f32(uint16_t h);
uint16_t f32_to_half(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

#endif

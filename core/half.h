// IEEE half (binary16) and bfloat16 <-> float32, the one set of conversions every file format
// here uses (safetensors F16/BF16, .npy '<f2', legacy torch HalfStorage / BFloat16Storage).
// Widening is exact (subnormal halves included). Narrowing rounds to nearest even, overflows to
// infinity and keeps infinities and NaNs (NaNs come back quiet, with the sign kept).
#ifndef MALA_HALF_H
#define MALA_HALF_H

#include <stddef.h>
#include <stdint.h>

float half_to_f32(uint16_t h);
uint16_t f32_to_half(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
// n halves (little-endian, any alignment) -> floats, as half_to_f32 each (F16C's vcvtph2ps where
// the build has it: the same values, a signalling NaN made quiet): a DiT-XL/2 file in ~0.5 s.
void half_to_f32_n(const void *src, float *dst, size_t n);

#endif

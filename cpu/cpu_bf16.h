// bf16 for the CPU backend's products: rounding fp32 to bf16, the per-thread
// conversion buffers of the activations, and the bf16 shadows of the weights.
//
// A shadow is a converted copy of a parameter (a linear layer's W, a convolution's weights in
// oneDNN's layout), kept per (source pointer, layout) and made again only when the weights
// generation has moved since it was made. The generation moves when parameters may have changed:
// the optimiser's ops (adamw, ema) and the Backend's weights_changed (loading, initialisation);
// release drops the shadows of the freed block (the pointer may come back with other contents).
// So a training step converts each weight once, after its optimiser step, and sampling converts
// it once after the load.
// defines: cpu_bf16_round, cpu_bf16_advice, cpu_bf16_from_f32, cpu_bf16_pack, cpu_bf16_scratch, cpu_bf16_native,
//          cpu_bf16_weights_changed, cpu_bf16_generation, cpu_bf16_shadow, cpu_bf16_shadow_fills,
//          cpu_bf16_forget
#ifndef MALA_CPU_BF16_H
#define MALA_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>

// fp32 -> bf16 rounding to nearest, ties to even (NaN stays a quiet NaN).
static inline uint16_t cpu_bf16_round(float f) {
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u);
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}

void cpu_bf16_from_f32(uint16_t *dst, const float *src, size_t n);
// The rows x cols matrix at src (row stride ld) into dst, dense (row stride cols). OpenMP-parallel
// outside a parallel region when large.
void cpu_bf16_pack(uint16_t *dst, const float *src, int rows, int cols, int ld);
// The calling OS thread's grow-only buffer number slot (0..3) of at least bytes, 64-byte aligned.
void *cpu_bf16_scratch(int slot, size_t bytes);
// Whether this CPU has native bf16 dot products (avx512_bf16).
int cpu_bf16_native(void);
// The advice --precision bf16 gets from the measured product rates (GFLOP/s): when bf16 is slower
// than fp32, writes one line into buf (the ratio and "use --precision fp32") and returns 1; else 0.
int cpu_bf16_advice(double fp32_gflops, double bf16_gflops, char *buf, size_t cap);

// Parameters may have changed: every shadow is made again at its next use.
void cpu_bf16_weights_changed(void);
uint64_t cpu_bf16_generation(void);
// The shadow of src under layout (any value naming how it is converted; with src, the key), bytes
// long: fill(dst, src, ctx) writes it when it is new or the generation moved. Thread-safe.
const void *cpu_bf16_shadow(const void *src, uint64_t layout, size_t bytes,
                            void (*fill)(void *dst, const void *src, void *ctx), void *ctx);
// How many shadows have been filled so far (tests: once per weight per optimiser step).
uint64_t cpu_bf16_shadow_fills(void);
// Drops the shadows of sources in [p, p + bytes) (the CPU backend's release: the memory may come back
// holding other parameters).
void cpu_bf16_forget(const void *p, size_t bytes);

#endif

// CUDA C++ on the host, for running the kernels of cuda/*.cu without a GPU (the parity suite's
// emulated build, tests/cuda_emu/emu.mk). Included first in every emulated .cu file through the
// fake cuda_runtime.h. launch_rewrite turns `k<<<grid, block>>>(args)` into emu_launch(...); the
// scheduler (emu_launch.cpp) runs the blocks one after another and the threads of a block as
// fibers that switch at __syncthreads, __syncwarp and warp shuffles.
//
// What it checks, aborting with the launch site: launch limits, __syncthreads reached by only part
// of a block or at different call sites, shuffles with a partial mask, in a partial warp, with
// exited lanes or from different call sites, deadlocks. Shared memory is refilled with 0xff bytes
// (NaN) before every block, device memory after cudaMalloc, so reads of unwritten memory show.
//
// What it does not model: concurrency (blocks run in order, threads of a block run one at a time
// from barrier to barrier, so a missing barrier shows only when a thread reads a value another
// thread writes later in that order), the memory model (no caches, no reordering; atomics are
// plain read-modify-writes), warp lockstep (code that relies on implicit warp synchrony is not
// caught), dynamic shared memory, streams, separate address spaces (device pointers are host
// pointers: host code dereferencing one works here and crashes on a GPU), device math (host libm,
// and a*b+c fuses into an FMA only as the host compiler's flags say, where nvcc fuses by default),
// time-outs (an infinite loop hangs). __CUDACC__ and __CUDA_ARCH__ are not defined.
#ifndef CUDA_EMU_H
#define CUDA_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>

// ---- qualifiers ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One copy per program, refilled before each block; the section lets the scheduler find them all.
#define __shared__ static __attribute__((section("emu_shared")))

// ---- vector types and built-in variables ----
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef dim3 uint3;
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
static inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// ---- bit casts ----
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
}

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
enum { warpSize = 32 };

// ---- synchronisation and warp shuffles (file and line identify the call site) ----
void emu_syncthreads(const char *file, int line);
// Waits until every lane of the warp is at the same shuffle site, then returns lane src's bits
// (its own when src is outside the warp).
uint64_t emu_shfl_bits(const char *file, int line, unsigned mask, uint64_t bits, int src);
int emu_lane(void);

template <class T> T emu_shfl(const char *file, int line, unsigned mask, T v, int src) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = emu_shfl_bits(file, line, mask, b, src);
    memcpy(&v, &b, sizeof v);
    return v;
}

// __syncwarp(mask = all lanes): a shuffle that exchanges nothing.
struct emu_syncwarp {
    const char *file;
    int line;
    void operator()(unsigned mask = 0xffffffffu) const { (void)emu_shfl_bits(file, line, mask, 0, emu_lane()); }
};

#define __syncthreads() emu_syncthreads(__FILE__, __LINE__)
#define __syncwarp emu_syncwarp{__FILE__, __LINE__}
#define __shfl_sync(mask, v, src) emu_shfl(__FILE__, __LINE__, (mask), (v), (src) & 31)
#define __shfl_xor_sync(mask, v, lm) emu_shfl(__FILE__, __LINE__, (mask), (v), emu_lane() ^ (lm))
#define __shfl_down_sync(mask, v, d) emu_shfl(__FILE__, __LINE__, (mask), (v), emu_lane() + (d))
#define __shfl_up_sync(mask, v, d) emu_shfl(__FILE__, __LINE__, (mask), (v), emu_lane() - (d))

// One thread runs at a time, so a plain read-modify-write is atomic.
template <class T> struct emu_same { typedef T type; };
template <class T> T atomicAdd(T *p, typename emu_same<T>::type v) {
    T old = *p;
    *p = old + v;
    return old;
}
template <class T> T __ldg(const T *p) { return *p; }

// ---- launches: k<<<grid, block>>>(args) becomes
//      emu_launch("k", __FILE__, __LINE__, dim3(grid), dim3(block), emu_bind(k, args)) ----
void emu_launch(const char *kernel, const char *file, int line, dim3 grid, dim3 block,
                const std::function<void()> &body);
// The arguments are converted to the kernel's parameter types once, on the host, as in CUDA.
template <class... P> std::function<void()> emu_bind(void (*k)(P...), typename emu_same<P>::type... a) {
    return [=] { k(a...); };
}

// ---- shared by the emulator's own files ----
// Prints "cuda_emu: <message>" (with the kernel, block and thread when inside a launch), aborts.
[[noreturn]] void emu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Whether [p, p + bytes) lies inside one live cudaMalloc allocation.
bool emu_is_device(const void *p, size_t bytes);

#endif

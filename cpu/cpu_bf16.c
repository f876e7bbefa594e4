// bf16 conversion, per-thread conversion buffers and weight shadows (cpu_bf16.h).
// defines: cpu_bf16_from_f32, cpu_bf16_pack, cpu_bf16_scratch, cpu_bf16_native, cpu_bf16_weights_changed,
//          cpu_bf16_generation, cpu_bf16_shadow, cpu_bf16_shadow_fills, cpu_bf16_forget
#include "cpu/cpu_bf16.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/common.h"

static int in_parallel(void) {
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return 0;
#endif
}

void cpu_bf16_from_f32(uint16_t *dst, const float *src, size_t n) {
    #pragma omp parallel for schedule(static) if (n >= ((size_t)1 << 16) && !in_parallel())
    for (size_t i = 0; i < n; i++) dst[i] = cpu_bf16_round(src[i]);
}

void cpu_bf16_pack(uint16_t *dst, const float *src, int rows, int cols, int ld) {
    if (ld == cols) {
        cpu_bf16_from_f32(dst, src, (size_t)rows * cols);
        return;
    }
    #pragma omp parallel for schedule(static) if ((size_t)rows * cols >= ((size_t)1 << 16) && !in_parallel())
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) dst[(size_t)r * cols + c] = cpu_bf16_round(src[(size_t)r * ld + c]);
}

// ---- per-thread buffers (per OS thread: the viewer's workers are both OpenMP thread 0) ----

#define SCRATCH_SLOTS 4
typedef struct {
    void *buf[SCRATCH_SLOTS];
    size_t cap[SCRATCH_SLOTS];
} Scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    Scratch *s = p;
    for (int i = 0; i < SCRATCH_SLOTS; i++) free(s->buf[i]);
    free(s);
}

static void scratch_key_make(void) {
    CHECK(!pthread_key_create(&scratch_key, scratch_free), "bf16: pthread_key_create");
}

void *cpu_bf16_scratch(int slot, size_t bytes) {
    CHECK(slot >= 0 && slot < SCRATCH_SLOTS, "bf16: scratch slot %d", slot);
    pthread_once(&scratch_once, scratch_key_make);
    Scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = xcalloc(1, sizeof *s);
        CHECK(!pthread_setspecific(scratch_key, s), "bf16: pthread_setspecific");
    }
    if (bytes > s->cap[slot]) {
        free(s->buf[slot]);
        s->buf[slot] = NULL;
        if (posix_memalign(&s->buf[slot], 64, bytes)) FATAL("out of memory allocating %zu bytes", bytes);
        s->cap[slot] = bytes;
    }
    return s->buf[slot];
}

int cpu_bf16_native(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && __GNUC__ >= 11
    return __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

// ---- weight shadows ----

#define SHADOW_SLOTS 4096  // open addressing; a model has hundreds of parameters

typedef struct {
    const void *src;
    uint64_t layout;
    size_t bytes;
    uint64_t gen;  // the generation it was filled at
    void *buf;
    int used;      // 1 live, 2 deleted (a tombstone: probing goes on past it)
} Shadow;

static pthread_mutex_t shadow_lock = PTHREAD_MUTEX_INITIALIZER;
static Shadow *shadows;
static int shadow_used;  // live entries and tombstones
static uint64_t generation = 1, fills;

void cpu_bf16_weights_changed(void) { __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST); }
uint64_t cpu_bf16_generation(void) { return __atomic_load_n(&generation, __ATOMIC_SEQ_CST); }
uint64_t cpu_bf16_shadow_fills(void) { return __atomic_load_n(&fills, __ATOMIC_SEQ_CST); }

static size_t shadow_hash(const void *src, uint64_t layout) {
    uint64_t h = (uint64_t)(uintptr_t)src * 0x9e3779b97f4a7c15ull ^ layout * 0xc2b2ae3d27d4eb4full;
    return (size_t)(h ^ (h >> 29)) & (SHADOW_SLOTS - 1);
}

// The live entry for (src, layout), or a free slot for it.
static Shadow *shadow_slot(const void *src, uint64_t layout) {
    if (!shadows) shadows = xcalloc(SHADOW_SLOTS, sizeof *shadows);
    Shadow *free_slot = NULL;
    for (size_t i = shadow_hash(src, layout), n = 0; n < SHADOW_SLOTS; i = (i + 1) & (SHADOW_SLOTS - 1), n++) {
        Shadow *s = &shadows[i];
        if (!s->used) return free_slot ? free_slot : s;
        if (s->used == 2) { if (!free_slot) free_slot = s; continue; }
        if (s->src == src && s->layout == layout) return s;
    }
    CHECK(free_slot, "bf16: more than %d weight shadows", SHADOW_SLOTS);
    return free_slot;
}

const void *cpu_bf16_shadow(const void *src, uint64_t layout, size_t bytes,
                            void (*fill)(void *dst, const void *src, void *ctx), void *ctx) {
    const uint64_t gen = cpu_bf16_generation();
    pthread_mutex_lock(&shadow_lock);
    Shadow *s = shadow_slot(src, layout);
    if (s->used != 1) {
        CHECK(shadow_used < SHADOW_SLOTS * 3 / 4 || s->used == 2, "bf16: more than %d weight shadows",
              SHADOW_SLOTS * 3 / 4);
        if (!s->used) shadow_used++;
        *s = (Shadow){src, layout, 0, 0, NULL, 1};
    }
    if (s->bytes != bytes) {
        free(s->buf);
        s->buf = NULL;
        if (posix_memalign(&s->buf, 64, bytes)) FATAL("out of memory allocating %zu bytes", bytes);
        s->bytes = bytes;
        s->gen = 0;
    }
    if (s->gen != gen) {
        fill(s->buf, src, ctx);
        s->gen = gen;
        __atomic_add_fetch(&fills, 1, __ATOMIC_SEQ_CST);
    }
    void *buf = s->buf;
    pthread_mutex_unlock(&shadow_lock);
    return buf;
}

void cpu_bf16_forget(const void *p, size_t bytes) {
    pthread_mutex_lock(&shadow_lock);
    const char *lo = p, *hi = lo + bytes;
    for (int i = 0; shadows && i < SHADOW_SLOTS; i++) {
        Shadow *s = &shadows[i];
        if (s->used != 1 || (const char *)s->src < lo || (const char *)s->src >= hi) continue;
        free(s->buf);
        *s = (Shadow){0};
        s->used = 2;
    }
    pthread_mutex_unlock(&shadow_lock);
}

int cpu_bf16_advice(double fp32_gflops, double bf16_gflops, char *buf, size_t cap) {
    if (!(fp32_gflops > 0) || !(bf16_gflops > 0) || bf16_gflops >= fp32_gflops) return 0;
    snprintf(buf, cap, "mala: --precision bf16: this CPU's bf16 products run at %.2fx the fp32 rate (%.0f against "
             "%.0f GFLOP/s, measured at start-up); use --precision fp32, which is faster here",
             bf16_gflops / fp32_gflops, bf16_gflops, fp32_gflops);
    return 1;
}

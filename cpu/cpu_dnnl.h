// oneDNN plumbing shared by the CPU backend's products (cpu_gemm.c) and convolutions
// (ops_cpu_conv_dnnl.c): the engine, one stream per OpenMP thread, and the primitive cache.
// Only built with MALA_DNNL.
// defines: DnnlKey, DNNL_KEY_INTS, cpu_dnnl_engine, cpu_dnnl_stream, cpu_dnnl_cache_get, cpu_dnnl_ok,
//          cpu_dnnl_mem, cpu_dnnl_exec, cpu_dnnl_threads, cpu_dnnl_attr, cpu_dnnl_scratch_md
#ifndef MALA_CPU_DNNL_H
#define MALA_CPU_DNNL_H

#ifdef MALA_DNNL
#include <dnnl.h>
#include <stdint.h>

// A cache key: the op's configuration as ints (unused tail zero). v[0] names the op, v[1] the
// precision (GemmPrec); the rest is the op's (shapes, transposes, scale bits, threads, ...).
#define DNNL_KEY_INTS 24
typedef struct {
    int32_t v[DNNL_KEY_INTS];
} DnnlKey;

// The engine, or NULL where oneDNN does not start (said once on stderr).
dnnl_engine_t cpu_dnnl_engine(void);
// The calling OpenMP thread's stream.
dnnl_stream_t cpu_dnnl_stream(void);
// The cached value for key k, made by make(k, ctx) the first time (under the cache's lock; make may
// return NULL, "no primitive", which is cached too). Thread-safe. Inside an OpenMP region make runs
// with one thread, so that a primitive made there is planned for the one thread it runs on (and
// a product computed there has the bits of the same product on one thread).
void *cpu_dnnl_cache_get(const DnnlKey *k, void *(*make)(const DnnlKey *k, void *ctx), void *ctx);
// The threads a primitive made now will run on: 1 inside an OpenMP region (oneDNN then runs on the
// calling thread), else omp_get_max_threads(). Part of every key.
int cpu_dnnl_threads(void);
// Whether a oneDNN call succeeded; FATAL with what was being done otherwise.
void cpu_dnnl_ok(dnnl_status_t st, const char *what);
// A memory object over the caller's buffer.
dnnl_memory_t cpu_dnnl_mem(const dnnl_memory_desc_t *md, const void *p);
// Runs prim on the calling thread's stream with n (arg, memory) pairs, then frees the memories;
// scratch (NULL: none) is the primitive's scratchpad descriptor, backed by a buffer of the
// calling thread (oneDNN's own scratchpad is shared between threads, see cpu_dnnl_attr).
void cpu_dnnl_exec(dnnl_primitive_t prim, const dnnl_memory_desc_t *scratch, int n, const int *args,
                   dnnl_memory_t *mems);
// New primitive attributes with a user-managed scratchpad (what cpu_dnnl_exec provides).
dnnl_primitive_attr_t cpu_dnnl_attr(void);
// The scratchpad descriptor of pd (kept by the caller next to its primitive).
dnnl_memory_desc_t cpu_dnnl_scratch_md(const_dnnl_primitive_desc_t pd);
#endif

#endif

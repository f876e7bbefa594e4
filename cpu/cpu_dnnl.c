// oneDNN engine, per-thread streams and the primitive cache (cpu_dnnl.h).
// defines: cpu_dnnl_engine, cpu_dnnl_stream, cpu_dnnl_cache_get, cpu_dnnl_ok, cpu_dnnl_mem, cpu_dnnl_exec,
//          cpu_dnnl_threads, cpu_dnnl_attr, cpu_dnnl_scratch_md
#include "cpu/cpu_dnnl.h"

#ifdef MALA_DNNL
#include <pthread.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/common.h"

#define CACHE_SLOTS 8192  // open addressing, at most 3/4 full

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;  // the cache
static pthread_mutex_t setup = PTHREAD_MUTEX_INITIALIZER;  // the engine and streams (taken under lock too)
static dnnl_engine_t engine;
static int engine_tried;

typedef struct {
    DnnlKey key;
    int used;
    void *val;
} Slot;
static Slot *slots;
static int n_used;

void cpu_dnnl_ok(dnnl_status_t st, const char *what) {
    if (st != dnnl_success) FATAL("oneDNN: %s failed (status %d)", what, (int)st);
}

dnnl_engine_t cpu_dnnl_engine(void) {
    pthread_mutex_lock(&setup);
    if (!engine_tried) {
        engine_tried = 1;
        if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
            engine = NULL;
            fprintf(stderr, "mala: oneDNN's CPU engine did not start; OpenBLAS computes the products\n");
        }
    }
    pthread_mutex_unlock(&setup);
    return engine;
}

// Per OS thread (OpenMP workers and callers' own pthreads alike, such as the viewer's two
// workers: omp_get_thread_num is 0 in both, so it cannot name a thread): a stream and a grow-only
// scratchpad, released by the key's destructor when the thread ends.
typedef struct {
    dnnl_stream_t stream;
    void *scratch;
    size_t cap;
} ThreadState;

static pthread_key_t state_key;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;

static void state_free(void *p) {
    ThreadState *ts = p;
    if (ts->stream) dnnl_stream_destroy(ts->stream);
    free(ts->scratch);
    free(ts);
}

static void state_key_make(void) { CHECK(!pthread_key_create(&state_key, state_free), "oneDNN: pthread_key_create"); }

static ThreadState *thread_state(void) {
    pthread_once(&state_once, state_key_make);
    ThreadState *ts = pthread_getspecific(state_key);
    if (!ts) {
        ts = xcalloc(1, sizeof *ts);
        CHECK(!pthread_setspecific(state_key, ts), "oneDNN: pthread_setspecific");
    }
    return ts;
}

dnnl_stream_t cpu_dnnl_stream(void) {
    ThreadState *ts = thread_state();
    if (!ts->stream) cpu_dnnl_ok(dnnl_stream_create(&ts->stream, cpu_dnnl_engine(), dnnl_stream_default_flags),
                                 "stream_create");
    return ts->stream;
}

int cpu_dnnl_threads(void) {
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

// (omp_set_num_threads sets the calling thread's own count: other threads are not affected)
static void *make_planned(const DnnlKey *k, void *(*make)(const DnnlKey *k, void *ctx), void *ctx) {
#ifdef _OPENMP
    if (omp_in_parallel()) {
        const int save = omp_get_max_threads();
        omp_set_num_threads(1);
        void *v = make(k, ctx);
        omp_set_num_threads(save);
        return v;
    }
#endif
    return make(k, ctx);
}

static uint64_t key_hash(const DnnlKey *k) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the ints
    for (int i = 0; i < DNNL_KEY_INTS; i++) {
        h ^= (uint32_t)k->v[i];
        h *= 1099511628211ull;
    }
    return h;
}

void *cpu_dnnl_cache_get(const DnnlKey *k, void *(*make)(const DnnlKey *k, void *ctx), void *ctx) {
    pthread_mutex_lock(&lock);
    if (!slots) slots = xcalloc(CACHE_SLOTS, sizeof(Slot));
    size_t i = key_hash(k) & (CACHE_SLOTS - 1);
    for (;; i = (i + 1) & (CACHE_SLOTS - 1)) {
        if (!slots[i].used) break;
        if (!memcmp(&slots[i].key, k, sizeof *k)) {
            void *v = slots[i].val;
            pthread_mutex_unlock(&lock);
            return v;
        }
    }
    // (a step uses tens of configurations; thousands mean shapes that never repeat)
    CHECK(n_used < CACHE_SLOTS * 3 / 4, "oneDNN: more than %d primitive configurations", CACHE_SLOTS * 3 / 4);
    void *v = make_planned(k, make, ctx);
    slots[i] = (Slot){*k, 1, v};
    n_used++;
    pthread_mutex_unlock(&lock);
    return v;
}

dnnl_memory_t cpu_dnnl_mem(const dnnl_memory_desc_t *md, const void *p) {
    dnnl_memory_t m;
    cpu_dnnl_ok(dnnl_memory_create(&m, md, cpu_dnnl_engine(), (void *)p), "memory_create");
    return m;
}

dnnl_primitive_attr_t cpu_dnnl_attr(void) {
    dnnl_primitive_attr_t attr;
    cpu_dnnl_ok(dnnl_primitive_attr_create(&attr), "attr_create");
    cpu_dnnl_ok(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user), "scratchpad_mode");
    return attr;
}

dnnl_memory_desc_t cpu_dnnl_scratch_md(const_dnnl_primitive_desc_t pd) {
    return *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
}

// The calling thread's grow-only scratchpad.
static void *thread_scratch(size_t bytes) {
    ThreadState *ts = thread_state();
    if (bytes > ts->cap) {
        free(ts->scratch);
        ts->scratch = NULL;
        if (posix_memalign(&ts->scratch, 64, bytes)) FATAL("out of memory allocating %zu bytes", bytes);
        ts->cap = bytes;
    }
    return ts->scratch;
}

void cpu_dnnl_exec(dnnl_primitive_t prim, const dnnl_memory_desc_t *scratch, int n, const int *args,
                   dnnl_memory_t *mems) {
    dnnl_exec_arg_t a[8];
    CHECK(n < 8, "oneDNN: %d arguments", n);
    for (int i = 0; i < n; i++) a[i] = (dnnl_exec_arg_t){args[i], mems[i]};
    const size_t sb = scratch ? dnnl_memory_desc_get_size(scratch) : 0;
    if (sb) a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, cpu_dnnl_mem(scratch, thread_scratch(sb))};
    dnnl_stream_t s = cpu_dnnl_stream();
    cpu_dnnl_ok(dnnl_primitive_execute(prim, s, n, a), "primitive_execute");
    cpu_dnnl_ok(dnnl_stream_wait(s), "stream_wait");
    for (int i = 0; i < n; i++) dnnl_memory_destroy(a[i].memory);
}
#endif

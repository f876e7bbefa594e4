// A profiling backend: an op table whose slots forward to a real backend's and add each call's
// wall time (after a sync, so CUDA's asynchronous ops are counted where they run) to one of a few
// op kinds. Only the outermost call is timed (an op calling another through the table counts
// once). Memory management and queries (alloc, release, sync, precision, the *_floats sizes) are
// forwarded untimed. Used by `mala bench train --profile`; the forwarding wrappers are generated
// from core/backend.h by tools/gen_backend_profile.py.
#ifndef MALA_BACKEND_PROFILE_H
#define MALA_BACKEND_PROFILE_H

#include <stdint.h>

#include "core/backend.h"

enum {
    PROF_GEMM,         // linear_fwd/bwd, conv2d (im2col + GEMM)
    PROF_ATTENTION,    // RoPE, the MALA / linear / softmax / GLA cores, LePE's depthwise conv
    PROF_NORM,         // LayerNorm, adaLN modulate and gated residual, GroupNorm, RMSNorm gate
    PROF_ELEMENTWISE,  // activations, add, mul, scale, patchify, permutes, reshapes
    PROF_OPTIMISER,    // AdamW, EMA, the gradient norm's sum of squares
    PROF_MEMORY,       // zero, fill, copy, to_device, to_host, channel copies
    PROF_OTHER,        // embeddings, randomness, the diffusion loss and sampler update
    PROF_KINDS
};

#define PROF_MAX_SLOTS 160  // at least the number of timed slots (checked where the table is built)

typedef struct {
    double seconds[PROF_KINDS];
    int64_t calls[PROF_KINDS];
    double slot_seconds[PROF_MAX_SLOTS];  // per timed slot, in backend_profile_timed_slots' order
    int64_t slot_calls[PROF_MAX_SLOTS];
} BackendProfile;

// The profiling table over real (one per process: a second call re-targets it). Counters start at 0.
const Backend *backend_profiled(const Backend *real);
void backend_profile_reset(void);
BackendProfile backend_profile_read(void);
const char *backend_profile_kind_name(int kind);  // "gemm", "attention", ...; NULL out of range
// The timed slots' names (the generated wrappers), for tests that every op is wrapped.
int backend_profile_timed_slots(const char *const **names);

#endif

// defines: backend_profiled, backend_profile_reset, backend_profile_read, backend_profile_kind_name,
//          backend_profile_timed_slots
#include "core/backend_profile.h"

#include <string.h>

#include "core/common.h"

static const Backend *prof_real;
static Backend prof_table;
static BackendProfile prof_acc;
static int prof_depth;  // nesting of timed calls: only the outermost one is counted

static double prof_begin(void) {
    if (prof_depth++) return 0.0;
    prof_real->sync();
    return now_seconds();
}

static void prof_end(int kind, int slot, double t0) {
    if (--prof_depth) return;
    prof_real->sync();
    const double dt = now_seconds() - t0;
    prof_acc.seconds[kind] += dt;
    prof_acc.calls[kind]++;
    prof_acc.slot_seconds[slot] += dt;
    prof_acc.slot_calls[slot]++;
}

#include "core/backend_profile_ops.inc"

_Static_assert(PROF_SLOT_COUNT <= PROF_MAX_SLOTS, "raise PROF_MAX_SLOTS");

const Backend *backend_profiled(const Backend *real) {
    prof_real = real;
    prof_table = *real;  // untimed slots forward as they are
    prof_install(&prof_table);
    prof_table.name = real->name;
    backend_profile_reset();
    return &prof_table;
}

void backend_profile_reset(void) { memset(&prof_acc, 0, sizeof prof_acc); }

BackendProfile backend_profile_read(void) { return prof_acc; }

const char *backend_profile_kind_name(int kind) {
    static const char *const names[PROF_KINDS] = {"gemm", "attention", "norm_modulate", "elementwise", "optimiser",
                                                  "zero_copy", "other_ops"};
    return kind >= 0 && kind < PROF_KINDS ? names[kind] : NULL;
}

int backend_profile_timed_slots(const char *const **names) {
    *names = PROF_TIMED_SLOTS;
    return (int)(sizeof PROF_TIMED_SLOTS / sizeof *PROF_TIMED_SLOTS);
}

// defines: split_global_batch, check_resumed_batch, choose_accum
#include "train/train_batch.h"

#include <stdio.h>

#include "core/common.h"

int split_global_batch(int global, int *batch, int *accum, int batch_given, int accum_given, MalaErr *err) {
    if (batch_given && accum_given) {
        if ((long long)*batch * *accum != global)
            return mala_errf(err, "--global-batch %d is not --batch %d x --accum %d (it is their product: give two "
                             "of them)", global, *batch, *accum);
    } else if (batch_given) {
        if (global % *batch)
            return mala_errf(err, "--global-batch %d is not a multiple of --batch %d (--accum = global batch / batch)",
                             global, *batch);
        *accum = global / *batch;
    } else if (accum_given) {
        if (global % *accum)
            return mala_errf(err, "--global-batch %d does not split into --accum %d batches (--batch = global batch / "
                             "accum)", global, *accum);
        *batch = global / *accum;
    } else {
        *batch = global;
        *accum = 1;
    }
    return 0;
}

int check_resumed_batch(const BatchFlags *f, int run_batch, int run_accum, MalaErr *err) {
    if (f->batch_given && f->batch != run_batch)
        return mala_errf(err, "--resume: --batch %d contradicts the run's batch %d (a run keeps its batch size)", f->batch,
                         run_batch);
    if (f->accum_given && f->accum != run_accum)
        return mala_errf(err, "--resume: --accum %d contradicts the run's --accum %d (a run keeps its batch size and "
                         "accumulation)", f->accum, run_accum);
    if (f->global_given && (long long)f->global != (long long)run_batch * run_accum)
        return mala_errf(err, "--resume: --global-batch %d contradicts the run's %lld (--batch %d x --accum %d)",
                         f->global, (long long)run_batch * run_accum, run_batch, run_accum);
    return 0;
}

void choose_accum(const NetConfig *c, const Backend *be, TrainMemArgs *a, int global, int *batch, int *accum, int lead) {
    const int world = a->world > 1 ? a->world : 1;
    for (int k = 1; k <= global / world; k++) {
        if (global % k || (global / k) % world) continue;
        a->batch = global / k / world;
        a->accum = k;
        if (!train_memory_fits(c, be, a)) continue;
        *batch = global / k;
        *accum = k;
        if (k > 1 && lead)
            fprintf(stderr, "note: --global-batch %d does not fit in memory as one batch: --batch %d x --accum %d\n",
                    global, *batch, k);
        return;
    }
    a->batch = global / world;
    a->accum = 1;
    *batch = global;
    *accum = 1;
}

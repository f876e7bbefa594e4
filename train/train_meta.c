// defines: train_meta_write, train_meta_need_u64, train_meta_opt_u64, train_meta_read
#include "train/train_meta.h"

#include <limits.h>
#include <math.h>

#include "formats/st_meta.h"

void train_meta_write(StWriter *w, const TrainOpts *o, int global_batch) {
    st_writer_meta_u64(w, "seed", o->seed);
    st_writer_meta_u64(w, "batch", (uint64_t)global_batch);
    if (o->accum > 1) st_writer_meta_u64(w, "accum", (uint64_t)o->accum);  // only then: files as before
    st_writer_meta_float(w, "lr", o->lr);
    st_writer_meta_u64(w, "warmup", (uint64_t)o->warmup);
    if (o->decay_end > o->decay_start) {  // only then: a constant-rate run's file is as before
        st_writer_meta_u64(w, "decay_start", o->decay_start);
        st_writer_meta_u64(w, "decay_end", o->decay_end);
        st_writer_meta_float(w, "lr_end", o->lr_end);
    }
    st_writer_meta_float(w, "weight_decay", o->weight_decay);
    st_writer_meta_float(w, "grad_clip", o->grad_clip);
    st_writer_meta_float(w, "ema_decay", o->ema_decay);
    st_writer_meta_float(w, "label_drop", o->label_drop);
}

int train_meta_opt_u64(const StFile *f, const char *key, uint64_t lo, uint64_t hi, uint64_t *out, MalaErr *err) {
    uint64_t v;
    int rc = st_meta_u64(f, key, &v, err);
    if (rc) return rc;
    *out = v;
    if (v < lo || v > hi)
        return mala_errf(err, "%s: metadata '%s' = %llu is out of range (%llu to %llu)", f->path, key,
                         (unsigned long long)v, (unsigned long long)lo, (unsigned long long)hi);
    return 0;
}

int train_meta_need_u64(const StFile *f, const char *key, uint64_t lo, uint64_t hi, uint64_t *out,
                        MalaErr *err) {
    int rc = train_meta_opt_u64(f, key, lo, hi, out, err);
    if (rc == 1) return mala_errf(err, "%s: not a training checkpoint (metadata '%s' is missing)", f->path, key);
    return rc;
}

static int need_float(const StFile *f, const char *key, float lo, float hi, float *out, MalaErr *err) {
    int rc = st_meta_float(f, key, out, err);
    if (rc == 1) return mala_errf(err, "%s: not a training checkpoint (metadata '%s' is missing)", f->path, key);
    if (!rc && !(*out >= lo && *out <= hi)) {
        if (isinf(hi))
            return mala_errf(err, "%s: metadata '%s' = %g is out of range (at least %g)", f->path, key, (double)*out,
                             (double)lo);
        return mala_errf(err, "%s: metadata '%s' = %g is out of range (%g to %g)", f->path, key, (double)*out,
                         (double)lo, (double)hi);
    }
    return rc;
}

int train_meta_read(const StFile *f, TrainOpts *o, int *global_batch, MalaErr *err) {
    uint64_t b = 0, warmup = 0;
    if (train_meta_need_u64(f, "seed", 0, UINT64_MAX, &o->seed, err) ||
        train_meta_need_u64(f, "batch", 1, INT_MAX, &b, err) ||
        train_meta_need_u64(f, "warmup", 0, INT_MAX, &warmup, err) || need_float(f, "lr", 0, 1, &o->lr, err) ||
        need_float(f, "weight_decay", 0, 10, &o->weight_decay, err) ||
        need_float(f, "grad_clip", 0, INFINITY, &o->grad_clip, err) ||
        need_float(f, "ema_decay", 0, 1, &o->ema_decay, err) || need_float(f, "label_drop", 0, 1, &o->label_drop, err))
        return -1;
    o->warmup = (int)warmup;
    uint64_t accum = 1;  // optional: absent in a run without gradient accumulation
    if (train_meta_opt_u64(f, "accum", 1, INT_MAX, &accum, err) < 0) return -1;
    o->accum = (int)accum;
    // the decay's keys are optional (absent: a constant rate after the warmup)
    o->decay_start = o->decay_end = 0;
    o->lr_end = 0.0f;
    int rc = st_meta_u64(f, "decay_start", &o->decay_start, err);
    if (rc < 0) return -1;
    if (!rc) {
        if (train_meta_need_u64(f, "decay_end", 1, UINT64_MAX, &o->decay_end, err) ||
            need_float(f, "lr_end", 0, 1, &o->lr_end, err))
            return -1;
        if (o->decay_end <= o->decay_start)
            return mala_errf(err, "%s: metadata 'decay_end' = %llu is not after 'decay_start' = %llu", f->path,
                             (unsigned long long)o->decay_end, (unsigned long long)o->decay_start);
    }
    *global_batch = (int)b;
    return 0;
}

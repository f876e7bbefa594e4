// defines: label_mode_parse, label_mode_name, gen_labels
#include "pipeline/labels.h"

#include <string.h>

#include "core/rng.h"

// Keeps the label draws apart from the initial noise (seed, stream i) of the same seed.
#define LABEL_SEED_SALT 0x6c6162656c73ull  // "labels"

int label_mode_parse(const char *s, LabelMode *out) {
    if (!strcmp(s, "balanced")) *out = LABELS_BALANCED;
    else if (!strcmp(s, "random")) *out = LABELS_RANDOM;
    else return -1;
    return 0;
}

const char *label_mode_name(LabelMode m) { return m == LABELS_RANDOM ? "random" : "balanced"; }

void gen_labels(int32_t *y, LabelMode m, uint64_t seed, int64_t first, int n, int K) {
    for (int i = 0; i < n; i++) {
        if (K <= 0) {  // an unconditional model: the one embedding
            y[i] = 0;
            continue;
        }
        if (m != LABELS_RANDOM) {
            y[i] = (int32_t)((first + i) % K);
            continue;
        }
        Rng r;
        rng_seed_stream(&r, seed ^ LABEL_SEED_SALT, (uint64_t)(first + i));
        y[i] = (int32_t)rng_below(&r, (uint64_t)K);
    }
}

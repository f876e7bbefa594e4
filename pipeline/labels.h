// The class labels of a run of generated images (mala sample, mala eval --ckpt): image i's label
// depends only on (mode, seed, i, classes), so batching and the number of processes do not change
// the set.
//   balanced: i mod K, every class equally often (eval's default for --quick; sample's balanced
//             blocks are its own, i K / n)
//   random:   uniform over 0 .. K-1, drawn from Philox under the seed, stream i (DiT's sample_ddp.py
//             draws torch.randint per process; the distribution is the same, the draws are ours)
#ifndef MALA_LABELS_H
#define MALA_LABELS_H

#include <stdint.h>

typedef enum { LABELS_BALANCED = 0, LABELS_RANDOM = 1 } LabelMode;

int label_mode_parse(const char *s, LabelMode *out);  // "balanced" | "random"; 0 on success
const char *label_mode_name(LabelMode m);
// y[0..n) = the labels of images first .. first+n-1 of a run seeded by seed over K classes.
// K = 0 (an unconditional model): every label is 0.
void gen_labels(int32_t *y, LabelMode m, uint64_t seed, int64_t first, int n, int K);

#endif

// One pass of `mala eval` over an image source: the images through a feature network (the FID
// Inception or the Fashion-MNIST classifier) into FID statistics, kept feature rows, logits and
// class accuracy; statistics files loaded instead where given; and where the networks' weights are
// looked for.
// defines: Extractor, RunResult, eval_find_inception, eval_find_classifier, eval_load_inception,
//          eval_run_source, eval_is_stats_file, eval_stats_of_path
#ifndef MALA_EVAL_PASS_H
#define MALA_EVAL_PASS_H

#include "core/backend.h"
#include "eval/eval_metrics.h"
#include "eval/eval_source.h"
#include "eval/fid.h"
#include "eval/fmnist_features.h"
#include "eval/inception.h"

// The network the images go through: the FID Inception (2048-d pool3, 1008 logits for IS) or
// the Fashion-MNIST classifier (128-d features, 10 logits for the class accuracy).
typedef struct {
    const char *name;   // "inception" or "fmnist"
    const char *path;   // its weights
    Inception *inc;
    FmnistNet *fm;
    int dim, classes;
} Extractor;

typedef struct {
    int n;
    double seconds;
    float *logits;      // [n, classes] when asked for (IS)
    FeatRows feats;     // the first EVAL_KEEP_FEATS feature rows (precision/recall, KID)
    long labelled, correct;  // fmnist: images with a label, and those the classifier assigns it to
    int cancelled;      // sampling stopped by SampleSpec.cancel (no error line: the caller says it)
    char no_acc[200];        // fmnist, labelled images whose classes are not the classifier's: why
                             // class accuracy is absent (labelled stays 0); else ""
} RunResult;

// The FID Inception's weights: given, $MALA_INCEPTION, ./, ./assets/, then pytorch-fid's torch.hub
// cache. "random" for random weights; NULL after an error line naming where it looked.
const char *eval_find_inception(const char *given, char *buf, size_t cap);
// The Fashion-MNIST classifier: given, $MALA_FMNIST_CLASSIFIER, ./assets/, ./, then assets/ beside
// the executable; NULL after an error line.
const char *eval_find_classifier(const char *given, char *buf, size_t cap);
// The Inception at path ("random": random weights, with a warning); NULL after an error line.
Inception *eval_load_inception(const char *path, const Backend *be, int batch);

// The images of path (or sp's samples when sp is not NULL; at most limit > 0 of them) through m
// in batches of `batch`: stats / sstats (NULL: not wanted) get the features / the sFID features
// (the Inception only), r the count, time, kept rows, logits (want_logits) and class accuracy.
// 0, or -1 after an error line.
int eval_run_source(Extractor *m, const char *path, const SampleSpec *sp, int batch, int limit, FidStats *stats,
                    FidStats *sstats, int want_logits, RunResult *r);
// Whether path is a statistics .npz (mu and sigma).
int eval_is_stats_file(const char *path);
// The statistics of path: a statistics .npz is loaded (with its feats and sFID keys where present),
// images are run through m. *spatial gets the sFID statistics (Inception only) or NULL. NULL after
// an error line.
FidStats *eval_stats_of_path(Extractor *m, const char *path, const SampleSpec *sp, int batch, int limit,
                             int want_logits, RunResult *r, FidStats **spatial);

#endif

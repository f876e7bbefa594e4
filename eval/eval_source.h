// Image sources of `mala eval`: an ADM sample batch (.npz, arr_0 uint8 [N, H, W, C] or [N, H, W],
// arr_1 labels when present), a folder of image files (recursive, sorted; RGB as PIL's
// convert("RGB"); unreadable files are skipped), the Fashion-MNIST images as training sees them, or
// a model sampled on the fly (--ckpt; sharded over the processes under mpirun). Batches come out
// as float NCHW in [0, 1] (ToTensor), every image of a batch the same size.
// defines: Source, SampleSpec, source_open, source_open_sampler, source_next, source_close
#ifndef MALA_EVAL_SOURCE_H
#define MALA_EVAL_SOURCE_H

#include "formats/npy.h"
#include "pipeline/batch_store.h"
#include "pipeline/generate.h"
#include "pipeline/generate_shard.h"
#include "pipeline/labels.h"
#include "data/dataset.h"

typedef struct {
    const char *path;
    int n;                 // images in the source
    int next;              // next image index
    NpyArray arr;          // npz
    int h, w, c;
    char **files;          // folder
    int skipped;
    uint8_t *pend;         // folder: a decoded image waiting for the next batch
    int pw, ph;
    float *batch;          // [max, C, H, W]
    size_t batch_cap;
    Dataset *ds;           // fashion-mnist[-test][:DIR]
    Generator *gen;        // sampling from a checkpoint (eval fid|is --ckpt)
    int gen_borrowed;      // gen is the caller's (SampleSpec.gen): not closed here
    const GenOpts *gopts;
    LabelMode label_mode;
    BatchStore *store;
    uint64_t seed;
    float *x;              // [gen batch, C, H, W] samples in [-1, 1]
    int32_t *y;
    ShardedGen shard;      // the generator's batches (over the processes under mpirun)
    const volatile int *cancel;  // SampleSpec.cancel
    int32_t *labels;       // npz arr_1 [n], dataset labels [batch]; NULL: unlabelled
    const int32_t *batch_labels;  // the labels of the last batch, or NULL
} Source;

// What `--ckpt` asks for: num images sampled with these options and labels.
typedef struct {
    const char *ckpt, *device, *precision;
    const char *vae;       // latent models: the VAE that decodes the samples
    int num, batch;
    uint64_t seed;
    GenOpts opts;
    LabelMode labels;      // the classes of the images (pipeline/labels.h)
    BatchStore *store;     // NULL, or where the sampled batches are kept (pipeline/batch_store.h)
    Generator *gen;        // NULL, or an open generator to sample from instead of ckpt (its weights as they are,
                           // its VAE attached; the caller's: not closed; ckpt then only names it in messages)
    const volatile int *cancel;  // NULL, or a flag that ends the sampling within a step (ShardedGen.cancel)
} SampleSpec;

// Opens a file or folder (or fashion-mnist[-test][:DIR]); -1 with err.
int source_open(Source *s, const char *path, MalaErr *err);
// Opens the model of sp for sampling sp->num images; -1 with err.
int source_open_sampler(Source *s, const SampleSpec *sp, MalaErr *err);
// The next batch of up to `max` same-sized images (*n = 0 at the end); s->batch_labels holds its
// labels, or NULL.
float *source_next(Source *s, int max, int *n, int *c, int *h, int *w);
void source_close(Source *s);

#endif

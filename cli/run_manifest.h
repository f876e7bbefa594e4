// What `mala sample` and `mala eval` record about how their results were made:
// the manifest.h members of the .json beside an .npz / .npy / statistics file and of eval's JSON
// line, and the settings a partial run (batch_store.h) must match to be continued.
#ifndef MALA_RUN_MANIFEST_H
#define MALA_RUN_MANIFEST_H

#include <stdint.h>

#include "core/backend.h"
#include "pipeline/generate.h"
#include "pipeline/manifest.h"

typedef struct {
    const char *ckpt;          // the model file
    const char *weights;       // "ema" or "online"
    const NetConfig *cfg;      // its configuration
    const GenOpts *opts;       // the sampler (clip as the run used it)
    const char *label_mode;    // "balanced", "random", or how the labels were given ("class", "list")
    const int32_t *labels;     // [n], hashed; NULL when they follow from the mode and seed
    int n, batch;
    uint64_t seed;
    const char *init_noise;    // a noise file, hashed (NULL: from the seed)
    const Backend *be;
    const char *vae;           // a latent model's decoder (NULL: none)
    const char *init_image;    // image-to-image: the input file or folder (NULL: none)
    const char *mask;          // inpainting: the mask file (NULL: none)
    float strength;            // with init_image
    int resample;              // inpainting's jumps per step
} SamplingRecord;

// model, model_sha256, model_config, weights[, vae, vae_sha256]
void manifest_add_model(Manifest *m, const SamplingRecord *r);
// device, matmul_precision, version
void manifest_add_runtime(Manifest *m, const Backend *be);
// The model, then sampler, steps, eta, clip, cfg_scale, cfg_channels, label_mode[, labels_sha256],
// num, seed[, init_noise_sha256][, blend][, init_image, its sha256 (a file), strength, mask, its
// sha256, resample], then the runtime. Exits when a file cannot be read.
void manifest_add_sampling(Manifest *m, const SamplingRecord *r);
// The manifest_add_sampling members but the model's path, and the batch size: what decides a
// partial run's samples.
void manifest_partial_settings(Manifest *m, const SamplingRecord *r);
// The sha256 of a file (exits with an error naming it when it cannot be read).
void manifest_add_file_hash(Manifest *m, const char *key, const char *path);
// PATH.json beside a result file PATH, with cmd first; exits on a write error.
void manifest_write_beside(const Manifest *m, const char *path);

#endif

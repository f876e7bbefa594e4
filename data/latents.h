// Encoded latent datasets (docs/design.md §8, docs/math/vae.md "Latent datasets"): the VAE posterior of
// every image of a folder, encoded once by `mala encode`, as a directory numpy maps whole:
//
//   LATENTS/latents.json      manifest (format "mala-latents", version 1; count, views, dtype,
//                             latent_shape, scale, image_size, num_classes, shard_images,
//                             shards_done, complete, the VAE's and the source list's hashes)
//   LATENTS/mean.npy          [N, V, C, h, w] posterior mean (unscaled), float16 or float32
//   LATENTS/logvar.npy        [N, V, C, h, w] log-variance clamped to [-30, 20], same dtype
//   LATENTS/labels.npy        int32 [N], the class folder's index in sorted order
//   LATENTS/class_names.json  the class folder names in label order
//
// V = 2 with flips (view 1 encodes the mirrored image), else 1. The arrays are created with their
// final shapes; rows are filled a shard of shard_images at a time, and a shard counts once its
// rows are fsync'ed and latents.json (rewritten atomically) says so: readers use the first
// min(N, shards_done * shard_images) rows, all N once complete.
//
// Training draws z = (mean + exp(logvar / 2) * eps) * scale with eps from Philox seeded by
// (seed, stream): a fresh z per use, as DiT's latent_dist.sample().mul_(0.18215).
#ifndef MALA_LATENTS_H
#define MALA_LATENTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"  // defines: MalaErr

#define LATENT_MANIFEST "latents.json"
#define LATENT_MAX_COUNT ((int64_t)1 << 40)

typedef struct {
    int64_t count;            // images N
    int views, c, h, w;       // rows are [views, c, h, w]
    int f16;                  // float16 storage (else float32)
    int image_size;           // pixels per side the images were cropped to
    float scale;              // the VAE's scaling_factor (0.18215)
    int num_classes;
    int shard_images;
    int64_t shards_done;
    int complete;
    char crop[32];            // "adm_center_crop_arr"
    char vae_file[1024];      // the VAE file's name, its size and a 64-bit hash of its bytes
    uint64_t vae_bytes, vae_hash;
    char source[4096];        // the image folder and a hash of its (label, path) list
    uint64_t list_hash;
} LatentManifest;

// Rows a reader may use: all once complete, else the committed shards'.
int64_t latent_rows_ready(const LatentManifest *m);
// Values per image (views * c * h * w) and bytes per stored value.
size_t latent_row_values(const LatentManifest *m);
size_t latent_value_bytes(const LatentManifest *m);

// 1 when dir holds a latents.json (a latent set, maybe incomplete).
int latent_is_set(const char *dir);
// Reads and checks DIR/latents.json.
int latent_manifest_read(const char *dir, LatentManifest *m, MalaErr *err);
// Parses a manifest held in memory (name: for messages).
int latent_manifest_parse(const char *text, size_t len, const char *name, LatentManifest *m, MalaErr *err);

// A set opened for reading: the arrays memory-mapped, labels and class names copied.
typedef struct {
    LatentManifest m;
    int64_t rows;             // latent_rows_ready
    char *dir;
    int32_t *labels;          // [rows]
    char **class_names;       // [m.num_classes]
    const unsigned char *mean, *logvar;  // row i at + i * latent_row_values * value bytes
    void *map[2];
    size_t map_len[2];
} LatentSet;

// Opens a set: every file's type, shape and size checked against the manifest, labels in
// 0..num_classes-1, no rows yet is an error. Errors name the file and the problem.
int latent_set_open(LatentSet *s, const char *dir, MalaErr *err);
void latent_set_close(LatentSet *s);
// z [c, h, w] = (mean + exp(logvar / 2) * eps) * scale for row `row`, view `view`, eps the normals
// of Philox stream `stream` under `seed`. eps NULL-equivalent: with sample = 0, z = mean * scale.
void latent_set_draw(const LatentSet *s, int64_t row, int view, int sample, uint64_t seed, uint64_t stream, float *z);

// FNV-1a over 64-bit little-endian words (the tail zero-padded) of a file: the VAE's identity.
int latent_file_hash(const char *path, uint64_t *hash, uint64_t *bytes, MalaErr *err);

// ---- writing (mala encode) ----
typedef struct {
    LatentManifest m;
    char *dir;
    int fd[2];                // mean.npy, logvar.npy
    uint64_t off[2];          // where the data starts
    void *buf;                // conversion buffer
    size_t buf_cap;
} LatentWriter;

// Creates a new set in dir (made if missing) for manifest m (shards_done 0): class_names.json and
// labels.npy written atomically, mean.npy and logvar.npy created at their full size (sparse),
// then latents.json. Or, when dir already holds a latents.json, reopens it to continue: its
// manifest must match m (source list, VAE, views, dtype, shape, shard size), naming what differs;
// w->m.shards_done then says where to continue.
int latent_writer_open(LatentWriter *w, const char *dir, const LatentManifest *m, char *const *class_names,
                       const int32_t *labels, MalaErr *err);
// Writes rows first .. first+n-1 (float32 [n, views, c, h, w] each; converted to the set's dtype).
int latent_writer_put(LatentWriter *w, int64_t first, int64_t n, const float *mean, const float *logvar, MalaErr *err);
// fsyncs the arrays, then rewrites latents.json with shards_done (complete when every row is in).
int latent_writer_commit(LatentWriter *w, int64_t shards_done, MalaErr *err);
void latent_writer_close(LatentWriter *w);

#endif

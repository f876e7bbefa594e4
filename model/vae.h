// Stable Diffusion's AutoencoderKL (docs/design.md §8, docs/math/vae.md), inference only, over the op
// table: the encoder x [N, 3, H, W] in [-1, 1] -> posterior mean and clamped log-variance
// [N, 4, H/8, W/8], and the decoder of scaled latents z [N, 4, h, w] -> images [N, 3, 8h, 8w] in
// the [-1, 1] scale (not clamped): decoder(post_quant_conv(z / 0.18215)).
//
// Weights: diffusers' `diffusion_pytorch_model.safetensors` under either attention naming
// (to_q/to_k/to_v/to_out.0 or query/key/value/proj_attn; Linear [C, C] or 1x1-conv [C, C, 1, 1]
// shaped), F32/F16/BF16. The config is read off the tensor shapes; GroupNorm's group count from
// metadata `norm_num_groups`, else 32. q, k and v are fused into one [3C, C] projection at load
// time (the attention runs as softmax_fwd with one head on [B, T, 3C] rows).
//
// Memory is planned once, at build time, for (max_batch, max_h, max_w): one backend block for the
// weights and one for the activations (three maps of the largest tensor, the conv workspace, the
// attention's qkv rows and one T x T score block). Longer inputs run in chunks of max_batch.
#ifndef MALA_VAE_H
#define MALA_VAE_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/common.h"        // defines: MalaErr
#include "formats/safetensors.h"   // defines: StFile

#define VAE_MAX_LEVELS 8
#define VAE_SCALE 0.18215f          // the default scaling_factor (SD-VAE's): a latent = mean-space z * scale
#define VAE_LOGVAR_MIN -30.0f       // DiagonalGaussianDistribution's clamp
#define VAE_LOGVAR_MAX 20.0f
#define VAE_DEFAULT_GROUPS 32

typedef enum { VAE_NAMES_NEW = 0, VAE_NAMES_OLD = 1 } VaeNaming;

typedef struct {
    int levels;                  // len(block_out_channels)
    int ch[VAE_MAX_LEVELS];      // block_out_channels
    int layers;                  // layers_per_block: encoder resnets per level (decoder: layers + 1)
    int in_channels, out_channels, latent;
    int groups;                  // norm_num_groups
    VaeNaming naming;            // attention tensor names
    int attn_conv;               // attention weights stored [C, C, 1, 1]
    float scale;                 // scaling_factor: config.json's, else VAE_SCALE
} VaeConfig;

// sd-vae-ft-ema / -mse: 128 256 512 512, 2 layers, latent 4, 32 groups, current names.
void vae_config_sd(VaeConfig *c);
// Downsampling factor 2^(levels - 1).
int vae_factor(const VaeConfig *c);
void vae_describe(const VaeConfig *c, char *buf, size_t n);

// One tensor of the file, in diffusers' state_dict order. offset: where its floats go in the
// weight buffer (q, k, v of each attention are laid out as one [3C, C] matrix and one [3C] bias).
typedef struct {
    char name[80];
    int ndim;
    int64_t shape[4];
    size_t offset, numel;
} VaeParam;

typedef struct {
    VaeConfig c;
    int n;
    VaeParam *p;
    size_t floats;  // the weight buffer
} VaeTable;

// The parameter table of a config, without allocating any weights. 0, or -1 with err set for a
// config that is not an AutoencoderKL (levels, channels and groups checked).
int vae_table_build(VaeTable *t, const VaeConfig *c, MalaErr *err);
void vae_table_free(VaeTable *t);
const VaeParam *vae_table_find(const VaeTable *t, const char *name);

// A source of tensor shapes: returns the ndim of tensor `name` and fills shape[0..ndim-1], or -1
// when there is no such tensor.
typedef int (*VaeShapeFn)(void *ctx, const char *name, int64_t shape[4]);
// Reads the config off the shapes (file: the name in messages; groups: norm_num_groups). Errors
// name the file and the first tensor that is missing or of the wrong rank.
int vae_config_derive(VaeConfig *c, VaeShapeFn fn, void *ctx, const char *file, int groups, MalaErr *err);
// The config of an open file (metadata norm_num_groups or 32), then every tensor checked against
// the table (shapes, nothing missing, nothing extra). The first bad tensor is named.
int vae_config_from_file(VaeConfig *c, const StFile *f, MalaErr *err);

// diffusers' config.json of an AutoencoderKL (model/vae_json.c): scale (scaling_factor, VAE_SCALE
// when absent), groups (norm_num_groups) and the architecture fields it states (0 when absent: the
// weights' shapes give them, and a field that contradicts them refuses the folder). _class_name
// (AutoencoderKL) and act_fn (silu) are checked when present. -1 with err naming `name` and the key.
typedef struct {
    float scale;
    int groups, latent, layers, in_channels, out_channels, levels;
    int ch[VAE_MAX_LEVELS];
} VaeJson;
int vae_json_parse(const char *text, size_t len, const char *name, VaeJson *out, MalaErr *err);

// The configuration of a VAE as `--vae PATH` names it (model/vae_file.c), any of:
//   a folder as diffusers publishes one: config.json with diffusion_pytorch_model.safetensors, or
//     diffusion_pytorch_model.bin (torch.save's zip format) when there is no .safetensors;
//   a diffusion_pytorch_model.* file: with the config.json beside it, if there is one;
//   any other .safetensors (norm_num_groups from its metadata) or torch.save file of the weights.
// scale and groups come from config.json, else the defaults; every tensor is checked against the
// table (shapes, nothing missing, nothing extra). -1 with err naming the file at fault.
int vae_config_read(const char *path, VaeConfig *c, MalaErr *err);
// The weights file PATH names (the folder's diffusion_pytorch_model.*, else PATH): what a run records
// the hash of.
int vae_weights_file(const char *path, char *out, size_t n, MalaErr *err);

typedef struct Vae Vae;

// Loads a VAE (any layout vae_config_read takes) and plans memory for up to max_batch images of at most max_h x max_w
// pixels (multiples of vae_factor). NULL with err set on a bad file.
Vae *vae_load(const char *path, const Backend *be, int max_batch, int max_h, int max_w, MalaErr *err);
// Random weights (variance 1 / fan_in, GroupNorm 1 and 0, biases 0) for benchmarks.
Vae *vae_random(const VaeConfig *c, const Backend *be, int max_batch, int max_h, int max_w, uint64_t seed,
                MalaErr *err);
void vae_free(Vae *v);
const VaeConfig *vae_config(const Vae *v);
int vae_max_batch(const Vae *v);
// The backend bytes of the activation block for (batch, h, w) pixels, and of the weights.
size_t vae_activation_bytes(const VaeConfig *c, const Backend *be, int batch, int h, int w);
size_t vae_weight_bytes(const VaeConfig *c);
// The largest batch (>= 1, <= cap) whose activations fit in `bytes` at h x w.
int vae_batch_for(const VaeConfig *c, const Backend *be, int h, int w, size_t bytes, int cap);

// Host memory in and out. x [N, in_channels, H, W]; mean, logvar [N, latent, H/f, W/f] (logvar
// clamped to [-30, 20]; either may be NULL). Returns 0, or -1 with err set for a size the plan
// does not cover.
int vae_encode(Vae *v, const float *x, int N, int H, int W, float *mean, float *logvar, MalaErr *err);
// z [N, latent, h, w] scaled latents -> x [N, out_channels, h*f, w*f].
int vae_decode(Vae *v, const float *z, int N, int h, int w, float *x, MalaErr *err);
// Multiply-accumulates of one image's encode / decode at H x W pixels (convs, projections and
// the attention's two products).
double vae_encode_macs(const VaeConfig *c, int H, int W);
double vae_decode_macs(const VaeConfig *c, int H, int W);

#endif

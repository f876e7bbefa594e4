// DiT with MALA / softmax / linear attention (DESIGN sections 1-2): configuration, presets, the
// parameter table, initialisation, forward and backward through the op table.
#ifndef MALA_DIT_H
#define MALA_DIT_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "common.h"

typedef enum { ATTN_MALA = 0, ATTN_SOFTMAX = 1, ATTN_LINEAR = 2 } AttnKind;

typedef struct {
    int depth, hidden, heads, patch;          // the preset
    int image_size, in_channels, num_classes; // the data
    int learn_sigma;                          // output 2C channels (eps and variance)
    AttnKind attn;
    int rope, gate, lepe;                     // lepe = kernel size, 0 = off
} DitConfig;

#define DIT_FREQ_DIM 256  // timestep frequency embedding size

// Defaults: DiT-S/2 shape, MALA with RoPE and LePE 5 (no gate), 32x32x1, 10 classes, learned sigma.
void dit_config_default(DitConfig *c);
// "DiT-S/2", "S/2", "DiT-XL/4", ... also the CPU presets T (4/128/4) and XS (6/256/4).
// Sets depth/hidden/heads/patch only.
int dit_config_preset(DitConfig *c, const char *preset, MalaErr *err);
int dit_config_validate(const DitConfig *c, MalaErr *err);
const char *attn_kind_name(AttnKind k);
int attn_kind_parse(const char *s, AttnKind *k);
void dit_config_describe(const DitConfig *c, char *buf, size_t n);  // "depth 12, hidden 384, ..."
// Default attention flags for a kind: mala rope on + lepe 5; softmax none; linear rope on + lepe 5.
void dit_config_attn_defaults(DitConfig *c, AttnKind k);

// One row of the parameter table; names are PyTorch's state_dict names.
typedef struct {
    char name[72];
    int ndim;
    int64_t shape[4];
    size_t offset, numel;  // in floats, into the parameter buffer
} ParamInfo;

// Offsets (in floats) of one block's tensors in the parameter buffer; SIZE_MAX when absent.
typedef struct {
    size_t qkv_w, qkv_b, proj_w, proj_b, lepe_w, lepe_b, gate_w, gate_b;
    size_t fc1_w, fc1_b, fc2_w, fc2_b, ada_w, ada_b;
} BlockOffsets;

typedef struct BlockActs BlockActs;
typedef struct DitActs DitActs;

enum { DIT_INFER = 0, DIT_TRAIN = 1 };

typedef struct {
    DitConfig cfg;
    const Backend *be;
    int mode, max_batch;
    int T, gh, out_channels;  // tokens, grid side, C_out

    // Parameter table: trainable tensors first, then the fixed pos_embed.
    int nparams;
    ParamInfo *params;
    size_t n_trainable, n_floats;  // floats trainable / in total (incl. pos_embed)
    size_t x_w, x_b, pos, t0_w, t0_b, t2_w, t2_b, y_tab, f_lin_w, f_lin_b, f_ada_w, f_ada_b;
    BlockOffsets *blk;

    // One backend allocation holds everything below.
    void *arena;
    size_t arena_bytes;
    float *w;                 // parameters [n_floats]
    float *grad, *m, *v, *ema; // [n_floats] each, DIT_TRAIN only
    DitActs *acts;
} Dit;

Dit *dit_create(const DitConfig *c, const Backend *be, int max_batch, int mode);
void dit_free(Dit *m);
const ParamInfo *dit_find_param(const Dit *m, const char *name);
// DiT's initialize_weights (Xavier-uniform linears, zero adaLN and final layer, N(0, 0.02)
// embeddings and t-MLP, sin-cos pos_embed). Writes w (and ema = w in training mode).
void dit_init_weights(Dit *m, uint64_t seed);
// Fills the pos_embed entry of a host parameter buffer (MAE 2-D sin-cos).
void dit_pos_embed(float *pos, int H, int grid);

// out [B, C_out, S, S] = model(x [B,C,S,S], t [B] (float timesteps), y [B] (K = null class)).
// All pointers are backend memory. B <= max_batch.
void dit_forward(Dit *m, float *out, const float *x, const float *t, const int32_t *y, int B);
// Adds d(loss)/d(params) into m->grad given dout = d(loss)/d(out) of the last forward (DIT_TRAIN).
void dit_backward(Dit *m, const float *dout, int B);

// Forward-pass FLOPs for one image (multiply-add = 2), for throughput reports.
double dit_flops_per_image(const DitConfig *c);

#endif

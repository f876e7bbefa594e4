// The network interface every backbone implements (docs/design.md §7): the configuration and its metadata,
// the parameter table with PyTorch's state_dict names, arena sizing, initialisation, forward and
// backward through the op table, and FLOPs. The trainer, the generator, model files, bench, eval and
// the viewer see only this header; a backbone lives in model/<name>*.c and registers in net.c.
#ifndef MALA_NET_H
#define MALA_NET_H

#include <stddef.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/common.h"
#include "core/rng.h"
#include "formats/safetensors.h"

typedef enum { BACKBONE_DIT = 0, BACKBONE_DIG = 1, BACKBONE_DIC = 2 } BackboneKind;

typedef enum { ATTN_MALA = 0, ATTN_SOFTMAX = 1, ATTN_LINEAR = 2 } AttnKind;

// DiT's own settings (docs/design.md §1-2).
typedef struct {
    int depth, hidden, heads, patch;
    AttnKind attn;
    int rope, gate, lepe;  // lepe = kernel size, 0 = off
    // The MALA authors' block parts, depthwise kernels (0 = off): cpe, x = x + dwconv(x) before each
    // attention; ffn_dwconv, h = h + dwconv(h) between the MLP's GELU and fc2.
    int cpe, ffn_dwconv;
} DitConfig;

// DiG's own settings (docs/design.md §7): the DiT keys it shares; the rest is fixed by the official preset
// DiG_*_bid_layer_dwconv_qdir (GLA q/k width H/2, SwiGLU MLP, 3x3 depthwise conv, 4 scan directions).
typedef struct {
    int depth, hidden, heads, patch;
} DigConfig;

// DiC's own settings (docs/design.md §7): stage widths hidden * multipliers[s] and block counts depths[s]
// over n = 5 or 7 stages (an hourglass of (n+1)/2 levels), a skip concatenation every skip_stride
// blocks.
#define DIC_MAX_STAGES 7
#define DIC_MAX_WIDTH (1 << 20)  // channels of a stage (hidden x multiplier): far beyond DiC-H
typedef struct {
    int hidden, n;
    int depths[DIC_MAX_STAGES], multipliers[DIC_MAX_STAGES];
    int skip_stride;
} DicConfig;

typedef struct {
    BackboneKind backbone;
    int image_size, in_channels, num_classes;  // what the data fixes
    int learn_sigma;                           // output 2C channels (eps and variance)
    float latent_scale;                        // > 0: a latent model (docs/design.md §8), its samples are VAE
                                               // latents times this scale (metadata `latent`,
                                               // `latent_scale`); 0: pixels
    DitConfig dit;                             // backbone "dit"
    DigConfig dig;                             // backbone "dig"
    DicConfig dic;                             // backbone "dic"
} NetConfig;

// One row of the parameter table; names are PyTorch's state_dict names.
typedef struct {
    char name[72];
    int ndim;
    int64_t shape[4];
    size_t offset, numel;  // in floats, into the parameter buffer
    // A transformer block's large linear weight [out, in] (the ones Backend.linear_fwd_quant takes):
    // stored as int8 rows with per-row scales in a q8 model file (model/checkpoint.h). In a network
    // holding int8 weights (Net.q8) such a tensor has no floats (offset is SIZE_MAX): its row scales
    // and int8 rows are at q8_offset bytes into Net.q8w (net_q8_weights).
    int quant8;
    size_t q8_offset;
} ParamInfo;

// NET_TRAIN keeps every layer's activations for backward; NET_INFER_ATTN is inference that also
// keeps what each block's attention rows need (net_attn_row), for the viewer; plain NET_INFER
// keeps nothing, so sampling memory does not grow.
enum { NET_INFER = 0, NET_TRAIN = 1, NET_INFER_ATTN = 2 };

// Where a backbone's attention rows live: blocks x heads, over a gh x gw token grid of each image.
typedef struct {
    int blocks, heads, gh, gw;
    const char *kind;  // the token mixer ("mala", "softmax", "linear")
} AttnRowInfo;

// A bump allocator over one backend block: a first pass with base NULL counts the bytes, the second
// hands out pointers (256-byte aligned).
typedef struct { char *base; size_t used; } Arena;
float *arena_take(Arena *a, size_t floats);

typedef struct Net Net;

typedef struct {
    const char *name;         // the metadata value of `backbone`
    const char *family;       // the preset prefix: "DiT" in "DiT-S/2"; the default is <family>-S/2
    const char *presets;      // for messages: "DiT-{T,XS,S,B,L,XL}/{2,4,8}"
    void (*config_default)(NetConfig *c);  // the backbone's fields only
    // Sets the architecture fields from a preset name; 1 when the name is not this backbone's.
    int (*preset)(NetConfig *c, const char *name, MalaErr *err);
    int (*validate)(const NetConfig *c, MalaErr *err);
    void (*describe)(const NetConfig *c, char *buf, size_t n);
    const char *(*mixer)(const NetConfig *c);  // the token mixer: "mala", "softmax", "linear", "gla"
    // The backbone's metadata keys (the common ones are read by net_config_read).
    int (*read_meta)(const StFile *f, NetConfig *c, MalaErr *err);
    void (*write_meta)(StWriter *w, const NetConfig *c);
    double (*flops_per_image)(const NetConfig *c);  // forward, multiply-add = 2
    // A shape that cannot represent its output (optional, NULL = none): an error with the reason.
    int (*learnable)(const NetConfig *c, MalaErr *err);
    void (*build)(Net *n);              // the parameter table (net_add_param) and n->impl
    void (*layout)(Net *n, Arena *a);   // activations and scratch for n->max_batch images
    void (*destroy)(Net *n);            // frees n->impl
    // The official initialisation into a host buffer of n_floats (zeroed by the caller).
    void (*init_weights)(const Net *n, float *host, uint64_t seed);
    void (*forward)(Net *n, float *out, const float *x, const float *t, const int32_t *y, int B);
    void (*backward)(Net *n, float *grad, const float *dout, int B);
    // Optional (NULL: the backbone has no attention rows, as DiG and DiC): the geometry, and the
    // row of query token `query` of image `image` of the last forward, for block `block` and head
    // `head` (< 0: the mean over heads), with the query scaled by a (backend.h attn_row), into
    // row[gh*gw] (host memory). Needs a network created with NET_INFER_ATTN.
    void (*attn_info)(const Net *n, AttnRowInfo *info);
    void (*attn_row)(Net *n, float *row, int block, int head, int image, int query, float a);
} NetOps;

struct Net {
    const NetOps *ops;
    NetConfig cfg;
    const Backend *be;
    int mode, max_batch;
    int last_batch;            // images of the last forward (0 before the first)
    int out_channels;          // C_out = C or 2C
    int nparams;
    ParamInfo *params;         // trainable tensors first, then fixed ones (pos_embed)
    size_t n_trainable, n_floats;
    void *arena;
    size_t arena_bytes;
    float *w;                  // parameters [n_floats], backend memory
    // Sampling at int8 (net_holds_q8): the quant8 tensors are held as int8 rows and row scales only,
    // in q8w (backend memory, q8_bytes; in the arena), and n_floats leaves them out. 0 otherwise.
    int q8;
    char *q8w;
    size_t q8_bytes;
    void *impl;                // the backbone's offsets and activations
    int params_cap;
    // the class blend (model/label_blend.c): on, classes a and b, weight w; label_mix is the
    // backend scratch of one mixed label table (inference modes of class-conditional models only)
    int blend_on, blend_a, blend_b;
    float blend_w;
    float *label_mix;
    size_t label_mix_floats;
};

// ---- configuration ----
const NetOps *net_backbone(BackboneKind k);
int backbone_parse(const char *s, BackboneKind *k);
const char *backbone_name(BackboneKind k);
// For help texts: "dit|dig" and "DiT-{T,XS,S,B,L,XL}/{2,4,8}, DiG-{...}" over every backbone.
const char *backbone_names(void);
const char *backbone_presets(void);
// DiT-S/2 MALA, 32x32x1, 10 classes, learned sigma.
void net_config_default(NetConfig *c, BackboneKind k);
// A preset's canonical spelling ("dit-t/4" -> "DiT-T/4"): the family as registered, the rest in capitals.
const char *net_preset_canonical(const char *name, char *buf, size_t n);
// A preset of any backbone ("DiT-S/2", ...; any case): sets the backbone and its architecture fields.
int net_config_preset(NetConfig *c, const char *name, MalaErr *err);
int net_config_validate(const NetConfig *c, MalaErr *err);
void net_config_describe(const NetConfig *c, char *buf, size_t n);
double net_flops_per_image(const NetConfig *c);
const char *net_mixer_name(const NetConfig *c);
// 0, or an error saying why a network of this shape cannot learn (a token narrower than the values
// it must predict). Loading files does not check this; starting to train does.
int net_check_learnable(const NetConfig *c, MalaErr *err);
// Model-file metadata: `backbone` (absent = dit), image_size in_channels num_classes learn_sigma,
// then the backbone's keys. Keys nobody uses are ignored.
int net_config_read(const StFile *f, NetConfig *c, MalaErr *err);
void net_config_write(StWriter *w, const NetConfig *c);

// ---- the network ----
// Backend bytes a network of this configuration allocates for max_batch images.
size_t net_arena_bytes(const NetConfig *c, const Backend *be, int max_batch, int mode);
// Parameter floats of a network of this configuration (n_floats), and its trainable ones.
size_t net_param_floats(const NetConfig *c, size_t *trainable);
// The parameter table (params, nparams, n_floats, cfg) of configuration c, with no memory for the
// weights or activations (w unset): for checks before anything is allocated. Free with net_plan_free.
Net *net_plan(const NetConfig *c);
void net_plan_free(Net *n);
// A network for sampling (any mode but NET_TRAIN) on a backend running int8 (be->precision() "int8":
// the CPU's --precision int8) holds its quant8 tensors in int8 only (Net.q8): their fp32 values are
// never allocated, and it runs them through Backend.linear_fwd_q8 whatever the precision is later.
Net *net_create(const NetConfig *c, const Backend *be, int max_batch, int mode);
// 1 when net_create(c, be, _, mode) makes a network holding int8 weights (see above).
int net_holds_q8(const Backend *be, int mode);
void net_free(Net *n);
const ParamInfo *net_find_param(const Net *n, const char *name);
// Writes the official initialisation into n->w (and, in a q8 network, its int8 tensors, quantised).
void net_init_weights(Net *n, uint64_t seed);
// Parameter p's values (host, p->numel floats) into the network: into w, or in a q8 network a quant8
// tensor quantised by rows (core/quant8.h: what the CPU's int8 products do to fp32 weights).
void net_put_param(Net *n, const ParamInfo *p, const float *host);
// A quant8 tensor of a q8 network from a q8 file's int8 rows q and row scales: the values q * scale
// quantised again, row by row (so the same int8 weights as from loading those values as floats), with
// one row of floats as scratch.
void net_put_param_q8(Net *n, const ParamInfo *p, const int8_t *q, const float *scale);
// A quant8 tensor of a q8 network: its int8 rows q [rows, cols] and their scales [rows] into host
// memory.
void net_get_param_q8(const Net *n, const ParamInfo *p, int8_t *q, float *scale);
// Where a q8 network's quant8 tensor at q8 byte offset `off` with `rows` output rows keeps its int8
// rows and scales (backend memory): what Backend.linear_fwd_q8 takes.
void net_q8_weights(const Net *n, size_t off, int rows, const int8_t **q, const float **scale);
// out [B, C_out, S, S] = net(x [B,C,S,S], t [B] (float timesteps), y [B] (K = the null class)).
// Backend pointers; B <= max_batch.
void net_forward(Net *n, float *out, const float *x, const float *t, const int32_t *y, int B);
// Adds d(loss)/d(params) into grad [n_floats] given dout = d(loss)/d(out) of the last forward.
void net_backward(Net *n, float *grad, const float *dout, int B);

// Attention rows of the last forward (NetOps attn_row): 0 and the geometry when the backbone has
// them, else -1 with the reason in err.
int net_attn_info(const Net *n, AttnRowInfo *info, MalaErr *err);
// 0 and row[gh*gw] (host), or -1 with err naming what is out of range or missing (a backbone
// without rows, a network not created with NET_INFER_ATTN, no forward yet, an image beyond the
// last forward's batch).
int net_attn_row(Net *n, float *row, int block, int head, int image, int query, float a, MalaErr *err);

// For backbones: the initialisation distributions (PyTorch's nn.init, our Philox stream).
void init_xavier_uniform(Rng *r, float *w, size_t fan_out, size_t fan_in, double gain);
void init_normal(Rng *r, float *w, size_t n, float std);
void init_uniform(Rng *r, float *w, size_t n, double bound);

// For backbones: appends a row to the parameter table, returns its offset.
size_t net_add_param(Net *n, const char *name, int ndim, const int64_t *shape);
// The same for a quant8 tensor (a linear weight [out, in] that Backend.linear_fwd_quant takes): in a
// q8 network it takes no floats and the return value is its q8_offset, for net_q8_weights.
size_t net_add_param_quant8(Net *n, const char *name, int ndim, const int64_t *shape);
#define NET_SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NET_NDIM(...) ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

// ---- class blend (model/label_blend.c) ----
// Until net_clear_label_blend, every conditional label (y < num_classes) of a forward embeds as
// (1 - w) e_a + w e_b, in every label table of the backbone; the null label (y = num_classes, the
// unconditional half of a guided batch) keeps its own row. w = 0 gives e_a and w = 1 e_b exactly.
// -1 with err for classes out of range, w outside [0, 1], an unconditional model or NET_TRAIN.
int net_set_label_blend(Net *n, int a, int b, float w, MalaErr *err);
void net_clear_label_blend(Net *n);
// For backbones, in place of embed_fwd on a label table: out [B, C] = table [K + 1, C] rows y, or
// the blend when one is set (a mixed copy of the table in n->label_mix: K rows of the blend, then
// the null row).
void net_embed_labels(Net *n, float *out, const float *table, const int32_t *y, int B, int C);
// For net.c: the floats of label_mix, from the parameter table's label tables (names ending in
// "embedding_table.weight"): the widest of them, K + 2 rows (one of scratch). 0 without classes.
size_t net_label_mix_size(const Net *n);

// ---- attention kinds (DiT's token mixers) ----
const char *attn_kind_name(AttnKind k);
int attn_kind_parse(const char *s, AttnKind *k);
// Default attention flags for a kind: mala rope on + lepe 5; softmax none; linear rope on + lepe 5.
void dit_config_attn_defaults(DitConfig *c, AttnKind k);
// The --attn setting s: a kind's defaults, or "mala-authors", MALA with every part of its authors'
// block (qhfan/MALA AddLinearAttention and Block): RoPE, LePE 5, the output gate, CPE 3 and the
// FFN's 3x3 depthwise conv. -1 for an unknown name.
int dit_config_attn_setting(DitConfig *c, const char *s);
#define DIT_ATTN_SETTINGS "mala, softmax, linear or mala-authors"

#endif

// The DiT backbone (docs/design.md §1-2) with MALA / softmax / linear attention, behind the network
// interface (net.h). What the three files of the backbone share: dit.c (table, activations,
// forward, backward), dit_config.c (presets, validation, metadata, FLOPs), dit_init.c (DiT's
// initialize_weights).
#ifndef MALA_DIT_H
#define MALA_DIT_H

#include "model/dit_embed.h"
#include "model/net.h"

// Offsets (in floats) of one block's tensors in the parameter buffer; SIZE_MAX when absent. In a q8
// network (net.h) the quant8 weights' (qkv_w, proj_w, gate_w, fc1_w, fc2_w) are bytes into Net.q8w.
typedef struct {
    size_t qkv_w, qkv_b, proj_w, proj_b, lepe_w, lepe_b, gate_w, gate_b;
    size_t fc1_w, fc1_b, fc2_w, fc2_b, ada_w, ada_b;
    size_t dw_w, dw_b, pos_w, pos_b;  // mlp.dwconv (ffn_dwconv), pos (cpe)
} BlockOffsets;

typedef struct BlockActs BlockActs;

// Per-network activations (dit.c); BlockActs has depth entries in training, one in inference.
typedef struct {
    BlockActs *blk;
    float *x;               // [BL, H] residual stream
    float *xm, *y, *h2;     // shared scratch
    float *h3;              // [BL, 4H] h2 + dwconv(h2) (ffn_dwconv only; shared scratch)
    // backward (training only); dxm, dxhat are the embedder's (DitEmbed) scratch
    float *dx, *dxm, *dxhat, *dmo, *dh2, *dao, *dy, *do_, *dg, *dqkv, *dqkr, *dada;
} DitActs;

// One attention kind's backend ops; kernel: phi = ELU+1 is applied to q and k first (mala, linear).
typedef struct {
    int kernel;
    size_t (*cache_floats)(AttnShape s);
    void (*fwd)(float *out, float *cache, const float *qkv, const float *qkr, AttnShape s);
    void (*bwd)(float *dqkv, float *dqkr, const float *dout, const float *qkv, const float *qkr, float *cache,
                AttnShape s);
} DitAttnOps;

// The backbone state behind Net.impl.
typedef struct {
    int T, gh;  // tokens, grid side
    DitAttnOps attn;
    DitEmbed e; // embedders, final layer and their activations
    BlockOffsets *blk;
    DitActs acts;
    // NET_INFER_ATTN only (else NULL): every block's qkv [depth][B*L*3H] and qkr [depth][B*L*2H]
    // (rope only) of the last forward, as the attention op saw them, and a row [L] for attn_row.
    float *keep_qkv, *keep_qkr, *row;
} Dit;

// dit_config.c
void dit_config_default(NetConfig *c);
int dit_config_preset(NetConfig *c, const char *preset, MalaErr *err);
int dit_config_validate(const NetConfig *c, MalaErr *err);
void dit_config_describe(const NetConfig *c, char *buf, size_t n);
const char *dit_mixer(const NetConfig *c);
int dit_read_meta(const StFile *f, NetConfig *c, MalaErr *err);
void dit_write_meta(StWriter *w, const NetConfig *c);
double dit_flops_per_image(const NetConfig *c);

// dit_attn_rows.c (the viewer's attention maps)
void dit_attn_info(const Net *n, AttnRowInfo *info);
void dit_attn_row(Net *n, float *row, int block, int head, int image, int query, float a);

// dit_init.c
void dit_init_weights(const Net *n, float *w, uint64_t seed);

#endif

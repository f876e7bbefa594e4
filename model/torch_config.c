// defines: torch_infer_config, torch_check_fit
#include "model/torch_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const TorchTensor *shaped(const TorchLegacy *t, const char *name, int ndim) {
    const TorchTensor *x = torch_legacy_find(t, name);
    return x && x->ndim == ndim ? x : NULL;
}

// DiT's presets (models.py): S 384/6, B 768/12, L 1024/16, XL 1152/16.
static int preset_heads(int hidden) {
    switch (hidden) {
    case 384: return 6;
    case 768: return 12;
    case 1024: case 1152: return 16;
    default: return 0;
    }
}

// args.model as DiT's train.py writes it: "DiT-XL/2".
static int arg_heads(const char *model) {
    static const struct { const char *size; int heads; } k[] = {{"XL", 16}, {"L", 16}, {"B", 12}, {"S", 6}};
    if (!model || strncmp(model, "DiT-", 4) != 0) return 0;
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(k[i].size);
        if (strncmp(model + 4, k[i].size, n) == 0 && model[4 + n] == '/') return k[i].heads;
    }
    return 0;
}

// The number of consecutive blocks.{i}.<rest> from 0.
static int count_blocks(const TorchLegacy *t, const char *rest) {
    int depth = 0;
    for (;; depth++) {
        char name[128];
        snprintf(name, sizeof name, "blocks.%d.%s", depth, rest);
        if (!torch_legacy_find(t, name)) return depth;
    }
}

// What DiT and DiG share (DiG's models_dig.py keeps DiT's embedders and final layer): the patch
// embedding, pos_embed, the label table and the final layer give width, patch, channels, image
// size, classes and learned sigma. *hidden and *patch out.
static int patch_model(const TorchLegacy *t, NetConfig *c, int *hidden_out, int *patch_out, MalaErr *err) {
    const char *path = torch_file_name(t);
    const TorchTensor *xe = shaped(t, "x_embedder.proj.weight", 4), *pe = shaped(t, "pos_embed", 3),
                      *ye = shaped(t, "y_embedder.embedding_table.weight", 2),
                      *fl = shaped(t, "final_layer.linear.weight", 2);
    const char *missing = !xe ? "x_embedder.proj.weight [hidden, C, p, p]" : !pe ? "pos_embed [1, T, hidden]"
                        : !ye ? "y_embedder.embedding_table.weight [classes + 1, hidden]"
                        : !fl ? "final_layer.linear.weight [p*p*C_out, hidden]" : NULL;
    if (missing) return mala_errf(err, "%s: fits no backbone: no %s", path, missing);
    int hidden = (int)xe->shape[0], p = (int)xe->shape[2];
    c->in_channels = (int)xe->shape[1];
    if (xe->shape[3] != p || p <= 0 || hidden <= 0 || c->in_channels <= 0)
        return mala_errf(err, "%s: x_embedder.proj.weight is not [hidden, C, p, p]", path);
    int64_t T = pe->shape[1];
    int grid = (int)llround(sqrt((double)T));
    if (pe->shape[0] != 1 || pe->shape[2] != hidden || (int64_t)grid * grid != T)
        return mala_errf(err, "%s: pos_embed [%lld, %lld, %lld] is not [1, grid^2, %d]", path, (long long)pe->shape[0],
                         (long long)T, (long long)pe->shape[2], hidden);
    c->image_size = grid * p;
    if (ye->shape[1] != hidden || ye->shape[0] < 1)
        return mala_errf(err, "%s: y_embedder.embedding_table.weight is not [classes + 1, %d]", path, hidden);
    c->num_classes = (int)ye->shape[0] - 1;
    int64_t out = fl->shape[0] / ((int64_t)p * p);
    if (fl->shape[1] != hidden || out * p * p != fl->shape[0] || (out != c->in_channels && out != 2 * c->in_channels))
        return mala_errf(err, "%s: final_layer.linear.weight [%lld, %lld] fits neither C nor 2C outputs", path,
                         (long long)fl->shape[0], (long long)fl->shape[1]);
    c->learn_sigma = out == 2 * c->in_channels;
    *hidden_out = hidden;
    *patch_out = p;
    return 0;
}

static int infer_dit(const TorchLegacy *t, int heads, NetConfig *c, MalaErr *err) {
    int hidden, p;
    if (patch_model(t, c, &hidden, &p, err)) return -1;
    c->backbone = BACKBONE_DIT;
    int depth = count_blocks(t, "attn.qkv.weight");
    if (heads <= 0) heads = arg_heads(torch_file_arg(t, "model"));
    if (heads <= 0) heads = preset_heads(hidden);
    if (heads <= 0)
        return mala_errf(err, "%s: hidden size %d is none of DiT's presets (384, 768, 1024, 1152): give --heads",
                         torch_file_name(t), hidden);
    c->dit = (DitConfig){.depth = depth, .hidden = hidden, .heads = heads, .patch = p, .attn = ATTN_SOFTMAX};
    return 0;
}

// DiG (models_dig.py, DiG_*_bid_layer_dwconv_qdir): GLA heads from the RMSNorm of one head's values,
// blocks.{i}.attn.g_norm_swish_gate.weight [hidden / heads] (model/dig.c).
static int infer_dig(const TorchLegacy *t, int heads, NetConfig *c, MalaErr *err) {
    int hidden, p;
    if (patch_model(t, c, &hidden, &p, err)) return -1;
    c->backbone = BACKBONE_DIG;
    const TorchTensor *gn = shaped(t, "blocks.0.attn.g_norm_swish_gate.weight", 1);
    if (!gn || gn->shape[0] < 1 || hidden % gn->shape[0])
        return mala_errf(err, "%s: fits no backbone: DiG's blocks.0.attn.g_norm_swish_gate.weight [hidden / heads] is "
                         "missing or does not divide hidden %d", torch_file_name(t), hidden);
    if (heads <= 0) heads = hidden / (int)gn->shape[0];
    c->dig = (DigConfig){.depth = count_blocks(t, "attn.q_proj.weight"), .hidden = hidden, .heads = heads, .patch = p};
    return 0;
}

// The modules the three backbones' state dicts are made of (a name's first part).
static int known_module(const char *name) {
    static const char *const mods[] = {"pos_embed", "x_embedder", "t_embedder", "y_embedder", "blocks",
                                       "final_layer", "t_embedder_ls", "y_embedder_ls", "enc_blocks", "lat_blocks",
                                       "dec_blocks", "downs", "ups", "output"};
    size_t n = strcspn(name, ".");
    for (size_t i = 0; i < sizeof mods / sizeof *mods; i++)
        if (strlen(mods[i]) == n && !strncmp(name, mods[i], n)) return 1;
    return 0;
}

static int no_backbone(const TorchLegacy *t, MalaErr *err) {
    const char *path = torch_file_name(t);
    for (int i = 0; i < torch_legacy_count(t); i++) {
        const char *name = torch_legacy_tensor(t, i)->name;
        if (!known_module(name))
            return mala_errf(err, "%s: fits no backbone: tensor '%s' is none of DiT's, DiG's or DiC's", path, name);
    }
    return mala_errf(err, "%s: fits no backbone: it has none of DiT's blocks.0.attn.qkv.weight, DiG's "
                     "blocks.0.attn.q_proj.weight, DiC's t_embedder_ls.0.mlp.0.weight (%d tensors)", path,
                     torch_legacy_count(t));
}

static void shape_str(char *buf, size_t n, const int64_t *shape, int ndim) {
    buf[0] = 0;
    for (int d = 0; d < ndim; d++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", d ? ", " : "[", (long long)shape[d]);
    snprintf(buf + strlen(buf), n - strlen(buf), "]");
}

int torch_check_fit(const TorchLegacy *t, const NetConfig *c, MalaErr *err) {
    Net *m = net_plan(c);
    char desc[256], have[96];
    net_config_describe(c, desc, sizeof desc);
    int rc = 0;
    for (int i = 0; i < torch_legacy_count(t) && !rc; i++) {
        const TorchTensor *x = torch_legacy_tensor(t, i);
        const ParamInfo *p = net_find_param(m, x->name);
        int same = p && p->ndim == x->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = p->shape[d] == x->shape[d];
        shape_str(have, sizeof have, x->shape, x->ndim);
        if (!same)
            rc = mala_errf(err, "%s: fits no backbone: tensor '%s' %s is not one of the model its other tensors give "
                           "(%s)", torch_file_name(t), x->name, have, desc);
    }
    for (int i = 0; i < m->nparams && !rc; i++)
        if (!torch_legacy_find(t, m->params[i].name)) {
            shape_str(have, sizeof have, m->params[i].shape, m->params[i].ndim);
            rc = mala_errf(err, "%s: fits no backbone: no tensor '%s' %s of the model its other tensors give (%s)",
                           torch_file_name(t), m->params[i].name, have, desc);
        }
    net_plan_free(m);
    return rc;
}

int torch_infer_config(const TorchLegacy *t, int heads, NetConfig *c, MalaErr *err) {
    memset(c, 0, sizeof *c);
    int rc;
    if (torch_legacy_find(t, "t_embedder_ls.0.mlp.0.weight")) rc = torch_infer_dic(t, c, err);
    else if (torch_legacy_find(t, "blocks.0.attn.q_proj.weight")) rc = infer_dig(t, heads, c, err);
    else if (torch_legacy_find(t, "blocks.0.attn.qkv.weight")) rc = infer_dit(t, heads, c, err);
    else rc = no_backbone(t, err);
    if (rc) return -1;
    if (c->in_channels == 4) c->latent_scale = 0.18215f;
    return 0;
}

// defines: torch_infer_config
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

int torch_infer_config(const TorchLegacy *t, int heads, NetConfig *c, MalaErr *err) {
    const char *path = torch_file_name(t);
    if (torch_legacy_find(t, "blocks.0.attn.q_proj.weight") || torch_legacy_find(t, "t_embedder_ls.0.mlp.0.weight"))
        return mala_errf(err, "%s: a %s state dict: only DiT's can be read from a PyTorch file yet", path,
                         torch_legacy_find(t, "t_embedder_ls.0.mlp.0.weight") ? "DiC" : "DiG");
    const TorchTensor *xe = shaped(t, "x_embedder.proj.weight", 4), *pe = shaped(t, "pos_embed", 3),
                      *ye = shaped(t, "y_embedder.embedding_table.weight", 2),
                      *fl = shaped(t, "final_layer.linear.weight", 2);
    const char *missing = !xe ? "x_embedder.proj.weight [hidden, C, p, p]" : !pe ? "pos_embed [1, T, hidden]"
                        : !ye ? "y_embedder.embedding_table.weight [classes + 1, hidden]"
                        : !fl ? "final_layer.linear.weight [p*p*C_out, hidden]" : NULL;
    if (missing) {
        const TorchTensor *first = torch_legacy_tensor(t, 0);
        return mala_errf(err, "%s: fits no backbone: no %s (first tensor: %s)", path, missing,
                         first ? first->name : "none");
    }
    memset(c, 0, sizeof *c);
    c->backbone = BACKBONE_DIT;
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
    int depth = 0;
    for (;; depth++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn.qkv.weight", depth);
        if (!torch_legacy_find(t, name)) break;
    }
    if (depth == 0) return mala_errf(err, "%s: fits no backbone: no blocks.0.attn.qkv.weight", path);
    if (heads <= 0) heads = arg_heads(torch_file_arg(t, "model"));
    if (heads <= 0) heads = preset_heads(hidden);
    if (heads <= 0)
        return mala_errf(err, "%s: hidden size %d is none of DiT's presets (384, 768, 1024, 1152): give --heads", path,
                         hidden);
    c->dit = (DitConfig){.depth = depth, .hidden = hidden, .heads = heads, .patch = p, .attn = ATTN_SOFTMAX};
    if (c->in_channels == 4) c->latent_scale = 0.18215f;
    return 0;
}

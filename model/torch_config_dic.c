// defines: torch_infer_dic
#include "model/torch_config.h"

#include <stdio.h>
#include <string.h>

static const TorchTensor *shaped(const TorchLegacy *t, const char *name, int ndim) {
    const TorchTensor *x = torch_legacy_find(t, name);
    return x && x->ndim == ndim ? x : NULL;
}

// The blocks of stage s as DiC names them (model/dic.c): enc_blocks.{s}.{b} below the middle level,
// lat_blocks.0.{b} at it, dec_blocks.{s-L}.{b} above.
static void block_name(char *buf, size_t n, int s, int L, int b, const char *rest) {
    if (s < L - 1) snprintf(buf, n, "enc_blocks.%d.%d.conv.%s", s, b, rest);
    else if (s == L - 1) snprintf(buf, n, "lat_blocks.0.%d.conv.%s", b, rest);
    else snprintf(buf, n, "dec_blocks.%d.%d.conv.%s", s - L, b, rest);
}

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

int torch_infer_dic(const TorchLegacy *t, NetConfig *c, MalaErr *err) {
    const char *path = torch_file_name(t);
    c->backbone = BACKBONE_DIC;
    DicConfig *d = &c->dic;
    const TorchTensor *xe = shaped(t, "x_embedder.proj.weight", 4),
                      *ye = shaped(t, "y_embedder_ls.0.embedding_table.weight", 2),
                      *fl = shaped(t, "final_layer.out_proj.weight", 4);
    const char *missing = !xe ? "x_embedder.proj.weight [W, C, 3, 3]"
                        : !ye ? "y_embedder_ls.0.embedding_table.weight [classes + 1, W]"
                        : !fl ? "final_layer.out_proj.weight [C_out, W, 3, 3]" : NULL;
    if (missing) return mala_errf(err, "%s: fits no backbone: DiC's %s is missing", path, missing);
    c->in_channels = (int)xe->shape[1];
    c->num_classes = (int)ye->shape[0] - 1;
    c->learn_sigma = fl->shape[0] == 2 * c->in_channels;
    // one time embedder per level: L levels, n = 2L - 1 stages
    int L = 0;
    char name[128];
    for (; L <= 4; L++) {
        snprintf(name, sizeof name, "t_embedder_ls.%d.mlp.0.weight", L);
        if (!shaped(t, name, 2)) break;
    }
    if (L != 3 && L != 4)
        return mala_errf(err, "%s: fits no backbone: %d DiC time embedders (t_embedder_ls.*), not 3 or 4 levels", path,
                         L);
    d->n = 2 * L - 1;
    int W[DIC_MAX_STAGES], hidden = 0, max_depth = 0;
    for (int s = 0; s < d->n; s++) {
        for (d->depths[s] = 0;; d->depths[s]++) {
            block_name(name, sizeof name, s, L, d->depths[s], "conv1.weight");
            if (!shaped(t, name, 4)) break;
        }
        if (d->depths[s] == 0) {
            block_name(name, sizeof name, s, L, 0, "conv1.weight");
            return mala_errf(err, "%s: fits no backbone: no DiC block %s", path, name);
        }
        block_name(name, sizeof name, s, L, 0, "conv1.weight");
        W[s] = (int)shaped(t, name, 4)->shape[0];  // the stage's width: its blocks' output channels
        if (W[s] < 1) return mala_errf(err, "%s: %s has no channels", path, name);
        hidden = gcd(hidden, W[s]);
        if (d->depths[s] > max_depth) max_depth = d->depths[s];
    }
    // hidden x multipliers is all the network sees of either: the common divisor gives the official
    // split (DiC-S: 96 x [1, 2, 4, 2, 1]) and the same network for any other
    d->hidden = hidden;
    for (int s = 0; s < d->n; s++) d->multipliers[s] = W[s] / hidden;
    // the skip concatenations: decoder block b takes one (and has a 1x1 skip conv) when b is a
    // multiple of the stride; a stride past every depth concatenates at block 0 only, as any other
    d->skip_stride = max_depth;
    for (int s = L; s < d->n; s++)
        for (int b = 1; b < d->depths[s] && b < d->skip_stride; b++) {
            block_name(name, sizeof name, s, L, b, "skip.weight");
            if (torch_legacy_find(t, name)) d->skip_stride = b;
        }
    // the image size: nothing in the convolutions fixes it; a training checkpoint's args.image_size
    // (pixels; SD-VAE latents are 8x smaller), else 32, the latent grid of DiC's 256x256 models
    int64_t size = 0;
    if (!torch_file_arg_int(t, "image_size", &size) && size > 0 && size <= 65536)
        c->image_size = (int)(c->in_channels == 4 ? size / 8 : size);
    else
        c->image_size = 32;
    return 0;
}

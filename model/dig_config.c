// DiG configuration: presets (the official ones plus T and XS for the CPU), validation, metadata
// (the DiT keys; docs/design.md §7), FLOPs.
// defines: dig_dims, dig_config_default, dig_config_preset, dig_config_validate,
//          dig_config_describe, dig_read_meta, dig_write_meta, dig_flops_per_image
#include <stdio.h>
#include <string.h>

#include "model/dig.h"
#include "formats/st_meta.h"

typedef struct { const char *name; int depth, hidden, heads; } Preset;

// models_dig.py's S/B/L/XL (XL is the official 18-head variant) and three CPU presets whose depths
// are multiples of 4, so the four scan directions end in the original token order as in theirs.
// T13 is T narrowed to DiT-T's parameter count (1.29M on Fashion-MNIST, for mala compare).
static const Preset PRESETS[] = {
    {"T", 4, 128, 4},   {"T13", 4, 112, 4}, {"XS", 8, 256, 4},   {"S", 12, 384, 6},
    {"B", 12, 768, 12}, {"L", 24, 1024, 16}, {"XL", 28, 1152, 18},
};

DigDims dig_dims(const DigConfig *c) {
    DigDims d;
    d.H = c->hidden;
    d.K = c->hidden / 2;  // expand_k 0.5
    d.V = c->hidden;      // expand_v 1
    d.dk = d.K / c->heads;
    d.dv = d.V / c->heads;
    d.I = 256 * ((8 * c->hidden / 3 + 255) / 256);  // GLAMLP: int(H * 4 * 2/3) rounded up to 256
    return d;
}

void dig_config_default(NetConfig *nc) {
    DigConfig *c = &nc->dig;
    c->depth = 12; c->hidden = 384; c->heads = 6; c->patch = 2;
}

int dig_config_preset(NetConfig *nc, const char *preset, MalaErr *err) {
    if (strncmp(preset, "DiG-", 4)) return 1;
    const char *s = preset + 4, *slash = strchr(s, '/');
    size_t len = slash ? (size_t)(slash - s) : strlen(s);
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        if (strlen(PRESETS[i].name) != len || strncmp(PRESETS[i].name, s, len)) continue;
        int patch = 2;
        if (slash) {
            if (strcmp(slash, "/2") && strcmp(slash, "/4") && strcmp(slash, "/8"))
                return mala_errf(err, "--model %s: patch size must be 2, 4 or 8", preset);
            patch = slash[1] - '0';
        }
        nc->dig = (DigConfig){PRESETS[i].depth, PRESETS[i].hidden, PRESETS[i].heads, patch};
        return 0;
    }
    return 1;
}

int dig_config_validate(const NetConfig *nc, MalaErr *err) {
    const DigConfig *c = &nc->dig;
    if (c->depth < 1 || c->hidden < 4 || c->heads < 1 || c->patch < 1)
        return mala_errf(err, "model: depth, hidden, heads and patch must be positive");
    if (c->hidden % 4)
        return mala_errf(err, "model: hidden %d must be a multiple of 4 (sin-cos position embedding)", c->hidden);
    if ((c->hidden / 2) % c->heads)
        return mala_errf(err, "model: DiG's key width hidden/2 = %d is not divisible by heads %d", c->hidden / 2,
                         c->heads);
    if (nc->image_size % c->patch)
        return mala_errf(err, "model: image size %d is not a multiple of patch %d", nc->image_size, c->patch);
    return 0;
}

void dig_config_describe(const NetConfig *nc, char *buf, size_t n) {
    const DigConfig *c = &nc->dig;
    snprintf(buf, n, "depth %d, hidden %d, heads %d, patch %d, gla", c->depth, c->hidden, c->heads, c->patch);
}

int dig_read_meta(const StFile *f, NetConfig *nc, MalaErr *err) {
    DigConfig *c = &nc->dig;
    if (st_meta_need_int(f, "depth", &c->depth, err) || st_meta_need_int(f, "hidden", &c->hidden, err) ||
        st_meta_need_int(f, "heads", &c->heads, err) || st_meta_need_int(f, "patch", &c->patch, err))
        return -1;
    return 0;
}

void dig_write_meta(StWriter *w, const NetConfig *nc) {
    const DigConfig *c = &nc->dig;
    st_writer_meta_int(w, "depth", c->depth);
    st_writer_meta_int(w, "hidden", c->hidden);
    st_writer_meta_int(w, "heads", c->heads);
    st_writer_meta_int(w, "patch", c->patch);
}

// Multiply-adds x 2 of the forward pass, counted as dit_flops_per_image counts DiT's (docs/math/dig.md):
// the Linears, the 3x3 conv and 2 T dk dv per head for the GLA (k^T v into the state, q S).
double dig_flops_per_image(const NetConfig *nc) {
    const DigConfig *c = &nc->dig;
    DigDims d = dig_dims(c);
    double H = d.H, K = d.K, V = d.V, r = DIG_GATE_RANK, I = d.I, p = c->patch;
    double g = nc->image_size / c->patch, T = g * g, cout = nc->in_channels * (nc->learn_sigma ? 2 : 1);
    double per_block = T * (2 * H * K + 2 * H * V + H * r + r * K + V * H + 3 * H * I + 9 * H) + 2 * T * K * d.dv +
                       6 * H * H;
    double mac = c->depth * per_block + T * p * p * nc->in_channels * H + (DIT_FREQ_DIM * H + H * H) + 2 * H * H +
                 T * H * p * p * cout;
    return 2.0 * mac;
}

// DiT configuration: defaults, presets, validation, metadata, names, FLOPs.
// defines: dit_config_default, dit_config_preset, dit_config_validate, attn_kind_name,
//          attn_kind_parse, dit_config_describe, dit_config_attn_defaults, dit_read_meta,
//          dit_write_meta, dit_flops_per_image, dit_config_attn_setting
#include <stdio.h>
#include <string.h>

#include "model/dit.h"
#include "formats/st_meta.h"

typedef struct { const char *name; int depth, hidden, heads; } Preset;

// DiT's presets plus two sized for CPU work (T: minutes, XS: hours on two cores).
static const Preset PRESETS[] = {
    {"T", 4, 128, 4},  {"XS", 6, 256, 4},   {"S", 12, 384, 6},
    {"B", 12, 768, 12}, {"L", 24, 1024, 16}, {"XL", 28, 1152, 16},
};

void dit_config_default(NetConfig *nc) {
    DitConfig *c = &nc->dit;
    memset(c, 0, sizeof *c);
    c->depth = 12; c->hidden = 384; c->heads = 6; c->patch = 2;
    dit_config_attn_defaults(c, ATTN_MALA);
}

void dit_config_attn_defaults(DitConfig *c, AttnKind k) {
    c->attn = k;
    c->rope = k != ATTN_SOFTMAX;
    c->lepe = k != ATTN_SOFTMAX ? 5 : 0;
    c->gate = 0;
    c->cpe = c->ffn_dwconv = 0;
}

int dit_config_attn_setting(DitConfig *c, const char *s) {
    AttnKind k;
    int authors = !strcmp(s, "mala-authors");
    if (authors) k = ATTN_MALA;
    else if (attn_kind_parse(s, &k)) return -1;
    dit_config_attn_defaults(c, k);
    if (authors) c->gate = 1, c->cpe = c->ffn_dwconv = 3;
    return 0;
}

int dit_config_preset(NetConfig *nc, const char *preset, MalaErr *err) {
    DitConfig *c = &nc->dit;
    const char *s = preset;
    if (!strncmp(s, "DiT-", 4)) s += 4;
    else if (strchr(s, '-')) return 1;  // another backbone's family
    const char *slash = strchr(s, '/');
    size_t len = slash ? (size_t)(slash - s) : strlen(s);
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        if (strlen(PRESETS[i].name) != len || strncmp(PRESETS[i].name, s, len)) continue;
        int patch = 2;
        if (slash) {
            if (strcmp(slash, "/2") && strcmp(slash, "/4") && strcmp(slash, "/8"))
                return mala_errf(err, "--model %s: patch size must be 2, 4 or 8", preset);
            patch = slash[1] - '0';
        }
        c->depth = PRESETS[i].depth; c->hidden = PRESETS[i].hidden; c->heads = PRESETS[i].heads;
        c->patch = patch;
        return 0;
    }
    return 1;
}

int dit_config_validate(const NetConfig *nc, MalaErr *err) {
    const DitConfig *c = &nc->dit;
    if (c->depth < 1 || c->hidden < 4 || c->heads < 1 || c->patch < 1)
        return mala_errf(err, "model: depth, hidden, heads and patch must be positive");
    if (c->hidden % c->heads)
        return mala_errf(err, "model: hidden %d is not divisible by heads %d", c->hidden, c->heads);
    if (c->hidden % 4)
        return mala_errf(err, "model: hidden %d must be a multiple of 4 (sin-cos position embedding)", c->hidden);
    if (c->rope && (c->hidden / c->heads) % 4)
        return mala_errf(err, "model: RoPE needs a head dimension divisible by 4 (got %d)", c->hidden / c->heads);
    if (nc->image_size % c->patch)
        return mala_errf(err, "model: image size %d is not a multiple of patch %d", nc->image_size, c->patch);
    if (c->lepe < 0 || (c->lepe && c->lepe % 2 == 0))
        return mala_errf(err, "model: LePE kernel %d must be odd (or 0 = off)", c->lepe);
    if (c->cpe < 0 || (c->cpe && c->cpe % 2 == 0))
        return mala_errf(err, "model: CPE kernel %d must be odd (or 0 = off)", c->cpe);
    if (c->ffn_dwconv < 0 || (c->ffn_dwconv && c->ffn_dwconv % 2 == 0))
        return mala_errf(err, "model: FFN depthwise kernel %d must be odd (or 0 = off)", c->ffn_dwconv);
    if (c->attn < ATTN_MALA || c->attn > ATTN_LINEAR) return mala_errf(err, "model: unknown attention kind");
    return 0;
}

const char *attn_kind_name(AttnKind k) {
    return k == ATTN_MALA ? "mala" : k == ATTN_SOFTMAX ? "softmax" : k == ATTN_LINEAR ? "linear" : "?";
}

int attn_kind_parse(const char *s, AttnKind *k) {
    if (!strcmp(s, "mala")) *k = ATTN_MALA;
    else if (!strcmp(s, "softmax")) *k = ATTN_SOFTMAX;
    else if (!strcmp(s, "linear")) *k = ATTN_LINEAR;
    else return -1;
    return 0;
}

void dit_config_describe(const NetConfig *nc, char *buf, size_t n) {
    const DitConfig *c = &nc->dit;
    int k = snprintf(buf, n, "depth %d, hidden %d, heads %d, patch %d, attn %s%s%s, lepe %d", c->depth, c->hidden,
                     c->heads, c->patch, attn_kind_name(c->attn), c->rope ? " +rope" : "", c->gate ? " +gate" : "",
                     c->lepe);
    if (k < 0 || (size_t)k >= n) return;
    if (c->cpe) k += snprintf(buf + k, n - (size_t)k, ", cpe %d", c->cpe);
    if (c->ffn_dwconv && k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, ", ffn dwconv %d", c->ffn_dwconv);
}

const char *dit_mixer(const NetConfig *c) { return attn_kind_name(c->dit.attn); }

int dit_read_meta(const StFile *f, NetConfig *nc, MalaErr *err) {
    DitConfig *c = &nc->dit;
    if (st_meta_need_int(f, "depth", &c->depth, err) || st_meta_need_int(f, "hidden", &c->hidden, err) ||
        st_meta_need_int(f, "heads", &c->heads, err) || st_meta_need_int(f, "patch", &c->patch, err))
        return -1;
    const char *attn = st_meta(f, "attn");
    AttnKind k = ATTN_SOFTMAX;  // a DiT file without the key is plain DiT
    if (attn && attn_kind_parse(attn, &k))
        return mala_errf(err, "%s: metadata 'attn' = '%s' (expected mala, softmax or linear)", f->path, attn);
    dit_config_attn_defaults(c, k);
    if (st_meta_bool(f, "rope", &c->rope, err) < 0 || st_meta_bool(f, "gate", &c->gate, err) < 0 ||
        st_meta_int(f, "lepe", &c->lepe, err) < 0 || st_meta_int(f, "cpe", &c->cpe, err) < 0 ||
        st_meta_int(f, "ffn_dwconv", &c->ffn_dwconv, err) < 0)
        return -1;
    return 0;
}

void dit_write_meta(StWriter *w, const NetConfig *nc) {
    const DitConfig *c = &nc->dit;
    st_writer_meta_int(w, "depth", c->depth);
    st_writer_meta_int(w, "hidden", c->hidden);
    st_writer_meta_int(w, "heads", c->heads);
    st_writer_meta_int(w, "patch", c->patch);
    st_writer_meta_int(w, "lepe", c->lepe);
    st_writer_meta_bool(w, "rope", c->rope);
    st_writer_meta_bool(w, "gate", c->gate);
    st_writer_meta(w, "attn", attn_kind_name(c->attn));
    // written only when on, so files of models without them keep their metadata byte for byte
    if (c->cpe) st_writer_meta_int(w, "cpe", c->cpe);
    if (c->ffn_dwconv) st_writer_meta_int(w, "ffn_dwconv", c->ffn_dwconv);
}

// Counts multiply-adds of the forward pass (x2 for FLOPs); elementwise work is ignored.
double dit_flops_per_image(const NetConfig *nc) {
    const DitConfig *c = &nc->dit;
    double H = c->hidden, g = nc->image_size / c->patch, T = g * g, d = (double)c->hidden / c->heads;
    double p2 = (double)c->patch * c->patch, cout = nc->in_channels * (nc->learn_sigma ? 2 : 1);
    double per_block = T * (3 * H * H + H * H + 8 * H * H) + 6 * H * H;
    if (c->gate) per_block += T * H * H;
    if (c->attn == ATTN_SOFTMAX) per_block += 2 * T * T * H;
    else per_block += 2 * T * d * H;  // K^T V and Q (KV) per head: 2 T d^2 x heads
    if (c->lepe) per_block += T * H * c->lepe * c->lepe;
    if (c->cpe) per_block += T * H * c->cpe * c->cpe;
    if (c->ffn_dwconv) per_block += T * 4 * H * c->ffn_dwconv * c->ffn_dwconv;
    double mac = c->depth * per_block + T * p2 * nc->in_channels * H + (DIT_FREQ_DIM * H + H * H)
                 + 2 * H * H + T * H * p2 * cout;
    return 2.0 * mac;
}

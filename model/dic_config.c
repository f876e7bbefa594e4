// DiC configuration: presets (the official S/B/XL/H and T for the CPU), the plan and its rules
// (ref_dic.Plan), metadata (hidden, depths and multipliers as JSON arrays, skip_stride; docs/design.md §7),
// FLOPs.
// defines: dic_plan, dic_pushes, dic_pops, dic_block_cin, dic_groups, dic_config_default,
//          dic_config_preset, dic_config_validate, dic_config_describe, dic_read_meta,
//          dic_write_meta, dic_flops_per_image
#include <stdio.h>
#include <string.h>

#include "model/dic.h"
#include "model/dit_embed.h"
#include "formats/json.h"
#include "formats/st_meta.h"

typedef struct { const char *name; int hidden, depths[5]; } Preset;

// dic_models.py's DiC_S/B/XL/H (DiC_default: multipliers [1,2,4,2,1], skip stride 3) and T, a
// third of S's width and depth, sized for minutes on two cores; T13, T narrowed to DiT-T's
// parameter count (1.28M on Fashion-MNIST, for mala compare).
static const Preset PRESETS[] = {
    {"T", 32, {2, 2, 2, 2, 2}},   {"T13", 28, {2, 2, 2, 2, 2}}, {"S", 96, {6, 6, 5, 6, 6}},
    {"B", 192, {6, 6, 5, 6, 6}},  {"XL", 384, {7, 7, 8, 7, 7}}, {"H", 384, {14, 14, 10, 14, 14}},
};
static const int DEFAULT_MULT[5] = {1, 2, 4, 2, 1};

int dic_groups(int channels) { return channels / 4 < 32 ? channels / 4 : 32; }

int dic_pushes(const DicConfig *c, int s, int b) { return (c->depths[s] - 1 - b) % c->skip_stride == 0; }

int dic_pops(const DicConfig *c, int b) { return b % c->skip_stride == 0; }

int dic_block_cin(const DicConfig *c, const DicPlan *p, int s, int b) {
    return s >= p->L && dic_pops(c, b) ? p->W[s] + p->W[p->n - 1 - s] : p->W[s];
}

int dic_plan(const NetConfig *nc, DicPlan *p, MalaErr *err) {
    const DicConfig *c = &nc->dic;
    memset(p, 0, sizeof *p);
    int n = c->n;
    if (n != 5 && n != 7) return mala_errf(err, "model: DiC needs 5 or 7 stages (depths, multipliers), got %d", n);
    int L = (n + 1) / 2;
    p->n = n;
    p->L = L;
    if (c->hidden < 1 || c->skip_stride < 1) return mala_errf(err, "model: DiC hidden and skip_stride must be positive");
    for (int s = 0; s < n; s++) {
        if (c->depths[s] < 1 || c->multipliers[s] < 1)
            return mala_errf(err, "model: DiC depths and multipliers must be positive");
        if (c->depths[s] != c->depths[n - 1 - s]) return mala_errf(err, "model: DiC depths must be mirror-symmetric");
        if ((long long)c->hidden * c->multipliers[s] > DIC_MAX_WIDTH)
            return mala_errf(err, "model: DiC stage %d width %d x %d is over %d channels", s, c->hidden,
                             c->multipliers[s], DIC_MAX_WIDTH);
        p->W[s] = c->hidden * c->multipliers[s];
        int lvl = s < n - 1 - s ? s : n - 1 - s;
        p->R[s] = nc->image_size >> lvl;
    }
    if (nc->image_size % (1 << (L - 1)))
        return mala_errf(err, "model: image size %d is not a multiple of 2^%d (DiC's levels)", nc->image_size, L - 1);
    for (int s = 1; s < L; s++)
        if (p->W[s] % 4) return mala_errf(err, "model: DiC stage %d width %d is not a multiple of 4", s, p->W[s]);
    // conditions: one embedder per level, mirrored, and the last stage's by its multiplier
    int k = -1;
    for (int i = 0; i < L && k < 0; i++)
        if (c->multipliers[i] == c->multipliers[n - 1]) k = i;
    if (k < 0) return mala_errf(err, "model: DiC's last multiplier must equal one of the first %d", L);
    for (int s = 0; s < n; s++) {
        p->cond[s] = s < L ? s : s < n - 1 ? n - 1 - s : k;
        if (c->multipliers[p->cond[s]] != c->multipliers[s])
            return mala_errf(err, "model: DiC stage %d is conditioned by embedder %d of another width", s, p->cond[s]);
    }
    for (int s = 0; s < n; s++)
        for (int b = 0; b < c->depths[s]; b++) {
            int widths[2] = {dic_block_cin(c, p, s, b), p->W[s]};
            for (int j = 0; j < 2; j++) {
                int g = dic_groups(widths[j]);
                if (g < 1 || widths[j] % g)
                    return mala_errf(err, "model: DiC stage %d block %d: GroupNorm of %d channels needs min(32, C/4) "
                                     ">= 1 groups dividing C", s, b, widths[j]);
            }
        }
    return 0;
}

void dic_config_default(NetConfig *nc) {
    DicConfig *c = &nc->dic;
    memset(c, 0, sizeof *c);
    c->hidden = 96;
    c->n = 5;
    memcpy(c->depths, PRESETS[1].depths, sizeof PRESETS[1].depths);
    memcpy(c->multipliers, DEFAULT_MULT, sizeof DEFAULT_MULT);
    c->skip_stride = 3;
}

int dic_config_preset(NetConfig *nc, const char *preset, MalaErr *err) {
    if (strncmp(preset, "DiC-", 4)) return 1;
    for (size_t i = 0; i < sizeof PRESETS / sizeof PRESETS[0]; i++) {
        if (strcmp(PRESETS[i].name, preset + 4)) continue;
        dic_config_default(nc);
        nc->dic.hidden = PRESETS[i].hidden;
        memcpy(nc->dic.depths, PRESETS[i].depths, sizeof PRESETS[i].depths);
        return 0;
    }
    return strchr(preset, '/') ? mala_errf(err, "--model %s: DiC presets have no patch size (DiC-S, ...)", preset) : 1;
}

int dic_config_validate(const NetConfig *nc, MalaErr *err) {
    DicPlan p;
    return dic_plan(nc, &p, err);
}

static void format_list(char *buf, size_t n, const int *v, int len) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < len && o < n; i++) o += (size_t)snprintf(buf + o, n - o, "%s%d", i ? "," : "", v[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

void dic_config_describe(const NetConfig *nc, char *buf, size_t n) {
    const DicConfig *c = &nc->dic;
    char d[64], m[64];
    format_list(d, sizeof d, c->depths, c->n);
    format_list(m, sizeof m, c->multipliers, c->n);
    snprintf(buf, n, "hidden %d, depths %s, multipliers %s, skip stride %d, conv", c->hidden, d, m, c->skip_stride);
}

// A metadata value that is a JSON array of 5 or 7 positive integers.
static int meta_list(const StFile *f, const char *key, int *v, int *len, MalaErr *err) {
    const char *s = st_meta(f, key);
    if (!s) return mala_errf(err, "%s: metadata '%s' is missing", f->path, key);
    MalaErr jerr;
    JsonValue *j = json_parse(s, strlen(s), &jerr);
    int ok = j && j->type == JSON_ARRAY && (j->n == 5 || j->n == 7);
    for (int i = 0; ok && i < j->n; i++) {
        const JsonValue *e = &j->items[i];
        ok = e->type == JSON_NUMBER && e->number >= 1 && e->number <= 100000 && e->number == (int)e->number;
        if (ok) v[i] = (int)e->number;
    }
    if (ok) *len = j->n;
    json_free(j);
    if (!ok) return mala_errf(err, "%s: metadata '%s' = '%s' is not a JSON array of 5 or 7 positive integers", f->path, key,
                              s);
    return 0;
}

int dic_read_meta(const StFile *f, NetConfig *nc, MalaErr *err) {
    DicConfig *c = &nc->dic;
    int nd = 0, nm = 0;
    if (st_meta_need_int(f, "hidden", &c->hidden, err) || st_meta_need_int(f, "skip_stride", &c->skip_stride, err) ||
        meta_list(f, "depths", c->depths, &nd, err) || meta_list(f, "multipliers", c->multipliers, &nm, err))
        return -1;
    if (nd != nm) return mala_errf(err, "%s: metadata 'depths' and 'multipliers' differ in length", f->path);
    c->n = nd;
    return 0;
}

void dic_write_meta(StWriter *w, const NetConfig *nc) {
    const DicConfig *c = &nc->dic;
    char buf[64];
    st_writer_meta_int(w, "hidden", c->hidden);
    format_list(buf, sizeof buf, c->depths, c->n);
    st_writer_meta(w, "depths", buf);
    format_list(buf, sizeof buf, c->multipliers, c->n);
    st_writer_meta(w, "multipliers", buf);
    st_writer_meta_int(w, "skip_stride", c->skip_stride);
}

// Multiply-adds x 2 of the convs and Linears (docs/math/dic.md's formula): down convs on the
// fine grid, up convs on the coarse one.
double dic_flops_per_image(const NetConfig *nc) {
    const DicConfig *c = &nc->dic;
    DicPlan p;
    MalaErr err;
    if (dic_plan(nc, &p, &err)) return 0;
    double C = nc->in_channels, cout = nc->in_channels * (nc->learn_sigma ? 2 : 1), mac = 0;
    mac += 9 * C * p.W[0] * (double)p.R[0] * p.R[0];
    for (int i = 0; i < p.L; i++) mac += DIT_FREQ_DIM * (double)p.W[i] + (double)p.W[i] * p.W[i];
    for (int s = 0; s < p.n; s++)
        for (int b = 0; b < c->depths[s]; b++) {
            double ci = dic_block_cin(c, &p, s, b), co = p.W[s], R2 = (double)p.R[s] * p.R[s];
            mac += R2 * (9 * ci * co + 9 * co * co + (ci != co ? ci * co : 0)) + 3 * co * co;
        }
    for (int s = 0; s < p.L - 1; s++) mac += (double)p.R[s] * p.R[s] * 9 * p.W[s] * (p.W[s + 1] / 4);
    for (int s = p.L; s < p.n; s++) mac += (double)p.R[s - 1] * p.R[s - 1] * 36.0 * p.W[s - 1] * p.W[s];
    double W = p.W[p.n - 1], R2 = (double)p.R[p.n - 1] * p.R[p.n - 1];
    mac += R2 * (9 * W * W + 9 * W * cout) + 2 * W * W;
    return 2.0 * mac;
}

// defines: net_set_label_blend, net_clear_label_blend, net_embed_labels, net_label_mix_size
//
// The class blend (model/net.h): one mechanism for every backbone. A backbone looks its label
// rows up through net_embed_labels; under a blend that reads a mixed copy of the table whose K
// class rows all hold (1 - w) e_a + w e_b and whose null row is the table's own, so the
// unconditional half of a guided batch is unchanged. Everything runs through the op table.
#include <string.h>

#include "model/net.h"

static const char TABLE_SUFFIX[] = "embedding_table.weight";

size_t net_label_mix_size(const Net *n) {
    if (n->cfg.num_classes < 1) return 0;
    size_t width = 0, rows = 0, ls = strlen(TABLE_SUFFIX);
    for (int i = 0; i < n->nparams; i++) {
        const ParamInfo *p = &n->params[i];
        size_t len = strlen(p->name);
        if (p->ndim != 2 || len < ls || strcmp(p->name + len - ls, TABLE_SUFFIX)) continue;
        if ((size_t)p->shape[1] > width) width = (size_t)p->shape[1];
        rows = (size_t)p->shape[0];
    }
    return rows ? (rows + 1) * width : 0;
}

int net_set_label_blend(Net *n, int a, int b, float w, MalaErr *err) {
    const int K = n->cfg.num_classes;
    if (K < 1) return mala_errf(err, "class blend: the model is unconditional (num_classes 0)");
    if (!n->label_mix) return mala_errf(err, "class blend: needs a network created for inference");
    if (a < 0 || a >= K || b < 0 || b >= K)
        return mala_errf(err, "class blend %d,%d: the model has classes 0..%d", a, b, K - 1);
    if (!(w >= 0.0f && w <= 1.0f)) return mala_errf(err, "class blend weight %g: must be in [0, 1]", (double)w);
    n->blend_on = 1;
    n->blend_a = a;
    n->blend_b = b;
    n->blend_w = w;
    return 0;
}

void net_clear_label_blend(Net *n) { n->blend_on = 0; }

// mix [K + 2, C]: rows 0..K-1 the blend, row K the null row, row K + 1 scratch. (1 - w) e_a is
// formed, then w e_b added: w = 0 leaves e_a's bits (1 e_a + 0 e_b) and w = 1 e_b's.
static void build_mix(Net *n, float *mix, const float *table, int C) {
    const Backend *be = n->be;
    const int K = n->cfg.num_classes;
    const size_t row = (size_t)C * sizeof(float);
    float *scratch = mix + (size_t)(K + 1) * C;
    be->copy(mix, table + (size_t)n->blend_a * C, row);
    be->scale(mix, 1.0f - n->blend_w, (size_t)C);
    be->copy(scratch, table + (size_t)n->blend_b * C, row);
    be->scale(scratch, n->blend_w, (size_t)C);
    be->add(mix, mix, scratch, (size_t)C);
    for (int have = 1; have < K; have *= 2) {  // doubling copies: log2(K) of them
        int more = have < K - have ? have : K - have;
        be->copy(mix + (size_t)have * C, mix, (size_t)more * row);
    }
    be->copy(mix + (size_t)K * C, table + (size_t)K * C, row);
}

void net_embed_labels(Net *n, float *out, const float *table, const int32_t *y, int B, int C) {
    if (!n->blend_on) {
        n->be->embed_fwd(out, table, y, B, C);
        return;
    }
    CHECK((size_t)(n->cfg.num_classes + 2) * C <= n->label_mix_floats, "class blend: label table of width %d "
          "exceeds the scratch", C);
    build_mix(n, n->label_mix, table, C);
    n->be->embed_fwd(out, n->label_mix, y, B, C);
}

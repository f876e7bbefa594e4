// defines: torch_file_sniff, torch_class_names, torch_read_config, torch_load_model
#include "model/torch_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/imagenet_classes.h"
#include "model/torch_config.h"

int torch_file_sniff(const char *path) {
    // A zip archive, or the legacy format's first pickle: PROTO 2, LONG1 of 10 bytes, the magic
    // number's first two bytes. A safetensors file starts with its header's length (little-endian
    // u64), which would have to be over 2^60 to match.
    static const unsigned char legacy[6] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc};
    unsigned char head[6] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(head, 1, 6, f);
    fclose(f);
    return (n >= 4 && memcmp(head, "PK\3\4", 4) == 0) || (n == 6 && memcmp(head, legacy, 6) == 0);
}

void torch_class_names(ClassNames *cn, int n) {
    if (n != IMAGENET_CLASSES) { class_names_default(cn, n); return; }
    cn->n = n;
    cn->names = xcalloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) cn->names[i] = xstrdup(imagenet_class_names[i]);
}

static int load_params(const Net *m, TorchLegacy *t, float *host, MalaErr *err) {
    const char *path = torch_file_name(t);
    for (int i = 0; i < torch_legacy_count(t); i++) {
        const TorchTensor *x = torch_legacy_tensor(t, i);
        if (!net_find_param(m, x->name)) {
            char desc[256];
            net_config_describe(&m->cfg, desc, sizeof desc);
            return mala_errf(err, "%s: tensor '%s' does not belong to this model (%s)", path, x->name, desc);
        }
    }
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        const TorchTensor *x = torch_legacy_find(t, p->name);
        if (!x) return mala_errf(err, "%s: no tensor '%s'", path, p->name);
        int same = x->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = x->shape[d] == p->shape[d];
        if (!same) return mala_errf(err, "%s: tensor '%s' has the wrong shape for this model", path, p->name);
        if (m->q8 && p->quant8) {  // a network holding int8 weights (net.h): this tensor's floats, quantised
            float *v = xmalloc(p->numel * sizeof(float));
            const int rc = torch_legacy_read_f32(t, x, v, err);
            if (!rc) net_put_param((Net *)m, p, v);
            free(v);
            if (rc) return -1;
            continue;
        }
        if (torch_legacy_read_f32(t, x, host + p->offset, err)) return -1;
    }
    return 0;
}

int torch_read_config(const char *path, const char *weights, int heads, NetConfig *c, ClassNames *cn, char *what,
                      size_t what_len, MalaErr *err) {
    TorchLegacy *t = torch_file_open(path, weights, err);
    if (!t) return -1;
    if (torch_infer_config(t, heads, c, err) || net_config_validate(c, err) || torch_check_fit(t, c, err)) {
        torch_legacy_close(t);
        return -1;
    }
    if (what) {
        const char *sub = torch_file_weights(t), *arch = torch_file_arg(t, "model");
        snprintf(what, what_len, "a PyTorch file (torch.save, %s format), weights from %s%s%s%s, %d tensors",
                 torch_file_is_zip(t) ? "zip" : "legacy", sub ? "the checkpoint's " : "the top-level state dict",
                 sub ? sub : "", arch ? ", args.model " : "", arch ? arch : "", torch_legacy_count(t));
    }
    torch_legacy_close(t);
    torch_class_names(cn, c->num_classes);
    return 0;
}

Net *torch_load_model(const char *path, const char *weights, int heads, const Backend *be, int max_batch, int mode,
                      ClassNames *cn, MalaErr *err) {
    TorchLegacy *t = torch_file_open(path, weights, err);
    if (!t) return NULL;
    NetConfig c;
    if (torch_infer_config(t, heads, &c, err) || net_config_validate(&c, err) || torch_check_fit(t, &c, err)) {
        torch_legacy_close(t);
        return NULL;
    }
    Net *m = net_create(&c, be, max_batch, mode);
    const int in_place = backend_on_host(be);  // host weights take the floats directly: no second copy
    float *host = in_place ? m->w : xmalloc(m->n_floats * sizeof(float));
    if (load_params(m, t, host, err)) {
        if (!in_place) free(host);
        net_free(m);
        torch_legacy_close(t);
        return NULL;
    }
    if (!in_place) {
        m->be->to_device(m->w, host, m->n_floats * sizeof(float));
        free(host);
    }
    m->be->weights_changed();
    torch_legacy_close(t);
    torch_class_names(cn, c.num_classes);
    return m;
}

// defines: view_config_model_defaults, view_config_load, view_config_model_ready, view_config_save
// The viewer's last settings between runs: view_settings.c reads and writes the file, this file
// maps it onto the View (class, guidance, steps, sampler, eta, seed, grid size, attention view).
#include <string.h>

#include "formats/view_settings.h"
#include "viewer/viewer.h"

#define LATENT_STEPS 20

void view_config_model_defaults(View *v, const char *model) {
    NetConfig c;
    ClassNames cn;
    MalaErr err;
    if (ckpt_file_config(model, &c, &cn, &err)) return;  // worker_check_vae has read it already
    class_names_free(&cn);
    if (!(c.latent_scale > 0)) return;
    v->opts.kind = v->default_kind = SAMPLER_DPMPP_2M;
    v->opts.steps = v->default_steps = LATENT_STEPS;
}

int view_config_load(View *v, const char *path) {
    if (!path) return 0;
    ViewSettings s;
    MalaErr err;
    int rc = view_settings_load(path, &s, &err);
    if (rc == 1) return 0;
    SamplerKind kind = v->opts.kind;
    if (rc == 0 && (s.have & VS_SAMPLER) && sampler_kind_parse(s.sampler, &kind))
        rc = mala_errf(&err, "%s: unknown sampler '%s' (known: %s)", path, s.sampler, sampler_kind_list());
    if (rc) {
        fprintf(stderr, "warning: %s; the saved settings are ignored and the file is left as it is\n", err.msg);
        return -1;
    }
    if (s.have & VS_CLASS) snprintf(v->pending_class, sizeof v->pending_class, "%s", s.cls);
    if (s.have & VS_CFG) v->opts.cfg_scale = s.cfg;
    if (s.have & VS_STEPS) v->opts.steps = s.steps;
    if (s.have & VS_SAMPLER) v->opts.kind = kind;
    if (s.have & VS_ETA) v->opts.eta = s.eta;
    if (s.have & VS_SEED) v->seed = s.seed;
    if (s.have & VS_SEED_MODE) v->seed_random = s.seed_random;
    if (s.have & VS_IMAGES) v->n = s.images;
    if (s.have & VS_ATTN) v->attn_sel.on = s.attn;
    if (s.have & VS_BLOCK) v->attn_sel.block = s.block;
    if (s.have & VS_HEAD) v->attn_sel.head = s.head;
    if (s.have & VS_SCALE) v->attn_sel.a = s.scale;
    return 0;
}

void view_config_model_ready(View *v) {
    if (!v->pending_class[0]) return;
    int k = class_names_find(&v->pane[0].model.classes, v->pending_class);
    if (k >= 0) v->cls = k;
    else fprintf(stderr, "view: the saved class '%s' is not one of this model's; class %d instead\n", v->pending_class, v->cls);
    v->pending_class[0] = 0;
}

void view_config_save(const View *v, const char *path) {
    if (!path) return;
    ViewSettings s;
    memset(&s, 0, sizeof s);
    s.have = VS_CFG | VS_ETA | VS_SEED | VS_SEED_MODE | VS_IMAGES | VS_ATTN | VS_HEAD | VS_SCALE;
    if (v->opts.steps != v->default_steps) s.have |= VS_STEPS;  // else the next model's own start
    if (v->opts.kind != v->default_kind) s.have |= VS_SAMPLER;
    const ClassNames *cn = &v->pane[0].model.classes;
    if (v->pane[0].ready && v->cls < cn->n && strlen(cn->names[v->cls]) < sizeof s.cls && !strchr(cn->names[v->cls], '\n')) {
        snprintf(s.cls, sizeof s.cls, "%s", cn->names[v->cls]);
        s.have |= VS_CLASS;
    } else if (v->pending_class[0]) {  // never loaded: keep what the file had
        snprintf(s.cls, sizeof s.cls, "%s", v->pending_class);
        s.have |= VS_CLASS;
    }
    s.cfg = v->opts.cfg_scale;
    s.steps = v->opts.steps;
    snprintf(s.sampler, sizeof s.sampler, "%s", sampler_kind_name(v->opts.kind));
    s.eta = v->opts.eta;
    s.seed = v->seed;
    s.seed_random = v->seed_random;
    s.images = v->n;
    s.attn = v->attn_sel.on;
    if (v->attn_sel.block >= 0) {
        s.block = v->attn_sel.block;
        s.have |= VS_BLOCK;
    }
    s.head = v->attn_sel.head;
    s.scale = v->attn_sel.a;
    MalaErr err;
    if (view_settings_save(path, &s, &err)) fprintf(stderr, "warning: the settings were not saved: %s\n", err.msg);
}

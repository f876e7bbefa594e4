// defines: manifest_add_sampling, manifest_partial_settings, manifest_add_file_hash
#include "run_manifest.h"

#include "sha256.h"
#include "version.h"

void manifest_add_file_hash(Manifest *m, const char *key, const char *path) {
    char hex[65];
    MalaErr err;
    if (sha256_file(path, hex, &err)) FATAL("%s", err.msg);
    manifest_str(m, key, "%s", hex);
}

void manifest_add_sampling(Manifest *m, const SamplingRecord *r) {
    const GenOpts *o = r->opts;
    char desc[512], ch[16];
    manifest_str(m, "model", "%s", r->ckpt);
    manifest_add_file_hash(m, "model_sha256", r->ckpt);
    net_config_describe(r->cfg, desc, sizeof desc);
    manifest_str(m, "model_config", "%s", desc);
    manifest_str(m, "weights", "%s", r->weights ? r->weights : "ema");
    manifest_str(m, "sampler", "%s", sampler_kind_name(o->kind));
    manifest_lit(m, "steps", "%d", o->steps);
    manifest_lit(m, "eta", "%.9g", o->eta);
    manifest_lit(m, "clip", "%s", o->clip ? "true" : "false");
    manifest_lit(m, "cfg_scale", "%.9g", o->cfg_scale);
    manifest_str(m, "cfg_channels", "%s", gen_cfg_channels_str(o->cfg_channels, r->cfg->in_channels, ch, sizeof ch));
    manifest_str(m, "label_mode", "%s", r->label_mode);
    if (r->labels) {
        char hex[65];
        sha256_hex(r->labels, (size_t)r->n * sizeof(int32_t), hex);
        manifest_str(m, "labels_sha256", "%s", hex);
    }
    manifest_lit(m, "num", "%d", r->n);
    manifest_lit(m, "seed", "%llu", (unsigned long long)r->seed);
    if (r->init_noise) manifest_add_file_hash(m, "init_noise_sha256", r->init_noise);
    manifest_str(m, "device", "%s", r->be->name);
    manifest_str(m, "precision", "%s", r->be->precision());
    manifest_str(m, "version", "%s", mala_version());
}

void manifest_partial_settings(Manifest *m, const SamplingRecord *r) {
    manifest_add_sampling(m, r);
    manifest_remove(m, "model");  // the file's hash decides, not the path it is reached by
    manifest_lit(m, "batch", "%d", r->batch);
}

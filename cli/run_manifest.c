// defines: manifest_add_model, manifest_add_runtime, manifest_add_sampling, manifest_partial_settings,
//          manifest_add_file_hash, manifest_write_beside
#include "cli/run_manifest.h"

#include <stdio.h>

#include "core/sha256.h"
#include "core/version.h"
#include "model/vae.h"  // defines: vae_weights_file

void manifest_add_file_hash(Manifest *m, const char *key, const char *path) {
    char hex[65];
    MalaErr err;
    if (sha256_file(path, hex, &err)) FATAL("%s", err.msg);
    manifest_str(m, key, "%s", hex);
}

void manifest_add_model(Manifest *m, const SamplingRecord *r) {
    char desc[512];
    manifest_str(m, "model", "%s", r->ckpt);
    manifest_add_file_hash(m, "model_sha256", r->ckpt);
    net_config_describe(r->cfg, desc, sizeof desc);
    manifest_str(m, "model_config", "%s", desc);
    manifest_str(m, "weights", "%s", r->weights ? r->weights : "ema");
    if (r->vae) {
        manifest_str(m, "vae", "%s", r->vae);
        char wf[4200];  // a diffusers folder: its weights file's hash
        MalaErr err;
        if (vae_weights_file(r->vae, wf, sizeof wf, &err)) FATAL("%s", err.msg);
        manifest_add_file_hash(m, "vae_sha256", wf);
    }
}

void manifest_add_runtime(Manifest *m, const Backend *be) {
    manifest_str(m, "device", "%s", be->name);
    manifest_str(m, "matmul_precision", "%s", be->precision());
    manifest_str(m, "version", "%s", mala_version());
}

void manifest_add_sampling(Manifest *m, const SamplingRecord *r) {
    const GenOpts *o = r->opts;
    char ch[16];
    manifest_add_model(m, r);
    manifest_str(m, "sampler", "%s", sampler_kind_name(o->kind));
    manifest_lit(m, "steps", "%d", o->steps);
    manifest_lit(m, "eta", "%.9g", o->eta);
    manifest_lit(m, "clip", "%s", o->clip ? "true" : "false");
    manifest_lit(m, "cfg_scale", "%.9g", o->cfg_scale);
    manifest_str(m, "cfg_channels", "%s", gen_cfg_channels_str(o->cfg_channels, r->cfg->in_channels, ch, sizeof ch));
    char iv[64];
    manifest_str(m, "cfg_interval", "%s", gen_cfg_interval_str(o, iv, sizeof iv));
    manifest_str(m, "label_mode", "%s", r->label_mode);
    if (r->labels) {
        char hex[65];
        sha256_hex(r->labels, (size_t)r->n * sizeof(int32_t), hex);
        manifest_str(m, "labels_sha256", "%s", hex);
    }
    manifest_lit(m, "num", "%d", r->n);
    manifest_lit(m, "seed", "%llu", (unsigned long long)r->seed);
    if (r->init_noise) manifest_add_file_hash(m, "init_noise_sha256", r->init_noise);
    if (o->blend) manifest_str(m, "blend", "%d,%d,%.9g", o->blend_a, o->blend_b, o->blend_w);
    if (r->init_image) {
        manifest_str(m, "init_image", "%s", r->init_image);
        if (is_regular_file(r->init_image)) manifest_add_file_hash(m, "init_image_sha256", r->init_image);
        manifest_lit(m, "strength", "%.9g", r->strength);
    }
    if (r->mask) {
        manifest_str(m, "mask", "%s", r->mask);
        manifest_add_file_hash(m, "mask_sha256", r->mask);
        manifest_lit(m, "resample", "%d", r->resample);
    }
    manifest_add_runtime(m, r->be);
}

void manifest_partial_settings(Manifest *m, const SamplingRecord *r) {
    manifest_add_sampling(m, r);
    manifest_remove(m, "model");  // the file's hash decides, not the path it is reached by
    if (!r->init_image) {  // the samples are kept before decoding: the VAE does not enter them unless
        manifest_remove(m, "vae");  // it encoded the input images
        manifest_remove(m, "vae_sha256");
    } else if (is_regular_file(r->init_image)) {
        manifest_remove(m, "init_image");  // a file's hash decides (a folder is named by its path)
    }
    if (r->mask) manifest_remove(m, "mask");
    manifest_lit(m, "batch", "%d", r->batch);
}

void manifest_write_beside(const Manifest *m, const char *path) {
    char p[4200];
    snprintf(p, sizeof p, "%s.json", path);
    MalaErr err;
    if (manifest_write(m, p, &err)) FATAL("%s", err.msg);
}

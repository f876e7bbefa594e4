// defines: vae_json_parse
// diffusers' config.json of an AutoencoderKL (beside diffusion_pytorch_model.safetensors / .bin):
// untrusted bytes, read with the strict JSON parser; fields of the wrong type or out of range are
// one-line errors naming the file and the key.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "formats/json.h"
#include "model/vae.h"

// An integer member in [lo, hi] into *out; absent: 0 with *out untouched.
static int int_member(const JsonValue *o, const char *key, int lo, int hi, int *out, const char *name, MalaErr *err) {
    const JsonValue *v = json_get(o, key);
    if (!v) return 0;
    int64_t i;
    if (json_get_i64(v, &i) || i < lo || i > hi)
        return mala_errf(err, "%s: \"%s\" must be an integer in %d..%d", name, key, lo, hi);
    *out = (int)i;
    return 0;
}

// A string member that must equal want when present.
static int str_member(const JsonValue *o, const char *key, const char *want, const char *name, MalaErr *err) {
    const JsonValue *v = json_get(o, key);
    if (!v) return 0;
    if (v->type != JSON_STRING) return mala_errf(err, "%s: \"%s\" must be a string", name, key);
    if (strlen(v->str) != v->len || strcmp(v->str, want)) {
        char shown[68];  // the value in one line: control bytes (a \n in the JSON string) shown as '?'
        size_t n = 0;
        for (; n < v->len && n < 64; n++) shown[n] = (unsigned char)v->str[n] < 0x20 ? '?' : v->str[n];
        shown[n] = 0;
        return mala_errf(err, "%s: \"%s\" is \"%s%s\": only %s is read", name, key, shown, v->len > 64 ? "..." : "",
                         want);
    }
    return 0;
}

static int parse_object(const JsonValue *o, const char *name, VaeJson *out, MalaErr *err) {
    if (o->type != JSON_OBJECT) return mala_errf(err, "%s: not a JSON object (diffusers' config.json)", name);
    if (str_member(o, "_class_name", "AutoencoderKL", name, err) || str_member(o, "act_fn", "silu", name, err))
        return -1;
    const JsonValue *s = json_get(o, "scaling_factor");
    if (s) {
        if (s->type != JSON_NUMBER || !isfinite(s->number) || s->number <= 0 || s->number > 1000 ||
            (float)s->number <= 0)
            return mala_errf(err, "%s: \"scaling_factor\" must be a number in (0, 1000]", name);
        out->scale = (float)s->number;
    }
    if (int_member(o, "norm_num_groups", 1, 1 << 16, &out->groups, name, err) ||
        int_member(o, "latent_channels", 1, 1 << 16, &out->latent, name, err) ||
        int_member(o, "layers_per_block", 1, 1 << 10, &out->layers, name, err) ||
        int_member(o, "in_channels", 1, 1 << 16, &out->in_channels, name, err) ||
        int_member(o, "out_channels", 1, 1 << 16, &out->out_channels, name, err))
        return -1;
    const JsonValue *b = json_get(o, "block_out_channels");
    if (b) {
        if (b->type != JSON_ARRAY || b->n < 1 || b->n > VAE_MAX_LEVELS)
            return mala_errf(err, "%s: \"block_out_channels\" must be an array of 1..%d integers", name,
                             VAE_MAX_LEVELS);
        for (int i = 0; i < b->n; i++) {
            int64_t v;
            if (json_get_i64(&b->items[i], &v) || v < 1 || v > 1 << 16)
                return mala_errf(err, "%s: \"block_out_channels\"[%d] must be an integer in 1..65536", name, i);
            out->ch[i] = (int)v;
        }
        out->levels = b->n;
    }
    return 0;
}

int vae_json_parse(const char *text, size_t len, const char *name, VaeJson *out, MalaErr *err) {
    memset(out, 0, sizeof *out);
    out->scale = VAE_SCALE;
    MalaErr jerr;
    JsonValue *v = json_parse(text, len, &jerr);
    if (!v) return mala_errf(err, "%s: not valid JSON: %s", name, jerr.msg);
    int rc = parse_object(v, name, out, err);
    json_free(v);
    return rc;
}

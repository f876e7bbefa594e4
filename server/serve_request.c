// defines: serve_request_defaults, serve_request_parse, serve_request_free, serve_sampler_ours,
//          serve_sampler_a1111
#include "server/serve_request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/json.h"
#include "server/base64.h"

// A1111's names (modules/sd_samplers_*.py) for the samplers that are the same algorithm as ours;
// its Karras and ancestral variants are other schedules and are refused by name.
static const struct { const char *a1111, *ours; } SAMPLERS[] = {
    {"DDIM", "ddim"}, {"DPM++ 2M", "dpm++2m"}, {"DDPM", "ddpm"},
};

const char *serve_sampler_ours(const char *name) {
    for (size_t i = 0; i < sizeof SAMPLERS / sizeof *SAMPLERS; i++)
        if (!strcasecmp(name, SAMPLERS[i].a1111) || !strcasecmp(name, SAMPLERS[i].ours)) return SAMPLERS[i].ours;
    return NULL;
}

const char *serve_sampler_a1111(const char *ours) {
    for (size_t i = 0; i < sizeof SAMPLERS / sizeof *SAMPLERS; i++)
        if (!strcmp(ours, SAMPLERS[i].ours)) return SAMPLERS[i].a1111;
    return ours;
}

void serve_request_defaults(ServeRequest *r) {
    memset(r, 0, sizeof *r);
    strcpy(r->sampler, "ddim");
    r->steps = 50;
    r->batch_size = r->n_iter = r->count = 1;
    r->cfg_scale = 4.0f;
    r->seed = -1;
    r->strength = 0.75f;
}

void serve_request_free(ServeRequest *r) {
    free(r->init);
    free(r->mask);
    r->init = r->mask = NULL;
}

__attribute__((format(printf, 3, 4))) static int fail(ServeError *e, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = status;
    return -1;
}

static int get_string(const JsonValue *o, const char *key, char *dst, size_t cap, ServeError *e) {
    const JsonValue *v = json_get(o, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_STRING) return fail(e, 400, "%s: expected a string, got %s", key, json_type_name(v->type));
    if (v->len >= cap || strlen(v->str) != v->len)
        return fail(e, 400, "%s: a string of at most %zu bytes without NUL expected", key, cap - 1);
    memcpy(dst, v->str, v->len + 1);
    return 0;
}

static int get_number(const JsonValue *o, const char *key, double lo, double hi, double *out, ServeError *e) {
    const JsonValue *v = json_get(o, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER) return fail(e, 400, "%s: expected a number, got %s", key, json_type_name(v->type));
    if (!(v->number >= lo && v->number <= hi)) return fail(e, 400, "%s %s: expected %g..%g", key, v->str, lo, hi);
    *out = v->number;
    return 1;
}

static int get_int(const JsonValue *o, const char *key, int lo, int hi, int *out, ServeError *e) {
    double d = 0;
    int rc = get_number(o, key, lo, hi, &d, e);
    if (rc <= 0) return rc;
    if (d != floor(d)) return fail(e, 400, "%s %g: expected a whole number", key, d);
    *out = (int)d;
    return 1;
}

static int get_bool(const JsonValue *o, const char *key, int *out, ServeError *e) {
    const JsonValue *v = json_get(o, key);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_BOOL) return fail(e, 400, "%s: expected true or false, got %s", key, json_type_name(v->type));
    *out = v->boolean;
    return 1;
}

static int get_image(const JsonValue *v, const char *key, size_t max, uint8_t **out, size_t *len, ServeError *e) {
    if (v->type != JSON_STRING) return fail(e, 400, "%s: expected a base64 image, got %s", key, json_type_name(v->type));
    if (v->len / 4 * 3 > max + 3)
        return fail(e, 413, "%s: %zu bytes of base64, more than the %zu bytes an image may have", key, v->len, max);
    if (base64_decode(v->str, v->len, max, out, len) || !*len)
        return fail(e, 400, "%s: not base64 (RFC 4648, optionally as a data: URL)", key);
    return 0;
}

// "WxH" (OpenAI's size).
static int parse_size(const char *s, int *w, int *h) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || *end != 'x') return -1;
    const char *b = end + 1;
    long c = strtol(b, &end, 10);
    if (end == b || *end || a < 1 || c < 1 || a > 65536 || c > 65536) return -1;
    *w = (int)a;
    *h = (int)c;
    return 0;
}

static int parse_common(const JsonValue *o, ReqKind kind, const ServeLimits *lim, ServeRequest *r, ServeError *e) {
    if (get_string(o, "model", r->model, sizeof r->model, e) || get_string(o, "prompt", r->prompt, sizeof r->prompt, e))
        return -1;
    if (kind == REQ_OPENAI) {
        char size[32] = "", fmt[32] = "b64_json";
        if (get_int(o, "n", 1, lim->max_images, &r->count, e) < 0 || get_string(o, "size", size, sizeof size, e) ||
            get_string(o, "response_format", fmt, sizeof fmt, e))
            return -1;
        if (size[0] && parse_size(size, &r->width, &r->height))
            return fail(e, 400, "size %s: expected WIDTHxHEIGHT, such as 256x256", size);
        if (strcmp(fmt, "b64_json"))
            return fail(e, 400, "response_format %s: this server answers b64_json only (it keeps no files to link to)", fmt);
        r->batch_size = r->count;
        return 0;
    }
    char sampler[64] = "";
    double d = 0;
    if (get_string(o, "sampler_name", sampler, sizeof sampler, e)) return -1;
    if (!sampler[0] && get_string(o, "sampler_index", sampler, sizeof sampler, e)) return -1;  // A1111's older name
    if (sampler[0]) {
        const char *ours = serve_sampler_ours(sampler);
        if (!ours) return fail(e, 400, "sampler_name %s: expected DDIM, DPM++ 2M or DDPM (ddim, dpm++2m, ddpm)", sampler);
        snprintf(r->sampler, sizeof r->sampler, "%s", ours);
    }
    if (get_int(o, "steps", 1, lim->max_steps, &r->steps, e) < 0 || get_int(o, "batch_size", 1, lim->max_images, &r->batch_size, e) < 0 ||
        get_int(o, "n_iter", 1, lim->max_images, &r->n_iter, e) < 0 || get_int(o, "width", 1, 65536, &r->width, e) < 0 ||
        get_int(o, "height", 1, 65536, &r->height, e) < 0 || get_int(o, "resample", 0, 100, &r->resample, e) < 0)
        return -1;
    int got = get_number(o, "cfg_scale", 0, 100, &d, e);
    if (got < 0) return -1;
    if (got) r->cfg_scale = (float)d;
    if ((got = get_number(o, "eta", 0, 10, &d, e)) < 0) return -1;
    if (got) r->eta = (float)d;
    const JsonValue *seed = json_get(o, "seed");
    if (seed && seed->type != JSON_NULL) {
        int64_t s;
        if (seed->type != JSON_NUMBER || json_get_i64(seed, &s) || s < -1)
            return fail(e, 400, "seed %s: expected -1 (random) or a whole number 0..2^63-1", seed->type == JSON_NUMBER ? seed->str : json_type_name(seed->type));
        r->seed = s;
    }
    if ((int64_t)r->batch_size * r->n_iter > lim->max_images)
        return fail(e, 400, "batch_size %d x n_iter %d: more than the %d images a request may make", r->batch_size, r->n_iter, lim->max_images);
    r->count = r->batch_size * r->n_iter;
    const JsonValue *inits = json_get(o, "init_images");
    if (kind == REQ_IMG2IMG && (!inits || inits->type != JSON_ARRAY || inits->n < 1))
        return fail(e, 400, "init_images: expected an array with one base64 image");
    if (inits && inits->type != JSON_NULL) {
        if (inits->type != JSON_ARRAY || inits->n != 1)
            return fail(e, 400, "init_images: expected an array with one base64 image (every image of the run starts from it)");
        if (get_image(&inits->items[0], "init_images[0]", lim->max_image_bytes, &r->init, &r->init_len, e)) return -1;
        r->has_init = 1;
        const JsonValue *mask = json_get(o, "mask");
        if (mask && mask->type != JSON_NULL) {
            if (get_image(mask, "mask", lim->max_image_bytes, &r->mask, &r->mask_len, e)) return -1;
            r->strength = 1.0f;  // inpainting: the whole schedule unless told (`mala sample --mask`)
        }
        if ((got = get_number(o, "denoising_strength", 0, 1, &d, e)) < 0) return -1;
        if (got) {
            if (!(d > 0)) return fail(e, 400, "denoising_strength %g: must be in (0, 1]", d);
            r->strength = (float)d;
        }
        const JsonValue *inv = json_get(o, "inpainting_mask_invert");  // A1111 sends 0 or 1; true / false too
        if (inv && inv->type == JSON_BOOL && get_bool(o, "inpainting_mask_invert", &r->mask_invert, e) < 0) return -1;
        if (inv && inv->type != JSON_BOOL && get_int(o, "inpainting_mask_invert", 0, 1, &r->mask_invert, e) < 0) return -1;
    }
    return 0;
}

int serve_request_parse(const char *body, size_t len, ReqKind kind, const ServeLimits *lim, ServeRequest *r,
                        ServeError *e) {
    serve_request_defaults(r);
    MalaErr err;
    JsonValue *o = json_parse(body, len, &err);
    if (!o) return fail(e, 400, "the body is not JSON: %s", err.msg);
    int rc = o->type == JSON_OBJECT ? parse_common(o, kind, lim, r, e)
                                    : fail(e, 400, "the body is a JSON %s, not an object", json_type_name(o->type));
    json_free(o);
    if (rc) serve_request_free(r);
    return rc;
}

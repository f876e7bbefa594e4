// The JSON bodies of `mala serve`'s generation requests (docs/serve.md), read into one request:
// A1111's txt2img / img2img, OpenAI's images/generations and our jobs. Untrusted bytes: every
// field's type and range is checked here, before any model sees it (fuzzed:
// tests/fuzz/fuzz_serve_request.c). Class names and model names are resolved later, against the
// models loaded.
#ifndef MALA_SERVE_REQUEST_H
#define MALA_SERVE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

typedef enum { REQ_TXT2IMG, REQ_IMG2IMG, REQ_OPENAI, REQ_JOB } ReqKind;

typedef struct {
    size_t max_image_bytes;  // one decoded init image or mask
    int max_images;          // images per request (batch_size x n_iter, or n)
    int max_steps;
} ServeLimits;

typedef struct {
    char model[128];     // the model's file stem; "" for the first loaded
    char prompt[512];    // pipeline/gen_prompt.h's text
    char sampler[16];    // ours: ddpm, ddim, dpm++2m
    int steps, batch_size, n_iter, count;  // count = batch_size x n_iter images
    int width, height;   // 0: not given (the model's own)
    float cfg_scale, eta;
    int64_t seed;        // -1: drawn by the server
    // image-to-image and inpainting (img2img, or a job with init_images)
    uint8_t *init, *mask;
    size_t init_len, mask_len;
    float strength;
    int mask_invert, resample, has_init;
} ServeRequest;

// status: 400 for a malformed or out-of-range field, 413 for an image past the limits.
typedef struct {
    int status;
    char msg[512];
} ServeError;

// The request's defaults (the server's: DDIM, 50 steps, guidance 4, one image, a random seed).
void serve_request_defaults(ServeRequest *r);
// Parses body[0..len) as kind's JSON object into r (defaults first). 0, or -1 with e set.
int serve_request_parse(const char *body, size_t len, ReqKind kind, const ServeLimits *lim, ServeRequest *r,
                        ServeError *e);
void serve_request_free(ServeRequest *r);
// A sampler name in A1111's spelling ("DDIM", "DPM++ 2M", "DDPM") or ours, case-insensitive, as
// ours (NULL when unknown).
const char *serve_sampler_ours(const char *name);
// A1111's spelling of ours.
const char *serve_sampler_a1111(const char *ours);

#endif

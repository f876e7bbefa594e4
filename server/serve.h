// `mala serve`: an image-generation server over the public API (include/mala.h) that keeps its
// models loaded and speaks AUTOMATIC1111's and OpenAI's image APIs, async jobs, and a web page
// (docs/serve.md). HTTP by libmicrohttpd.
#ifndef MALA_SERVE_H
#define MALA_SERVE_H

#include <stddef.h>

typedef struct {
    const char **models;    // model files; requests name them by file stem
    int nmodels;
    const char *vae;        // latent models' VAE (NULL: the one each run recorded)
    const char *host;       // 127.0.0.1 unless told
    int port;               // 0: any free port (printed)
    int queue;              // waiting jobs at most (429 past it)
    const char *api_key;    // NULL: no key; else every API call needs Authorization: Bearer KEY
    const char *out_dir;    // NULL, or where every result is also saved
    size_t max_body;        // bytes of a request body
    size_t max_image_bytes; // bytes of an uploaded image
    int max_images, max_steps;
    double job_ttl;         // seconds a finished job stays readable
    int timeout;            // seconds a client may stay silent before it is dropped
    const char *device, *precision;
    int threads;
} ServeOptions;

// Runs until SIGINT or SIGTERM; the exit status (0 after a clean shutdown, 1 when it cannot start).
int serve_main(const ServeOptions *o);

#endif

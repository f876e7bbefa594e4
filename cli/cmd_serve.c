// mala serve: the image-generation server (server/serve.h, docs/serve.md).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "model/checkpoint.h"
#include "server/serve.h"

int cmd_serve(int argc, char **argv) {
    // --model may be given several times: gathered here, the rest parsed as usual
    const char **models = calloc((size_t)argc, sizeof *models);
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nm = 0, nr = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) FATAL("--model needs a value (a model file)");
            models[nm++] = argv[++i];
        } else if (!strncmp(argv[i], "--model=", 8)) {
            models[nm++] = argv[i] + 8;
        } else {
            rest[nr++] = argv[i];
        }
    }
    ServeOptions o = {.models = models, .host = "127.0.0.1", .port = 7860, .queue = 16, .max_body = 32u << 20,
                      .max_image_bytes = 16u << 20, .max_images = 64, .max_steps = 1000, .job_ttl = 600, .timeout = 30};
    const char *api_key = getenv("MALA_API_KEY");
    int max_body_mb = 32, max_image_mb = 16, ttl = 600, heads = 0;
    Opt opts[] = {
        {"--vae", OPT_STR, &o.vae, "FILE", "latent models' VAE (default: the one each run recorded)"},
        {"--host", OPT_STR, &o.host, "ADDR", "address to listen on (default 127.0.0.1: this machine only)"},
        {"--port", OPT_INT, &o.port, "N", "port (0: any free one, printed)", ARG_MIN(0), ARG_MAX(65535)},
        {"--queue", OPT_INT, &o.queue, "N", "jobs that may wait; more are answered 429", ARG_MIN(1), ARG_MAX(4096)},
        {"--api-key", OPT_STR, &api_key, "KEY", "require Authorization: Bearer KEY (default: $MALA_API_KEY, else none)"},
        {"--out-dir", OPT_STR, &o.out_dir, "DIR", "also save every result there (existing files are never replaced)"},
        {"--max-body-mb", OPT_INT, &max_body_mb, "N", "largest request body, MiB", ARG_MIN(1), ARG_MAX(1024)},
        {"--max-image-mb", OPT_INT, &max_image_mb, "N", "largest uploaded image, MiB", ARG_MIN(1), ARG_MAX(256)},
        {"--max-images", OPT_INT, &o.max_images, "N", "images one request may make", ARG_MIN(1), ARG_MAX(4096)},
        {"--max-steps", OPT_INT, &o.max_steps, "N", "sampling steps one request may take", ARG_MIN(1), ARG_MAX(1000)},
        {"--job-ttl", OPT_INT, &ttl, "S", "seconds a finished job stays readable", ARG_MIN(1)},
        {"--timeout", OPT_INT, &o.timeout, "S", "seconds a client may stay silent", ARG_MIN(1), ARG_MAX(3600)},
        {"--heads", OPT_INT, &heads, "N", "attention heads of a PyTorch .pt (default: its args, else DiT's preset)",
         ARG_MIN(1), ARG_MAX(4096)},
        OPT_DEVICE(&o.device),
        OPT_PRECISION(&o.precision),
        OPT_THREADS(&o.threads),
    };
    args_parse("usage: mala serve --model FILE [--model FILE ...] [--vae FILE] [--host 127.0.0.1] [--port 7860]\n\n"
               "Keeps the models loaded and serves AUTOMATIC1111's API (/sdapi/v1/txt2img, img2img, progress,\n"
               "interrupt), OpenAI's (/v1/images/generations), async jobs (/mala/v1/jobs) and a web page at /\n"
               "(docs/serve.md). Requests name models by file stem.",
               opts, sizeof opts / sizeof opts[0], nr, rest, 1);
    if (!nm) FATAL("mala serve needs --model FILE (one or more; see --help)");
    o.nmodels = nm;
    o.api_key = api_key && api_key[0] ? api_key : NULL;
    o.max_body = (size_t)max_body_mb << 20;
    o.max_image_bytes = (size_t)max_image_mb << 20;
    o.job_ttl = ttl;
    ckpt_torch_options(0, heads);  // how every .pt model below is read (model/checkpoint.h)
#ifdef MALA_SERVE
    int rc = serve_main(&o);
#else
    int rc = 1;
    fprintf(stderr, "error: mala serve: this mala was built without libmicrohttpd (install libmicrohttpd-dev, or run "
                    "tools/install_deps.sh, then make)\n");
#endif
    free(models);
    free(rest);
    return rc;
}

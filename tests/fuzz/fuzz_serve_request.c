// libFuzzer harness: what `mala serve` reads from a client (server/serve_request.c, server/base64.c,
// pipeline/gen_prompt.c): a request body of any kind (the first byte picks it), the same bytes as
// base64, and the prompt text against a model's class names. Any bytes parse without a fault, and
// what is taken is within the limits.
#include <string.h>

#include "fuzz_util.h"
#include "pipeline/gen_prompt.h"
#include "server/base64.h"
#include "server/serve_request.h"

static char *NAMES[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                        "Ankle boot"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size) return 0;
    const ServeLimits lim = {4096, 8, 1000};
    ServeRequest r;
    ServeError e;
    if (!serve_request_parse((const char *)data + 1, size - 1, (ReqKind)(data[0] % 4), &lim, &r, &e)) {
        if (r.count != r.batch_size * r.n_iter || r.count < 1 || r.count > lim.max_images) abort();
        if (r.steps < 1 || r.steps > lim.max_steps || r.init_len > lim.max_image_bytes || r.mask_len > lim.max_image_bytes)
            abort();
        if (!serve_sampler_ours(r.sampler) || !(r.strength > 0 && r.strength <= 1) || r.seed < -1) abort();
        serve_request_free(&r);
    } else if ((e.status != 400 && e.status != 413) || !e.msg[0]) {
        abort();
    }
    uint8_t *b;
    size_t n;
    if (!base64_decode((const char *)data, size, 4096, &b, &n)) {  // decodes back to itself through its encoding
        if (n > 4096) abort();
        char *t = base64_encode(b, n);
        uint8_t *b2;
        size_t n2;
        if (!t || base64_decode(t, strlen(t), 4096, &b2, &n2) || n2 != n || memcmp(b, b2, n)) abort();
        free(b2);
        free(t);
        free(b);
    }
    char text[700];
    size_t k = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, k);
    text[k] = 0;
    ClassNames cn = {.n = 10, .names = NAMES};
    GenPrompt g;
    MalaErr err;
    if (!gen_prompt_parse(&cn, text, "prompt", &g, &err)) {
        if (g.blend ? !(g.a >= 0 && g.a < 10 && g.b >= 0 && g.b < 10 && g.w >= 0 && g.w <= 1) : g.cls < -1 || g.cls >= 10)
            abort();
    } else if (!err.msg[0]) {
        abort();
    }
    return 0;
}

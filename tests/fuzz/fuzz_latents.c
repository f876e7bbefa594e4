// libFuzzer harness: a latent set of `mala encode` (data/latents.h) as `mala train --data
// LATENTS` opens it: latents.json, mean.npy, logvar.npy, labels.npy and class_names.json are the
// input's five parts, split at each "\n@@latents@@\n" (missing parts are empty files), written to
// a private directory; latent_set_open checks and maps them, then the first and last rows of
// every view are drawn (sampled and as the mean).
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "data/latents.h"

#define SEP "\n@@latents@@\n"

static const char *const FILES[5] = {"latents.json", "mean.npy", "logvar.npy", "labels.npy", "class_names.json"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/mala_fuzz_latents_XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir)) abort();
    }
    const uint8_t *p = data, *end = data + size;
    const size_t sl = strlen(SEP);
    for (int k = 0; k < 5; k++) {
        const uint8_t *q = p ? memmem(p, (size_t)(end - p), SEP, sl) : NULL;
        size_t n = p ? (size_t)((q ? q : end) - p) : 0;
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, FILES[k]);
        FILE *f = fopen(path, "wb");
        if (!f) abort();
        if (n && fwrite(p, 1, n, f) != n) abort();
        fclose(f);
        p = q ? q + sl : NULL;
    }
    LatentSet s;
    MalaErr err;
    if (latent_set_open(&s, dir, &err) == 0) {
        const size_t per = (size_t)s.m.c * s.m.h * s.m.w;
        if (per <= ((size_t)1 << 20)) {
            float *z = malloc(per * sizeof(float));
            for (int v = 0; v < s.m.views; v++) {
                latent_set_draw(&s, 0, v, 1, 1, 2, z);
                latent_set_draw(&s, s.rows - 1, v, 0, 0, 0, z);
            }
            free(z);
        }
        latent_set_close(&s);
    }
    return 0;
}

// mala train's TensorBoard log (train/train_tensorboard.h).
#include "train/train_tensorboard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tb_log_row(TfEvents *w, uint64_t step, const TbRow *r, MalaErr *err) {
    static const char *const tags[] = {"train/loss", "train/mse",       "train/vb", "train/grad_norm",
                                       "train/lr",   "train/img_per_s", "train/skipped"};
    const float vals[] = {(float)r->loss, (float)r->mse, (float)r->vb, (float)r->grad_norm,
                          (float)r->lr,   (float)r->img_per_s, (float)r->skipped};
    return tfev_scalars(w, (int64_t)step, tags, vals, (int)(sizeof vals / sizeof *vals), err);
}

static uint32_t be32(const uint8_t *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }

int tb_log_grid(TfEvents *w, uint64_t step, const char *png_path, MalaErr *err) {
    FILE *f = fopen(png_path, "rb");
    if (!f) return mala_errf(err, "%s: cannot read: %s", png_path, strerror(errno));
    uint8_t *b = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n == cap) b = realloc(b, cap = cap ? 2 * cap : 1 << 16);
        got = fread(b + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    // the grid is an RGB PNG of ours: signature, then IHDR's width and height at bytes 16 and 20
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    int rc = n < 33 || memcmp(b, sig, 8) || memcmp(b + 12, "IHDR", 4)
                 ? mala_errf(err, "%s: not a PNG", png_path)
                 : tfev_image(w, (int64_t)step, "samples", (int)be32(b + 20), (int)be32(b + 16), 3, b, n, err);
    free(b);
    return rc;
}

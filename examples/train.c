// A training run through the public API only (include/mala.h): the run directory `mala train`
// writes (checkpoints/, log.csv, loss.png), a line at every log step, and the model sampled at the end.
//
//   cc train.c -o train $(pkg-config --cflags --libs mala)
//   ./train OUT [MODEL [ITERS [BATCH [LIMIT]]]]
//
// Defaults: DiT-T/4 on Fashion-MNIST, 200 steps of batch 32 on all 60,000 images. The checkpoints are
// `mala train --model MODEL --iters ITERS --batch BATCH --limit LIMIT --ckpt-every 100 --log-every 50
// --sample-every 0 --tensorboard 0 --out OUT`'s, byte for byte, and `mala train --resume --out OUT`
// continues the run.
#include <stdio.h>
#include <stdlib.h>

#include <mala.h>

static int on_log(void *user, const mala_train_stats *st) {
    (void)user;
    printf("step %llu  loss %.4f (mse %.4f vb %.4f)  grad %.3f  lr %g  %.1f img/s\n", (unsigned long long)st->step,
           st->loss, st->mse, st->vb, st->grad_norm, st->lr, st->images_per_s);
    return 0;  // non-zero stops the run (after a checkpoint of this step)
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: %s OUT [MODEL [ITERS [BATCH [LIMIT]]]]\n", argv[0]), 2;
    char err[256];
    mala_context *ctx = mala_context_new(NULL, err, sizeof err);
    if (!ctx) return fprintf(stderr, "error: %s\n", err), 1;
    mala_train_options o = mala_train_options_default();
    o.out = argv[1];
    o.model = argc > 2 ? argv[2] : "DiT-T/4";
    o.iters = argc > 3 ? strtoull(argv[3], NULL, 10) : 200;
    o.batch = argc > 4 ? atoi(argv[4]) : 32;
    o.limit = argc > 5 ? atoi(argv[5]) : 0;
    o.ckpt_every = 100;
    o.log_every = 50;
    mala_train *t;
    if (mala_train_open(ctx, &o, &t)) return fprintf(stderr, "error: %s\n", mala_context_error(ctx)), 1;
    if (mala_train_run(t, on_log, NULL)) return fprintf(stderr, "error: %s\n", mala_train_error(t)), 1;
    mala_train_free(t);
    // the run's last checkpoint is a model file: sample from it
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/%07llu.safetensors", o.out, (unsigned long long)o.iters);
    mala_model *m;
    if (mala_model_load(ctx, ckpt, NULL, &m)) return fprintf(stderr, "error: %s\n", mala_context_error(ctx)), 1;
    mala_gen_params p = mala_gen_params_default();
    p.sampler = "ddim";
    p.steps = 20;
    p.count = 10;
    mala_model_info info;
    mala_model_get_info(m, &info);
    float *img = malloc(sizeof(float) * p.count * info.out_channels * info.out_size * info.out_size);
    char png[4200];
    snprintf(png, sizeof png, "%s/final.png", o.out);
    if (mala_generate(m, &p, img) ||
        mala_write_png_grid(ctx, png, img, p.count, info.out_channels, info.out_size, 10))
        return fprintf(stderr, "error: %s\n", mala_model_error(m)), 1;
    printf("wrote %s\n", png);
    free(img);
    mala_model_free(m);
    mala_context_free(ctx);
    return 0;
}

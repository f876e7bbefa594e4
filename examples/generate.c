// A grid of one class from a model file, as a PNG, through the public API only (include/mala.h):
//
//   cc generate.c -o generate $(pkg-config --cflags --libs mala)
//   ./generate [MODEL [CLASS [OUT.png [STEPS [SEED]]]]]
//
// The defaults: the bundled Fashion-MNIST model, Sneaker, sneakers.png, 50 DDIM steps, seed 0. The
// image is `mala sample --ckpt MODEL --class CLASS --n 16 --sampler ddim --steps STEPS --seed SEED`'s.
#include <stdio.h>
#include <stdlib.h>

#include <mala.h>

// After every step: preview is the predicted clean batch (a viewer would draw it).
static int step(void *user, int first, int n, int i, int steps, const float *preview) {
    (void)user;
    fprintf(stderr, "\rimages %d-%d: step %d/%d (x0[0] %+.3f)", first + 1, first + n, i + 1, steps, preview[0]);
    return 0;  // non-zero cancels
}

int main(int argc, char **argv) {
    const char *model = argc > 1 ? argv[1] : "assets/mala-dit-fmnist.safetensors";
    const char *cls = argc > 2 ? argv[2] : "Sneaker", *out = argc > 3 ? argv[3] : "sneakers.png";
    char err[256];
    mala_context *ctx = mala_context_new(NULL, err, sizeof err);
    if (!ctx) return fprintf(stderr, "error: %s\n", err), 1;
    mala_model *m;
    if (mala_model_load(ctx, model, NULL, &m)) return fprintf(stderr, "error: %s\n", mala_context_error(ctx)), 1;
    mala_model_info info;
    mala_model_get_info(m, &info);
    mala_gen_params p = mala_gen_params_default();
    p.class_id = mala_model_class_find(m, cls);
    if (p.class_id < 0) return fprintf(stderr, "error: %s has no class %s\n", model, cls), 1;
    p.sampler = "ddim";
    p.steps = argc > 4 ? atoi(argv[4]) : 50;
    p.seed = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    p.count = 16;
    p.on_step = step;
    size_t floats = (size_t)p.count * info.out_channels * info.out_size * info.out_size;
    float *img = malloc(floats * sizeof(float));
    int rc = !img || mala_generate(m, &p, img);
    fprintf(stderr, "\n");
    if (rc) fprintf(stderr, "error: %s\n", img ? mala_model_error(m) : "out of memory");
    else if ((rc = mala_write_png_grid(ctx, out, img, p.count, info.out_channels, info.out_size, 8)))
        fprintf(stderr, "error: %s\n", mala_context_error(ctx));
    else
        printf("wrote %s (%d x %s, %s %d steps)\n", out, p.count, mala_model_class_name(m, p.class_id), p.sampler,
               p.steps);
    free(img);
    mala_model_free(m);
    mala_context_free(ctx);
    return rc != 0;
}

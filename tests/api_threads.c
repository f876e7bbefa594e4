// Two threads, each with its own context and model, generate at the same time; their images must
// be what one thread makes alone (include/mala.h: "calls on separate handles may run at the same
// time"). Built against the installed library by tests/test_library.sh. usage: api_threads MODEL
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mala.h>

enum { N = 4, FLOATS = N * 32 * 32 };  // the bundled model: 32 x 32 x 1
typedef struct { const char *model; int cls; float img[FLOATS]; int rc; } Job;

static void *run(void *arg) {
    Job *j = arg;
    mala_context_options o = mala_context_options_default();
    o.device = "cpu";
    o.threads = 1;
    mala_context *ctx = mala_context_new(&o, NULL, 0);
    mala_model *m = NULL;
    j->rc = !ctx || mala_model_load(ctx, j->model, NULL, &m);
    mala_model_info info;
    if (!j->rc && (mala_model_get_info(m, &info) || (size_t)N * info.out_channels * info.out_size * info.out_size != FLOATS))
        j->rc = 1;  // (a model other than the bundled one)
    mala_gen_params p = mala_gen_params_default();
    p.sampler = "ddim";
    p.steps = 4;
    p.count = N;
    p.class_id = j->cls;
    p.seed = 11;
    if (!j->rc && (j->rc = mala_generate(m, &p, j->img))) fprintf(stderr, "%s\n", mala_model_error(m));
    mala_model_free(m);
    mala_context_free(ctx);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) return fprintf(stderr, "usage: api_threads MODEL\n"), 2;
    static Job alone[2], together[2];
    for (int k = 0; k < 2; k++) {
        alone[k] = (Job){.model = argv[1], .cls = 3 + 4 * k};
        together[k] = alone[k];
        run(&alone[k]);
    }
    pthread_t t[2];
    for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, run, &together[k]);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    for (int k = 0; k < 2; k++)
        if (alone[k].rc || together[k].rc || memcmp(alone[k].img, together[k].img, sizeof alone[k].img)) {
            fprintf(stderr, "FAIL: thread %d's images differ from one thread's (or failed)\n", k);
            return 1;
        }
    printf("ok: two threads on separate contexts and models make one thread's images\n");
    return 0;
}

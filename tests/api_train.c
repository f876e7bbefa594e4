// The training API's refusals and its step-by-step use (include/mala.h), against the installed
// library (tests/test_library.sh): bad options are one-line errors naming what is wrong, and so is
// a run beyond memory (`mala train`'s memory plan, which returns to the caller instead of exiting);
// a run stepped by hand, with no run directory, writes nothing and saves a checkpoint that loads as
// a model.
#define _POSIX_C_SOURCE 200809L  // setenv, unsetenv
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mala.h>

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "api_train: " __VA_ARGS__); fputc('\n', stderr); return 1; } } while (0)

// Entries of a directory.
static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    while (d && readdir(d)) n++;
    if (d) closedir(d);
    return n;
}

static int refused(mala_context *ctx, mala_train_options o, const char *want) {
    mala_train *t = NULL;
    if (!mala_train_open(ctx, &o, &t)) return mala_train_free(t), 0;
    return strstr(mala_context_error(ctx), want) != NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: api_train DIR\n"), 2;
    char err[256], path[4200];
    mala_context *ctx = mala_context_new(NULL, err, sizeof err);
    CHECK(ctx, "%s", err);
    mala_train_options o = mala_train_options_default();
    o.model = "DiT-T/4", o.batch = 4, o.limit = 16;
    mala_train_options bad = o;
    bad.data = "no/such/folder";
    CHECK(refused(ctx, bad, "no/such/folder"), "a missing data folder: '%s'", mala_context_error(ctx));
    bad = o, bad.model = "DiT-Q/9";
    CHECK(refused(ctx, bad, "DiT-Q/9"), "an unknown preset: '%s'", mala_context_error(ctx));
    bad = o, bad.batch = 0;
    CHECK(refused(ctx, bad, "batch"), "batch 0: '%s'", mala_context_error(ctx));
    bad = o, bad.batch = 64;
    CHECK(refused(ctx, bad, "larger than the data"), "a batch past the data: '%s'", mala_context_error(ctx));
    setenv("MALA_TEST_MEMORY", "1M", 1);  // (train/mem_plan.h: what the machine has, for tests)
    CHECK(refused(ctx, o, "needs about") && strstr(mala_context_error(ctx), "DiT-T/4"), "a run beyond memory: '%s'",
          mala_context_error(ctx));
    unsetenv("MALA_TEST_MEMORY");
    const int files_before = count_files(".");
    mala_train *t;
    CHECK(!mala_train_open(ctx, &o, &t), "%s", mala_context_error(ctx));
    CHECK(mala_train_run(t, NULL, NULL) && strstr(mala_train_error(t), "options.out is NULL"), "a run without out: '%s'",
          mala_train_error(t));
    mala_train_stats st;
    for (int i = 0; i < 3; i++) CHECK(!mala_train_step(t, &st), "%s", mala_train_error(t));
    CHECK(st.step == 3 && st.loss > 0 && st.loss < 10 && !st.skipped, "step %llu loss %g", (unsigned long long)st.step,
          st.loss);
    CHECK(count_files(".") == files_before, "a run without out wrote in the working directory");
    snprintf(path, sizeof path, "%s/stepped.safetensors", argv[1]);
    CHECK(!mala_train_save(t, path), "%s", mala_train_error(t));
    mala_train_free(t);
    mala_model *m;
    CHECK(!mala_model_load(ctx, path, NULL, &m), "the saved checkpoint does not load: %s", mala_context_error(ctx));
    CHECK(mala_model_class_find(m, "Sneaker") == 7, "the checkpoint lost its class names");
    mala_model_free(m);
    mala_context_free(ctx);
    printf("ok: the training API refuses bad options and a run beyond memory by name; 3 steps by hand, nothing "
           "written, saved, loaded as a model\n");
    return 0;
}

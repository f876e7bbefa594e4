// The mala commands as a new user (coming from facebookresearch/DiT) runs them: run directories
// that never lose history, --resume that remembers the run's settings, shapes from the data,
// DiT's flag names, range checks that name the flag, "did you mean", progress lines fit for a
// log file, eval's FID presets, and the details of info / view / sample. Each test runs the built
// program ($MALA_BIN, default ./mala) through the shell with stdout and stderr captured, on tiny
// configurations (DiT-T/4, a few steps, a few images).
#include <dirent.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "formats/image_io.h"
#include "eval/line_plot.h"
#include "formats/npy.h"
#include "core/progress.h"
#include "testutil.h"
#include "testcli.h"   // defines: run, g_out, g_err, mala_bin
#include "testmodels.h"  // defines: make_latent_model

#define MODEL "tests/fixtures/sample_model.safetensors"  // 8x8x1, 3 classes: fast to sample
#define BUNDLED "assets/mala-dit-fmnist.safetensors"
// A tiny run: DiT-T/4 on 32x32 images, batch 4, no periodic grids.
#define TINY "--model DiT-T/4 --batch 4 --log-every 1 --sample-every 0 --threads 2"

// An image folder root/<class k>/<i>.png of random pixels, `channels` 1 (gray PNGs) or 3.
static void make_folder(const char *root, int classes, int per_class, int channels, int side) {
    mkdir(root, 0755);
    uint64_t s = 7;
    uint8_t *px = malloc((size_t)side * side * channels);
    for (int k = 0; k < classes; k++) {
        char dir[600], path[700];
        snprintf(dir, sizeof dir, "%s/class%c", root, 'a' + k);
        mkdir(dir, 0755);
        for (int i = 0; i < per_class; i++) {
            for (int j = 0; j < side * side * channels; j++) px[j] = (uint8_t)(tu_next(&s) >> 56);
            snprintf(path, sizeof path, "%s/%03d.png", dir, i);
            MalaErr err;
            ck_assert_msg(image_write_png(path, px, side, side, channels, &err) == 0, "%s", err.msg);
        }
    }
    free(px);
}

// Every file under dir (recursively) with its bytes, as one string, to compare a tree before and after.
static void tree_snapshot(const char *dir, char **acc, size_t *len) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char *names[256];
    int n = 0;
    while ((e = readdir(d)) && n < 256)
        // .lock is the writer lock (core/dir_lock.h): any process that looks at the run takes it
        // and notes its PID there; it is not a result
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".lock")) names[n++] = strdup(e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) { char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t; }
    for (int i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat st;
        ck_assert(stat(p, &st) == 0);
        size_t add = strlen(p) + 2 + (S_ISREG(st.st_mode) ? (size_t)st.st_size : 0);
        *acc = realloc(*acc, *len + add + 1);
        memcpy(*acc + *len, p, strlen(p) + 1);
        *len += strlen(p) + 1;
        if (S_ISDIR(st.st_mode)) {
            tree_snapshot(p, acc, len);
        } else {
            size_t got;
            char *bytes = tu_read_file(p, &got);
            memcpy(*acc + *len, bytes, got);
            *len += got;
            free(bytes);
        }
        free(names[i]);
    }
}

// A whole text file, NUL-terminated.
static char *read_text(const char *path) {
    size_t n;
    char *raw = tu_read_file(path, &n), *s = malloc(n + 1);
    memcpy(s, raw, n);
    s[n] = 0;
    free(raw);
    return s;
}

static int count_lines(const char *path) {
    size_t n;
    char *s = tu_read_file(path, &n);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += s[i] == '\n';
    free(s);
    return lines;
}

// The first column of every data row of a log.csv, as "1,2,3".
static void csv_steps(const char *path, char *out, size_t cap) {
    char *s = read_text(path);
    out[0] = 0;
    for (char *line = strchr(s, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        long step = strtol(line + 1, NULL, 10);
        snprintf(out + strlen(out), cap - strlen(out), "%s%ld", out[0] ? "," : "", step);
    }
    free(s);
}

// Column col (0 = step) of the log.csv row of a step, as a number; -1 when there is no such row.
static double csv_value(const char *path, long step, int col) {
    char *s = read_text(path);
    double v = -1;
    for (char *line = strchr(s, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        if (strtol(line + 1, NULL, 10) != step) continue;
        char *p = line + 1;
        for (int c = 0; c < col && p; c++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
        if (p) v = strtod(p, NULL);
    }
    free(s);
    return v;
}

static int stderr_has_cr(void) { return strchr(g_err, '\r') != NULL; }

// ---------------------------------------------------------------------------------------------

// Values that make no sense are refused naming the flag,
// unknown flags and commands get a suggestion, --help prints one default per row, DiT's names work.
START_TEST(test_flags) {
    tu_make_tmpdir("cli");
    struct { const char *args, *flag; } bad[] = {
        {"train --threads -1", "--threads -1"},     {"train --threads 100000", "--threads 100000"},
        {"train --lr nan", "--lr nan"},             {"train --label-drop 2", "--label-drop 2"},
        {"train --limit -5", "--limit -5"},         {"sample --cfg-scale nan", "--cfg-scale nan"},
        {"sample --eta -5", "--eta -5"},            {"eval fid --cfg-scale inf", "--cfg-scale inf"},
        {"sample --threads -1", "--threads -1"},    {"bench train --batch 0", "--batch 0"},
        {"train --batch abc", "--batch abc"},       {"eval is --splits 0", "--splits 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_error(run("%s", bad[i].args), bad[i].args, bad[i].flag, NULL);
    expect_error(run("bench train --batch 100000000 --model DiT-S/2"), "bench --batch 1e8", "--batch 100000000",
                 "of memory");
    expect_error(run("sample --n 1000000000"), "sample --n 1e9", "--n 1000000000", "of memory");
    {  // a flag's own error comes before "--out exists" (make demo leaves samples.png behind)
        char png[300];
        snprintf(png, sizeof png, "%s/earlier.png", tu_tmp);
        FILE *f = fopen(png, "wb");
        ck_assert_ptr_nonnull(f);
        fputs("an earlier result", f);
        fclose(f);
        expect_error(run("sample --n 1000000000 --out %s", png), "sample --n 1e9 over an existing --out",
                     "--n 1000000000", "of memory");
        expect_error(run("sample --n 1 --out %s", png), "existing --out", "exists", NULL);
    }
    expect_error(run("bench foo"), "bench foo", "'foo'", "unknown");
    expect_error(run("bench trian"), "bench trian", "did you mean train?", NULL);
    expect_error(run("trian"), "mala trian", "did you mean train?", NULL);
    expect_error(run("train --global-bach-size 4"), "typo", "did you mean --global-batch-size?", NULL);
    expect_error(run("sample --stpes 3"), "typo", "did you mean --steps?", NULL);
    expect_error(run("eval fid --num-fid-sample 3"), "typo", "did you mean --num-fid-samples?", NULL);
    expect_error(run("train --frobnicate 1"), "far from every flag", "unknown flag '--frobnicate'", NULL);
    ck_assert_msg(!strstr(g_err, "did you mean"), "no flag is close to --frobnicate: %s", g_err);

    // --help: at most one default on every row
    const char *helps[] = {"train", "sample", "eval", "bench train", "bench sample", "bench inception", "export", "info",
                           "view"};
    for (size_t i = 0; i < sizeof helps / sizeof *helps; i++) {
        ck_assert_msg(run("%s --help", helps[i]) == 0, "%s --help: %s", helps[i], g_err);
        for (char *line = g_out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            char *end = strchr(line, '\n'), *first = strstr(line, "default");
            ck_assert_msg(!first || !strstr(first + 1, "default") || (end && strstr(first + 1, "default") > end),
                          "%s --help: two defaults on one row: %.*s", helps[i], end ? (int)(end - line) : 200, line);
        }
    }

    // DiT's names mean the same as ours: identical samples
    RUN_OK("sample --ckpt " MODEL " --num-sampling-steps 3 --per-proc-batch-size 2 --global-seed 5 --n 3 "
           "--save-npy %s --threads 1", tp("dit.npy"));
    RUN_OK("sample --ckpt " MODEL " --steps 3 --batch 2 --seed 5 --n 3 --save-npy %s --threads 1", tp("ours.npy"));
    size_t na, nb;
    char *a = tu_read_file(tp("dit.npy"), &na), *b = tu_read_file(tp("ours.npy"), &nb);
    ck_assert_msg(na == nb && !memcmp(a, b, na), "DiT's flag names gave other samples");
    free(a); free(b);
    tu_rm_tmpdir();
}
END_TEST

// Points 1 and 2: --out is created with its parents, a bad --data creates nothing, a second
// fresh train into a run directory is refused and changes no byte, --keep spares the checkpoint
// just written and files of later steps.
START_TEST(test_run_directory) {
    tu_make_tmpdir("cli");
    RUN_OK("train " TINY " --limit 16 --iters 2 --out %s", tp("a/b/c/run"));
    ck_assert(exists(tp("a/b/c/run/checkpoints/0000002.safetensors")) && exists(tp("a/b/c/run/log.csv")));
    ck_assert_msg(!stderr_has_cr(), "train wrote \\r to a file:\n%s", g_err);

    expect_error(run("train " TINY " --data %s --out %s", tp("no/such/data"), tp("fresh/run")), "bad --data",
                 "no/such/data", NULL);
    ck_assert_msg(!exists(tp("fresh")), "a bad --data still created the run directory");

    const char *run_dir = tp("a/b/c/run");
    char *before = NULL, *after = NULL;
    size_t lb = 0, la = 0;
    tree_snapshot(run_dir, &before, &lb);
    expect_error(run("train " TINY " --limit 16 --iters 5 --out %s", run_dir), "train into a run", "--resume", "fresh");
    tree_snapshot(run_dir, &after, &la);
    ck_assert_msg(la == lb && !memcmp(before, after, lb), "the refused train changed %s", run_dir);
    free(before); free(after);
    // log.csv alone is a run too
    mkdir(tp("logonly"), 0755);
    FILE *f = fopen(tp("logonly/log.csv"), "w");
    fputs("step,loss\n1500,0.03\n", f);
    fclose(f);
    expect_error(run("train " TINY " --limit 16 --iters 2 --out %s", tp("logonly")), "log.csv only", "--resume", NULL);
    ck_assert_int_eq(count_lines(tp("logonly/log.csv")), 2);

    // --keep 1: a checkpoint cut short at a later step is passed over by --resume and kept; the one
    // just written survives, the older one goes
    char later[600];
    snprintf(later, sizeof later, "%s/checkpoints/0000099.safetensors", run_dir);
    f = fopen(later, "w");
    fputs("cut short", f);
    fclose(f);
    RUN_OK("train --resume --out %s --iters 4 --keep 1", run_dir);
    ck_assert_msg(strstr(g_err, "at step 2"), "%s", g_err);
    char p2[600], p4[600];
    snprintf(p2, sizeof p2, "%s/checkpoints/0000002.safetensors", run_dir);
    snprintf(p4, sizeof p4, "%s/checkpoints/0000004.safetensors", run_dir);
    ck_assert_msg(exists(p4), "--keep 1 pruned the checkpoint just written");
    ck_assert_msg(!exists(p2), "--keep 1 kept an older checkpoint");
    ck_assert_msg(exists(later), "--keep pruned a file of a later step it did not write");
    tu_rm_tmpdir();
}
END_TEST

// Everything is checked before the run directory is created, so a failed
// start leaves nothing that blocks the retry; a directory that holds no run (a start killed before
// its first logged step: no checkpoint, log.csv of the header alone) is used again, and --resume
// there says that there is nothing to resume; --out equal to or inside --data is refused.
START_TEST(test_failed_start) {
    tu_make_tmpdir("cli");
    expect_error(run("train " TINY " --limit 16 --iters 1 --vae %s --out %s", tp("no/vae.safetensors"), tp("v/run")),
                 "missing --vae", "--vae", "not latents");
    ck_assert_msg(!exists(tp("v")), "a refused --vae created the run directory");
    expect_error(run("train " TINY " --limit 16 --iters 1 --vae ema --out %s", tp("v/run")), "DiT's --vae ema",
                 "--vae ema", "ema|mse");
    ck_assert_msg(!exists(tp("v")), "a refused --vae ema created the run directory");
    RUN_OK("train " TINY " --limit 16 --iters 1 --out %s", tp("v/run"));  // the retry
    ck_assert(exists(tp("v/run/checkpoints/0000001.safetensors")));

    // what a start killed before its first logged step leaves
    mkdir(tp("killed"), 0755);
    mkdir(tp("killed/checkpoints"), 0755);
    FILE *f = fopen(tp("killed/log.csv"), "w");
    fputs("step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time\n", f);
    fclose(f);
    expect_error(run("train --resume --out %s", tp("killed")), "resume without a run", "nothing to resume",
                 "drop --resume");
    expect_error(run("train --resume --out %s", tp("none")), "resume of no directory", "nothing to resume", NULL);
    RUN_OK("train " TINY " --limit 16 --iters 2 --out %s", tp("killed"));
    ck_assert_msg(strstr(g_err, "training there anew"), "%s", g_err);
    char steps[64];
    csv_steps(tp("killed/log.csv"), steps, sizeof steps);
    ck_assert_str_eq(steps, "1,2");

    // --out inside --data: by its name, through "..", through a symbolic link; the data itself
    make_folder(tp("imgs"), 2, 2, 1, 32);
    ck_assert(symlink(tp("imgs"), tp("link")) == 0);
    const char *inside[] = {"imgs/run", "imgs/a/../b/run", "link/run", "imgs"};
    for (size_t i = 0; i < sizeof inside / sizeof *inside; i++) {
        expect_error(run("train " TINY " --data %s --iters 1 --out %s", tp("imgs"), tp(inside[i])), inside[i], "--out",
                     "--data");
        ck_assert_msg(strstr(g_err, i < 3 ? "inside" : "the same directory"), "%s", g_err);
    }
    expect_error(run("train " TINY " --data %s/ --iters 1 --out %s", tp("link"), tp("imgs/run")), "data by a link",
                 "inside", NULL);
    DIR *d = opendir(tp("imgs"));
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));) entries += e->d_name[0] != '.';
    closedir(d);
    ck_assert_msg(entries == 2, "a refused --out created something in the data (%d entries)", entries);
    RUN_OK("train " TINY " --data %s --iters 1 --out %s", tp("imgs"), tp("imgs-run"));  // beside it: fine
    tu_rm_tmpdir();
}
END_TEST

// --resume continues toward the run's --iters (stored as run.iters), a
// damaged run.* value is refused naming the key, and the sample grid's cost is the flags'.
START_TEST(test_resume_keeps_iters) {
    tu_make_tmpdir("cli");
    RUN_OK("train " TINY " --limit 16 --iters 2 --out %s", tp("run"));
    RUN_OK("info %s", tp("run/checkpoints/0000002.safetensors"));
    ck_assert_msg(strstr(g_out, "iters 2"), "%s", g_out);
    RUN_OK("train --resume --out %s --threads 2", tp("run"));
    ck_assert_msg(strstr(g_err, "to step 2") && strstr(g_err, "nothing to train"), "%s", g_err);
    char steps[64];
    csv_steps(tp("run/log.csv"), steps, sizeof steps);
    ck_assert_str_eq(steps, "1,2");
    RUN_OK("train --resume --out %s --iters 3 --threads 2", tp("run"));  // given again, --iters wins and is kept
    RUN_OK("info %s", tp("run/checkpoints/0000003.safetensors"));
    ck_assert_msg(strstr(g_out, "iters 3"), "%s", g_out);

    // a damaged value (the same length, so the file stays readable): refused, not a division by 0
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sed -i 's/\"run.log_every\":\"1\"/\"run.log_every\":\"0\"/' %s",
             tp("run/checkpoints/0000003.safetensors"));
    ck_assert(system(cmd) == 0);
    expect_error(run("train --resume --out %s --iters 4 --threads 2", tp("run")), "run.log_every 0",
                 "'run.log_every' = '0'", "0000003.safetensors");

    // the grid: 3 images in a row, 2 DDIM steps, with a progress line
    RUN_OK("train " TINY " --limit 16 --iters 1 --sample-every 1 --sample-steps 2 --sample-images 3 --out %s",
           tp("grid"));
    ck_assert_msg(strstr(g_err, "sample grid: 3 images, DDIM step 2/2"), "%s", g_err);
    int w, h;
    MalaErr err;
    ck_assert_msg(image_check(tp("grid/samples/0000001.png"), &w, &h, &err) == 0, "%s", err.msg);
    ck_assert_msg(w == 3 * 34 + 2 && h == 36, "a grid of %dx%d pixels", w, h);
    RUN_OK("info %s", tp("grid/checkpoints/0000001.safetensors"));  // --resume keeps them
    ck_assert_msg(strstr(g_out, "sample_steps 2") && strstr(g_out, "sample_images 3"), "%s", g_out);
    tu_rm_tmpdir();
}
END_TEST

// Points 3, 4 and 6: a folder run takes its channels and classes from the data, logs a wall
// clock, ends with a sample grid; --resume continues with its data, limit, flips, logging and
// checkpoint settings, and a flag given again wins.
START_TEST(test_resume_remembers) {
    tu_make_tmpdir("cli");
    make_folder(tp("rgb"), 2, 8, 3, 32);
    RUN_OK("train --model DiT-T/4 --batch 4 --data %s --limit 12 --hflip 0 --log-every 1 --ckpt-every 2 --keep 2 "
           "--sample-every 1000 --iters 2 --threads 2 --out %s", tp("rgb"), tp("run"));
    ck_assert_msg(strstr(g_err, "12 images, 3 channels, 2 classes"), "%s", g_err);
    ck_assert_msg(exists(tp("run/samples/0000002.png")), "no final sample grid");
    RUN_OK("info %s", tp("run/checkpoints/0000002.safetensors"));
    ck_assert_msg(strstr(g_out, "32x32x3, 2 classes") && strstr(g_out, "classa, classb"), "%s", g_out);
    // wall clock columns
    char *csv = read_text(tp("run/log.csv"));
    ck_assert_msg(!strncmp(csv, "step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time\n", 62), "%s", csv);
    char *row = strchr(csv, '\n') + 1;
    int commas = 0;
    for (char *c = row; *c && *c != '\n'; c++) commas += *c == ',';
    ck_assert_msg(commas == 9 && strstr(row, "T") && strstr(row, "Z\n"), "row: %s", row);
    free(csv);

    // the run's settings come back: 12 images of the folder, a log row per step, checkpoints every 2
    RUN_OK("train --resume --out %s --iters 4", tp("run"));
    ck_assert_msg(strstr(g_err, "12 images, 3 channels") && strstr(g_err, tp("rgb")), "%s", g_err);
    char steps[256];
    csv_steps(tp("run/log.csv"), steps, sizeof steps);
    ck_assert_str_eq(steps, "1,2,3,4");
    double e2 = csv_value(tp("run/log.csv"), 2, 8), e3 = csv_value(tp("run/log.csv"), 3, 8);
    ck_assert_msg(e2 > 0 && e3 > e2, "elapsed_s does not carry on over --resume: %g then %g", e2, e3);
    ck_assert(exists(tp("run/checkpoints/0000002.safetensors")) && exists(tp("run/checkpoints/0000004.safetensors")));
    ck_assert(exists(tp("run/samples/0000004.png")));
    RUN_OK("info %s", tp("run/checkpoints/0000004.safetensors"));
    ck_assert_msg(strstr(g_out, "hflip 0") && strstr(g_out, "limit 12") && strstr(g_out, "keep 2") &&
                  strstr(g_out, "ckpt_every 2") && strstr(g_out, "sample_every 1000"), "%s", g_out);
    // given again, a flag wins; --keep 2 (restored) prunes step 2
    RUN_OK("train --resume --out %s --iters 6 --log-every 2 --sample-every 0", tp("run"));
    csv_steps(tp("run/log.csv"), steps, sizeof steps);
    ck_assert_str_eq(steps, "1,2,3,4,6");
    ck_assert(!exists(tp("run/checkpoints/0000002.safetensors")) && exists(tp("run/checkpoints/0000006.safetensors")));
    RUN_OK("info %s", tp("run/checkpoints/0000006.safetensors"));
    ck_assert_msg(strstr(g_out, "log_every 2") && strstr(g_out, "keep 2"), "%s", g_out);
    // a contradicting model flag or batch is refused
    expect_error(run("train --resume --out %s --iters 8 --model DiT-S/2", tp("run")), "resume --model", "--resume",
                 "checkpoint");
    expect_error(run("train --resume --out %s --iters 8 --batch 8", tp("run")), "resume --batch", "--batch 8", NULL);

    // --online weights differ from the EMA ones; a model file has only one set
    RUN_OK("sample --ckpt %s --n 2 --steps 2 --save-npy %s --threads 1", tp("run/checkpoints/0000006.safetensors"),
           tp("ema.npy"));
    RUN_OK("sample --ckpt %s --weights online --n 2 --steps 2 --save-npy %s --threads 1",
           tp("run/checkpoints/0000006.safetensors"), tp("online.npy"));
    size_t na, nb;
    char *a = tu_read_file(tp("ema.npy"), &na), *b = tu_read_file(tp("online.npy"), &nb);
    ck_assert_msg(na == nb && memcmp(a, b, na), "--weights online gave the EMA images");
    free(a); free(b);
    expect_error(run("sample --ckpt " MODEL " --weights online --n 1"), "online of a model file", "--weights online", NULL);
    tu_rm_tmpdir();
}
END_TEST

// Points 4, 5 and 7: gray folders train as 1 channel, contradicting flags are errors, shapes that
// cannot learn and batches larger than the data are refused, DiT's names and --epochs work.
START_TEST(test_shapes_from_data) {
    tu_make_tmpdir("cli");
    make_folder(tp("gray"), 3, 4, 1, 32);
    make_folder(tp("rgb"), 2, 8, 3, 32);
    RUN_OK("train " TINY " --data %s --iters 1 --out %s", tp("gray"), tp("g"));
    ck_assert_msg(strstr(g_err, "12 images, 1 channel, 3 classes"), "%s", g_err);
    expect_error(run("train " TINY " --data %s --classes 5 --out %s", tp("rgb"), tp("x")), "--classes 5", "--classes 5",
                 "2 classes");
    expect_error(run("train " TINY " --channels 3 --limit 16 --out %s", tp("x")), "fashion-mnist --channels 3",
                 "1 channel", NULL);
    expect_error(run("train --model DiT-T/8 --batch 4 --data %s --out %s", tp("rgb"), tp("x")), "DiT-T/8 on RGB",
                 "hidden 128 is smaller than a patch's 192 values", NULL);
    expect_error(run("train " TINY " --data %s --batch 64 --out %s", tp("rgb"), tp("x")), "batch > data", "--batch 64",
                 "16 images");
    ck_assert_msg(!exists(tp("x")), "a refused train created its run directory");
    // an explicit --channels 1 on an RGB folder converts to gray (not a contradiction)
    RUN_OK("train " TINY " --data %s --channels 1 --iters 1 --out %s", tp("rgb"), tp("c1"));
    ck_assert_msg(strstr(g_err, "1 channel"), "%s", g_err);
    // DiT's train.py names; --epochs 2 of 16 images at batch 4 = 8 steps
    RUN_OK("train --model DiT-T/4 --data-path %s --global-batch-size 4 --num-classes 2 --epochs 2 --results-dir %s "
           "--global-seed 3 --ckpt-every 100 --log-every 4 --sample-every 0 --threads 2",
           tp("rgb"), tp("dit/000-DiT-T-4"));
    ck_assert_msg(strstr(g_err, "done: step 8") && exists(tp("dit/000-DiT-T-4/checkpoints/0000008.safetensors")), "%s",
                  g_err);
    expect_error(run("train " TINY " --epochs 1 --iters 5 --out %s", tp("x")), "--epochs and --iters", "--epochs", NULL);
    tu_rm_tmpdir();
}
END_TEST

static double g_clock;
static double fake_clock(void) { return g_clock; }

// Point 6: status lines on a file are whole lines, one every few seconds; on a terminal they are
// redrawn in place. The commands write no \r when stderr is a file.
START_TEST(test_progress_lines) {
    tu_make_tmpdir("cli");
    FILE *f = tmpfile();
    Progress p;
    progress_init(&p, f);
    ck_assert_int_eq(p.tty, 0);
    p.clock = fake_clock;
    for (int i = 0; i <= 24; i++) {  // an update every half second for 12 s, then the final one
        g_clock = 0.5 * i;
        progress_update(&p, 0, "step %d", i);
    }
    progress_update(&p, 1, "step done");
    progress_break(&p);
    rewind(f);
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_str_eq(buf, "step 0\nstep 10\nstep 20\nstep done\n");  // t = 0, 5, 10 s and the end

    // an unchanged line is not written again; the next new one is, at once
    f = tmpfile();
    progress_init(&p, f);
    p.clock = fake_clock;
    g_clock = 0; progress_update(&p, 0, "waiting");
    g_clock = 6; progress_update(&p, 0, "waiting");
    g_clock = 12; progress_update(&p, 0, "waiting");
    g_clock = 13; progress_update(&p, 0, "step 1");
    g_clock = 14; progress_update(&p, 0, "step 2");  // within 5 s of the last line
    rewind(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_str_eq(buf, "waiting\nstep 1\n");

    f = tmpfile();
    progress_init(&p, f);
    p.tty = 1;
    p.clock = fake_clock;
    g_clock = 0; progress_update(&p, 0, "step 10");
    g_clock = 0.05; progress_update(&p, 0, "step 11");  // within 0.1 s: not drawn
    g_clock = 0.2; progress_update(&p, 0, "step 9");
    progress_break(&p);
    rewind(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_str_eq(buf, "\rstep 10\rstep 9 \n");

    RUN_OK("sample --ckpt " MODEL " --n 4 --batch 2 --steps 30 --out %s --threads 1", tp("g.png"));
    ck_assert_msg(!stderr_has_cr() && strstr(g_err, "step 30/30"), "sample to a file:\n%s", g_err);
    RUN_OK("eval stats --data fashion-mnist-test --limit 4 --batch 2 --out %s --inception random --threads 2",
           tp("s.npz"));
    ck_assert_msg(!stderr_has_cr() && strstr(g_err, "4/4 images"), "eval to a file:\n%s", g_err);

    // loss.png of one logged point draws it (series colour 31,119,180), not an empty frame
    uint64_t step = 1;
    double loss = 0.5;
    MalaErr err;
    ck_assert(loss_plot_png(tp("loss.png"), &step, &loss, 1, &err) == 0);
    uint8_t *px;
    int w, h, curve = 0;
    ck_assert_msg(image_load(tp("loss.png"), 3, &px, &w, &h, &err) == 0, "%s", err.msg);
    // counted left of the legend (the right 150 columns), which has the series' colour too
    for (int i = 0; i < w * h; i++)
        curve += i % w < w - 150 && px[3 * i] == 31 && px[3 * i + 1] == 119 && px[3 * i + 2] == 180;
    free(px);
    ck_assert_msg(curve >= 25, "one logged point drew %d pixels", curve);
    tu_rm_tmpdir();
}
END_TEST

// Point 8: eval fid --ckpt samples with DiT's sample_ddp.py settings unless told otherwise; the
// quick preset and custom settings are labelled in the JSON line and on stderr.
START_TEST(test_eval_presets) {
    tu_make_tmpdir("cli");
    const char *common = "--inception random --limit 2 --batch 2 --splits 1 --device cpu --threads 2";
    RUN_OK("eval is --ckpt %s %s", MODEL, common);
    ck_assert_msg(strstr(g_out, "\"preset\":\"dit\",\"sampler\":\"ddpm\",\"steps\":250,\"cfg_scale\":1.5,\"eta\":0,"
                                "\"clip\":false,\"num\":50000"), "%s", g_out);
    ck_assert_msg(strstr(g_err, "DiT's FID-50K settings"), "%s", g_err);
    // a 1-channel pixel model: DiT's 3-channel guidance is all of its eps (tests/test_latent.c: 3 on latents)
    ck_assert_msg(strstr(g_out, "\"cfg_channels\":\"all\",\"label_mode\":\"random\""), "%s", g_out);
    ck_assert_msg(strstr(g_err, "random labels (DiT's"), "%s", g_err);
    RUN_OK("eval is --ckpt %s --cfg-channels 1 %s", MODEL, common);
    ck_assert_msg(strstr(g_out, "\"preset\":\"custom\"") && strstr(g_out, "\"cfg_channels\":\"all\""), "%s", g_out);
    // mala sample's default is all: the same bytes as 4 of 4 channels, others than DiT's 3 (tools/ref/ref_cfg_channels.py's
    // model; tests/test_sample.c compares the samples with PyTorch's)
    const char *cfg4 = "sample --ckpt tests/fixtures/cfg4_model.safetensors --n 2 --steps 3 --threads 1";
    RUN_OK("%s --save-npy %s", cfg4, tp("call.npy"));
    RUN_OK("%s --cfg-channels 4 --save-npy %s", cfg4, tp("c4.npy"));
    RUN_OK("%s --cfg-channels 3 --save-npy %s", cfg4, tp("c3.npy"));
    size_t n_all, n4, n3;
    char *s_all = tu_read_file(tp("call.npy"), &n_all), *s4 = tu_read_file(tp("c4.npy"), &n4),
         *s3 = tu_read_file(tp("c3.npy"), &n3);
    ck_assert(n_all == n4 && n_all == n3 && !memcmp(s_all, s4, n4) && memcmp(s_all, s3, n3));
    free(s_all); free(s4); free(s3);
    expect_error(run("eval is --ckpt %s --cfg-channels none %s", MODEL, common), "eval", "--cfg-channels none",
                 "all or");
    expect_error(run("eval is --ckpt %s --label-mode even %s", MODEL, common), "eval", "--label-mode even", "random");
    expect_error(run("sample --ckpt " MODEL " --class 1 --label-mode random"), "sample", "--label-mode and --class",
                 NULL);
    // mala sample --label-mode random: the labels of the seed, whatever the batch size
    RUN_OK("sample --ckpt " MODEL " --n 9 --steps 1 --batch 2 --label-mode random --seed 4 --save-npz %s --threads 1",
           tp("r2.npz"));
    RUN_OK("sample --ckpt " MODEL " --n 9 --steps 1 --batch 4 --label-mode random --seed 4 --save-npz %s --threads 1",
           tp("r4.npz"));
    RUN_OK("sample --ckpt " MODEL " --n 9 --steps 1 --batch 4 --seed 4 --save-npz %s --threads 1", tp("bal.npz"));
    NpyArray l2, l4, lb;
    MalaErr lerr;
    ck_assert(npz_load(tp("r2.npz"), "arr_1", &l2, &lerr) == 0 && npz_load(tp("r4.npz"), "arr_1", &l4, &lerr) == 0 &&
              npz_load(tp("bal.npz"), "arr_1", &lb, &lerr) == 0);
    ck_assert(l2.nbytes == 9 * 8 && !memcmp(l2.data, l4.data, l2.nbytes) && memcmp(l2.data, lb.data, l2.nbytes));
    npy_free(&l2); npy_free(&l4); npy_free(&lb);
    expect_error(run("sample --ckpt " MODEL " --n 1 --cfg-interval 5,1"), "sample", "--cfg-interval 5,1", "LO < HI");
    expect_error(run("eval is --ckpt %s --cfg-interval 1 %s", MODEL, common), "eval", "--cfg-interval 1", "none");
    RUN_OK("eval is --ckpt %s --cfg-interval 0.5,20 %s", MODEL, common);
    ck_assert_msg(strstr(g_out, "\"cfg_interval\":\"0.5,20\"") && strstr(g_out, "\"preset\":\"custom\""), "%s",
                  g_out);
    expect_error(run("sample --ckpt " MODEL " --n 1 --cfg-channels 0"), "sample", "--cfg-channels 0", "all or");
    expect_error(run("view --ckpt " MODEL " --cfg-channels -2"), "view", "--cfg-channels -2", "all or");
    RUN_OK("eval is --ckpt %s --quick %s", MODEL, common);
    ck_assert_msg(strstr(g_out, "\"preset\":\"quick\",\"sampler\":\"ddim\",\"steps\":50,") &&
                  strstr(g_out, "\"num\":10000") && strstr(g_out, "\"label_mode\":\"balanced\""), "%s", g_out);
    ck_assert_msg(strstr(g_err, "QUICK preset"), "%s", g_err);
    RUN_OK("eval is --ckpt %s --quick --label-mode random %s", MODEL, common);
    ck_assert_msg(strstr(g_out, "\"preset\":\"custom\"") && strstr(g_out, "\"label_mode\":\"random\""), "%s", g_out);
    RUN_OK("eval is --ckpt %s --quick --num-sampling-steps 5 %s", MODEL, common);
    ck_assert_msg(strstr(g_out, "\"preset\":\"custom\",\"sampler\":\"ddim\",\"steps\":5,"), "%s", g_out);
    ck_assert_msg(strstr(g_err, "custom settings"), "%s", g_err);
    // eval fid names the same settings
    RUN_OK("eval stats --data fashion-mnist-test --limit 2 --batch 2 --out %s --inception random --threads 2",
           tp("ref.npz"));
    RUN_OK("eval fid --ckpt %s --quick --ref %s %s", MODEL, tp("ref.npz"), common);
    ck_assert_msg(strstr(g_out, "\"cmd\":\"eval fid\"") && strstr(g_out, "\"preset\":\"quick\""), "%s", g_out);
    // other tools' names: torch-fidelity's keys beside ours, the ADM evaluator's lines on stderr
    double ours, theirs;
    const char *f1 = strstr(g_out, "\"fid\":"), *f2 = strstr(g_out, "\"frechet_inception_distance\":");
    ck_assert_msg(f1 && f2 && sscanf(f1 + 6, "%lf", &ours) == 1 && sscanf(f2 + 29, "%lf", &theirs) == 1 &&
                  fabs(ours - theirs) <= 1e-6 * fabs(ours) && strstr(g_out, "\"inception_score_mean\":"), "%s", g_out);
    ck_assert_msg(strstr(g_err, "\nFID: ") && strstr(g_err, "\nsFID: ") && strstr(g_err, "\nInception Score: "), "%s",
                  g_err);
    // sFID: the statistics file carries mu_s / sigma_s (2023 features), so eval fid reports it
    char **keys;
    int nk, found = 0;
    MalaErr err;
    ck_assert_msg(npz_keys(tp("ref.npz"), &keys, &nk, &err) == 0, "%s", err.msg);
    for (int i = 0; i < nk; i++) found += !strcmp(keys[i], "mu_s") + !strcmp(keys[i], "sigma_s");
    npz_keys_free(keys, nk);
    ck_assert_int_eq(found, 2);
    ck_assert_msg(strstr(g_out, "\"sfid\":") && strstr(g_err, "sFID"), "%s\n%s", g_out, g_err);
    RUN_OK("bench inception --batch 1 --iters 1 --warmup 0 --size 8 --device cpu --threads 2");
    ck_assert_msg(strstr(g_out, "\"device\":\"cpu\""), "%s", g_out);
    tu_rm_tmpdir();
}
END_TEST

// --features fmnist: stats with the reference features, then one JSON line with fd, class_acc
// (labelled samples: a dataset, --ckpt), precision/recall and KID; the Inception's IS is refused.
START_TEST(test_eval_fmnist) {
    tu_make_tmpdir("cli");
    RUN_OK("eval stats --features fmnist --data fashion-mnist --limit 200 --batch 50 --out %s --threads 2",
           tp("fm.npz"));
    ck_assert_msg(strstr(g_out, "\"features\":\"fmnist\"") && strstr(g_out, "\"dim\":128,\"feats\":200"), "%s", g_out);
    RUN_OK("eval fid --features fmnist --samples fashion-mnist-test --limit 100 --ref %s --threads 2", tp("fm.npz"));
    const char *keys[] = {"\"features\":\"fmnist\"", "\"fd\":", "\"class_acc\":", "\"precision\":", "\"recall\":",
                          "\"kid_mean\":", "\"kid_std\":", "\"n\":100,", "\"seconds\":"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) ck_assert_msg(strstr(g_out, keys[i]), "%s: %s", keys[i], g_out);
    ck_assert_msg(!strchr(g_out, '\n') || !strchr(g_out, '\n')[1], "one line: %s", g_out);
    double acc = atof(strstr(g_out, "\"class_acc\":") + 12);
    ck_assert_msg(acc > 0.8, "real test images: class accuracy %.3f", acc);
    // samples from a checkpoint carry their labels
    RUN_OK("eval fid --features fmnist --ckpt %s --quick --num 10 --sample-batch 10 --steps 2 --ref %s --device cpu "
           "--threads 2", BUNDLED, tp("fm.npz"));
    ck_assert_msg(strstr(g_out, "\"class_acc\":") && strstr(g_out, "\"n\":10,"), "%s", g_out);
    // a model of other classes (classa, classb: 32x32 gray, as the classifier takes) gets FD but no
    // class accuracy, and a note saying why
    make_folder(tp("ab"), 2, 2, 1, 32);
    RUN_OK("train " TINY " --data %s --iters 1 --out %s", tp("ab"), tp("abrun"));
    RUN_OK("eval fid --features fmnist --ckpt %s --quick --num 4 --sample-batch 4 --steps 2 --ref %s --device cpu "
           "--threads 2", tp("abrun/checkpoints/0000001.safetensors"), tp("fm.npz"));
    ck_assert_msg(strstr(g_out, "\"fd\":") && !strstr(g_out, "\"class_acc\":") &&
                  strstr(g_out, "\"no_class_acc\":\"the images have 2 classes"), "%s", g_out);
    ck_assert_msg(strstr(g_err, "note: no class accuracy: the images have 2 classes") &&
                  !strstr(g_err, "class accuracy 0"), "%s", g_err);
    RUN_OK("eval sweep --features fmnist --ckpt %s --ref %s --cfg-scale 1 --steps 2 --sampler ddim --num 4 "
           "--sample-batch 4 --batch 4 --device cpu --threads 2 --out %s", tp("abrun/checkpoints/0000001.safetensors"),
           tp("fm.npz"), tp("sw"));
    char md[4096];
    slurp(tp("sw/sweep.md"), md, sizeof md);
    ck_assert_msg(strstr(md, "| 1 | ") && strstr(md, " - |") && strstr(md, "No class accuracy: the images have 2 classes"),
                  "%s", md);
    // images the classifier cannot take, a 2048-d reference, IS, an unknown network
    int rc = run("eval fid --features fmnist --ckpt %s --num 2 --steps 2 --ref %s --device cpu --threads 2", MODEL,
                 tp("fm.npz"));
    ck_assert_msg(rc == 1 && strstr(g_err, "takes 1 x 32 x 32"), "exit %d: %s", rc, g_err);
    RUN_OK("eval stats --data fashion-mnist-test --limit 2 --batch 2 --out %s --inception random --threads 2",
           tp("inc.npz"));
    rc = run("eval fid --features fmnist --samples fashion-mnist-test --limit 10 --ref %s --threads 2", tp("inc.npz"));
    ck_assert_msg(rc == 1 && strstr(g_err, "2048-d statistics, but --features fmnist gives 128-d"), "exit %d: %s", rc,
                  g_err);
    expect_error(run("eval is --features fmnist --samples fashion-mnist-test --threads 2"), "eval is fmnist",
                 "needs the Inception", NULL);
    expect_error(run("eval fid --features vgg --samples x.npz --ref y.npz"), "--features vgg", "--features vgg", NULL);
    tu_rm_tmpdir();
}
END_TEST

// Point 9: info names a file that is not safetensors and shows parameters and the step; view says
// why a model file cannot be read; a 1000-class model samples 64 images by default; --batch
// changes the images by no more than the bound docs/sample.md states.
START_TEST(test_small_things) {
    tu_make_tmpdir("cli");
    RUN_OK("info tests/fixtures/npy_grid.npz");  // a result file: its arrays and manifest (tests/test_manifest.c)
    ck_assert_msg(strstr(g_out, "arrays: ") && strstr(g_out, "no manifest"), "%s", g_out);
    expect_error(run("info tests/fixtures/fid_ref.txt"), "info txt", "not a safetensors file", NULL);
    // image formats are named by their magic bytes, with what info reads
    static const struct { const char *name, *bytes, *kind; size_t n; } img[] = {
        {"x.jpg", "\xff\xd8\xff\xe0\0\x10JFIF\0", "a JPEG image", 11}, {"x.gif", "GIF89a\1\0\1\0", "a GIF image", 10},
        {"x.bmp", "BM\x3a\0\0\0\0\0", "a BMP image", 8}, {"x.bin", "PK\x03\x04\x14\0\0\0", "a ZIP archive", 8}};
    for (size_t i = 0; i < sizeof img / sizeof img[0]; i++) {
        FILE *f = fopen(tp(img[i].name), "wb");
        ck_assert(f && fwrite(img[i].bytes, 1, img[i].n, f) == img[i].n && fclose(f) == 0);
        expect_error(run("info %s", tp(img[i].name)), img[i].name, img[i].kind, "not a file mala info reads");
    }
    char cmd[4300];  // a PNG under another name is read as one
    snprintf(cmd, sizeof cmd, "cp tests/fixtures/img_rgba.png %s", tp("png.dat"));
    ck_assert_int_eq(system(cmd), 0);
    RUN_OK("info %s", tp("png.dat"));
    ck_assert_msg(strstr(g_out, ": PNG ") && strstr(g_out, "no generation parameters"), "%s", g_out);
    RUN_OK("info " BUNDLED);
    ck_assert_msg(strstr(g_out, "1,290,784 trainable parameters"), "%s", g_out);
    RUN_OK("train " TINY " --limit 16 --iters 2 --out %s", tp("run"));
    RUN_OK("info %s", tp("run/checkpoints/0000002.safetensors"));
    ck_assert_msg(strstr(g_out, "training checkpoint at step 2") && strstr(g_out, "run: data fashion-mnist"), "%s", g_out);
    expect_error(run("view --ckpt %s", tp("missing.safetensors")), "view missing", "No such file or directory", NULL);

    // a 1000-class model: 64 images spread over the classes, not 8,000
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 1; c.dit.hidden = 32; c.dit.heads = 2; c.dit.patch = 4; c.image_size = 8; c.num_classes = 1000;
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    net_init_weights(m, 1);
    ClassNames cn;
    class_names_default(&cn, 1000);
    MalaErr err;
    ck_assert_msg(ckpt_save_weights(m, &cn, m->w, ST_F32, tp("k1000.safetensors"), &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    net_free(m);
    RUN_OK("sample --ckpt %s --steps 1 --save-npy %s --threads 1", tp("k1000.safetensors"), tp("k.npy"));
    NpyArray a;
    ck_assert_msg(npy_load(tp("k.npy"), &a, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(a.shape[0], 64);
    npy_free(&a);

    // --batch: the bundled model, DDPM 50 steps, 6 images in batches of 6, 4 and 1 stay within the
    // docs/sample.md's bound (OpenBLAS's AVX-512 kernels sum small products in another order than large
    // ones, so even one thread is not batch-invariant there)
    const int bs[3] = {6, 4, 1};
    for (int threads = 1; threads <= 2; threads++) {
        float *x[3];
        for (int i = 0; i < 3; i++) {
            char name[32];
            snprintf(name, sizeof name, "b%d_t%d.npy", bs[i], threads);
            RUN_OK("sample --n 6 --steps 50 --batch %d --seed 1 --save-npy %s --threads %d", bs[i], tp(name), threads);
            ck_assert_msg(npy_load(tp(name), &a, &err) == 0, "%s", err.msg);
            x[i] = malloc(a.nbytes);
            memcpy(x[i], a.data, a.nbytes);
            npy_free(&a);
        }
        size_t nf = 6 * 32 * 32;
        double d1 = tu_max_abs_diff(x[0], x[1], nf), d2 = tu_max_abs_diff(x[0], x[2], nf);
        printf("sample --threads %d: --batch 6 vs 4: max |diff| %.3g; vs 1: %.3g\n", threads, d1, d2);
        ck_assert_msg(d1 <= 1e-4 && d2 <= 1e-4, "%d thread(s): --batch changed the images by %.3g / %.3g (bound 1e-4)",
                      threads, d1, d2);
        for (int i = 0; i < 3; i++) free(x[i]);
    }
    tu_rm_tmpdir();
}
END_TEST

// Info says nothing meaningless (hflip -1, an empty vae), an exported model keeps
// its training step, source and run settings, and sample decodes a latent model through the VAE
// its run recorded when none is given.
START_TEST(test_info_export_vae) {
    tu_make_tmpdir("cli");
    RUN_OK("info " BUNDLED);
    ck_assert_msg(strstr(g_out, "training step: not recorded"), "%s", g_out);
    RUN_OK("train " TINY " --limit 16 --iters 2 --out %s", tp("run"));
    RUN_OK("export --ckpt %s --out %s", tp("run/checkpoints/0000002.safetensors"), tp("m.safetensors"));
    RUN_OK("info %s", tp("m.safetensors"));
    char want[600];
    snprintf(want, sizeof want, "training step 2, exported from %s\n", tp("run/checkpoints/0000002.safetensors"));
    ck_assert_msg(strstr(g_out, want), "%s", g_out);
    ck_assert_msg(strstr(g_out, "run: data fashion-mnist") && strstr(g_out, "hflip the data's default"), "%s", g_out);
    ck_assert_msg(!strstr(g_out, "hflip -1") && !strstr(g_out, "vae"), "%s", g_out);
    // a training checkpoint is never an export's --out, with or without --force; its bytes stay
    size_t n0, n1;
    char *before = tu_read_file(tp("run/checkpoints/0000002.safetensors"), &n0);
    for (int force = 0; force < 2; force++) {
        expect_error(run("export --ckpt %s --out %s%s", tp("m.safetensors"), tp("run/checkpoints/0000002.safetensors"),
                         force ? " --force" : ""),
                     "export onto a checkpoint", "is a training checkpoint", "never replaces one");
        char *after = tu_read_file(tp("run/checkpoints/0000002.safetensors"), &n1);
        ck_assert(n0 == n1 && !memcmp(before, after, n0));
        free(after);
    }
    free(before);

    // latent: the recorded VAE when it can be read, also after export; an error naming it when not
    make_latent_model(tp("lat.safetensors"), "tests/fixtures/vae_tiny.safetensors");
    RUN_OK("export --ckpt %s --out %s --dtype f32", tp("lat.safetensors"), tp("lat_m.safetensors"));
    RUN_OK("info %s", tp("lat_m.safetensors"));
    ck_assert_msg(strstr(g_out, "vae tests/fixtures/vae_tiny.safetensors") && strstr(g_out, "training step 7"), "%s",
                  g_out);
    RUN_OK("sample --ckpt %s --n 2 --steps 2 --out %s --threads 2", tp("lat_m.safetensors"), tp("lat.png"));
    snprintf(want, sizeof want, "using the VAE recorded in %s: tests/fixtures/vae_tiny.safetensors\n",
             tp("lat_m.safetensors"));
    ck_assert_msg(strstr(g_err, want), "%s", g_err);
    int w, h;
    MalaErr err;
    ck_assert_msg(image_check(tp("lat.png"), &w, &h, &err) == 0, "%s", err.msg);
    ck_assert_int_ge(w, 32);  // decoded: 4x4 latents -> 32x32 images
    make_latent_model(tp("lost.safetensors"), "no/such/vae.safetensors");
    expect_error(run("sample --ckpt %s --n 2 --steps 2 --out %s", tp("lost.safetensors"), tp("x.png")), "lost VAE",
                 "no/such/vae.safetensors", "give --vae FILE");
    tu_rm_tmpdir();
}
END_TEST

// Help names latent sets as --data, --global-batch's default is said in words,
// preset names take any case (the canonical name is printed).
START_TEST(test_help_and_names) {
    tu_make_tmpdir("cli");
    RUN_OK("help");
    char line[256];
    const char *row = strstr(g_out, "  train ");
    ck_assert_msg(row, "%s", g_out);
    snprintf(line, sizeof line, "%.*s", (int)(strchr(row, '\n') - row), row);
    ck_assert_msg(strstr(line, "a latent set"), "mala help's train row does not name latent sets: %s", line);
    RUN_OK("train --help");
    row = strstr(g_out, "--data SRC");
    ck_assert_msg(row, "%s", g_out);
    snprintf(line, sizeof line, "%.*s", (int)(strchr(row, '\n') - row), row);
    ck_assert_msg(strstr(line, "latent set (mala encode)"), "%s", line);
    row = strstr(g_out, "--global-batch G");
    ck_assert_msg(row, "%s", g_out);
    snprintf(line, sizeof line, "%.*s", (int)(strchr(row, '\n') - row), row);
    ck_assert_msg(!strstr(line, "default 0") && strstr(line, "(default: --batch)"), "%s", line);
    RUN_OK("train --model dit-t/4 --batch 4 --log-every 1 --sample-every 0 --threads 2 --limit 16 --iters 1 --out %s",
           tp("lower"));
    ck_assert_msg(strstr(g_err, "note: --model dit-t/4 is DiT-T/4\n"), "%s", g_err);
    RUN_OK("bench train --model dig-t/4 --batch 2 --steps 1 --threads 2");
    ck_assert_msg(strstr(g_err, "note: --model dig-t/4 is DiG-T/4\n"), "%s", g_err);
    // --backbone alone: that backbone's S/2, or S where its presets have no patch size
    RUN_OK("bench train --backbone dic --batch 1 --steps 1 --threads 2");
    ck_assert_msg(strstr(g_out, "\"model\":\"DiC-S\""), "%s", g_out);
    expect_error(run("train --model dit-q/4 --out %s", tp("x")), "unknown preset", "--model dit-q/4: unknown preset",
                 NULL);
    tu_rm_tmpdir();
}
END_TEST

// Mala restarts itself to set OpenMP's wait policy; the restarted process keeps
// the binary's name (it was "exe", from /proc/self/exe), so ps, top and pgrep find it. The child
// is read as a zombie (waitid WNOWAIT): its comm stays until it is reaped.
START_TEST(test_process_name) {
    tu_make_tmpdir("cli");
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        unsetenv("MALA_NO_REEXEC");
        unsetenv("OMP_WAIT_POLICY");  // the restart happens when the policy is not set
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl(mala_bin(), mala_bin(), "help", (char *)NULL);
        _exit(127);
    }
    siginfo_t info;
    ck_assert(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) == 0);
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    slurp(path, comm, sizeof comm);
    int st;
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mala help: status %d", st);
    const char *base = strrchr(mala_bin(), '/') ? strrchr(mala_bin(), '/') + 1 : mala_bin();
    char want[32];
    snprintf(want, sizeof want, "%.15s\n", base);  // the kernel keeps 15 characters
    ck_assert_msg(!strcmp(comm, want), "process name '%s', expected '%s'", comm, want);
    tu_rm_tmpdir();
}
END_TEST


// ---- gradient accumulation, unconditional models, fine-tuning ----

static int same_bytes(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    int same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

// Largest |a - b| over the tensors of a that b has (under the same name); the count compared in *n.
static double tensors_max_diff(const char *a, const char *b, const char *prefix, int *n) {
    StFile fa, fb;
    MalaErr err;
    ck_assert_msg(st_open(&fa, a, &err) == 0, "%s", err.msg);
    ck_assert_msg(st_open(&fb, b, &err) == 0, "%s", err.msg);
    double worst = 0;
    *n = 0;
    for (int i = 0; i < fa.n; i++) {
        const StTensor *ta = &fa.tensors[i], *tb = st_find(&fb, ta->name);
        if (strncmp(ta->name, prefix, strlen(prefix)) || !tb) continue;
        ck_assert_msg(st_numel(ta) == st_numel(tb), "%s: tensor %s", b, ta->name);
        size_t k = (size_t)st_numel(ta);
        float *xa = malloc(k * sizeof(float)), *xb = malloc(k * sizeof(float));
        ck_assert(st_read_f32(&fa, ta, xa, &err) == 0 && st_read_f32(&fb, tb, xb, &err) == 0);
        double d = tu_max_abs_diff(xa, xb, k);
        if (d > worst) worst = d;
        free(xa);
        free(xb);
        (*n)++;
    }
    st_close(&fa);
    st_close(&fb);
    return worst;
}

// --accum: 2 x batch 4 trains what batch 8 trains (the loader's images, the draws; to the order of
// the gradient's sums: weights within 1e-6 after 4 steps), the log counts images, the checkpoint
// and mala info record it, --resume follows it and refuses another, --global-batch splits.
START_TEST(test_train_accum) {
    tu_make_tmpdir("cli");
#define ACC "train --model DiT-T/4 --log-every 2 --sample-every 0 --threads 2 --limit 64 --ckpt-every 2"
    RUN_OK(ACC " --batch 8 --iters 4 --out %s", tp("big"));
    RUN_OK(ACC " --batch 4 --accum 2 --iters 4 --out %s", tp("acc"));
    ck_assert_msg(strstr(g_err, "batch 8 (--batch 4 x --accum 2)"), "%s", g_err);
    int n;
    double d = tensors_max_diff(tp("big/checkpoints/0000004.safetensors"), tp("acc/checkpoints/0000004.safetensors"),
                                "", &n);
    printf("--batch 4 --accum 2 vs --batch 8, 4 steps: max |diff| %.3g over %d tensors\n", d, n);
    ck_assert_msg(n > 100 && d <= 1e-6, "accumulation differs from the big batch by %g", d);
    RUN_OK("info %s", tp("acc/checkpoints/0000004.safetensors"));
    ck_assert_msg(strstr(g_out, "batch 4 accum 2 ") && strstr(g_out, "batches 8 "), "%s", g_out);
    // resume: follows the run's --accum (bit-exact), refuses another
    RUN_OK(ACC " --batch 4 --accum 2 --iters 2 --out %s", tp("res"));
    RUN_OK("train --resume --iters 4 --threads 2 --out %s", tp("res"));
    ck_assert_msg(same_bytes(tp("acc/checkpoints/0000004.safetensors"), tp("res/checkpoints/0000004.safetensors")),
                  "resume with accumulation is not bit-exact");
    expect_error(run("train --resume --accum 4 --iters 6 --threads 2 --out %s", tp("res")), "another --accum",
                 "--accum 4 contradicts the run's --accum 2", NULL);
    expect_error(run("train --resume --global-batch 16 --iters 6 --threads 2 --out %s", tp("res")),
                 "another --global-batch", "--global-batch 16 contradicts the run's 8 (--batch 4 x --accum 2)", NULL);
    RUN_OK("train --resume --global-batch-size 8 --iters 6 --threads 2 --out %s", tp("res"));
    // --global-batch with --batch: --accum is their quotient, which must be whole
    expect_error(run(ACC " --global-batch 8 --batch 3 --out %s", tp("x")), "indivisible", "not a multiple of --batch 3",
                 NULL);
    RUN_OK(ACC " --global-batch 8 --batch 2 --iters 1 --out %s", tp("g2"));
    ck_assert_msg(strstr(g_err, "batch 8 (--batch 2 x --accum 4)"), "%s", g_err);
    // alone: one batch when it fits, else the fewest micro-batches that fit (DiT-T/4: batch 32 needs
    // about 125 MB beyond the program, 16 about 83 MB)
    RUN_OK(ACC " --global-batch 64 --iters 1 --out %s", tp("g1"));
    ck_assert_msg(strstr(g_err, "batch 64, lr") && !strstr(g_err, "--accum"), "%s", g_err);
    setenv("MALA_TEST_MEMORY", "100M", 1);
    int rc = run(ACC " --global-batch 64 --iters 1 --out %s", tp("g4"));
    unsetenv("MALA_TEST_MEMORY");
    ck_assert_msg(rc == 0, "exit %d: %s", rc, g_err);
    ck_assert_msg(strstr(g_err, "note: --global-batch 64 does not fit in memory as one batch: --batch 16 x --accum 4"),
                  "%s", g_err);
#undef ACC
    tu_rm_tmpdir();
}
END_TEST

// --classes 0: a tiny unconditional model trains (with its grid), resumes, says so in mala info,
// samples without --class, and refuses a class and guidance by name, in sample and eval.
START_TEST(test_train_unconditional) {
    tu_make_tmpdir("cli");
    RUN_OK("train " TINY " --classes 0 --limit 16 --iters 2 --sample-every 2 --sample-steps 2 --sample-images 4 "
           "--out %s", tp("u"));
    ck_assert_msg(strstr(g_err, "10 classes unused (an unconditional model)"), "%s", g_err);
    ck_assert(exists(tp("u/samples/0000002.png")));
    RUN_OK("train --resume --iters 3 --sample-every 0 --threads 2 --out %s", tp("u"));
    const char *ck = tp("u/checkpoints/0000003.safetensors");
    RUN_OK("info %s", ck);
    ck_assert_msg(strstr(g_out, "32x32x1, unconditional") && strstr(g_out, "classes: none (num_classes 0"), "%s", g_out);
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, ck, &err) == 0, "%s", err.msg);
    const StTensor *t = st_find(&f, "y_embedder.embedding_table.weight");
    ck_assert(t && t->ndim == 2 && t->shape[0] == 1 && !strcmp(st_meta(&f, "num_classes"), "0") &&
              !strcmp(st_meta(&f, "class_names"), "[]"));
    st_close(&f);
    RUN_OK("export --ckpt %s --out %s", ck, tp("u.safetensors"));
    RUN_OK("sample --ckpt %s --sampler ddim --steps 2 --n 2 --threads 2 --out-dir %s", tp("u.safetensors"), tp("png"));
    ck_assert(exists(tp("png/000001_uncond.png")));
    expect_error(run("sample --ckpt %s --steps 2 --cfg-scale 4 --out %s", tp("u.safetensors"), tp("g.png")), "guidance",
                 "--cfg-scale 4: the model is unconditional (num_classes 0)", "drop --cfg-scale");
    expect_error(run("sample --ckpt %s --steps 2 --class 3 --out %s", tp("u.safetensors"), tp("g.png")), "a class",
                 "--class 3:", "is an unconditional model (num_classes 0)");
    expect_error(run("eval fid --features fmnist --ckpt %s --cfg-scale 2 --ref %s --threads 2", tp("u.safetensors"),
                     tp("none.npz")), "eval guidance", "--cfg-scale 2: the model is unconditional", NULL);
    tu_rm_tmpdir();
}
END_TEST

// Largest |a[name] - b[bprefix name]| over a's model tensors (no ema.*, opt.*) but `skip`; *n compared.
static double model_diff(const char *a, const char *b, const char *bprefix, const char *skip, int *n) {
    StFile fa, fb;
    MalaErr err;
    ck_assert_msg(st_open(&fa, a, &err) == 0 && st_open(&fb, b, &err) == 0, "%s", err.msg);
    double worst = 0;
    *n = 0;
    for (int i = 0; i < fa.n; i++) {
        const StTensor *ta = &fa.tensors[i];
        if (!strncmp(ta->name, "ema.", 4) || !strncmp(ta->name, "opt.", 4) || (skip && !strcmp(ta->name, skip)))
            continue;
        char name[160];
        snprintf(name, sizeof name, "%s%s", bprefix, ta->name);
        const StTensor *tb = st_find(&fb, name);
        ck_assert_msg(tb && st_numel(ta) == st_numel(tb), "%s: tensor %s", b, name);
        size_t k = (size_t)st_numel(ta);
        float *xa = malloc(k * sizeof(float)), *xb = malloc(k * sizeof(float));
        ck_assert(st_read_f32(&fa, ta, xa, &err) == 0 && st_read_f32(&fb, tb, xb, &err) == 0);
        worst = fmax(worst, tu_max_abs_diff(xa, xb, k));
        free(xa);
        free(xb);
        (*n)++;
    }
    st_close(&fa);
    st_close(&fb);
    return worst;
}

// The same tensor `name` of two files: max |a - b| (-1 when the shapes differ).
static double tensor_diff(const char *a, const char *b, const char *name) {
    StFile fa, fb;
    MalaErr err;
    ck_assert_msg(st_open(&fa, a, &err) == 0 && st_open(&fb, b, &err) == 0, "%s", err.msg);
    const StTensor *ta = st_find(&fa, name), *tb = st_find(&fb, name);
    ck_assert_msg(ta && tb, "%s: no %s", ta ? b : a, name);
    double d = -1;
    if (st_numel(ta) == st_numel(tb)) {
        size_t k = (size_t)st_numel(ta);
        float *xa = malloc(k * sizeof(float)), *xb = malloc(k * sizeof(float));
        ck_assert(st_read_f32(&fa, ta, xa, &err) == 0 && st_read_f32(&fb, tb, xb, &err) == 0);
        d = tu_max_abs_diff(xa, xb, k);
        free(xa);
        free(xb);
    }
    st_close(&fa);
    st_close(&fb);
    return d;
}

// --init (fine-tuning): a DiT-T/4 of Fashion-MNIST's 10 classes fine-tuned on a 3-class folder with
// --lr 0 (so the checkpoint's online weights are the starting ones): every tensor but the label
// table is the file's EMA exactly; the table is a fresh run's (DiT init); at another image size
// pos_embed is the fresh run's sin-cos table; --init-weights online and a model file; mala info
// names the file and its SHA-256 (as sha256sum prints it); another width or backbone, --resume and
// online weights of a model file are refused, creating nothing.
START_TEST(test_train_init) {
    tu_make_tmpdir("cli");
#define FT "--batch 4 --log-every 1 --sample-every 0 --threads 2 --lr 0 --iters 1"
    RUN_OK("train " TINY " --limit 16 --iters 2 --out %s", tp("base"));
    char base[600];
    snprintf(base, sizeof base, "%s", tp("base/checkpoints/0000002.safetensors"));
    make_folder(tp("f3"), 3, 4, 1, 32);
    RUN_OK("train " FT " --init %s --data %s --out %s", base, tp("f3"), tp("ft"));
    ck_assert_msg(strstr(g_err, "(ema weights, step 2): carried over 59 of 60 tensors") &&
                  strstr(g_err, "new: y_embedder.embedding_table.weight [4, 128] (3 classes + the null class; the "
                                "file's [11, 128]: re-initialised, N(0, 0.02))") && strstr(g_err, "3 classes"),
                  "%s", g_err);
    const char *ft = tp("ft/checkpoints/0000001.safetensors");
    int n;
    double d = model_diff(ft, base, "ema.", "y_embedder.embedding_table.weight", &n);
    ck_assert_msg(n == 59 && d == 0, "carried over %d tensors, max |diff| %g", n, d);
    RUN_OK("train --model DiT-T/4 " FT " --data %s --out %s", tp("f3"), tp("fresh"));
    d = tensor_diff(ft, tp("fresh/checkpoints/0000001.safetensors"), "y_embedder.embedding_table.weight");
    ck_assert_msg(d == 0, "the new label table is not a fresh run's: %g", d);
    // where it started, in mala info (and the hash sha256sum computes)
    RUN_OK("info %s", ft);
    char cmd[800], sum[80] = "";
    snprintf(cmd, sizeof cmd, "sha256sum %s", base);
    FILE *p = popen(cmd, "r");
    ck_assert(p && fscanf(p, "%64s", sum) == 1);
    pclose(p);
    char want[1000];
    snprintf(want, sizeof want, "fine-tuned from %s (ema weights, step 2), sha256 %s", base, sum);
    ck_assert_msg(strstr(g_out, want), "want '%s' in:\n%s", want, g_out);
    // another image size: pos_embed recomputed for the new grid
    RUN_OK("train " FT " --init %s --data %s --image-size 16 --out %s", base, tp("f3"), tp("ft16"));
    ck_assert_msg(strstr(g_err, "recomputed: pos_embed [1, 16, 128] (the fixed sin-cos table of a 16x16 image; the "
                                "file's [1, 64, 128])"), "%s", g_err);
    RUN_OK("train --model DiT-T/4 " FT " --data %s --image-size 16 --out %s", tp("f3"), tp("fresh16"));
    d = tensor_diff(tp("ft16/checkpoints/0000001.safetensors"), tp("fresh16/checkpoints/0000001.safetensors"),
                    "pos_embed");
    ck_assert_msg(d == 0, "pos_embed is not the 16x16 table: %g", d);
    // the online weights, and a model file (F16: its values exactly)
    RUN_OK("train " FT " --init %s --init-weights online --limit 16 --out %s", base, tp("on"));
    ck_assert_msg(strstr(g_err, "(online weights, step 2): carried over 60 of 60 tensors"), "%s", g_err);
    d = model_diff(tp("on/checkpoints/0000001.safetensors"), base, "", NULL, &n);
    ck_assert_msg(n == 60 && d == 0, "online: %d tensors, max |diff| %g", n, d);
    RUN_OK("export --ckpt %s --out %s", base, tp("m.safetensors"));
    RUN_OK("train " FT " --init %s --limit 16 --out %s", tp("m.safetensors"), tp("fm"));
    ck_assert_msg(strstr(g_err, "(the model file's weights, step 2): carried over 60 of 60"), "%s", g_err);
    d = model_diff(tp("fm/checkpoints/0000001.safetensors"), tp("m.safetensors"), "", NULL, &n);
    ck_assert_msg(n == 60 && d == 0, "model file: %d tensors, max |diff| %g", n, d);
    // refused, before anything is created
    expect_error(run("train " FT " --init %s --model DiT-XS/4 --limit 16 --out %s", base, tp("x")), "a wider model",
                 "tensor 'ema.x_embedder.proj.weight' is [128, 1, 4, 4] there and [256, 1, 4, 4] in the model trained",
                 NULL);
    expect_error(run("train " FT " --init %s --model DiG-T/4 --limit 16 --out %s", base, tp("x")), "another backbone",
                 "has no tensor 'ema.blocks.0.attn.q_proj.weight'", "another backbone or depth");
    expect_error(run("train " FT " --init %s --init-weights online --out %s", tp("m.safetensors"), tp("x")),
                 "online of a model file", "--init-weights online:", "holds one set of weights");
    expect_error(run("train --resume --init %s --out %s", base, tp("ft")), "--init with --resume", "give one of them",
                 NULL);
    ck_assert_msg(!exists(tp("x")), "a refused --init created its run directory");
#undef FT
    tu_rm_tmpdir();
}
END_TEST

// --threads above the CPUs this process may use (its affinity mask) warns once; within it, nothing.
START_TEST(test_threads_over_cores) {
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    const int usable = CPU_COUNT(&set);
    RUN_OK("bench train --model DiT-T/4 --batch 1 --steps 1 --device cpu --threads %d", usable + 1);
    const char *w = strstr(g_err, "is more than the");
    ck_assert_msg(w && !strstr(w + 16, "is more than the"), "%s", g_err);
    RUN_OK("bench train --model DiT-T/4 --batch 1 --steps 1 --device cpu --threads 1");
    ck_assert_msg(!strstr(g_err, "is more than the"), "%s", g_err);
}
END_TEST

// --precision bf16 on the CPU (oneDNN builds; refused with a one-line error
// without oneDNN), fp32 the default, an unknown precision refused; bench's JSON names it, and a
// bf16 train and sample run end to end.
START_TEST(test_precision_flag) {
    tu_make_tmpdir("cli");
    RUN_OK("bench train --model DiT-T/4 --batch 2 --steps 1 --threads 2 --device cpu");
    ck_assert_msg(strstr(g_out, "\"precision\":\"fp32\""), "%s", g_out);
    expect_error(run("bench train --model DiT-T/4 --batch 2 --steps 1 --device cpu --precision fp16"), "fp16",
                 "--precision fp16: unknown precision", NULL);
#ifdef MALA_DNNL
    RUN_OK("bench train --model DiT-T/4 --batch 2 --steps 1 --threads 2 --device cpu --precision bf16");
    ck_assert_msg(strstr(g_out, "\"precision\":\"bf16\""), "%s", g_out);
    // slower bf16 products get one line of advice (the measured ratio stood in for by the test hook)
    setenv("MALA_TEST_BF16_RATIO", "0.5", 1);
    RUN_OK("bench train --model DiT-T/4 --batch 2 --steps 1 --threads 2 --device cpu --precision bf16");
    const char *adv = strstr(g_err, "0.50x the fp32 rate");
    ck_assert_msg(adv && !strstr(adv + 19, "fp32 rate") && strstr(g_err, "use --precision fp32"), "%s", g_err);
    setenv("MALA_TEST_BF16_RATIO", "1.5", 1);
    RUN_OK("bench train --model DiT-T/4 --batch 2 --steps 1 --threads 2 --device cpu --precision bf16");
    ck_assert_msg(!strstr(g_err, "fp32 rate"), "%s", g_err);
    unsetenv("MALA_TEST_BF16_RATIO");
    RUN_OK("bench sample --model DiT-T/4 --n 2 --steps 2 --repeats 1 --threads 2 --device cpu --precision bf16");
    ck_assert_msg(strstr(g_out, "\"precision\":\"bf16\""), "%s", g_out);
    RUN_OK("train " TINY " --device cpu --precision bf16 --limit 16 --iters 2 --out %s", tp("bf"));
    RUN_OK("sample --ckpt " MODEL " --steps 3 --batch 2 --n 2 --device cpu --precision bf16 --save-npy %s "
           "--threads 2", tp("bf.npy"));
#else
    expect_error(run("bench train --model DiT-T/4 --batch 2 --steps 1 --device cpu --precision bf16"), "no oneDNN",
                 "--precision bf16: this build has no oneDNN", NULL);
#endif
    tu_rm_tmpdir();
}
END_TEST

// --precision int8 (sampling on the CPU, oneDNN builds): sample on the bundled model writes images
// close to fp32's and records the precision; bench sample names it; training and CUDA refuse it
// with one line each.
#define BUNDLED "assets/mala-dit-fmnist.safetensors"
START_TEST(test_precision_int8) {
    tu_make_tmpdir("cli8");
    expect_error(run("train " TINY " --device cpu --precision int8 --out %s", tp("t")), "train int8",
                 "--precision int8: int8 is for sampling only", NULL);
    expect_error(run("bench train --model DiT-T/4 --batch 2 --steps 1 --device cpu --precision int8"), "bench train int8",
                 "--precision int8: int8 is for sampling only", NULL);
    expect_error(run("sample --ckpt " BUNDLED " --n 1 --device cuda --precision int8"), "cuda int8",
                 "--precision int8:", "CUDA int8 is not there yet");
#ifdef MALA_DNNL
    RUN_OK("sample --ckpt " BUNDLED " --sampler ddim --steps 4 --n 4 --batch 4 --device cpu --threads 2 --precision int8 "
           "--save-npy %s --out %s", tp("i8.npy"), tp("i8.png"));
    char js[4096];
    slurp(tp("i8.npy.json"), js, sizeof js);
    ck_assert_msg(strstr(js, "\"matmul_precision\":\"int8\""), "%s", js);
    RUN_OK("sample --ckpt " BUNDLED " --sampler ddim --steps 4 --n 4 --batch 4 --device cpu --threads 2 "
           "--save-npy %s --out %s", tp("f32.npy"), tp("f32.png"));
    NpyArray a, b;
    MalaErr err;
    ck_assert_msg(npy_load(tp("i8.npy"), &a, &err) == 0 && npy_load(tp("f32.npy"), &b, &err) == 0, "%s", err.msg);
    const size_t n = (size_t)npy_numel(&a);
    ck_assert(n == (size_t)npy_numel(&b) && n == 4 * 32 * 32);
    const double d = tu_max_abs_diff((const float *)a.data, (const float *)b.data, n);
    printf("test_precision_int8: bundled model, DDIM-4, 4 images: max |int8 - fp32| %.3f (images in [-1, 1])\n", d);
    ck_assert_msg(d > 0 && d < 0.5, "int8 images against fp32: max diff %g", d);
    npy_free(&a), npy_free(&b);
    // a q8 file: written by export, described by info, sampled as it is in both precisions
    RUN_OK("export --ckpt " BUNDLED " --out %s --type q8", tp("q8.safetensors"));
    RUN_OK("info %s", tp("q8.safetensors"));
    ck_assert_msg(strstr(g_out, "type q8 (") && strstr(g_out, "1.8 MB") && strstr(g_out, "1,290,784 trainable"), "%s",
                  g_out);
    RUN_OK("info " BUNDLED);
    ck_assert_msg(strstr(g_out, "type F16, file 2,603,840 bytes"), "%s", g_out);
    RUN_OK("sample --ckpt %s --sampler ddim --steps 2 --n 2 --device cpu --threads 2 --precision int8 --out %s",
           tp("q8.safetensors"), tp("q8i8.png"));
    RUN_OK("sample --ckpt %s --sampler ddim --steps 2 --n 2 --device cpu --threads 2 --out %s", tp("q8.safetensors"),
           tp("q8f32.png"));
    RUN_OK("bench sample --model DiT-T/4 --n 2 --steps 2 --repeats 1 --threads 2 --device cpu --precision int8");
    ck_assert_msg(strstr(g_out, "\"precision\":\"int8\""), "%s", g_out);
    RUN_OK("bench gemm --repeats 1 --tokens 64 --threads 2");  // four shapes, three rates each
    ck_assert_msg(strstr(g_out, "\"layer\":\"DiT-S/2 fc2\"") && strstr(g_out, "\"int8_gflops\":") &&
                  strstr(g_out, "\"bf16_gflops\":"), "%s", g_out);
#else
    expect_error(run("sample --ckpt " BUNDLED " --n 1 --device cpu --precision int8"), "no oneDNN",
                 "--precision int8: this build has no oneDNN", NULL);
#endif
    tu_rm_tmpdir();
}
END_TEST

// --eval-every evaluates the EMA weights at every multiple (training images, or
// steps with the s suffix) and at the end: evals.csv (append-only; points already evaluated are
// not again after --resume), fd.png, best.json and best.safetensors outside checkpoints/, and the
// TensorBoard scalars; the settings travel in run.eval.
#define EV "--limit 16 --eval-images 6 --eval-steps 2"
START_TEST(test_train_eval_every) {
    tu_make_tmpdir("cli");
    RUN_OK("eval stats --features fmnist --data fashion-mnist-test --limit 100 --out %s", tp("ref.npz"));
    RUN_OK("train " TINY " " EV " --iters 4 --eval-every 8 --eval-ref %s --out %s", tp("ref.npz"), tp("run"));
    char csv[4096];
    slurp(tp("run/evals.csv"), csv, sizeof csv);
    ck_assert_msg(!strncmp(csv, "images,step,train_s,fd,class_acc,eval_s\n8,2,", 44) && strstr(csv, "\n16,4,"),
                  "%s", csv);
    ck_assert(exists(tp("run/fd.png")) && exists(tp("run/best.json")) && exists(tp("run/best.safetensors")));
    ck_assert(!exists(tp("run/checkpoints/best.safetensors")));
    char json[512];
    slurp(tp("run/best.json"), json, sizeof json);
    ck_assert_msg(strstr(json, "\"fd\":") && strstr(json, "\"class_acc\":") && strstr(json, "best.safetensors"),
                  "%s", json);
    RUN_OK("info %s", tp("run/best.safetensors"));  // a checkpoint mala reads
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -q eval/class_acc %s/events.out.tfevents.*", tp("run"));
    ck_assert_msg(system(cmd) == 0, "no eval scalars in the event file");

    // resumed with its stored settings, counting steps now: 3s passes at step 6, and step 7 ends
    RUN_OK("train --resume --out %s --iters 7 --eval-every 3s --threads 2", tp("run"));
    char csv2[4096];
    slurp(tp("run/evals.csv"), csv2, sizeof csv2);
    ck_assert_msg(!strncmp(csv2, csv, strlen(csv)), "rows rewritten:\n%s\n%s", csv, csv2);  // append-only
    ck_assert_msg(strstr(csv2, "\n24,6,") && strstr(csv2, "\n28,7,") && !strstr(csv2, "\n20,5,"), "%s", csv2);
    ck_assert_msg(strstr(g_err, "6 images, ddim 2 steps"), "%s", g_err);  // --eval-images/--eval-steps kept
    RUN_OK("train --resume --out %s --iters 8 --eval-every 0 --threads 2", tp("run"));  // off
    slurp(tp("run/evals.csv"), csv, sizeof csv);
    ck_assert_str_eq(csv, csv2);

    expect_error(run("train " TINY " --eval-every 10x --out %s", tp("r2")), "--eval-every 10x", "--eval-every",
                 "Ns");
    expect_error(run("train " TINY " --eval-every 8 --eval-sampler nope --out %s", tp("r2")), "--eval-sampler nope",
                 "--eval-sampler", "ddim");
    expect_error(run("train " TINY " " EV " --eval-every 8 --eval-ref %s --out %s", tp("none.npz"), tp("r3")),
                 "a missing --eval-ref", "none.npz", NULL);
    make_folder(tp("rgb"), 2, 2, 3, 16);  // 16x16: not the classifier's size, refused before training
    ck_assert_int_eq(run("train " TINY " --data %s --image-size 16 --iters 1 --eval-every 4 --eval-ref %s --out %s",
                         tp("rgb"), tp("ref.npz"), tp("r4")), 1);
    ck_assert_msg(strstr(g_err, "takes 32x32 or 28x28 images"), "%s", g_err);
    tu_rm_tmpdir();
}
END_TEST

// Checkpoints hold fp32 tensors whatever the precision and record it
// (run.precision, shown by mala info); --resume follows it, --precision changes it. A bf16 run
// resumed without the flag is byte-identical to a straight bf16 run (same device and threads); a
// bf16 run goes on in fp32 and an fp32 run in bf16.
START_TEST(test_resume_precision) {
#ifdef MALA_DNNL
    tu_make_tmpdir("cli");
#define PR "train " TINY " --device cpu --limit 16 --ckpt-every 2"
    RUN_OK(PR " --precision bf16 --iters 4 --out %s", tp("straight"));
    RUN_OK(PR " --precision bf16 --iters 2 --out %s", tp("res"));
    RUN_OK("train --resume --iters 4 --threads 2 --out %s", tp("res"));
    ck_assert_msg(strstr(g_err, "note: the run trained in bf16; it goes on in bf16 (the run's"), "%s", g_err);
    ck_assert_msg(same_bytes(tp("straight/checkpoints/0000004.safetensors"), tp("res/checkpoints/0000004.safetensors")),
                  "a bf16 resume is not bit-exact");
    RUN_OK("info %s --tensors", tp("res/checkpoints/0000004.safetensors"));
    ck_assert_msg(strstr(g_out, "precision bf16") && strstr(g_out, " F32 ") && !strstr(g_out, "BF16"), "%s", g_out);
    RUN_OK("train --resume --iters 6 --precision fp32 --threads 2 --out %s", tp("res"));  // bf16 -> fp32
    ck_assert_msg(strstr(g_err, "note: the run trained in bf16; it goes on in fp32 (--precision)"), "%s", g_err);
    RUN_OK("info %s", tp("res/checkpoints/0000006.safetensors"));
    ck_assert_msg(strstr(g_out, "precision fp32"), "%s", g_out);
    RUN_OK(PR " --iters 2 --out %s", tp("f32"));  // fp32 -> bf16
    RUN_OK("info %s", tp("f32/checkpoints/0000002.safetensors"));
    ck_assert_msg(strstr(g_out, "precision fp32"), "%s", g_out);
    RUN_OK("train --resume --iters 4 --precision bf16 --threads 2 --out %s", tp("f32"));
    ck_assert_msg(strstr(g_err, "note: the run trained in fp32; it goes on in bf16 (--precision)"), "%s", g_err);
    RUN_OK("info %s", tp("f32/checkpoints/0000004.safetensors"));
    ck_assert_msg(strstr(g_out, "precision bf16"), "%s", g_out);
#undef PR
    tu_rm_tmpdir();
#else
    printf("test_resume_precision: skipped, this build has no oneDNN (no bf16)\n");
#endif
}
END_TEST

// A PyTorch .pt (torch.save's zip format, tools/make_torch_zip_fixtures.py) samples as it is, bit for bit
// as the same weights converted by `mala import`: a bare state dict, a {model, ema, opt, args} training
// checkpoint (ema by default, model with --weights online) and F16 storages; `export` of a .pt the
// same. `info` names the format.
START_TEST(test_sample_torch_file) {
    tu_make_tmpdir("cli");
#define PTS "--vae tests/fixtures/vae_tiny.safetensors --heads 2 --n 2 --steps 3 --sampler ddim --seed 1 --threads 1"
    static const char *const kinds[] = {"sd", "ckpt", "f16"};
    for (int i = 0; i < 3; i++) {
        char pt[128], st[64], a_npy[64], b_npy[64];
        snprintf(pt, sizeof pt, "tests/fixtures/torchzip_%s.pt", kinds[i]);
        snprintf(st, sizeof st, "%s.safetensors", kinds[i]);
        snprintf(a_npy, sizeof a_npy, "%s_pt.npy", kinds[i]);
        snprintf(b_npy, sizeof b_npy, "%s_st.npy", kinds[i]);
        RUN_OK("import %s --heads 2 --out %s", pt, tp(st));
        RUN_OK("sample --ckpt %s " PTS " --save-npy %s", pt, tp(a_npy));
        RUN_OK("sample --ckpt %s " PTS " --save-npy %s", tp(st), tp(b_npy));
        size_t na, nb;
        char *a = tu_read_file(tp(a_npy), &na), *b = tu_read_file(tp(b_npy), &nb);
        ck_assert_msg(a && na == nb && !memcmp(a, b, na), "%s: the .pt and its import sample differently", pt);
        free(a); free(b);
    }
    RUN_OK("sample --ckpt tests/fixtures/torchzip_ckpt.pt " PTS " --weights online --save-npy %s", tp("online.npy"));
    size_t na, nb;
    char *a = tu_read_file(tp("online.npy"), &na), *b = tu_read_file(tp("ckpt_pt.npy"), &nb);
    ck_assert_msg(na == nb && memcmp(a, b, na), "--weights online gave the checkpoint's ema samples");
    free(a); free(b);
    RUN_OK("export --ckpt tests/fixtures/torchzip_sd.pt --heads 2 --dtype f32 --out %s", tp("exp.safetensors"));
    RUN_OK("sample --ckpt %s " PTS " --save-npy %s", tp("exp.safetensors"), tp("exp.npy"));
    a = tu_read_file(tp("exp.npy"), &na), b = tu_read_file(tp("sd_pt.npy"), &nb);
    ck_assert_msg(na == nb && !memcmp(a, b, na), "export of a .pt samples otherwise than the .pt");
    free(a); free(b);
    // diffusers' VAE folder (config.json + diffusion_pytorch_model.bin): the same images as its weights in
    // our file, and the PNG and .npy records name the folder and hash its weights file
#define PTV "sample --ckpt tests/fixtures/torchzip_sd.pt --heads 2 --n 2 --steps 3 --sampler ddim --seed 1 --threads 1"
    RUN_OK(PTV " --vae tests/fixtures/vae_tiny_bin --out %s --save-npy %s", tp("dir.png"), tp("dir.npy"));
    RUN_OK(PTV " --vae tests/fixtures/vae_tiny_old.safetensors --save-npy %s", tp("old.npy"));
#undef PTV
    a = tu_read_file(tp("dir.npy"), &na), b = tu_read_file(tp("old.npy"), &nb);
    ck_assert_msg(a && b && na == nb && !memcmp(a, b, na), "--vae DIR decodes otherwise than its weights");
    free(a); free(b);
    RUN_OK("info %s", tp("dir.png"));
    ck_assert_msg(strstr(g_out, "VAE: vae_tiny_bin"), "%s", g_out);
#undef PTS
    RUN_OK("info tests/fixtures/torchzip_ckpt.pt --heads 2");
    ck_assert_msg(strstr(g_out, "a PyTorch file (torch.save, zip format), weights from the checkpoint's ema") &&
                  strstr(g_out, "dit depth 1, hidden 16, heads 2, patch 2"), "%s", g_out);
    // a 1000-class .pt (tools/ref/make_torch_1000class_fixture.py) has no names: ImageNet's are shown and taken
#define P1K "sample --ckpt tests/fixtures/torchzip_1000.pt --heads 2 --vae tests/fixtures/vae_tiny.safetensors --n 1 " \
            "--steps 2 --threads 1"
    RUN_OK("info tests/fixtures/torchzip_1000.pt --heads 2");
    ck_assert_msg(strstr(g_out, "classes: 1000 (0 tench,") && strstr(g_out, "207 golden retriever"), "%s", g_out);
    RUN_OK(P1K " --class \"Golden Retriever\" --out %s", tp("gr.png"));
    RUN_OK("info %s", tp("gr.png"));
    ck_assert_msg(strstr(g_out, "golden retriever\n") && strstr(g_out, "Class: 207,"), "%s", g_out);
    ck_assert_int_eq(run(P1K " --class \"golden retreiver\" --out %s", tp("typo.png")), 1);
    ck_assert_msg(strstr(g_err, "--class golden retreiver: unknown class (the model has 1000, by name or number "
                                "0..999); did you mean golden retriever?\n"), "%s", g_err);
#undef P1K
    tu_rm_tmpdir();
}
END_TEST

// A model file of fixture src's model tensors (our reference fixtures also hold grad.*, in.* and out),
// with its metadata's configuration and class names numbered as a .pt's are.
static void model_file_of(const char *src, const char *dst) {
    StFile f;
    MalaErr err;
    NetConfig c;
    ClassNames cn;
    ck_assert_msg(st_open(&f, src, &err) == 0 && ckpt_read_config(&f, &c, &cn, &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    class_names_default(&cn, c.num_classes);
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        ck_assert_msg(st_load_f32(&f, p->name, p->shape, p->ndim, m->w + p->offset, &err) == 0, "%s", err.msg);
    }
    ck_assert_msg(ckpt_save_weights(m, &cn, m->w, ST_F32, dst, &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    net_free(m);
    st_close(&f);
}

// DiG's and DiC's .pt (tools/ref/make_torch_digdic_fixtures.py: our fixtures' tensors, whose names are
// the official ones, saved by torch.save): the backbone and configuration are inferred from the names
// (DiC's image size from its checkpoint's args) and the samples equal those of the same weights as
// a model file bit for bit; a file that fits no backbone is refused naming the first tensor that
// does not fit.
START_TEST(test_sample_torch_digdic) {
    tu_make_tmpdir("cli");
    static const struct { const char *pt, *src, *desc; } cases[] = {
        {"dig", "dig_t2", "dig depth 2, hidden 16, heads 2, patch 2, gla, 8x8x1, 3 classes, learned sigma"},
        {"dic", "dic_t1", "dic hidden 2, depths [3,2,1,2,3], multipliers [3,4,6,4,3], skip stride 2, conv, 8x8x1, "
                          "3 classes, learned sigma"}};
    for (int i = 0; i < 2; i++) {
        char pt[64], src[64], st[32], a[32], b[32];
        snprintf(pt, sizeof pt, "tests/fixtures/torchzip_%s.pt", cases[i].pt);
        snprintf(src, sizeof src, "tests/fixtures/%s.safetensors", cases[i].src);
        snprintf(st, sizeof st, "%s.safetensors", cases[i].pt);
        snprintf(a, sizeof a, "%s_pt.npy", cases[i].pt);
        snprintf(b, sizeof b, "%s_st.npy", cases[i].pt);
        RUN_OK("info %s", pt);
        ck_assert_msg(strstr(g_out, cases[i].desc), "%s: want '%s' in\n%s", pt, cases[i].desc, g_out);
        model_file_of(src, tp(st));
#define DD "--n 3 --steps 3 --sampler ddim --seed 1 --threads 1"
        RUN_OK("sample --ckpt %s " DD " --save-npy %s", pt, tp(a));
        RUN_OK("sample --ckpt %s " DD " --save-npy %s", tp(st), tp(b));
#undef DD
        size_t na, nb;
        char *x = tu_read_file(tp(a), &na), *y = tu_read_file(tp(b), &nb);
        ck_assert_msg(x && y && na == nb && !memcmp(x, y, na), "%s: the .pt and its model file sample differently", pt);
        free(x); free(y);
    }
    expect_error(run("sample --ckpt tests/fixtures/torchzip_nofit.pt --n 1 --out %s", tp("x.png")), "a DiG .pt with "
                 "a tensor of no backbone", "torchzip_nofit.pt: fits no backbone: tensor 'blocks.0.attn.rotary.weight' "
                 "[4] is not one of the model", NULL);
    expect_error(run("sample --ckpt tests/fixtures/torchzip_alien.pt --n 1 --out %s", tp("x.png")), "a state dict of "
                 "no backbone", "torchzip_alien.pt: fits no backbone: tensor 'conv1.weight' is none of DiT's, DiG's or "
                 "DiC's", NULL);
    expect_error(run("info tests/fixtures/torchzip_alien.pt"), "info of a .pt of no backbone", "torchzip_alien.pt: "
                 "fits no backbone: tensor 'conv1.weight'", NULL);
    ck_assert_msg(!exists(tp("x.png")), "a refused .pt wrote an image");
    tu_rm_tmpdir();
}
END_TEST

static int same_tensors(const char *a, const char *b);

// mala vae preview-fit prints a VAE's latent-to-RGB projection (the step previews' for a VAE other
// than the SD-VAE): a row per latent channel, bias and R^2, the same for the same seed.
START_TEST(test_vae_preview_fit) {
    const char *fit = "vae preview-fit --vae tests/fixtures/vae_tiny.safetensors --cells 4 --count 4 --threads 1";
    RUN_OK("%s --seed 1", fit);
    char *a = strdup(g_out);
    ck_assert_msg(strstr(a, "\n  z0 ") && strstr(a, "\n  z3 ") && !strstr(a, "\n  z4 ") && strstr(a, "\n  bias ") &&
                  strstr(a, "\n  R^2 "), "%s", a);
    RUN_OK("%s --seed 1", fit);
    ck_assert_msg(!strcmp(a, g_out), "the same seed fitted twice:\n%s\n%s", a, g_out);
    RUN_OK("%s --seed 2", fit);
    ck_assert_msg(strcmp(a, g_out), "another seed, the same fit");
    free(a);
    expect_error(run("vae preview-fit --cells 4"), "preview-fit without --vae", "--vae is required", NULL);
}
END_TEST

// One vocabulary for which weights of a training checkpoint: ema, or online, which DiT's checkpoints
// call model. sample, view, eval --ckpt, info, import, export (--weights) and train (--init-weights) take both spellings of
// online alike and refuse any other word with one line naming the flag.
START_TEST(test_weights_words) {
    tu_make_tmpdir("cli");
#define PT "tests/fixtures/torchzip_ckpt.pt --heads 2"
#define SMP "sample --ckpt " PT " --vae tests/fixtures/vae_tiny.safetensors --n 1 --steps 2 --seed 1 --threads 1"
    RUN_OK(SMP " --weights online --save-npy %s", tp("online.npy"));
    RUN_OK(SMP " --weights model --save-npy %s", tp("model.npy"));
    RUN_OK(SMP " --weights ema --save-npy %s", tp("ema.npy"));
    size_t na, nb, nc;
    char *a = tu_read_file(tp("online.npy"), &na), *b = tu_read_file(tp("model.npy"), &nb),
         *e = tu_read_file(tp("ema.npy"), &nc);
    ck_assert_msg(a && b && e && na == nb && !memcmp(a, b, na), "sample: --weights model is not online");
    ck_assert_msg(na == nc && memcmp(a, e, na), "sample: --weights online gave the ema samples");
    free(a); free(b); free(e);
    RUN_OK("info " PT " --weights model");
    char *out_model = strdup(g_out);
    RUN_OK("info " PT " --weights online");
    ck_assert_msg(!strcmp(out_model, g_out) && strstr(g_out, "weights from the checkpoint's model"), "%s", g_out);
    free(out_model);
    RUN_OK("import " PT " --weights online --out %s", tp("online.safetensors"));
    RUN_OK("import " PT " --weights model --out %s", tp("model.safetensors"));
    a = tu_read_file(tp("online.safetensors"), &na), b = tu_read_file(tp("model.safetensors"), &nb);
    ck_assert_msg(a && b && na == nb && !memcmp(a, b, na), "import: --weights model is not online");
    free(a); free(b);
    RUN_OK("import tests/fixtures/torchzip_sd.pt --heads 2 --weights ema --out %s", tp("sd.safetensors"));
    // export and eval --ckpt take --weights as sample does: export's online tensors are import's
    RUN_OK("export --ckpt " PT " --weights model --dtype f32 --out %s", tp("exp_online.safetensors"));
    RUN_OK("export --ckpt " PT " --dtype f32 --out %s", tp("exp_ema.safetensors"));
    ck_assert_msg(same_tensors(tp("exp_online.safetensors"), tp("online.safetensors")), "export --weights online is not "
                  "import's online");
    ck_assert_msg(!same_tensors(tp("exp_online.safetensors"), tp("exp_ema.safetensors")), "export: online is ema");
    const char *ev = "eval is --ckpt " PT " --vae tests/fixtures/vae_tiny.safetensors --num 2 --sample-batch 2 --steps 2 "
                     "--sampler ddim --inception random --batch 2 --splits 1 --device cpu --threads 1";
    char is_ema[64] = "", is_online[64] = "";
    RUN_OK("%s --weights ema", ev);
    const char *k = strstr(g_out, "\"inception_score_mean\":");
    ck_assert_msg(k && strstr(g_out, "\"weights\":\"ema\""), "%s", g_out);
    snprintf(is_ema, sizeof is_ema, "%.36s", k);  // the key and its value
    RUN_OK("%s --weights online", ev);
    k = strstr(g_out, "\"inception_score_mean\":");
    ck_assert_msg(k && strstr(g_out, "\"weights\":\"online\""), "%s", g_out);
    snprintf(is_online, sizeof is_online, "%.36s", k);
    ck_assert_msg(strcmp(is_ema, is_online), "eval --weights online scored the ema samples: %s", is_online);
    expect_error(run("export --ckpt %s --weights online --out %s", MODEL, tp("x.safetensors")), "export online of a "
                 "model file", "--weights online", "one set of weights");
    expect_error(run("view --ckpt " PT " --weights last"), "view --weights last", "--weights last: expected ema or "
                 "online", NULL);
    expect_error(run(SMP " --weights mdoel --out %s", tp("x.png")), "sample --weights mdoel", "--weights mdoel: "
                 "expected ema or online", NULL);
    expect_error(run("info " PT " --weights last"), "info --weights last", "--weights last: expected ema or online",
                 NULL);
    expect_error(run("import " PT " --weights state_dict --out %s", tp("x.safetensors")), "import --weights state_dict",
                 "--weights state_dict: expected ema or online", NULL);
    expect_error(run("train --init %s --init-weights both --out %s", tp("sd.safetensors"), tp("x")),
                 "train --init-weights both", "--init-weights both: expected ema or online", NULL);
    ck_assert_msg(!exists(tp("x")) && !exists(tp("x.png")) && !exists(tp("x.safetensors")), "a refused word wrote");
#undef SMP
#undef PT
    tu_rm_tmpdir();
}
END_TEST

// Two files hold the same tensors, bit for bit: names, dtypes, shapes and bytes (their metadata may differ).
static int same_tensors(const char *a, const char *b) {
    StFile fa, fb;
    MalaErr err;
    ck_assert_msg(st_open(&fa, a, &err) == 0 && st_open(&fb, b, &err) == 0, "%s", err.msg);
    int same = fa.n == fb.n;
    for (int i = 0; same && i < fa.n; i++) {
        const StTensor *ta = &fa.tensors[i], *tb = &fb.tensors[i];
        same = !strcmp(ta->name, tb->name) && ta->dtype == tb->dtype && ta->ndim == tb->ndim &&
               !memcmp(ta->shape, tb->shape, sizeof ta->shape) && ta->end - ta->begin == tb->end - tb->begin &&
               !memcmp(fa.data + ta->begin, fb.data + tb->begin, ta->end - ta->begin);
        if (!same) fprintf(stderr, "%s and %s differ at tensor %s\n", a, b, ta->name);
    }
    st_close(&fa);
    st_close(&fb);
    return same;
}

// train --init FILE.pt (tests/fixtures/torchzip_*.pt: a bare state dict, a {model, ema, opt, args}
// checkpoint's ema and its online `model` (--init-weights model: DiT's word), F16 storages) trains as --init of the same weights
// converted by `mala import`: the first checkpoints hold the same tensors, bit for bit; the run
// records which weights it started from; online weights of a bare state dict are refused.
START_TEST(test_train_init_torch_file) {
    tu_make_tmpdir("cli");
    make_folder(tp("f4"), 4, 1, 3, 64);  // 8x8x4 latents of the fixtures' model (tests/fixtures/vae_tiny: 8x)
    RUN_OK("encode --data %s --vae tests/fixtures/vae_tiny.safetensors --image-size 64 --dtype f32 --out %s "
           "--threads 2", tp("f4"), tp("lat"));
#define FTP "--heads 2 --batch 4 --iters 1 --log-every 1 --sample-every 0 --threads 2"
    static const struct { const char *pt, *weights, *shown; } cases[] = {
        {"sd", "ema", "the model file's weights"}, {"ckpt", "ema", "(ema weights)"},
        {"ckpt", "model", "(online weights)"}, {"f16", "ema", "the model file's weights"}};
    for (int i = 0; i < 4; i++) {
        char pt[128], st[32], a[32], b[32], a_ck[64], b_ck[64];
        snprintf(pt, sizeof pt, "tests/fixtures/torchzip_%s.pt", cases[i].pt);
        snprintf(st, sizeof st, "m%d.safetensors", i);
        snprintf(a, sizeof a, "pt%d", i);
        snprintf(b, sizeof b, "st%d", i);
        RUN_OK("import %s --heads 2 %s --out %s", pt, !strcmp(cases[i].weights, "model") ? "--weights online" : "",
               tp(st));
        RUN_OK("train " FTP " --init %s --init-weights %s --data %s --out %s", pt, cases[i].weights, tp("lat"), tp(a));
        ck_assert_msg(strstr(g_err, cases[i].shown) && strstr(g_err, "carried over 22 of 22 tensors"), "%s", g_err);
        RUN_OK("train " FTP " --init %s --data %s --out %s", tp(st), tp("lat"), tp(b));
        snprintf(a_ck, sizeof a_ck, "%s/checkpoints/0000001.safetensors", a);
        snprintf(b_ck, sizeof b_ck, "%s/checkpoints/0000001.safetensors", b);
        char ca[600];
        snprintf(ca, sizeof ca, "%s", tp(a_ck));
        ck_assert_msg(same_tensors(ca, tp(b_ck)), "%s %s: --init of the .pt and of its import train differently",
                      pt, cases[i].weights);
    }
    RUN_OK("info %s", tp("pt2/checkpoints/0000001.safetensors"));
    ck_assert_msg(strstr(g_out, "fine-tuned from ") && strstr(g_out, "torchzip_ckpt.pt (online weights), sha256 "),
                  "%s", g_out);
    expect_error(run("train " FTP " --init tests/fixtures/torchzip_sd.pt --init-weights online --data %s --out %s",
                     tp("lat"), tp("x")), "online of a bare state dict", "--init-weights online:",
                 "holds one set of weights");
    expect_error(run("train --batch 4 --init tests/fixtures/torchzip_sd.pt --data %s --out %s", tp("lat"), tp("x")),
                 "a .pt of no preset width without --heads", "torchzip_sd.pt", "give --heads");
    ck_assert_msg(!exists(tp("x")), "a refused --init created its run directory");
#undef FTP
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_flags);
    tcase_add_test(tc, test_run_directory);
    tcase_add_test(tc, test_failed_start);
    tcase_add_test(tc, test_resume_keeps_iters);
    tcase_add_test(tc, test_resume_remembers);
    tcase_add_test(tc, test_shapes_from_data);
    tcase_add_test(tc, test_progress_lines);
    tcase_add_test(tc, test_eval_presets);
    tcase_add_test(tc, test_eval_fmnist);
    tcase_add_test(tc, test_small_things);
    tcase_add_test(tc, test_precision_flag);
    tcase_add_test(tc, test_threads_over_cores);
    tcase_add_test(tc, test_resume_precision);
    suite_add_tcase(s, tc);
    TCase *int8 = tcase_create("int8");  // --precision int8
    tcase_set_timeout(int8, 120);
    tcase_add_test(int8, test_precision_int8);
    suite_add_tcase(s, int8);
    TCase *names = tcase_create("names");  // process name, info, help
    tcase_set_timeout(names, 600);
    tcase_add_test(names, test_process_name);
    tcase_add_test(names, test_help_and_names);
    tcase_add_test(names, test_info_export_vae);
    tcase_add_test(names, test_weights_words);
    tcase_add_test(names, test_vae_preview_fit);
    suite_add_tcase(s, names);
    TCase *t37 = tcase_create("train37");  // --accum, --classes 0, --init
    tcase_set_timeout(t37, 600);
    tcase_add_test(t37, test_train_accum);
    tcase_add_test(t37, test_train_unconditional);
    tcase_add_test(t37, test_train_init);
    tcase_add_test(t37, test_sample_torch_file);
    tcase_add_test(t37, test_train_init_torch_file);
    tcase_add_test(t37, test_sample_torch_digdic);
    tcase_add_test(t37, test_train_eval_every);
    suite_add_tcase(s, t37);
    return tu_run(s);
}

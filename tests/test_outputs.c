// Output paths of every command, as a new user meets them: no
// existing file is replaced without --force (export may replace an earlier export, never a
// training checkpoint), every output path is checked before any work, errors never show the
// internal .tmp name, and sample's small traps (--n 0, --out a.jpg, --eta under DDPM, DiT's
// model flags) get a one-line error. Each test runs the built program ($MALA_BIN) on tiny inputs.
#include <sys/stat.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "testutil.h"
#include "testcli.h"  // defines: run, g_out, g_err, mala_bin

#define MODEL "tests/fixtures/sample_model.safetensors"  // 8x8x1, 3 classes: fast to sample
#define TINY "--model DiT-T/4 --batch 4 --log-every 1 --sample-every 0 --threads 2"
#define SAMPLE "sample --ckpt " MODEL " --n 2 --steps 2 --threads 2"

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(s, f);
    fclose(f);
}

// The file's bytes are still exactly `want` (len bytes).
static void expect_bytes(const char *path, const void *want, size_t len) {
    size_t n;
    void *got = tu_read_file(path, &n);
    ck_assert_msg(n == len && !memcmp(got, want, len), "%s changed (%zu bytes, was %zu)", path, n, len);
    free(got);
}

// Item 1: export never replaces a training checkpoint (even with --force), refuses any other file
// that is not an exported model without --force, and never writes over its own input.
START_TEST(test_export_keeps_checkpoints) {
    tu_make_tmpdir("out");
    RUN_OK("train " TINY " --limit 16 --iters 4 --ckpt-every 2 --log-every 3 --out %s", tp("r"));
    // the last step is logged although 4 is no multiple of --log-every (a 1-step run
    // left a log.csv of its header alone)
    size_t ln;
    char *raw = tu_read_file(tp("r/log.csv"), &ln), *log = calloc(ln + 1, 1);
    memcpy(log, raw, ln);
    free(raw);
    ck_assert_msg(ln > 3 && strstr(log, "\n3,") && strstr(log, "\n4,") && !strstr(log, "\n2,"), "log.csv:\n%.*s",
                  (int)ln, log);
    free(log);
    const char *c2 = tp("r/checkpoints/0000002.safetensors"), *c4 = tp("r/checkpoints/0000004.safetensors");
    ck_assert(exists(c2) && exists(c4));
    size_t len;
    void *before = tu_read_file(c2, &len);
    expect_error(run("export --ckpt %s --out %s", c4, c2), "export over a checkpoint", "training checkpoint",
                 "even with --force");
    expect_bytes(c2, before, len);
    expect_error(run("export --ckpt %s --out %s", c4, c4), "export onto its input", "same file", NULL);

    RUN_OK("export --ckpt %s --out %s", c4, tp("m.safetensors"));
    RUN_OK("export --ckpt %s --out %s", c2, tp("m.safetensors"));  // an earlier export may be replaced
    write_text(tp("notes.txt"), "mine");
    expect_error(run("export --ckpt %s --out %s", c4, tp("notes.txt")), "export over another file", "--force", NULL);
    expect_bytes(tp("notes.txt"), "mine", 4);
    RUN_OK("export --ckpt %s --out %s --force", c4, tp("notes.txt"));  // on purpose
    // a training checkpoint is never replaced, --force or not
    expect_error(run("export --ckpt %s --out %s --force", c4, c2), "export --force over a checkpoint",
                 "training checkpoint", "even with --force");
    expect_bytes(c2, before, len);
    ck_assert(!exists(tp("r/checkpoints/0000002.safetensors.tmp")));
    free(before);
    tu_rm_tmpdir();
}
END_TEST

// Items 1 and 2 for sample: existing files are kept, bad paths fail before any sampling (no
// progress line precedes the error), parents are created, --out-dir holds one run's images.
START_TEST(test_sample_outputs) {
    tu_make_tmpdir("out");
    RUN_OK(SAMPLE " --out %s", tp("new/sub/a.png"));  // parents created
    size_t len;
    void *png = tu_read_file(tp("new/sub/a.png"), &len);
    expect_error(run(SAMPLE " --out %s", tp("new/sub/a.png")), "sample over its earlier grid", "exists", "--force");
    expect_bytes(tp("new/sub/a.png"), png, len);
    RUN_OK(SAMPLE " --seed 3 --out %s --force", tp("new/sub/a.png"));
    free(png);

    write_text(tp("afile"), "x");  // a parent that is a file: no directory can be made there
    expect_error(run(SAMPLE " --out %s", tp("afile/sub/a.png")), "--out under a file", "--out", "not a directory");
    expect_error(run(SAMPLE " --save-npz %s", tp("afile/s.npz")), "--save-npz under a file", "--save-npz", NULL);
    expect_error(run(SAMPLE " --save-npy %s", tp("afile/s.npy")), "--save-npy under a file", "--save-npy", NULL);
    expect_error(run(SAMPLE " --out-dir %s", tp("afile/d")), "--out-dir under a file", "--out-dir", NULL);
    mkdir(tp("d.png"), 0755);
    expect_error(run(SAMPLE " --out %s", tp("d.png")), "--out naming a directory", "is a directory", NULL);
    write_text(tp("x.npy"), "mine");
    expect_error(run(SAMPLE " --save-npy %s", tp("x.npy")), "--save-npy over a file", "--force", NULL);
    expect_bytes(tp("x.npy"), "mine", 4);

    // --out-dir: a second run is refused; --force clears the earlier images and nothing else
    RUN_OK(SAMPLE " --n 3 --out-dir %s", tp("od"));
    ck_assert(exists(tp("od/000002_ring.png")));
    expect_error(run(SAMPLE " --out-dir %s", tp("od")), "--out-dir of an earlier run", "--force", NULL);
    write_text(tp("od/notes.txt"), "mine");
    RUN_OK(SAMPLE " --n 2 --out-dir %s --force", tp("od"));
    ck_assert_msg(!exists(tp("od/000002_ring.png")), "--force left an earlier run's image beside the new ones");
    ck_assert(exists(tp("od/000000_circle.png")) && exists(tp("od/000001_square.png")));
    expect_bytes(tp("od/notes.txt"), "mine", 4);
    tu_rm_tmpdir();
}
END_TEST

// Item 2 for eval: stats --out and fid --save-stats are checked before any image is read.
START_TEST(test_eval_outputs) {
    tu_make_tmpdir("out");
    const char *stats = "eval stats --data fashion-mnist-test --limit 2 --batch 2 --inception random --threads 2";
    RUN_OK("%s --out %s", stats, tp("s.npz"));
    size_t len;
    void *npz = tu_read_file(tp("s.npz"), &len);
    expect_error(run("%s --out %s", stats, tp("s.npz")), "eval stats over its earlier file", "exists", "--force");
    expect_bytes(tp("s.npz"), npz, len);
    free(npz);
    write_text(tp("afile"), "x");
    expect_error(run("%s --out %s", stats, tp("afile/s.npz")), "eval stats --out under a file", "--out", NULL);
    expect_error(run("eval fid --samples fashion-mnist-test --limit 2 --batch 2 --ref %s --inception random "
                     "--threads 2 --save-stats %s", tp("s.npz"), tp("afile/t.npz")),
                 "eval fid --save-stats under a file", "--save-stats", NULL);
    // vae encode / decode: the same rule, before the weights or the input are read
    write_text(tp("x.png"), "mine");
    expect_error(run("vae decode --vae tests/fixtures/vae_tiny.safetensors --in %s --out %s", tp("z.npy"), tp("x.png")),
                 "vae decode over a file", "--out", "--force");
    expect_error(run("vae encode --vae tests/fixtures/vae_tiny.safetensors --in %s --out %s", tp("x.png"), tp("s.npz")),
                 "vae encode over a file", "--out", "--force");
    expect_bytes(tp("x.png"), "mine", 4);
    tu_rm_tmpdir();
}
END_TEST

// Items 8 and 13: sample's ETA covers the whole job; its small traps get one-line errors.
START_TEST(test_sample_flags) {
    tu_make_tmpdir("out");
    expect_error(run(SAMPLE " --n 0 --out %s", tp("a.png")), "--n 0", "--n 0", "at least 1");
    expect_error(run(SAMPLE " --out %s", tp("a.jpg")), "--out a.jpg", ".png", NULL);
    expect_error(run(SAMPLE " --eta 0.5 --out %s", tp("a.png")), "--eta under DDPM", "--eta", "ddim");
    RUN_OK(SAMPLE " --sampler ddim --eta 0.5 --out %s", tp("a.png"));
    expect_error(run(SAMPLE " --model DiT-XL/2 --out %s", tp("b.png")), "DiT's --model", "--model", "model file");
    expect_error(run(SAMPLE " --image-size=256 --out %s", tp("b.png")), "DiT's --image-size", "--image-size", NULL);
    expect_error(run(SAMPLE " --num-classes 1000 --out %s", tp("b.png")), "DiT's --num-classes", "--num-classes", NULL);
    ck_assert(!exists(tp("b.png")));

    // a 4-channel pixel model: PNG outputs are refused before sampling, with what works instead
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 1; c.dit.hidden = 32; c.dit.heads = 2; c.dit.patch = 4; c.image_size = 8; c.num_classes = 2;
    c.in_channels = 4;
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    net_init_weights(m, 1);
    ClassNames cn;
    class_names_default(&cn, 2);
    MalaErr err;
    ck_assert_msg(ckpt_save_weights(m, &cn, m->w, ST_F32, tp("c4.safetensors"), &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    net_free(m);
    expect_error(run("sample --ckpt %s --n 2 --steps 2 --out %s", tp("c4.safetensors"), tp("g.png")), "4 channels",
                 "--save-npy", "4-channel");
    RUN_OK("sample --ckpt %s --n 2 --steps 2 --save-npy %s", tp("c4.safetensors"), tp("g.npy"));

    // 3 batches of 2 images, 4 steps each: the lines count the batches, whose steps the ETA covers
    RUN_OK("sample --ckpt " MODEL " --n 6 --batch 2 --steps 4 --threads 2 --out %s", tp("c.png"));
    ck_assert_msg(strstr(g_err, "images 1-2 of 6: batch 1/3, step 1/4") && strstr(g_err, "ETA"), "first line:\n%s",
                  g_err);
    ck_assert_msg(strstr(g_err, "images 5-6 of 6: batch 3/3, step 4/4"), "no final line:\n%s", g_err);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("outputs");
    TCase *tc = tcase_create("outputs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_export_keeps_checkpoints);
    tcase_add_test(tc, test_sample_outputs);
    tcase_add_test(tc, test_eval_outputs);
    tcase_add_test(tc, test_sample_flags);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

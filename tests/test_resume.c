// Resumable long sampling: `mala sample` with --save-npz / --save-npy /
// --out-dir and `mala eval fid|is --ckpt` keep each batch beside the output as it is sampled
// (pipeline/batch_store.h); a run stopped after some batches (MALA_TEST_STOP_AFTER, a kill in all
// but name: the process _exits) and run again gives the bytes of an uninterrupted run, says how
// many images it kept, and refuses a partial run of other settings naming what differs.
// `mala eval sweep` continues its points the same way. tests/test_mpi.c resumes across world
// sizes. Also the building blocks: SHA-256's known answers
// and manifest.h's differences. Each CLI test runs the built program ($MALA_BIN) on tiny inputs.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dir_lock.h"
#include "pipeline/manifest.h"
#include "core/sha256.h"
#include "testutil.h"
#include "testcli.h"  // defines: run, g_out, g_err, mala_bin

#define MODEL "tests/fixtures/sample_model.safetensors"  // 8x8x1, 3 classes: fast to sample
#define SAMPLE "sample --ckpt " MODEL " --n 11 --batch 3 --steps 4 --label-mode random --seed 2 --threads 1"

static int same_file(const char *a, const char *b) {
    size_t na, nb;
    char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    int same = na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

// Folder b holds the files of folder a, the same bytes; returns how many.
static int same_dirs(const char *a, const char *b) {
    DIR *d = opendir(a);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int n = 0;
    char pa[1024], pb[1024];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        ck_assert_msg(exists(pb) && same_file(pa, pb), "%s differs from %s", pb, pa);
        n++;
    }
    closedir(d);
    return n;
}

// Runs a command that MALA_TEST_STOP_AFTER=k stops (exit 3) after k batches.
static void run_stopped(int k, const char *cmd) {
    char env[32];
    snprintf(env, sizeof env, "%d", k);
    setenv("MALA_TEST_STOP_AFTER", env, 1);
    int rc = run("%s", cmd);
    unsetenv("MALA_TEST_STOP_AFTER");
    ck_assert_msg(rc == 3 && strstr(g_err, "stopped after"), "expected a stop (exit 3), got %d:\n%s", rc, g_err);
}

START_TEST(test_sha256_and_manifest) {
    char hex[65];
    sha256_hex("abc", 3, hex);  // FIPS 180-4's examples
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // 448 bits: a second block
    sha256_hex(two, strlen(two), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *mil = malloc(1000000);
    memset(mil, 'a', 1000000);
    sha256_hex(mil, 1000000, hex);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(mil);

    tu_make_tmpdir("resume");
    Manifest *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    manifest_str(a, "sampler", "ddpm");
    manifest_lit(a, "steps", "%d", 250);
    manifest_str(a, "note", "a \"quoted\" value");
    MalaErr err;
    ck_assert_msg(manifest_write(a, tp("m.json"), &err) == 0, "%s", err.msg);
    ck_assert_msg(manifest_read(b, tp("m.json"), &err) == 0, "%s", err.msg);
    char diff[512];
    ck_assert_int_eq(manifest_diff(a, b, diff, sizeof diff), 0);
    manifest_lit(b, "steps", "%d", 50);
    manifest_remove(b, "note");
    manifest_lit(b, "seed", "%d", 3);
    ck_assert_int_eq(manifest_diff(a, b, diff, sizeof diff), 3);
    ck_assert_msg(strstr(diff, "steps 250 (then), 50 (now)") && strstr(diff, "seed none (then), 3 (now)") &&
                  strstr(diff, "note a \"quoted\" value (then), none (now)"), "%s", diff);
    free(a);
    free(b);
    tu_rm_tmpdir();
}
END_TEST

// mala sample: stopped after 2 of 4 batches, then run again: every output is the uninterrupted
// run's, byte for byte, and the folder of kept batches is gone.
START_TEST(test_sample_resumes) {
    tu_make_tmpdir("resume");
    char cmd[2048];
    RUN_OK(SAMPLE " --save-npz %s --save-npy %s --out-dir %s", tp("a.npz"), tp("a.npy"), tp("a"));
    snprintf(cmd, sizeof cmd, SAMPLE " --save-npz %s --save-npy %s --out-dir %s", tp("b.npz"), tp("b.npy"), tp("b"));
    run_stopped(2, cmd);
    ck_assert(exists(tp("b.npz.partial/settings.json")) && exists(tp("b.npz.partial/batch-0000001.f32")));
    ck_assert(!exists(tp("b.npz")) && !exists(tp("b.npy")));
    RUN_OK("%s", cmd);
    ck_assert_msg(strstr(g_err, "continuing the partial run in") && strstr(g_err, "kept 6 of 11 images"), "%s", g_err);
    ck_assert_msg(strstr(g_err, "batch 2/2"), "the progress counts the batches left:\n%s", g_err);
    ck_assert(same_file(tp("a.npz"), tp("b.npz")) && same_file(tp("a.npy"), tp("b.npy")));
    ck_assert_int_eq(same_dirs(tp("a"), tp("b")), 11);
    ck_assert(!exists(tp("b.npz.partial")));

    // --save-npy alone keeps its own folder; --out-dir's is DIR.partial
    snprintf(cmd, sizeof cmd, SAMPLE " --save-npy %s", tp("c.npy"));
    run_stopped(1, cmd);
    ck_assert(exists(tp("c.npy.partial/batch-0000000.f32")));
    RUN_OK("%s", cmd);
    ck_assert(same_file(tp("a.npy"), tp("c.npy")) && !exists(tp("c.npy.partial")));
    snprintf(cmd, sizeof cmd, SAMPLE " --out-dir %s/", tp("d"));
    run_stopped(3, cmd);
    ck_assert(exists(tp("d.partial/batch-0000002.f32")));
    RUN_OK("%s", cmd);
    ck_assert(strstr(g_err, "kept 9 of 11 images") && !exists(tp("d.partial")));

    // other settings are refused, naming each difference; --force starts over
    snprintf(cmd, sizeof cmd, SAMPLE " --save-npz %s", tp("e.npz"));
    run_stopped(1, cmd);
    int rc = run("%s --steps 5 --seed 3", cmd);
    ck_assert_msg(rc == 1 && strstr(g_err, "error: --save-npz: ") &&
                  strstr(g_err, "e.npz.partial holds a partial run") &&
                  strstr(g_err, "steps 4 (then), 5 (now)") && strstr(g_err, "seed 2 (then), 3 (now)") &&
                  strstr(g_err, "labels_sha256"), "%d:\n%s", rc, g_err);
    RUN_OK("%s --steps 5 --seed 3 --force", cmd);
    ck_assert_msg(strstr(g_err, "discarding the partial run") && !strstr(g_err, "kept"), "%s", g_err);
    ck_assert(!exists(tp("e.npz.partial")));

    // a partial folder another process is writing (its lock held, here by this test) is refused
    // naming that process, and nothing of it is touched; once the lock is gone the run continues
    snprintf(cmd, sizeof cmd, SAMPLE " --save-npz %s", tp("f.npz"));
    run_stopped(1, cmd);
    DirLock held;
    MalaErr err;
    ck_assert_msg(dir_lock_take(&held, tp("f.npz.partial"), "mala sample (the test)", &err) == 0, "%s", err.msg);
    rc = run("%s", cmd);
    char pid[96];
    snprintf(pid, sizeof pid, "process %ld (mala sample (the test))", (long)getpid());
    ck_assert_msg(rc == 1 && strstr(g_err, "error: --save-npz: ") && strstr(g_err, "f.npz.partial is in use by") &&
                  strstr(g_err, pid), "%d:\n%s", rc, g_err);
    ck_assert(exists(tp("f.npz.partial/batch-0000000.f32")) && !exists(tp("f.npz")));
    dir_lock_release(&held);
    RUN_OK("%s", cmd);
    ck_assert_msg(strstr(g_err, "kept 3 of 11 images") && !exists(tp("f.npz.partial")), "%s", g_err);
    tu_rm_tmpdir();
}
END_TEST

// mala eval fid|is --ckpt: kept beside --save-stats (FILE.partial) or in --partial DIR; a resumed run
// prints the uninterrupted run's numbers and writes the same statistics.
START_TEST(test_eval_resumes) {
    tu_make_tmpdir("resume");
    RUN_OK("eval stats --data fashion-mnist-test --limit 4 --batch 2 --out %s --inception random --threads 1",
           tp("ref.npz"));
    char flags[1024], cmd[2048], one[1 << 14];
    snprintf(flags, sizeof flags, "eval fid --ckpt " MODEL " --inception random --num 7 --sample-batch 2 --batch 2 "
             "--steps 3 --sampler ddim --splits 1 --threads 1 --device cpu --ref %s", tp("ref.npz"));
    RUN_OK("%s --save-stats %s", flags, tp("s1.npz"));
    char *p = strstr(g_out, ",\"seconds\"");
    ck_assert_ptr_nonnull(p);
    snprintf(one, sizeof one, "%.*s", (int)(p - g_out), g_out);
    snprintf(cmd, sizeof cmd, "%s --save-stats %s", flags, tp("s2.npz"));
    run_stopped(2, cmd);
    ck_assert(exists(tp("s2.npz.partial/batch-0000001.f32")) && !exists(tp("s2.npz")));
    RUN_OK("%s", cmd);
    ck_assert_msg(strstr(g_err, "kept 4 of 7 images"), "%s", g_err);
    ck_assert_msg(!strncmp(g_out, one, strlen(one)), "resumed:\n%s\nstraight:\n%s", g_out, one);
    ck_assert(same_file(tp("s1.npz"), tp("s2.npz")) && !exists(tp("s2.npz.partial")));

    // eval is with --partial DIR
    snprintf(cmd, sizeof cmd, "eval is --ckpt " MODEL " --inception random --num 5 --sample-batch 2 --batch 2 "
             "--steps 2 --splits 1 --threads 1 --device cpu --partial %s", tp("isp"));
    RUN_OK("%s", cmd);
    p = strstr(g_out, ",\"seconds\"");
    ck_assert_ptr_nonnull(p);
    snprintf(one, sizeof one, "%.*s", (int)(p - g_out), g_out);
    ck_assert(!exists(tp("isp")));
    run_stopped(1, cmd);
    RUN_OK("%s", cmd);
    ck_assert_msg(strstr(g_err, "kept 2 of 5 images") && !strncmp(g_out, one, strlen(one)), "%s\n%s", g_err, g_out);
    run_stopped(1, cmd);
    int rc = run("%s --cfg-scale 2", cmd);
    ck_assert_msg(rc == 1 && strstr(g_err, "error: --partial: ") && strstr(g_err, "cfg_scale 1.5 (then), 2 (now)"),
                  "%d:\n%s", rc, g_err);
    tu_rm_tmpdir();
}
END_TEST

// mala eval sweep: one eval fid --ckpt per point; a point stopped mid-way (the children inherit
// MALA_TEST_STOP_AFTER) makes the sweep fail naming it, and the same command then continues it and
// the rest; the table equals an uninterrupted sweep's, and the finished points are kept.
START_TEST(test_sweep_resumes) {
    tu_make_tmpdir("resume");
    const char *fm = "--features fmnist --classifier assets/fmnist_classifier.safetensors --threads 1 --device cpu";
    RUN_OK("eval stats --data fashion-mnist-test --limit 40 --batch 20 --out %s %s", tp("ref.npz"), fm);
    char flags[2048], cmd[2200];
    snprintf(flags, sizeof flags, "eval sweep --ckpt assets/mala-dit-fmnist.safetensors --ref %s --cfg-scale 1,3 "
             "--steps 2,3 --sampler ddim --num 12 --sample-batch 4 --batch 4 %s", tp("ref.npz"), fm);
    RUN_OK("%s --out %s", flags, tp("a"));
    ck_assert_msg(strstr(g_err, "[sweep] 4/4 ddim-s3-w3: fd ") && exists(tp("a/sweep.png")), "%s", g_err);
    snprintf(cmd, sizeof cmd, "%s --out %s", flags, tp("b"));
    setenv("MALA_TEST_STOP_AFTER", "2", 1);
    int rc = run("%s", cmd);
    unsetenv("MALA_TEST_STOP_AFTER");
    ck_assert_msg(rc == 1 && strstr(g_err, "point ddim-s2-w1 failed (exit 3)"), "%d:\n%s", rc, g_err);
    ck_assert(exists(tp("b/points/ddim-s2-w1.partial/batch-0000001.f32")));
    RUN_OK("%s", cmd);
    ck_assert(same_file(tp("a/sweep.md"), tp("b/sweep.md")) && !exists(tp("b/points/ddim-s2-w1.partial")));
    unlink(tp("b/points/ddim-s3-w1.json"));
    RUN_OK("%s", cmd);
    ck_assert_msg(strstr(g_err, "kept 3 of 4 points") && same_file(tp("a/sweep.md"), tp("b/sweep.md")), "%s", g_err);
    size_t n;
    char *jl = tu_read_file(tp("b/sweep.jsonl"), &n);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += jl[i] == '\n';
    free(jl);
    ck_assert_int_eq(lines, 4);
    rc = run("eval sweep --ref %s --out %s --cfg-scale 1,,2", tp("ref.npz"), tp("c"));
    ck_assert_msg(rc == 1 && strstr(g_err, "error: --cfg-scale 1,,2"), "%s", g_err);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("resume");
    TCase *tc = tcase_create("resume");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sha256_and_manifest);
    tcase_add_test(tc, test_sample_resumes);
    tcase_add_test(tc, test_eval_resumes);
    tcase_add_test(tc, test_sweep_resumes);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

// mala compare: the config parser (every error names the file and line), and the shipped tiny
// comparison end to end through the built program ($MALA_BIN, default ./mala): the results files
// and plots, a second run that resumes without training or evaluating again, a run stopped by a
// signal that continues, a comparison done a few runs at a time (--runs), and a bad config. From
// evaluation rows alone: the ranking (ties too), compare.png's labels, a changed config refused or
// accepted, an --out that is not a comparison's; and the plots' tick values. Budgets in compute
// (budget_tflop): each arm's images and evaluation points from its GFLOP/img, mala train --dry-run's
// GFLOP/img against the model's, compare-tiny-tflop.ini end to end (equal compute, drift), and a run
// whose checkpoints are its evaluation points only.
#include <dirent.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare/compare.h"
#include "compare/compare_config.h"
#include "model/net.h"
#include "formats/image_io.h"
#include "formats/json.h"
#include "eval/line_plot.h"
#include "formats/npy.h"
#include "testutil.h"
#include "testcli.h"   // defines: run, g_err, slurp, mala_bin

#define TINY "configs/compare-tiny.ini"
#define TINY_TFLOP "configs/compare-tiny-tflop.ini"

static void write_text(const char *path, const char *s) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(s, f);
    fclose(f);
}

static char *read_text(const char *path) {
    size_t n;
    char *raw = tu_read_file(path, &n), *s = malloc(n + 1);
    memcpy(s, raw, n);
    s[n] = 0;
    free(raw);
    return s;
}

// ---- the parser ----

static const char *GOOD =
    "# a comparison\n"
    "[compare]\n"
    "batch = 32   # per step\n"
    "eval_cfg_channels = 3\n"
    "lr = 2e-4\n"
    "seeds = 1, 2\n"
    "budget_images = 1000\n"
    "eval_every_images = 300\n"
    "train_flags = --limit 64 --ema-decay 0.999\n"
    "\n"
    "[arm a]\n"
    "backbone = dit\n"
    "preset = DiT-T/4\n"
    "; another comment\n"
    "[arm b.2]\n"
    "backbone = dig\n"
    "preset = DiG-T/4\n"
    "flags = --learn-sigma 0\n"
    "lr = 1e-3\n";

START_TEST(test_parse_good) {
    CompareConfig *c = malloc(sizeof *c);
    MalaErr err;
    ck_assert_msg(compare_config_parse(GOOD, strlen(GOOD), "good.ini", c, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(c->batch, 32);
    ck_assert(fabs(c->lr - 2e-4) < 1e-12);
    ck_assert_int_eq(c->nseeds, 2);
    ck_assert_int_eq((int)c->seeds[1], 2);
    ck_assert_int_eq(c->ntrain_flags, 4);
    ck_assert_str_eq(c->train_flag[3], "0.999");
    ck_assert_int_eq(c->narms, 2);
    ck_assert_str_eq(c->arms[0].attention, "mala");  // DiT's default
    ck_assert_str_eq(c->arms[1].name, "b.2");
    ck_assert_str_eq(c->arms[1].attention, "");
    ck_assert_int_eq(c->arms[1].nflags, 2);
    ck_assert(fabs(c->arms[1].lr - 1e-3) < 1e-12);
    ck_assert_int_eq(c->arms[1].line, 15);
    ck_assert_str_eq(c->features, "fmnist");  // the defaults
    ck_assert_str_eq(c->sampler, "ddim");
    ck_assert_str_eq(c->device, "auto");
    ck_assert_str_eq(c->cfg_channels, "3");
    ck_assert_str_eq(c->precision, "auto");
    int64_t *p;
    int n = compare_eval_points(c, &p);
    ck_assert_int_eq(n, 4);  // 300, 600, 900, 1000
    ck_assert(p[0] == 300 && p[2] == 900 && p[3] == 1000);
    ck_assert_int_eq((int)compare_steps(c, p[3]), 32);  // 1000 / 32 rounded up
    free(p);
    free(c);
}
END_TEST

// Each bad text gives an error that starts with the file name and holds the phrase (and the line).
START_TEST(test_parse_errors) {
    static const struct { const char *text, *phrase; } BAD[] = {
        {"[compare]\nbudget_images = 10\nbath = 3\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "bad.ini:3: unknown key 'bath' in [compare]; did you mean batch?"},
        {"batch = 3\n", "bad.ini:1: 'batch' before any section"},
        {"[compare]\nbudget_images = ten\n", "bad.ini:2: budget_images: expected a number, got 'ten'"},
        {"[compare]\nbatch = 2.5\n", "bad.ini:2: batch: expected an integer"},
        {"[compare]\nbatch = 0\n", "bad.ini:2: batch 0: out of range"},
        {"[compare]\nseeds = 1,,2\n", "bad.ini:2: seeds"},
        {"[compare]\nseeds = 1, 1\n", "bad.ini:2: seeds: 1 given twice"},
        {"[compare]\nbatch = 2\nbatch = 3\n", "bad.ini:3: batch given twice in this section (first on line 2)"},
        {"[compare\n", "bad.ini:1: section header without ']'"},
        {"[arms x]\n", "bad.ini:1: unknown section [arms x]"},
        {"[arm a/b]\n", "bad.ini:1: [arm a/b]: names use"},
        {"[compare]\nbudget_images = 8\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n[arm a]\n", "bad.ini:6: [arm a] given twice (first on line 3)"},
        {"[compare]\njust words\n", "bad.ini:2: expected 'key = value'"},
        {"[compare]\nbudget_images = 8\n", "bad.ini: no [arm NAME] section"},
        {"[compare]\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "bad.ini: [compare] needs budget_images"},
        {"[compare]\nbudget_images = 8\n[arm a]\nbackbone = vit\npreset = DiT-T/4\n", "bad.ini:3: [arm a] backbone vit"},
        {"[compare]\nbudget_images = 8\n[arm a]\nbackbone = dig\nattention = mala\npreset = DiG-T/4\n", "bad.ini:3: [arm a] attention is DiT's"},
        {"[compare]\nbudget_images = 8\n[arm a]\nbackbone = dit\nattention = flash\npreset = DiT-T/4\n", "bad.ini:3: [arm a] attention flash"},
        {"[compare]\nbudget_images = 8\n[arm a]\nbackbone = dit\n", "bad.ini:3: [arm a] needs backbone and preset"},
        {"[compare]\nbudget_images = 8\n[arm a]\nbackbone = dit\npreset = DiT-T/4\nflags = --iters 5\n", "bad.ini:3: [arm a] flags: --iters is set by mala compare"},
        {"[compare]\nbudget_images = 8\ntrain_flags = --lr=3\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "train_flags: --lr is set by mala compare itself (use the key lr)"},
        {"[compare]\nbudget_images = 8\ndevice = tpu\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "bad.ini: device tpu: expected auto, cpu or cuda"},
        {"[compare]\nbudget_images = 8\ntrain_flags = --device cpu\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "train_flags: --device is set by mala compare itself (use the config's keys)"},
        {"[compare]\nbudget_images = 8\nprecision = fp16\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n",
         "bad.ini: precision fp16: expected auto, fp32, bf16 or tf32"},
        {"[compare]\nbudget_images = 8\ntrain_flags = --precision bf16\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n",
         "train_flags: --precision is set by mala compare itself (use the config's keys)"},
        {"[compare]\nbudget_images = 8\neval_sampler = euler\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "eval_sampler euler"},
        {"[compare]\nbudget_images = 100000\neval_every_images = 1\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "more than 1000 evaluation points"},
        {"[compare]\nlr = \n", "bad.ini:2: lr: empty value"},
        {"[compare]\nbudget_images = 8\neval_cfg_channels = 0\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "eval_cfg_channels 0: expected all or"},
        {"[compare]\nbudget_images = 8\neval_cfg_channels = 3x\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "eval_cfg_channels 3x"},
        {"[compare]\nbudget_images = 8\nbudget_tflop = 1\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "bad.ini: budget_images and budget_tflop exclude each other"},
        {"[compare]\nbudget_images = 8\ntrain_flags = --accum 2\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "does not take --accum"},
        {"[compare]\nbudget_tflop = 1\neval_every_images = 8\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "bad.ini: eval_every_images goes with budget_images"},
        {"[compare]\nbudget_images = 8\neval_every_tflop = 1\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "bad.ini: eval_every_tflop goes with budget_tflop"},
        {"[compare]\nbudget_tflop = 10\neval_every_tflop = 0.001\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n", "budget_tflop / eval_every_tflop gives more than 1000"},
        {"[compare]\nbudget_tflop = 0\n", "bad.ini:2: budget_tflop 0: out of range"},
        {"[compare]\nlr = 1\x01\n", "bad.ini:2: control byte 0x01"},
        {"[compare]\nbudget_images = 8\ngap = a\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n",
         "bad.ini: gap a: expected two arm names separated by a comma"},
        {"[compare]\nbudget_images = 8\ngap = a, b, a\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n",
         "bad.ini: gap a, b, a: expected two arm names"},
        {"[compare]\nbudget_images = 8\ngap = a, zz\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n",
         "bad.ini: gap a, zz: no [arm zz] in the file"},
        {"[compare]\nbudget_images = 8\ngap = a ,a\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n",
         "bad.ini: gap a ,a: the two arms must differ"},
    };
    CompareConfig *c = malloc(sizeof *c);
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        MalaErr err;
        ck_assert_msg(compare_config_parse(BAD[i].text, strlen(BAD[i].text), "bad.ini", c, &err) != 0, "accepted: %s",
                      BAD[i].text);
        ck_assert_msg(strstr(err.msg, BAD[i].phrase) && !strncmp(err.msg, "bad.ini", 7), "case %zu: '%s' lacks '%s'", i,
                      err.msg, BAD[i].phrase);
        ck_assert_msg(!strchr(err.msg, '\n'), "case %zu: more than one line: %s", i, err.msg);
    }
    free(c);
}
END_TEST

// The shipped configs parse.
START_TEST(test_parse_shipped) {
    const char *files[] = {TINY_TFLOP,
                           TINY,
                           "configs/compare-fmnist-bf16.ini",
                           "configs/compare-fmnist-256.ini",
                           "configs/compare-fmnist-256-ablation.ini",
                           "configs/compare-fmnist-256-2x.ini",
                           "configs/compare-fmnist.ini"};
    CompareConfig *c = malloc(sizeof *c);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        MalaErr err;
        ck_assert_msg(compare_config_load(files[i], c, &err) == 0, "%s", err.msg);
        ck_assert_str_eq(c->features, "fmnist");
    }
    ck_assert_int_ge(c->narms, 5);  // compare-fmnist.ini: MALA, softmax, linear, DiG, DiC
    ck_assert_int_ge(c->nseeds, 2);
    ck_assert_int_ge(c->budget_images / c->batch, 10000);
    free(c);
}
END_TEST

// ---- budgets in compute ----

static int count_char(const char *s, char ch);

// budget_tflop: each arm's points are the whole steps nearest to eval_every_tflop, 2 x, ... and
// budget_tflop at its GFLOP/img (round(T x 1000 / (GFLOP/img x batch))); a cheaper arm sees more
// images; points that round to one step keep the later; the budget ends every arm within half a
// step's compute of it.
START_TEST(test_tflop_points) {
    static const char *TEXT = "[compare]\nbatch = 10\nbudget_tflop = 0.25\neval_every_tflop = 0.1\n"
                              "[arm a]\nbackbone = dit\npreset = DiT-T/4\n";
    CompareConfig *c = malloc(sizeof *c);
    MalaErr err;
    ck_assert_msg(compare_config_parse(TEXT, strlen(TEXT), "t.ini", c, &err) == 0, "%s", err.msg);
    ck_assert_int_eq((int)c->budget_images, 0);
    // 1 GFLOP/img: a step of 10 images is 0.01 TFLOP; points 0.1, 0.2, 0.25 -> 10, 20, 25 steps
    int64_t *im;
    double *t;
    int n = compare_arm_points(c, 1.0, &im, &t);
    ck_assert_int_eq(n, 3);
    ck_assert(im[0] == 100 && im[1] == 200 && im[2] == 250);
    ck_assert(fabs(t[0] - 0.1) < 1e-12 && fabs(t[1] - 0.2) < 1e-12 && t[2] == 0.25);
    ck_assert_int_eq((int)compare_arm_budget(c, 1.0), 250);
    free(im);
    free(t);
    // 3 GFLOP/img: 0.1 TFLOP is 3.33 steps -> 3, 0.2 -> 6.67 -> 7, 0.25 -> 8.33 -> 8
    n = compare_arm_points(c, 3.0, &im, &t);
    ck_assert_int_eq(n, 3);
    ck_assert(im[0] == 30 && im[1] == 70 && im[2] == 80);
    free(im);
    free(t);
    ck_assert_int_eq((int)compare_tflop_steps(c, 0.25, 3.0), 8);
    ck_assert_int_eq((int)compare_tflop_steps(c, 0.035, 1.0), 4);  // 3.5 steps: half away from zero
    ck_assert_int_eq((int)compare_tflop_steps(c, 1e-9, 1.0), 1);   // at least one step
    // 40 GFLOP/img: a step is 0.4 TFLOP; 0.1 and 0.2 round to step 0 -> 1, 0.25 to 1: one point
    n = compare_arm_points(c, 40.0, &im, &t);
    ck_assert_int_eq(n, 1);
    ck_assert(im[0] == 10 && t[0] == 0.25);
    free(im);
    free(t);
    // within half a step's compute of the budget, at any cost
    for (double g = 0.01; g < 20; g *= 1.37) {
        const double step_tflop = g * c->batch / 1e3, end = compare_tflop(compare_arm_budget(c, g), g);
        if (step_tflop <= c->budget_tflop)
            ck_assert_msg(fabs(end - c->budget_tflop) <= step_tflop / 2 + 1e-12, "%g GFLOP/img: %g TFLOP", g, end);
    }
    // the default eval_every_tflop: the budget alone; budget_images: the images points, no TFLOP
    static const char *ONE = "[compare]\nbatch = 10\nbudget_tflop = 0.25\n[arm a]\nbackbone = dit\npreset = DiT-T/4\n";
    ck_assert_msg(compare_config_parse(ONE, strlen(ONE), "t.ini", c, &err) == 0, "%s", err.msg);
    n = compare_arm_points(c, 1.0, &im, &t);
    ck_assert(n == 1 && im[0] == 250);
    free(im);
    free(t);
    ck_assert_msg(compare_config_parse(GOOD, strlen(GOOD), "good.ini", c, &err) == 0, "%s", err.msg);
    n = compare_arm_points(c, 3.0, &im, &t);
    ck_assert(n == 4 && im[3] == 1000 && t == NULL);
    ck_assert_int_eq((int)compare_arm_budget(c, 3.0), 1000);
    free(im);
    free(c);
}
END_TEST

// The GFLOP/img compare budgets an arm by: `mala train --dry-run` with the arm's flags prints the
// model train builds (the data's 32x32x1 here, the flags' RoPE and LePE), counted as the report
// counts it (net_flops_per_image); it writes nothing.
START_TEST(test_dry_run_gflop) {
    tu_make_tmpdir("compare_dry");
    static const struct { const char *flags; int rope, lepe, gate, cpe, ffn_dwconv; } CASES[] = {
        {"", 1, 5, 0, 0, 0}, {" --rope 0 --lepe 0", 0, 0, 0, 0, 0}, {" --cpe 5 --ffn-dwconv 3", 1, 5, 0, 5, 3},
        {" --attn mala-authors --cpe 0", 1, 5, 1, 0, 3}};
    for (int i = 0; i < 4; i++) {
        int rc = run("train --dry-run --model DiT-T/4 --attn mala --data fashion-mnist --limit 64 --batch 8 --out %s%s",
                     tp("run"), CASES[i].flags);
        ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
        NetConfig nc;
        net_config_default(&nc, BACKBONE_DIT);
        MalaErr err;
        ck_assert_int_eq(net_config_preset(&nc, "DiT-T/4", &err), 0);
        dit_config_attn_defaults(&nc.dit, ATTN_MALA);
        nc.dit.rope = CASES[i].rope;
        nc.dit.lepe = CASES[i].lepe;
        nc.dit.gate = CASES[i].gate;
        nc.dit.cpe = CASES[i].cpe;
        nc.dit.ffn_dwconv = CASES[i].ffn_dwconv;
        nc.image_size = 32;
        nc.in_channels = 1;
        nc.num_classes = 10;
        const double want = net_flops_per_image(&nc) / 1e9;
        const char *g = strstr(g_out, "\"gflop_per_img\":");
        ck_assert_msg(g, "%s", g_out);
        const double got = strtod(g + 16, NULL);
        ck_assert_msg(fabs(got - want) <= 1e-8 * want, "%s: %.9g GFLOP/img, the model's %.9g", CASES[i].flags, got, want);
    }
    struct stat st;
    ck_assert_msg(stat(tp("run"), &st) != 0, "--dry-run created its --out");
    // a flag train refuses for the arm's model stops a budget_tflop comparison at that arm's line
    write_text(tp("bad.ini"), "[compare]\nbatch = 8\ntrain_flags = --limit 64\nbudget_tflop = 0.01\n\n"
                              "[arm x]\nbackbone = dic\npreset = DiC-T13\nflags = --rope 0\n");
    int rc = run("compare --config %s --out %s", tp("bad.ini"), tp("cmp"));
    char want[700];
    snprintf(want, sizeof want, "error: %s:6: [arm x]: mala train --dry-run (its GFLOP/img for budget_tflop) failed "
                                "with status 1: error: --attn, --rope, --lepe, --gate, --cpe and --ffn-dwconv set DiT's "
                                "attention block", tp("bad.ini"));
    ck_assert_msg(rc == 1 && !strncmp(g_err, want, strlen(want)) && count_char(g_err, '\n') == 1, "%s", g_err);
    ck_assert_msg(stat(tp("cmp/runs/x-s0/checkpoints"), &st) != 0, "the arm trained");
    ck_assert_msg(strstr(g_err, "(the whole log: ") && strstr(g_err, "cmp/runs/x-s0/dry-run.log)"), "%s", g_err);
    ck_assert_msg(stat(tp("cmp/runs/x-s0/dry-run.log"), &st) == 0, "the failed dry run's log is gone");
    // a run that has not started keeps no trace of the dry runs that --report asks for each time
    mkdir(tp("fresh"), 0755);
    mkdir(tp("fresh/runs"), 0755);
    char *t = read_text(TINY_TFLOP);
    write_text(tp("fresh/config.ini"), t);
    free(t);
    for (int i = 0; i < 2; i++) {
        rc = run("compare --config " TINY_TFLOP " --out %s --report", tp("fresh"));
        ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    }
    const char *arms[] = {"mala", "nolepe", "dic"}, *names[] = {"train.log", "dry-run.log", "dry-run.json.tmp"};
    for (int a = 0; a < 3; a++)
        for (int f = 0; f < 3; f++) {
            char path[700];
            snprintf(path, sizeof path, "%s/runs/%s-s1/%s", tp("fresh"), arms[a], names[f]);
            ck_assert_msg(stat(path, &st) != 0, "--report left %s", path);
        }
    tu_rm_tmpdir();
}
END_TEST

// ---- end to end ----

static int count_char(const char *s, char ch) {
    int n = 0;
    for (; *s; s++) n += *s == ch;
    return n;
}

static void check_png(const char *path) {
    int w, h;
    MalaErr err;
    ck_assert_msg(image_check(path, &w, &h, &err) == 0, "%s", err.msg);
    ck_assert(w > 16 && h > 16);
}

// Every file under dir with its bytes, one string (sorted names), to compare a tree before and after.
static void snapshot(const char *dir, char **acc, size_t *len) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char *names[256];
    int n = 0;
    while ((e = readdir(d)) && n < 256)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) { char *t = names[j]; names[j] = names[j - 1]; names[j - 1] = t; }
    for (int i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat st;
        ck_assert(stat(p, &st) == 0);
        *acc = realloc(*acc, *len + strlen(p) + 1 + (S_ISREG(st.st_mode) ? (size_t)st.st_size : 0) + 1);
        memcpy(*acc + *len, p, strlen(p) + 1);
        *len += strlen(p) + 1;
        if (S_ISDIR(st.st_mode)) {
            snapshot(p, acc, len);
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

START_TEST(test_end_to_end) {
    tu_make_tmpdir("compare");
    const char *out = tp("cmp");
    CompareConfig *c = malloc(sizeof *c);
    MalaErr err;
    ck_assert_msg(compare_config_load(TINY, c, &err) == 0, "%s", err.msg);
    int64_t *pts;
    int npoints = compare_eval_points(c, &pts);
    free(pts);
    int rc = run("compare --config " TINY " --out %s", out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    ck_assert_msg(strstr(g_err, "compare: done"), "%s", g_err);
    ck_assert_msg(strstr(g_err, "ETA"), "no progress with an ETA:\n%s", g_err);
    // every child runs on the config's device (auto: the default)
    char path[600];
    const char *logs[] = {"train.log", "eval.log"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/runs/%s-s1/%s", out, c->arms[0].name, logs[i]);
        char *log = read_text(path);
        int children = 0;
        for (char *l = log; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
            if (!strncmp(l, "$ mala ", 7)) {
                char *end = strchr(l, '\n');
                if (end) *end = 0;
                ck_assert_msg(strstr(l, " --device auto"), "%s: a child without --device auto: %s", path, l);
                ck_assert_msg(!strstr(l, "--precision"), "%s: precision auto gives no --precision: %s", path, l);
                children++;
                if (end) *end = '\n';
            }
        ck_assert_msg(children > 0, "%s: no child command line:\n%s", path, log);
        free(log);
    }

    // results.md: a row per arm with parameters, GFLOP, rates and FD
    snprintf(path, sizeof path, "%s/results.md", out);
    char *md = read_text(path);
    for (int a = 0; a < c->narms; a++) {
        char row[128];
        snprintf(row, sizeof row, "\n| %s | %s |", c->arms[a].name, c->arms[a].backbone);
        char *r = strstr(md, row);
        ck_assert_msg(r, "results.md has no row for %s:\n%s", c->arms[a].name, md);
        char *end = strchr(r + 1, '\n');
        *end = 0;
        ck_assert_int_eq(count_char(r + 1, '|'), 16);
        ck_assert_msg(strstr(r, "M |"), "no parameter count: %s", r + 1);
        *end = '\n';
    }
    free(md);
    // results.csv: a header and a row per arm, seed and point, each with an FD and a class accuracy
    snprintf(path, sizeof path, "%s/results.csv", out);
    char *csv = read_text(path);
    ck_assert_int_eq(count_char(csv, '\n'), 1 + c->narms * c->nseeds * npoints);
    char *line = strchr(csv, '\n') + 1;
    ck_assert_msg(strncmp(line, c->arms[0].name, strlen(c->arms[0].name)) == 0, "%s", line);
    *strchr(line, '\n') = 0;
    int fields = 1;
    double fd = -1, acc = -1;
    for (char *p = line; p; p = strchr(p, ','), p = p ? p + 1 : NULL, fields++) {
        if (fields == 11) fd = strtod(p, NULL);
        if (fields == 12) acc = *p == ',' ? -1 : strtod(p, NULL);
    }
    fields--;
    ck_assert_int_eq(fields, 19);
    ck_assert_msg(fd > 0, "FD %g", fd);
    ck_assert_msg(acc >= 0 && acc <= 1, "class accuracy %g", acc);
    free(csv);
    // results.json parses and has the arms
    snprintf(path, sizeof path, "%s/results.json", out);
    size_t n;
    char *js = tu_read_file(path, &n);
    JsonValue *j = json_parse(js, n, &err);
    ck_assert_msg(j, "%s", err.msg);
    const JsonValue *arms = json_get(j, "arms");
    ck_assert(arms && arms->type == JSON_ARRAY && arms->n == c->narms);
    const JsonValue *fdj = json_get(json_get(&arms->items[0], "fd"), "mean");
    ck_assert(fdj && fdj->type == JSON_NUMBER && fdj->number > 0);
    const JsonValue *params = json_get(&arms->items[0], "params");
    ck_assert(params && params->type == JSON_NUMBER && params->number > 1e5);
    json_free(j);
    free(js);
    const char *pngs[] = {"loss.png", "fd_vs_images.png", "fd_vs_time.png", "class_acc_vs_images.png",
                          "class_acc_vs_time.png", "compare.png", "fd_vs_tflop.png", "class_acc_vs_tflop.png"};
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "%s/%s", out, pngs[i]);
        check_png(path);
    }

    // a second run: nothing trained or evaluated again, the runs' files untouched
    char runs[600], *before = NULL, *after = NULL;
    size_t lb = 0, la = 0;
    snprintf(runs, sizeof runs, "%s/runs", out);
    snapshot(runs, &before, &lb);
    rc = run("compare --config " TINY " --out %s", out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    snapshot(runs, &after, &la);
    // (a run trained or evaluated again would have rewritten a checkpoint, log.csv or evals.csv)
    ck_assert_msg(la == lb && !memcmp(before, after, la), "the second run changed the runs' files");
    free(before);
    free(after);

    // a longer budget in the same DIR, stopped by SIGTERM during the first segment, then continued
    char *tiny = read_text(TINY), cfg2[8192];
    char *b = strstr(tiny, "budget_images");
    ck_assert(b);
    *b = 0;
    snprintf(cfg2, sizeof cfg2, "%sbudget_images = %lld\n%s", tiny, (long long)(c->budget_images + c->eval_every_images),
             strchr(b + 1, '\n') + 1);
    free(tiny);
    write_text(tp("longer.ini"), cfg2);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s compare --config %s --out %s 2>%s & pid=$!; sleep 3; kill -TERM $pid; wait $pid",
             mala_bin(), tp("longer.ini"), out, tp("stop.err"));
    int st = system(cmd);
    slurp(tp("stop.err"), g_err, sizeof g_err);
    ck_assert_msg(WIFEXITED(st) && (WEXITSTATUS(st) == 130 || WEXITSTATUS(st) == 0), "stopped run:\n%s", g_err);
    rc = run("compare --config %s --out %s", tp("longer.ini"), out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    snprintf(path, sizeof path, "%s/results.csv", out);
    csv = read_text(path);
    // every earlier row is still there, and the new points
    ck_assert_int_ge(count_char(csv, '\n'), 1 + c->narms * c->nseeds * (npoints + 1));
    free(csv);
    snprintf(path, sizeof path, "%s/runs/%s-s%llu/evals.csv", out, c->arms[0].name, (unsigned long long)c->seeds[0]);
    char *ev = read_text(path);
    ck_assert_msg(!strncmp(ev, "images,", 7), "%s", ev);
    char last[64];
    snprintf(last, sizeof last, "\n%lld,", (long long)(c->budget_images + c->eval_every_images));
    ck_assert_msg(strstr(ev, last), "no evaluation at the longer budget:\n%s", ev);
    free(ev);
    free(c);
    tu_rm_tmpdir();
}
END_TEST

static char *set_key(char *text, const char *key, const char *value);

// text (freed) with its one occurrence of `old` replaced by `now`.
static char *replace_text(char *text, const char *old, const char *now) {
    char *p = strstr(text, old);
    ck_assert_msg(p, "no '%s' in:\n%s", old, text);
    char *out = malloc(strlen(text) + strlen(now) + 1);
    sprintf(out, "%.*s%s%s", (int)(p - text), text, now, p + strlen(old));
    free(text);
    return out;
}

// Field i (1-based) of a CSV line, as a number.
static double csv_field(const char *line, int i) {
    for (; i > 1 && line; i--) line = strchr(line, ','), line = line ? line + 1 : NULL;
    return line && *line != ',' && *line != '\n' ? strtod(line, NULL) : NAN;
}

// compare-tiny-tflop.ini end to end: each arm trains to its own images (its GFLOP/img's whole steps
// nearest to the TFLOP points) and stops within half a step's compute of budget_tflop, so the arms
// end at equal compute within one step; the report has the TFLOP view. Then drift on that DIR:
// budget_images instead, or a smaller budget_tflop, refused naming the key; a larger one accepted.
START_TEST(test_tflop_end_to_end) {
    tu_make_tmpdir("compare_tflop");
    char out[512], path[700];
    snprintf(out, sizeof out, "%s", tp("cmp"));
    CompareConfig *c = malloc(sizeof *c);
    MalaErr err;
    ck_assert_msg(compare_config_load(TINY_TFLOP, c, &err) == 0, "%s", err.msg);
    int rc = run("compare --config " TINY_TFLOP " --out %s", out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    snprintf(path, sizeof path, "%s/results.csv", out);
    char *csv = read_text(path);
    double end[COMPARE_MAX_ARMS], step_tflop[COMPARE_MAX_ARMS];
    int64_t last_images[COMPARE_MAX_ARMS];
    for (int a = 0; a < c->narms; a++) {
        char head[80];
        snprintf(head, sizeof head, "\n%s,1,", c->arms[a].name);
        int64_t *im;
        double *t;
        double g = NAN;
        int n = 0, np = -1;
        for (char *l = strstr(csv, head); l; l = strstr(l + 1, head), n++) {
            g = csv_field(l + 1, 7);
            if (np < 0) np = compare_arm_points(c, g, &im, &t);
            ck_assert_msg(n < np && (int64_t)csv_field(l + 1, 8) == im[n], "[arm %s] row %d: %.0f images, not %lld:\n%s",
                          c->arms[a].name, n, csv_field(l + 1, 8), (long long)(n < np ? im[n] : -1), csv);
            end[a] = csv_field(l + 1, 19);
            ck_assert(fabs(end[a] - compare_tflop(im[n], g)) <= 1e-5 * end[a]);  // results.csv's 6 digits
        }
        ck_assert_msg(n == np && np == 2, "[arm %s]: %d rows, %d points:\n%s", c->arms[a].name, n, np, csv);
        last_images[a] = im[np - 1];
        step_tflop[a] = g * c->batch / 1e3;
        ck_assert_msg(fabs(end[a] - c->budget_tflop) <= step_tflop[a] / 2 + 1e-12, "[arm %s] ends at %g TFLOP",
                      c->arms[a].name, end[a]);
        free(im);
        free(t);
    }
    for (int a = 1; a < c->narms; a++)  // equal compute within one step; the costlier DiC sees fewer images
        ck_assert(fabs(end[a] - end[0]) <= fmax(step_tflop[a], step_tflop[0]));
    ck_assert_msg(last_images[2] < last_images[0] && last_images[1] == last_images[0], "%s", csv);
    free(csv);
    const char *pngs[] = {"fd_vs_tflop.png", "class_acc_vs_tflop.png", "fd_vs_images.png", "fd_vs_time.png", "loss.png"};
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", out, pngs[i]);
        check_png(path);
    }
    snprintf(path, sizeof path, "%s/results.md", out);
    char *md = read_text(path);
    ck_assert_msg(strstr(md, "budget 0.007 training TFLOP per arm") && strstr(md, "| train TFLOP |") &&
                      strstr(md, "Ranking by FD (lower is better) at 0.007 training TFLOP, the last point every run "
                                 "with results has reached (3 of 3 runs)") && strstr(md, "| run | 0.0035 | 0.007 |"),
                  "%s", md);
    free(md);

    char *before = NULL, *after = NULL;
    size_t lb = 0, la = 0;
    snapshot(out, &before, &lb);
    char *t = replace_text(read_text(TINY_TFLOP), "budget_tflop = 0.007\neval_every_tflop = 0.0035\n",
                           "budget_images = 64\n");
    write_text(tp("new.ini"), t);
    free(t);
    rc = run("compare --config %s --out %s", tp("new.ini"), out);
    char want[800];
    snprintf(want, sizeof want, ": budget_images replaces budget_tflop of %s/config.ini, with which run mala-s1 has "
                                "trained", out);
    ck_assert_msg(rc == 1 && strstr(g_err, want) && count_char(g_err, '\n') == 1, "%s", g_err);
    write_text(tp("new.ini"), (t = set_key(read_text(TINY_TFLOP), "budget_tflop", "0.005")));
    free(t);
    rc = run("compare --config %s --out %s", tp("new.ini"), out);
    snprintf(want, sizeof want, ": budget_tflop 0.005 is below 0.007 in %s/config.ini, and run mala-s1 has trained", out);
    ck_assert_msg(rc == 1 && strstr(g_err, want) && count_char(g_err, '\n') == 1, "%s", g_err);
    snapshot(out, &after, &la);
    ck_assert_msg(la == lb && !memcmp(before, after, la), "a refused config changed the output directory");
    free(before);
    free(after);
    write_text(tp("new.ini"), (t = set_key(read_text(TINY_TFLOP), "budget_tflop", "0.0105")));
    free(t);
    rc = run("compare --config %s --out %s --report", tp("new.ini"), out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    free(c);
    tu_rm_tmpdir();
}
END_TEST

// text with the line "key = ..." replaced by "key = value" (added after [compare] when absent).
static char *set_key(char *text, const char *key, const char *value) {
    size_t n = strlen(text), kl = strlen(key);
    char *out = malloc(n + kl + strlen(value) + 8), *o = out;
    int present = !strncmp(text, key, kl);
    for (char *p = strchr(text, '\n'); p && !present; p = strchr(p + 1, '\n'))
        present = !strncmp(p + 1, key, kl) && (p[1 + kl] == ' ' || p[1 + kl] == '=');
    int done = 0;
    for (char *p = text; *p;) {
        char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p + 1) : strlen(p);
        if (!done && !strncmp(p, key, kl) && (p[kl] == ' ' || p[kl] == '=')) {
            o += sprintf(o, "%s = %s\n", key, value);
            done = 1;
        } else {
            memcpy(o, p, l);
            o += l;
            if (!done && !present && !strncmp(p, "[compare]", 9)) { o += sprintf(o, "%s = %s\n", key, value); done = 1; }
        }
        p += l;
    }
    *o = 0;
    free(text);
    return out;
}

// A run keeps a checkpoint at its evaluation points only. Points at equal compute are rounded
// steps, not multiples of the first: at 0.0038 TFLOP a point, DiT-T/4 at batch 8 (0.866 GFLOP a
// step) evaluates at steps 4 and 9, where a checkpoint every 4 steps would add step 8.
START_TEST(test_tflop_checkpoints_at_points) {
    tu_make_tmpdir("compare_ckpts");
    char *t = set_key(set_key(read_text(TINY_TFLOP), "budget_tflop", "0.0076"), "eval_every_tflop", "0.0038");
    char ini[512], out[512], path[800];
    snprintf(ini, sizeof ini, "%s", tp("ck.ini"));
    snprintf(out, sizeof out, "%s", tp("cmp"));
    write_text(ini, t);
    free(t);
    int rc = run("compare --config %s --out %s --runs mala-s1", ini, out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    snprintf(path, sizeof path, "%s/runs/mala-s1/evals.csv", out);
    char *ev = read_text(path);
    long step[4];
    int n = 0;
    for (char *l = strchr(ev, '\n'); l && l[1] && n < 4; l = strchr(l + 1, '\n'))
        step[n++] = strtol(strchr(l + 1, ',') + 1, NULL, 10);
    ck_assert_msg(n == 2 && step[0] == 4 && step[1] == 9, "the points are not steps 4 and 9:\n%s", ev);
    free(ev);
    snprintf(path, sizeof path, "%s/runs/mala-s1/checkpoints", out);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    char want[2][32];
    for (int i = 0; i < 2; i++) snprintf(want[i], sizeof want[i], "%07ld.safetensors", step[i]);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        files++;
        ck_assert_msg(!strcmp(e->d_name, want[0]) || !strcmp(e->d_name, want[1]), "a checkpoint off the points: %s",
                      e->d_name);
    }
    closedir(d);
    ck_assert_int_eq(files, 2);
    tu_rm_tmpdir();
}
END_TEST

// The shipped comparison (all five arms at their presets) on a tiny budget: one step, one seed.
START_TEST(test_shipped_config_tiny) {
    tu_make_tmpdir("compare_shipped");
    char *t = read_text("configs/compare-fmnist.ini");
    const char *kv[][2] = {{"batch", "4"}, {"budget_images", "4"}, {"eval_every_images", "4"}, {"seeds", "3"},
                           {"eval_images", "10"}, {"eval_steps", "2"}, {"log_every", "1"}, {"threads", "2"},
                           {"ref_images", "50"}, {"train_flags", "--limit 64 --warmup 500 --ema-decay 0.999"},
                           {"grid_per_class", "1"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) t = set_key(t, kv[i][0], kv[i][1]);
    write_text(tp("shipped.ini"), t);
    free(t);
    int rc = run("compare --config %s --out %s", tp("shipped.ini"), tp("out"));
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    char *md = read_text(tp("out/results.md"));
    const char *arms[] = {"| mala-dit | dit | mala | DiT-T/4 | 1.29", "| softmax-dit | dit | softmax | DiT-T/4 | 1.2",
                          "| linear-dit | dit | linear | DiT-T/4 | 1.29", "| dig | dig | - | DiG-T13/4 | 1.2",
                          "| dic | dic | - | DiC-T13 | 1.2"};
    for (int i = 0; i < 5; i++) ck_assert_msg(strstr(md, arms[i]), "results.md lacks '%s':\n%s", arms[i], md);
    free(md);
    // --jobs 2 (two runs at a time, each child with its own threads): the same FD and accuracy
    rc = run("compare --config %s --out %s --jobs 2", tp("shipped.ini"), tp("out2"));
    ck_assert_msg(rc == 0, "--jobs 2: exit %d:\n%s", rc, g_err);
    const char *runs[] = {"mala-dit-s3", "softmax-dit-s3", "linear-dit-s3", "dig-s3", "dic-s3"};
    for (int i = 0; i < 5; i++) {
        char a1[96], a2[96];
        snprintf(a1, sizeof a1, "out/runs/%s/evals.csv", runs[i]);
        snprintf(a2, sizeof a2, "out2/runs/%s/evals.csv", runs[i]);
        char *e1 = read_text(tp(a1)), *e2 = read_text(tp(a2));
        // images,step,train_s,fd,class_acc,...: all but the training seconds must agree
        char *l1 = strchr(e1, '\n') + 1, *l2 = strchr(e2, '\n') + 1;
        double v1[5], v2[5];
        ck_assert_int_eq(sscanf(l1, "%lf,%lf,%lf,%lf,%lf", &v1[0], &v1[1], &v1[2], &v1[3], &v1[4]), 5);
        ck_assert_int_eq(sscanf(l2, "%lf,%lf,%lf,%lf,%lf", &v2[0], &v2[1], &v2[2], &v2[3], &v2[4]), 5);
        for (int j = 0; j < 5; j++)
            ck_assert_msg(j == 2 || v1[j] == v2[j], "%s: column %d is %.9g with --jobs 2, %.9g without", runs[i], j,
                          v2[j], v1[j]);
        free(e1); free(e2);
    }
    tu_rm_tmpdir();
}
END_TEST

// --runs: a comparison done a few runs at a time (one machine's lifetime each), and a copy of DIR
// without checkpoints/ that still reports every run.
START_TEST(test_runs_subset) {
    tu_make_tmpdir("compare_runs");
    char out[512];  // tp() reuses its buffers
    snprintf(out, sizeof out, "%s", tp("cmp"));
    int rc = run("compare --config " TINY " --out %s --runs mala-s2", out);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(g_err, "--runs: " TINY " has no run 'mala-s2' (its runs: mala-s1, softmax-s1, dig-s1)") &&
                      count_char(g_err, '\n') == 1, "%s", g_err);
    struct stat st;
    ck_assert_msg(stat(out, &st) != 0, "a bad --runs created the output directory");

    rc = run("compare --config " TINY " --out %s --runs mala-s1", out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    ck_assert_msg(stat(tp("cmp/runs/mala-s1/evals.csv"), &st) == 0, "mala-s1 was not evaluated");
    ck_assert_msg(stat(tp("cmp/runs/softmax-s1/evals.csv"), &st) != 0, "softmax-s1 ran though not selected");
    ck_assert_msg(stat(tp("cmp/runs/dig-s1/checkpoints"), &st) != 0, "dig-s1 ran though not selected");
    char *md = read_text(tp("cmp/results.md"));
    ck_assert_msg(strstr(md, "| softmax | dit | softmax | DiT-T/4 | - |"), "%s", md);
    ck_assert_msg(strstr(md, "at 64 images seen, the last point every run with results has reached (1 of 3 runs)"), "%s",
                  md);
    free(md);

    rc = run("compare --config " TINY " --out %s --runs softmax-s1,dig-s1 --jobs 2", out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    // the runs' small files alone (as a repository keeps a finished comparison): the same report
    char *before = read_text(tp("cmp/results.md"));
    ck_assert_msg(strstr(before, "at 64 images seen, the last point every run with results has reached (3 of 3 runs)"),
                  "%s", before);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "rm -rf %s/runs/*/checkpoints %s/results.md %s/compare.png", out, out, out);
    ck_assert_int_eq(system(cmd), 0);
    rc = run("compare --config " TINY " --out %s --report", out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    char *after = read_text(tp("cmp/results.md"));
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    check_png(tp("cmp/compare.png"));
    // a run that needs its checkpoint to go on says so and stops
    char *tiny = read_text(TINY);
    tiny = set_key(tiny, "budget_images", "96");
    write_text(tp("longer.ini"), tiny);
    free(tiny);
    rc = run("compare --config %s --out %s", tp("longer.ini"), out);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(g_err, "error: compare: mala-s1 was evaluated up to step 8 but ") &&
                      strstr(g_err, "holds no checkpoint to continue from"), "%s", g_err);
    tu_rm_tmpdir();
}
END_TEST

// The ranking from evaluation rows alone (--report, no training): at the last point every run with
// results has reached, and whether the seeds agree on the arms every seed has.
static void put_evals(const char *dir, const char *run, const char *rows) {
    char path[700];
    snprintf(path, sizeof path, "%s/runs/%s", dir, run);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/runs/%s/evals.csv", dir, run);
    char text[1024];
    snprintf(text, sizeof text, "images,step,train_s,fd,class_acc,fid,is_mean,is_std,sample_img_s,capped\n%s", rows);
    write_text(path, text);
}

// A comparison's DIR with no run trained (tmp/cmp, its config.ini the tiny config at seeds 1 and
// 2, also in tmp/two.ini) for --report on hand-made evaluation rows; its path in out.
static void two_seed_dir(char *out, size_t cap) {
    char *t = set_key(read_text(TINY), "seeds", "1, 2");
    write_text(tp("two.ini"), t);
    snprintf(out, cap, "%s", tp("cmp"));
    mkdir(out, 0755);
    char runs[600];
    snprintf(runs, sizeof runs, "%s/runs", out);
    mkdir(runs, 0755);
    write_text(tp("cmp/config.ini"), t);  // what the harness keeps in a comparison's DIR
    free(t);
}

START_TEST(test_report_ranking) {
    tu_make_tmpdir("compare_rank");
    char out[512];
    two_seed_dir(out, sizeof out);
    // images,step,train_s,fd,class_acc,...: dig-s1 is half way, dig-s2 has not started
    put_evals(out, "mala-s1", "32,4,1,5.0,0.1,,,,1,0\n64,8,2,3.0,0.2,,,,1,0\n");
    put_evals(out, "softmax-s1", "32,4,1,6.0,0.1,,,,1,0\n64,8,2,4.0,0.2,,,,1,0\n");
    put_evals(out, "mala-s2", "32,4,1,5.5,0.1,,,,1,0\n64,8,2,3.5,0.2,,,,1,0\n");
    put_evals(out, "softmax-s2", "32,4,1,6.5,0.1,,,,1,0\n64,8,2,4.5,0.2,,,,1,0\n");
    put_evals(out, "dig-s1", "32,4,1,2.0,0.1,,,,1,0\n");
    int rc = run("compare --config %s --out %s --report", tp("two.ini"), out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    char *md = read_text(tp("cmp/results.md"));
    const char *want[] = {
        "at 32 images seen, the last point every run with results has reached (5 of 6 runs), mean over seeds: dig < "
        "mala < softmax.\n",
        "Seed 1: dig < mala < softmax.\n",
        "Seed 2: mala < softmax (the other arms have no result yet).\n",
        "The seeds agree on the order of the arms every seed has (mala, softmax).\n",
        // the arm rows: mala and softmax at 64 images (both seeds), dig at 32 (its one seed with results)
        "| 64 | - | 2 | 3.250 ± 0.3536 |", "| 64 | - | 2 | 4.250 ± 0.3536 |", "| 32 | - | 1 | 2.000 |",
        // every run at every point
        "| run | 32 (4) | 64 (8) |\n|---|---|---|\n", "| mala-s1 | 5.000 / 0.100 | 3.000 / 0.200 |\n",
        "| dig-s1 | 2.000 / 0.100 | - |\n", "| dig-s2 | - | - |\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(md, want[i]), "results.md lacks '%s':\n%s", want[i], md);
    free(md);
    // seed 2 ranks softmax first at 32 images: the seeds disagree
    put_evals(out, "softmax-s2", "32,4,1,5.4,0.1,,,,1,0\n64,8,2,4.5,0.2,,,,1,0\n");
    rc = run("compare --config %s --out %s --report", tp("two.ini"), out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    md = read_text(tp("cmp/results.md"));
    ck_assert_msg(strstr(md, "The seeds DISAGREE on the order of the arms every seed has (mala, softmax).\n"), "%s", md);
    free(md);
    tu_rm_tmpdir();
}
END_TEST

// The rankings on the three axes: each run's FD read off its own evaluations at the largest value
// every run has reached. mala costs 1 GFLOP/img and trains slowly, softmax 2 GFLOP/img and fast:
// mala leads at equal images and equal compute, softmax at equal time (softmax-s2 read between
// its two evaluations there: log FD linear, 2 x 0.75^(5/7) = 1.628).
static void put_model(const char *dir, const char *run, double gflop) {
    char path[700], text[128];
    snprintf(path, sizeof path, "%s/runs/%s/model.csv", dir, run);
    snprintf(text, sizeof text, "params,gflop_per_img,classes\n1000,%g,10\n", gflop);
    write_text(path, text);
}

START_TEST(test_report_axes) {
    tu_make_tmpdir("compare_axes");
    char out[512];
    two_seed_dir(out, sizeof out);
    // images,step,train_s,fd,class_acc,...
    put_evals(out, "mala-s1", "32,4,10,4.0,0.2,,,,1,0\n64,8,20,1.0,0.6,,,,1,0\n");
    put_evals(out, "mala-s2", "32,4,10,4.0,0.2,,,,1,0\n64,8,20,1.0,0.4,,,,1,0\n");
    put_evals(out, "softmax-s1", "32,4,5,2.0,0.3,,,,1,0\n64,8,10,1.5,0.5,,,,1,0\n");
    put_evals(out, "softmax-s2", "32,4,5,2.0,0.3,,,,1,0\n64,8,12,1.5,0.5,,,,1,0\n");
    put_model(out, "mala-s1", 1.0); put_model(out, "mala-s2", 1.0);
    put_model(out, "softmax-s1", 2.0); put_model(out, "softmax-s2", 2.0);
    int rc = run("compare --config %s --out %s --report", tp("two.ini"), out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    char *md = read_text(tp("cmp/results.md"));
    const char *want[] = {
        "| arm | at 64 images seen | at 0.064 training TFLOP | at 10 s of training |\n|---|---:|---:|---:|\n",
        "| mala | 1.000 ± 0.000 / 0.500 | 1.000 ± 0.000 / 0.500 | 4.000 ± 0.000 / 0.200 |\n",
        "| softmax | 1.500 ± 0.000 / 0.500 | 2.000 ± 0.000 / 0.300 | 1.564 ± 0.09086 / 0.471 |\n",
        "| dig | - | - | - |\n",
        "\nAt equal images seen (64), by FD, mean over seeds: mala < softmax (the other arms have no result yet).\n",
        "\nAt equal training compute (0.064 TFLOP), by FD, mean over seeds: mala < softmax (the other arms have no "
        "result yet).\n",
        "\nAt equal training time (10 s), by FD, mean over seeds: softmax < mala (the other arms have no result "
        "yet).\nSeed 1: softmax < mala (the other arms have no result yet).\nSeed 2: softmax < mala (the other arms "
        "have no result yet).\nThe seeds agree on the order of the arms every seed has (mala, softmax).\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(md, want[i]), "results.md lacks '%s':\n%s", want[i], md);
    ck_assert_msg(!strstr(md, "The gap from"), "a gap table without the key gap:\n%s", md);
    free(md);
    tu_rm_tmpdir();
}
END_TEST

// The gap table (gap = softmax, dig): mala costs 2 GFLOP/img, softmax and dig 1, so at equal
// compute (0.064 TFLOP, where all three have reached) mala is at its 32 images and behind softmax,
// at equal images (64) ahead of it: per seed (2 - 3) / (2 - 1) = -100% and (3 - 3.5) / (3 - 1) =
// -25%, by the means (2.5 - 3.25) / (2.5 - 1) = -50%; at 64 images +50% on both seeds and by the
// means. softmax closes none of its own gap, dig all of it. Adding gap to a started comparison is
// accepted (cmp/config.ini has none).
START_TEST(test_report_gap) {
    tu_make_tmpdir("compare_gap");
    char out[512];
    two_seed_dir(out, sizeof out);
    char *t = set_key(read_text(tp("two.ini")), "gap", "softmax, dig");
    write_text(tp("gap.ini"), t);
    free(t);
    // images,step,train_s,fd,class_acc,...
    put_evals(out, "mala-s1", "32,4,10,3.0,0.2,,,,1,0\n64,8,20,1.5,0.6,,,,1,0\n");
    put_evals(out, "mala-s2", "32,4,10,3.5,0.2,,,,1,0\n64,8,20,2.0,0.4,,,,1,0\n");
    put_evals(out, "softmax-s1", "32,4,5,4.0,0.3,,,,1,0\n64,8,10,2.0,0.5,,,,1,0\n");
    put_evals(out, "softmax-s2", "32,4,5,4.0,0.3,,,,1,0\n64,8,12,3.0,0.5,,,,1,0\n");
    put_evals(out, "dig-s1", "32,4,5,2.0,0.3,,,,1,0\n64,8,10,1.0,0.5,,,,1,0\n");
    put_evals(out, "dig-s2", "32,4,5,2.0,0.3,,,,1,0\n64,8,12,1.0,0.5,,,,1,0\n");
    put_model(out, "mala-s1", 2.0); put_model(out, "mala-s2", 2.0);
    put_model(out, "softmax-s1", 1.0); put_model(out, "softmax-s2", 1.0);
    put_model(out, "dig-s1", 1.0); put_model(out, "dig-s2", 1.0);
    int rc = run("compare --config %s --out %s --report", tp("gap.ini"), out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    char *md = read_text(tp("cmp/results.md"));
    const char *want[] = {
        "The gap from softmax down to dig (the config's gap): each arm closes (FD_softmax - FD_arm) / (FD_softmax - "
        "FD_dig) of it",
        "| mala | 0.064 | 3.000 / 3.500 (3.250) | -100% / -25% (-50%) | 64 | 1.750 / 2.500 / 1.000 | +50% / +50% (+50%) |\n",
        "| softmax | 0.064 | 2.000 / 3.000 (2.500) | +0% / +0% (+0%) | 64 | 2.500 / 2.500 / 1.000 | +0% / +0% (+0%) |\n",
        "| dig | 0.064 | 1.000 / 1.000 (1.000) | +100% / +100% (+100%) | 64 | 1.000 / 2.500 / 1.000 | +100% / +100% "
        "(+100%) |\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(md, want[i]), "results.md lacks '%s':\n%s", want[i], md);
    free(md);
    tu_rm_tmpdir();
}
END_TEST

// The progress line's rate is the machine's now: the median img/s of the log's last 20 rows, so
// hours of an old session's contention (30 img/s rows) and a pause an older build counted as
// training (elapsed_s leaping by 5,000 s) do not make a 100 img/s run look like a 17 img/s one.
START_TEST(test_run_rate_recent_rows) {
    tu_make_tmpdir("compare_rate");
    mkdir(tp("run"), 0755);
    char *csv = malloc(1 << 16);
    int len = sprintf(csv, "step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time\n");
    double elapsed = 0;
    for (int i = 1; i <= 60; i++) {  // 50 steps of 64 images a row
        double rate = i <= 30 ? 30 : i % 7 == 0 ? 5 : 100 + i % 3;  // the odd slow row among the recent ones
        elapsed += 50 * 64 / rate + (i == 31 ? 5000 : 0);
        len += sprintf(csv + len, "%d,0.1,0.1,0,1,%.2f,5e-4,0,%.3f,2026-12-06T00:00:00Z\n", 50 * i, rate, elapsed);
    }
    write_text(tp("run/log.csv"), csv);
    int64_t img;
    double ts, rate = compare_run_rate(tp("run"), 64, &img, &ts);
    ck_assert_int_eq(img, 60 * 50 * 64);
    ck_assert_msg(fabs(ts - elapsed) < 1e-3, "train_s %g, the last row's %g", ts, elapsed);
    ck_assert_msg(rate >= 100 && rate <= 102, "rate %g, the recent rows' median is 100-102", rate);
    // an older log's rows end after the loss: no rate, as without a log
    write_text(tp("run/log.csv"), "step,loss\n10,0.1\n");
    ck_assert_msg(compare_run_rate(tp("run"), 64, &img, &ts) == 0 && img == 0 && ts == 0, "an older log");
    ck_assert_msg(compare_run_rate(tp("none"), 64, &img, &ts) == 0 && img == 0 && ts == 0, "a run without a log");
    free(csv);
    tu_rm_tmpdir();
}
END_TEST

// ---- plots: round ticks ----

// Tick values for a range are round (whole multiples of the step, a 1, 2 or 5 times a power of
// ten), lie in the range, and their labels all differ: a 4e-4 spread at 67.89 once got five
// "67.89" labels.
START_TEST(test_plot_ticks) {
    static const double R[][2] = {{67.8898, 67.8902}, {67.85, 67.93}, {0.9682, 0.9965}, {0, 640000},
                                  {32, 64}, {-3, 7}, {1e-7, 3e-7}, {999990, 1000010}};
    for (size_t r = 0; r < sizeof R / sizeof R[0]; r++) {
        double t[PLOT_MAX_TICKS], step;
        int n = plot_ticks(R[r][0], R[r][1], t, &step);
        ck_assert_msg(n >= 2 && n <= 6, "[%g, %g]: %d ticks", R[r][0], R[r][1], n);
        double m = step / pow(10, floor(log10(step)));
        ck_assert_msg(fabs(m - 1) < 1e-9 || fabs(m - 2) < 1e-9 || fabs(m - 5) < 1e-9, "step %g", step);
        char lab[PLOT_MAX_TICKS][32];
        for (int i = 0; i < n; i++) {
            ck_assert_msg(t[i] >= R[r][0] - 1e-9 * step && t[i] <= R[r][1] + 1e-9 * step, "tick %g outside", t[i]);
            ck_assert_msg(fabs(t[i] / step - round(t[i] / step)) < 1e-6, "tick %.17g: not a multiple of %g", t[i],
                          step);
            plot_tick_label(lab[i], sizeof lab[i], t[i], step);
            for (int j = 0; j < i; j++)
                ck_assert_msg(strcmp(lab[i], lab[j]), "[%g, %g]: two ticks labelled %s", R[r][0], R[r][1], lab[i]);
        }
    }
    double t[PLOT_MAX_TICKS], step;
    char lab[32];
    ck_assert_int_eq(plot_ticks(67.8898, 67.8902, t, &step), 5);  // 67.8898 ... 67.8902
    plot_tick_label(lab, sizeof lab, t[0], step);
    ck_assert_str_eq(lab, "67.8898");
    plot_ticks(0.9682, 0.9965, t, &step);  // loss.png's range: 0.97, 0.98, 0.99
    plot_tick_label(lab, sizeof lab, t[0], step);
    ck_assert_str_eq(lab, "0.97");
    plot_ticks(0, 640000, t, &step);
    plot_tick_label(lab, sizeof lab, t[2], step);
    ck_assert_str_eq(lab, "400K");
}
END_TEST

// A DIR that looks like a comparison: config.ini (the config at cfg), runs/ and one evaluated run.
static void fake_comparison(const char *dir, const char *cfg, const char *run, const char *rows) {
    char path[700];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/runs", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/config.ini", dir);
    char *t = read_text(cfg);
    write_text(path, t);
    free(t);
    put_evals(dir, run, rows);
}

// A tie at the printed precision is reported as one, and compare.png names each run's rows.
START_TEST(test_report_tie_and_labels) {
    tu_make_tmpdir("compare_tie");
    char out[512];
    snprintf(out, sizeof out, "%s", tp("cmp"));
    // 67.8901 and 67.8899 both print as 67.89: mala and softmax tie (config order), dig after
    fake_comparison(out, TINY, "mala-s1", "32,4,1,67.8901,0.1,,,,1,0\n");
    put_evals(out, "softmax-s1", "32,4,1,67.8899,0.1,,,,1,0\n");
    put_evals(out, "dig-s1", "32,4,1,70.0,0.1,,,,1,0\n");
    const char *names[] = {"mala-s1", "softmax-s1", "dig-s1"};
    float grid[2 * 8 * 8];
    for (int i = 0; i < 2 * 8 * 8; i++) grid[i] = -1.0f;  // black images: every white pixel is a label's
    for (int i = 0; i < 3; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/runs/%s/model.csv", out, names[i]);
        write_text(path, "params,gflop_per_img,classes\n1000,0.001,2\n");
        snprintf(path, sizeof path, "%s/runs/%s/grid-0000004.npy", out, names[i]);
        NpyArray a;
        const int64_t shape[4] = {2, 1, 8, 8};
        ck_assert_int_eq(npy_wrap(&a, "<f4", grid, 4, shape), 0);
        MalaErr err;
        ck_assert_msg(npy_save(path, &a, &err) == 0, "%s", err.msg);
    }
    int rc = run("compare --config " TINY " --out %s --report", out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    char *md = read_text(tp("cmp/results.md"));
    ck_assert_msg(strstr(md, "mean over seeds: mala = softmax < dig (=: a tie, the same FD to 4 digits).\n"), "%s", md);
    free(md);
    // compare.png: one row of 8x8 images per run (2 px padding) and a blank row between runs; the
    // label column left of the images has white pixels in each run's band of rows
    uint8_t *px;
    int w, h;
    MalaErr err;
    ck_assert_msg(image_load(tp("cmp/compare.png"), 3, &px, &w, &h, &err) == 0, "%s", err.msg);
    const int grid_w = 2 + 2 * (8 + 2);
    ck_assert_msg(w > grid_w, "compare.png is %d wide: no label column", w);
    for (int r = 0; r < 3; r++) {
        int white = 0, y0 = 2 + 2 * r * (8 + 2);  // run r's row: rows 0, 2, 4 (1, 3 are blank)
        for (int y = y0 - 2; y < y0 + 10 && y < h; y++)
            for (int x = 0; x < w - grid_w; x++) white += px[((size_t)y * w + x) * 3] == 255;
        ck_assert_msg(white > 5, "no label beside %s's rows", names[r]);
    }
    free(px);
    tu_rm_tmpdir();
}
END_TEST

// ---- the output directory: a comparison's own, and its config may not change what its runs used ----

// Config drift on a DIR whose run mala-s1 was evaluated: a changed recipe or evaluation is a
// one-line error naming the key and the run, nothing written; a larger budget or more evaluation
// points are accepted.
START_TEST(test_config_drift) {
    tu_make_tmpdir("compare_drift");
    char out[512], *before = NULL, *after = NULL;
    size_t lb = 0, la = 0;
    snprintf(out, sizeof out, "%s", tp("cmp"));
    fake_comparison(out, TINY, "mala-s1", "32,4,1,5.0,0.1,,,,1,0\n");
    snapshot(out, &before, &lb);
    static const struct { const char *key, *value, *phrase; } BAD[] = {
        {"lr", "0.001", ": lr 0.001 differs from 0.0005 in %s/config.ini, with which run mala-s1 was trained"},
        {"batch", "16", ": batch 16 differs from 8 in %s/config.ini, with which run mala-s1 was trained"},
        {"eval_steps", "3", ": eval_steps 3 differs from 2 in %s/config.ini, with which run mala-s1 was evaluated"},
        {"budget_images", "32", ": budget_images 32 is below 64 in %s/config.ini, and run mala-s1 has trained"},
        {"seeds", "2", ": no seed 1, but run mala-s1 of %s/config.ini has trained"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char *t = set_key(read_text(TINY), BAD[i].key, BAD[i].value);
        write_text(tp("new.ini"), t);
        free(t);
        int rc = run("compare --config %s --out %s", tp("new.ini"), out);
        char want[700];
        snprintf(want, sizeof want, BAD[i].phrase, out);
        ck_assert_msg(rc == 1 && !strncmp(g_err, "error: ", 7) && strstr(g_err, want) && count_char(g_err, '\n') == 1,
                      "%s = %s: exit %d:\n%s", BAD[i].key, BAD[i].value, rc, g_err);
    }
    // budget_tflop instead of budget_images
    char *t = replace_text(read_text(TINY), "budget_images = 64\neval_every_images = 32\n", "budget_tflop = 0.01\n"), *p;
    write_text(tp("new.ini"), t);
    free(t);
    int rc = run("compare --config %s --out %s", tp("new.ini"), out);
    char want[700];
    snprintf(want, sizeof want, ": budget_tflop replaces budget_images of %s/config.ini, with which run mala-s1 has "
                                "trained (a comparison keeps its budget's unit: a new --out)", out);
    ck_assert_msg(rc == 1 && strstr(g_err, want) && count_char(g_err, '\n') == 1, "%s", g_err);
    // an arm's own key, and an arm left out
    t = read_text(TINY), p = strstr(t, "preset = DiT-T/4");
    memcpy(p, "preset = DiT-S/4", 16);
    write_text(tp("new.ini"), t);
    rc = run("compare --config %s --out %s", tp("new.ini"), out);
    ck_assert_msg(rc == 1 && strstr(g_err, ": [arm mala] preset DiT-S/4 differs from DiT-T/4"), "%s", g_err);
    *strstr(t, "[arm mala]") = 0;
    snprintf(t + strlen(t), 64, "[arm x]\nbackbone = dit\npreset = DiT-T/4\n");
    write_text(tp("new.ini"), t);
    free(t);
    rc = run("compare --config %s --out %s", tp("new.ini"), out);
    ck_assert_msg(rc == 1 && strstr(g_err, ": no [arm mala], but run mala-s1 of "), "%s", g_err);
    snapshot(out, &after, &la);
    ck_assert_msg(la == lb && !memcmp(before, after, la), "a refused config changed the output directory");
    free(after);
    // a larger budget, more evaluation points, another seed and other threads: accepted (--report
    // here: no training), and the next invocation stores that config
    t = set_key(set_key(set_key(set_key(read_text(TINY), "budget_images", "128"), "eval_every_images", "16"), "seeds",
                        "1, 2"), "threads", "1");
    write_text(tp("new.ini"), t);
    rc = run("compare --config %s --out %s --report", tp("new.ini"), out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, g_err);
    char *md = read_text(tp("cmp/results.md"));
    ck_assert_msg(strstr(md, "budget 128 images seen"), "%s", md);
    free(md);
    free(t);
    free(before);
    tu_rm_tmpdir();
}
END_TEST

// --out naming a folder that is not a comparison's (a training run's directory, a folder with a
// config.ini of its own) is refused before anything is written; an empty folder is fine.
START_TEST(test_out_not_a_comparison) {
    tu_make_tmpdir("compare_out");
    char run_dir[512], *before = NULL, *after = NULL;
    size_t lb = 0, la = 0;
    snprintf(run_dir, sizeof run_dir, "%s", tp("train_run"));
    mkdir(run_dir, 0755);
    write_text(tp("train_run/log.csv"), "step,loss\n1,0.5\n");
    write_text(tp("train_run/loss.png"), "not really a png, but the user's");
    snapshot(run_dir, &before, &lb);
    const char *modes[] = {"", " --report"};
    for (int i = 0; i < 2; i++) {
        int rc = run("compare --config " TINY " --out %s%s", run_dir, modes[i]);
        ck_assert_int_eq(rc, 1);
        char want[700];
        snprintf(want, sizeof want, "--out %s: not empty and not a comparison's directory (no config.ini)", run_dir);
        ck_assert_msg(!strncmp(g_err, "error: ", 7) && strstr(g_err, want) && count_char(g_err, '\n') == 1, "%s",
                      g_err);
    }
    write_text(tp("train_run/config.ini"), "[model]\nwidth = 3\n");
    int rc = run("compare --config " TINY " --out %s", run_dir);
    ck_assert_msg(rc == 1 && strstr(g_err, "not a comparison's directory (its config.ini: ") &&
                      count_char(g_err, '\n') == 1, "%s", g_err);
    unlink(tp("train_run/config.ini"));
    snapshot(run_dir, &after, &la);
    ck_assert_msg(la == lb && !memcmp(before, after, la), "compare wrote into a training run's directory");
    free(before);
    free(after);
    // a file is not a directory; an empty directory is a new comparison's (here stopped by --runs)
    rc = run("compare --config " TINY " --out %s", tp("train_run/log.csv"));
    ck_assert_msg(rc == 1 && strstr(g_err, "log.csv: not a directory") && count_char(g_err, '\n') == 1, "%s", g_err);
    mkdir(tp("empty"), 0755);
    rc = run("compare --config " TINY " --out %s --runs nosuch-s1", tp("empty"));
    ck_assert_msg(rc == 1 && strstr(g_err, "--runs: " TINY " has no run 'nosuch-s1'"), "%s", g_err);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(test_bad_config) {
    tu_make_tmpdir("compare_bad");
    const char *bad = tp("bad.ini");
    write_text(bad, "[compare]\nbudget_images = 64\n[arm x]\nbackbone = dit\npreset = DiT-T/4\nlr = fast\n");
    int rc = run("compare --config %s --out %s", bad, tp("out"));
    ck_assert_msg(rc == 1, "exit %d", rc);
    char want[600];
    snprintf(want, sizeof want, "error: %s:6: lr: expected a number, got 'fast'\n", bad);
    ck_assert_str_eq(g_err, want);
    struct stat st;
    ck_assert_msg(stat(tp("out"), &st) != 0, "a bad config created the output directory");
    // a preset the backbone does not have: the arm's line
    write_text(bad, "[compare]\nbudget_images = 64\n\n[arm x]\nbackbone = dig\npreset = DiT-T/4\n");
    rc = run("compare --config %s --out %s", bad, tp("out"));
    ck_assert_int_eq(rc, 1);
    snprintf(want, sizeof want, "error: %s:4: [arm x] preset DiT-T/4 is a dit preset", bad);
    ck_assert_msg(!strncmp(g_err, want, strlen(want)) && count_char(g_err, '\n') == 1, "%s", g_err);
    rc = run("compare --config %s --out %s", tp("missing.ini"), tp("out"));
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(g_err, "missing.ini: cannot open") && count_char(g_err, '\n') == 1, "%s", g_err);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("compare");
    TCase *tc = tcase_create("compare");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_parse_good);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_parse_shipped);
    tcase_add_test(tc, test_tflop_points);
    tcase_add_test(tc, test_dry_run_gflop);
    tcase_add_test(tc, test_tflop_end_to_end);
    tcase_add_test(tc, test_tflop_checkpoints_at_points);
    tcase_add_test(tc, test_bad_config);
    tcase_add_test(tc, test_end_to_end);
    tcase_add_test(tc, test_shipped_config_tiny);
    tcase_add_test(tc, test_runs_subset);
    tcase_add_test(tc, test_report_ranking);
    tcase_add_test(tc, test_report_axes);
    tcase_add_test(tc, test_report_gap);
    tcase_add_test(tc, test_run_rate_recent_rows);
    tcase_add_test(tc, test_plot_ticks);
    tcase_add_test(tc, test_report_tie_and_labels);
    tcase_add_test(tc, test_config_drift);
    tcase_add_test(tc, test_out_not_a_comparison);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

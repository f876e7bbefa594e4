// `mala view` (viewer/viewer_*.c, SDL2) driven through the binary with --script under Xvfb: the
// viewer is linked into ./mala only, so each test fork/execs ./mala (the Makefile runs suites from
// the repository root after building it; MALA_BIN overrides the path). The suite starts one Xvfb
// server (on a free display, -displayfd) and a one-step training run makes the model file.
// Without Xvfb the window tests print SKIP and pass; the checks that need no display always run.
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stddef.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pipeline/generate.h"
#include "model/checkpoint.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "cli/args.h"
#include "formats/png_text.h"
#include "testutil.h"
#include "formats/view_settings.h"
#include "cpu/cpu_threads.h"

#define S_IMG 32         // image side of the model the fixture trains (Fashion-MNIST, padded)
#define WIN_W 800
#define WIN_H 600
#define VIEW_MAX_IMAGES_TEST 16  // the viewer opens its generator for 16 images (viewer/viewer.h)

static char g_dir[] = "/tmp/mala_viewer_XXXXXX";
static char g_model[512];
static int g_have_xvfb;   // our Xvfb is running and DISPLAY points at it
static pid_t g_xvfb_pid;

static const char *mala_bin(void) { return getenv("MALA_BIN") ? getenv("MALA_BIN") : "./mala"; }

// g_dir/NAME (four buffers in turn).
static const char *dir_path(const char *name) {
    static char buf[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s/%s", g_dir, name);
    return buf[i];
}

static int on_path(const char *prog) {
    const char *path = getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin";
    char *copy = strdup(path), *save = NULL;
    int found = 0;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", d, prog);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

// Under `make sanitize` LeakSanitizer reports SDL's own allocations at exit (libdbus, and X11
// modules SDL dlopens and unloads in SDL_Quit: a bare SDL_Init + SDL_Quit shows them), so the
// viewer runs with leak detection off; ASan and UBSan errors still fail it. Other children keep it.
static void no_leak_check(void) {
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

// Runs argv with stdout and stderr into log; returns the exit status (128 + signal if killed).
// viewer: argv runs `mala view` (see no_leak_check).
static int run(char *const argv[], const char *log, int viewer) {
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork failed");
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setenv("OMP_NUM_THREADS", "1", 1);
        unsetenv("MALA_VIEW_CONFIG");  // hermetic: scripted runs use a settings file only when given --config
        if (viewer) no_leak_check();
        execvp(argv[0], argv);
        fprintf(stderr, "cannot run %s\n", argv[0]);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {}
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char *read_text(const char *path) {
    size_t n;
    char *data = tu_read_file(path, &n);
    char *buf = malloc(n + 1);
    ck_assert(buf != NULL);
    memcpy(buf, data, n);
    buf[n] = 0;
    free(data);
    return buf;
}

// ./mala view --ckpt MODEL --threads 1 --width W --height H --script SCRIPT [--screenshot SHOT]
// on our Xvfb (under timeout, so a hung viewer fails the test instead of the run).
static int run_view_model(const char *model, const char *script, const char *shot, const char *log) {
    char size_w[16], size_h[16];
    snprintf(size_w, sizeof size_w, "%d", WIN_W);
    snprintf(size_h, sizeof size_h, "%d", WIN_H);
    char *argv[] = {"timeout", "180", (char *)mala_bin(), "view", "--ckpt", (char *)model, "--threads", "1", "--width", size_w, "--height", size_h, "--script",
                    (char *)script, shot ? "--screenshot" : NULL, (char *)shot, NULL};
    return run(argv, log, 1);
}

static int run_view(const char *script, const char *shot, const char *log) {
    return run_view_model(g_model, script, shot, log);
}

// ./mala view [flags...] --threads 1 --width W --height H --script SCRIPT [--screenshot SHOT]
static int run_view_flags(char *const flags[], const char *script, const char *shot, const char *log) {
    char size_w[16], size_h[16];
    snprintf(size_w, sizeof size_w, "%d", WIN_W);
    snprintf(size_h, sizeof size_h, "%d", WIN_H);
    char *argv[40] = {"timeout", "240", (char *)mala_bin(), "view"};
    int n = 4;
    for (int i = 0; flags[i]; i++) argv[n++] = flags[i];
    char *tail[] = {"--threads", "1", "--width", size_w, "--height", size_h, "--script", (char *)script};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) argv[n++] = tail[i];
    if (shot) {
        argv[n++] = "--screenshot";
        argv[n++] = (char *)shot;
    }
    argv[n] = NULL;
    return run(argv, log, 1);
}

// The Unix socket address of X display d: Linux's abstract one (what Xlib tries first, shared
// by everything in the network namespace) or the file under /tmp/.X11-unix.
static socklen_t x_addr(struct sockaddr_un *a, int d, int abstract) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int len = snprintf(a->sun_path + abstract, sizeof a->sun_path - 1, "/tmp/.X11-unix/X%d", d);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + len + !abstract);
}

static int x_connects(int d, int abstract) {
    struct sockaddr_un a;
    socklen_t len = x_addr(&a, d, abstract);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0), ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, len) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

// Display d is free: no lock file and nobody listens on either of its sockets (other sessions on
// this machine may run X servers too).
static int x_display_free(int d) {
    char lock[64];
    snprintf(lock, sizeof lock, "/tmp/.X%d-lock", d);
    return access(lock, F_OK) != 0 && !x_connects(d, 1) && !x_connects(d, 0);
}

static pid_t spawn_xvfb(int d) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the suite
    int log = open(dir_path("xvfb.log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
        dup2(log, 1);
        dup2(log, 2);
    }
    char name[16];
    snprintf(name, sizeof name, ":%d", d);
    execlp("Xvfb", "Xvfb", name, "-screen", "0", "1280x1024x24", "-nolisten", "tcp", (char *)NULL);
    _exit(127);
}

// Waits up to 20 s for Xvfb on display d to accept connections; 0 when it exits first (the
// display was taken after all) or never answers.
static int xvfb_ready(pid_t pid, int d) {
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return 0;
        if (x_connects(d, 1) || x_connects(d, 0)) return 1;
        usleep(20000);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return 0;
}

// Starts Xvfb on a free display (it keeps the lock file, so concurrent runs of this suite or of
// xvfb-run do not collide) and points DISPLAY at it for every test; 0 when Xvfb is missing.
static int start_xvfb(void) {
    if (!on_path("Xvfb")) return 0;
    for (int i = 0; i < 50; i++) {
        int d = 100 + (int)((getpid() + 13 * i) % 800);
        if (!x_display_free(d)) continue;
        g_xvfb_pid = spawn_xvfb(d);
        if (g_xvfb_pid < 0 || !xvfb_ready(g_xvfb_pid, d)) continue;
        char name[16];
        snprintf(name, sizeof name, ":%d", d);
        setenv("DISPLAY", name, 1);
        unsetenv("WAYLAND_DISPLAY");
        return 1;
    }
    g_xvfb_pid = 0;
    fprintf(stderr, "test_viewer: Xvfb did not start on any display (see %s)\n", dir_path("xvfb.log"));
    return 0;
}

static void fixture_setup(void) {
    ck_assert_msg(mkdtemp(g_dir) != NULL, "mkdtemp failed");
    snprintf(g_model, sizeof g_model, "%s/run/checkpoints/0000001.safetensors", g_dir);
    g_have_xvfb = start_xvfb();
    if (access(mala_bin(), X_OK)) {
        fprintf(stderr, "test_viewer: %s not found; build it first (make)\n", mala_bin());
        return;
    }
    char *argv[] = {(char *)mala_bin(), "train", "--model", "DiT-T/4", "--iters", "1", "--limit", "16", "--batch", "2",
                    "--sample-every", "0", "--threads", "1", "--out", (char *)dir_path("run"), NULL};
    if (run(argv, dir_path("train.log"), 0) != 0) fprintf(stderr, "test_viewer: making the model failed, see %s\n", dir_path("train.log"));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) { return remove(path); }

static void fixture_teardown(void) {
    if (g_xvfb_pid > 0) {
        kill(g_xvfb_pid, SIGTERM);
        waitpid(g_xvfb_pid, NULL, 0);
    }
    if (nftw(g_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS)) fprintf(stderr, "test_viewer: could not remove %s\n", g_dir);
}

static int skip_without_display(const char *test) {
    if (g_have_xvfb) return 0;
    printf("SKIP %s: no Xvfb (apt-get install xvfb)\n", test);
    return 1;
}

static void assert_model(void) {
    ck_assert_msg(access(g_model, R_OK) == 0, "no model file %s (see %s)", g_model, dir_path("train.log"));
}

static void assert_ran(int rc, int want, const char *log) {
    if (rc == want) return;
    char *text = read_text(log);
    ck_abort_msg("mala view exited %d, expected %d (DISPLAY=%s, Xvfb log %s); its output:\n%s", rc, want,
                 getenv("DISPLAY") ? getenv("DISPLAY") : "(unset)", dir_path("xvfb.log"), text);
}

static void load_rgb(const char *path, uint8_t **px, int *w, int *h) {
    MalaErr err;
    ck_assert_msg(image_load(path, 3, px, w, h, &err) == 0, "%s", err.msg);
}

// torchvision make_grid: min(nrow, n) columns, ceil(n / nrow) rows, padding 2 around every cell.
static void grid_size(int n, int nrow, int *w, int *h) {
    int cols = n < nrow ? n : nrow, rows = (n + nrow - 1) / nrow;
    *w = n == 1 ? S_IMG : cols * (S_IMG + 2) + 2;
    *h = n == 1 ? S_IMG : rows * (S_IMG + 2) + 2;
}

static double variance(const uint8_t *px, int w, int h, int stride, int x0, int y0) {
    double s = 0, s2 = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w * 3; x++) {
            double v = px[(size_t)(y0 + y) * stride + x0 * 3 + x];
            s += v;
            s2 += v * v;
        }
    double n = 3.0 * w * h;
    return s2 / n - (s / n) * (s / n);
}

START_TEST(generate_save_and_screenshot) {
    if (skip_without_display("generate_save_and_screenshot")) return;
    assert_model();
    char script[1024];
    snprintf(script, sizeof script,
             "class=Sneaker;cfg=4;steps=5;sampler=ddim;n=4;seed=3;generate;wait;save=%s;quit", dir_path("out.png"));
    assert_ran(run_view(script, dir_path("shot.png"), dir_path("view.log")), 0, dir_path("view.log"));
    char *log = read_text(dir_path("view.log"));
    ck_assert_msg(strstr(log, "generated 4 x Sneaker (DDIM 5 steps, cfg 4.0"), "%s", log);

    // the saved grid: 4 images in 2 columns, as torchvision's make_grid(nrow=2) lays them out
    uint8_t *grid, *shot;
    int gw, gh, sw, sh, ew, eh;
    load_rgb(dir_path("out.png"), &grid, &gw, &gh);
    grid_size(4, 2, &ew, &eh);
    ck_assert_msg(gw == ew && gh == eh, "out.png is %dx%d, expected %dx%d", gw, gh, ew, eh);

    // the screenshot: the window's size; the image area shows the grid, scaled up crisply
    load_rgb(dir_path("shot.png"), &shot, &sw, &sh);
    ck_assert_msg(sw == WIN_W && sh == WIN_H, "screenshot is %dx%d, the window %dx%d", sw, sh, WIN_W, WIN_H);
    const char *line = strstr(log, "view: screenshot");
    int iw, ih, ix, iy, scale;
    ck_assert_msg(line && sscanf(line, "view: screenshot %*s %*dx%*d, image %dx%d at %d,%d scale %d", &iw, &ih, &ix,
                                 &iy, &scale) == 5, "%s", log);
    ck_assert_msg(scale >= 2 && iw == gw * scale && ih == gh * scale, "image %dx%d at scale %d", iw, ih, scale);
    ck_assert(ix >= 0 && iy >= 0 && ix + iw <= sw && iy + ih <= sh);
    ck_assert_msg(variance(shot, iw, ih, sw * 3, ix, iy) > 0, "the image area is blank");
    long differ = 0;
    for (int y = 0; y < ih; y++)
        for (int x = 0; x < iw; x++)
            differ += memcmp(shot + ((size_t)(iy + y) * sw + ix + x) * 3, grid + ((size_t)(y / scale) * gw + x / scale) * 3, 3) != 0;
    ck_assert_msg(differ == 0, "%ld of %d screen pixels differ from out.png scaled %dx (nearest)", differ, iw * ih, scale);
    free(grid);
    free(shot);
    free(log);
}
END_TEST

// The viewer samples through the same API as `mala sample`: same settings, same pixels.
// The generation parameters a PNG holds (tEXt "parameters", pipeline/gen_params.h), malloc'd.
static char *png_params(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    uint8_t *b = malloc(1 << 20);
    size_t n = fread(b, 1, 1 << 20, f);
    fclose(f);
    MalaErr err;
    char *text;
    int rc = png_text_find(b, n, path, "parameters", &text, &err);
    ck_assert_msg(rc == 1, "%s: %s", path, rc < 0 ? err.msg : "no parameters");
    free(b);
    return text;
}

START_TEST(matches_mala_sample) {
    if (skip_without_display("matches_mala_sample")) return;
    assert_model();
    char script[1024];
    snprintf(script, sizeof script, "class=Bag;cfg=2.5;steps=4;sampler=ddpm;n=3;seed=11;generate;wait;save=%s;quit",
             dir_path("view3.png"));
    assert_ran(run_view(script, NULL, dir_path("view3.log")), 0, dir_path("view3.log"));
    char *argv[] = {(char *)mala_bin(), "sample", "--ckpt", g_model, "--class", "Bag", "--cfg-scale", "2.5", "--steps",
                    "4", "--sampler", "ddpm", "--n", "3", "--seed", "11", "--nrow", "2", "--threads", "1",
                    "--out", (char *)dir_path("sample3.png"), NULL};
    assert_ran(run(argv, dir_path("sample3.log"), 0), 0, dir_path("sample3.log"));
    uint8_t *a, *b;
    int aw, ah, bw, bh, ew, eh;
    load_rgb(dir_path("view3.png"), &a, &aw, &ah);
    load_rgb(dir_path("sample3.png"), &b, &bw, &bh);
    grid_size(3, 2, &ew, &eh);
    ck_assert_msg(aw == ew && ah == eh && bw == ew && bh == eh, "sizes %dx%d and %dx%d, expected %dx%d", aw, ah, bw, bh,
                  ew, eh);
    int maxd = 0;
    for (size_t i = 0; i < (size_t)aw * ah * 3; i++) {
        int d = abs(a[i] - b[i]);
        if (d > maxd) maxd = d;
    }
    ck_assert_msg(maxd <= 1, "viewer and mala sample differ by up to %d levels", maxd);
    free(a);
    free(b);
    char *pa = png_params(dir_path("view3.png")), *pb = png_params(dir_path("sample3.png"));  // the same settings, said the same
    ck_assert_str_eq(pa, pb);
    ck_assert_msg(strstr(pa, "Bag\nSteps: 4, Sampler: ddpm, CFG scale: 2.5, Seed: 11, Size: 32x32, Model hash: ") == pa &&
                  strstr(pa, ", Class: 8, Images: 3, "), "%s", pa);
    free(pa);
    free(pb);
}
END_TEST

// Keys go through the same path as a person's; a long run is cancelled while the window keeps
// drawing the live preview.
START_TEST(keys_preview_and_cancel) {
    if (skip_without_display("keys_preview_and_cancel")) return;
    assert_model();
    char script[1024];
    snprintf(script, sizeof script, "class=Sneaker;key=Right;steps=2;key=];n=2;key=M;key=Return;wait;"
             "sampler=ddim;steps=1000;n=4;generate;sleep=1;cancel;wait;size=900x650;screenshot=%s;quit", dir_path("big.png"));
    double t0 = now_seconds();
    assert_ran(run_view(script, NULL, dir_path("keys.log")), 0, dir_path("keys.log"));
    double dt = now_seconds() - t0;
    char *log = read_text(dir_path("keys.log"));
    // Right: Sneaker -> Bag; ]: 2 -> 3 steps; M: DDIM (the default) -> the next kind, DPM++2M; Return: generate
    ck_assert_msg(strstr(log, "generated 2 x Bag (DPM++2M 3 steps"), "%s", log);
    const char *c = strstr(log, "cancelled at step");
    int step, nsteps, previews;
    ck_assert_msg(c && sscanf(c, "cancelled at step %d/%d after %*f s, %d step previews", &step, &nsteps, &previews) == 3,
                  "%s", log);
    ck_assert_msg(nsteps == 1000 && step >= 1 && step < 1000, "%s", log);
    ck_assert_msg(previews >= 1, "no predicted x0 was shown while generating: %s", log);
    ck_assert_msg(dt < 120, "the cancelled run took %.0f s", dt);
    // the window is resizable: the screenshot after size=900x650 has that size
    uint8_t *shot;
    int sw, sh;
    load_rgb(dir_path("big.png"), &shot, &sw, &sh);
    ck_assert_msg(sw == 900 && sh == 650, "screenshot after resizing is %dx%d", sw, sh);
    free(shot);
    free(log);
}
END_TEST

static const char *train_model(const char *name, const char *preset, char *const extra[]);

START_TEST(script_errors) {
    assert_model();
    // refused while parsing, before any window: exit 2 without needing a display
    const char *bad[][2] = {{"generate;frobnicate;quit", "unknown command"},
                            {"genrate;quit", "'genrate': unknown command; did you mean generate?"},
                            {"steps=0", "expected an integer from 1 to 1000"},
                            {"n=17", "expected an integer from 1 to 16"},
                            {"sampler=euler", "expected sampler=ddpm|ddim|dpm++2m"},
                            {"save_one=x", "expected save_one=K"},
                            {"pane=2", "expected an integer from 0 to 1"},
                            {"key=NoSuchKey", "unknown key name"},
                            {"generate=3", "takes no value"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)mala_bin(), "view", "--ckpt", g_model, "--script", (char *)bad[i][0], NULL};
        int rc = run(argv, dir_path("err.log"), 1);
        char *log = read_text(dir_path("err.log"));
        ck_assert_msg(rc == 2 && strstr(log, bad[i][1]), "'%s': exit %d, output: %s", bad[i][0], rc, log);
        free(log);
    }
    char *missing[] = {(char *)mala_bin(), "view", "--ckpt", (char *)dir_path("none.safetensors"), NULL};
    int rc = run(missing, dir_path("err.log"), 1);
    char *log = read_text(dir_path("err.log"));
    ck_assert_msg(rc == 1 && strstr(log, "none.safetensors: cannot read the model file"), "exit %d: %s", rc, log);
    free(log);
    // an unconditional model (--classes 0) is refused before any window, with the reason docs/view.md gives
    char *uncond_flags[] = {"--classes", "0", NULL};
    char *uncond[] = {(char *)mala_bin(), "view", "--ckpt", (char *)train_model("uncond", "DiT-T/4", uncond_flags),
                      "--script", "quit", NULL};
    rc = run(uncond, dir_path("uncond.log"), 1);
    log = read_text(dir_path("uncond.log"));
    ck_assert_msg(rc == 1 && strstr(log, "is an unconditional model (num_classes 0): the viewer shows class-conditional "
                                         "models; sample it with mala sample"),
                  "exit %d: %s", rc, log);
    free(log);
    if (skip_without_display("script_errors (unknown class, save before a run)")) return;
    // class names are checked against the model once it is loaded: exit 1
    ck_assert_int_eq(run_view("class=Spaceship;generate;quit", NULL, dir_path("cls.log")), 1);
    log = read_text(dir_path("cls.log"));
    ck_assert_msg(strstr(log, "class=Spaceship: unknown class; the model knows: T-shirt/top"), "%s", log);
    free(log);
    ck_assert_int_eq(run_view("save=x.png;quit", NULL, dir_path("save.log")), 1);
    log = read_text(dir_path("save.log"));
    ck_assert_msg(strstr(log, "nothing to save yet"), "%s", log);
    free(log);
    // a file that is no model: the worker's error, exit 1
    char *argv[] = {"timeout", "180", (char *)mala_bin(), "view", "--ckpt", (char *)dir_path("train.log"),
                    "--script", "quit", NULL};
    ck_assert_int_eq(run(argv, dir_path("bad.log"), 1), 1);
    log = read_text(dir_path("bad.log"));
    ck_assert_msg(strstr(log, "error: ") && strstr(log, "train.log"), "%s", log);
    free(log);
}
END_TEST

// ---- the attention view ----

#define BUNDLED "assets/mala-dit-fmnist.safetensors"

// A one-step training run of `preset` with extra model flags into run_<name>/; returns its model file.
static const char *train_model(const char *name, const char *preset, char *const extra[]) {
    static char path[4][1024];
    static int i;
    i = (i + 1) % 4;
    char out[512];
    snprintf(out, sizeof out, "%s/run_%s", g_dir, name);
    snprintf(path[i], sizeof path[i], "%s/checkpoints/0000001.safetensors", out);
    if (access(path[i], R_OK) == 0) return path[i];
    char *argv[32] = {(char *)mala_bin(), "train", "--model", (char *)preset, "--iters", "1", "--limit", "16", "--batch",
                      "2", "--sample-every", "0", "--threads", "1", "--out", out};
    int n = 16;
    for (int k = 0; extra && extra[k]; k++) argv[n++] = extra[k];
    argv[n] = NULL;
    char log[600];
    snprintf(log, sizeof log, "%s.log", out);
    ck_assert_msg(run(argv, log, 0) == 0, "training the %s model failed, see %s", name, log);
    return path[i];
}

// A row the viewer wrote with attn_dump: [gh, gw] float32.
static float *load_row(const char *path, int *L) {
    NpyArray a;
    MalaErr err;
    ck_assert_msg(npy_load(path, &a, &err) == 0, "%s", err.msg);
    ck_assert_msg(a.ndim == 2 && !strcmp(a.dtype, "<f4"), "%s: expected a [gh, gw] float32 array", path);
    float *row;
    ck_assert(npy_to_f32(&a, &row, path, &err) == 0);
    *L = (int)npy_numel(&a);
    npy_free(&a);
    return row;
}

static double row_sum(const float *r, int L) {
    double s = 0;
    for (int j = 0; j < L; j++) s += r[j];
    return s;
}

static double row_spread(const float *r, int L) {
    double lo = r[0], hi = r[0];
    for (int j = 1; j < L; j++) { lo = fmin(lo, r[j]); hi = fmax(hi, r[j]); }
    return hi - lo;
}

// The bundled model (MALA with RoPE): the view opens, clicks and keys reach it, and the rows it
// shows are the library's explicit rows of the same run (same seed, sampler, steps and guidance,
// computed here through generate.h and net_attn_row). The screenshot shows the map beside the grid.
START_TEST(attention_view_bundled) {
    if (skip_without_display("attention_view_bundled")) return;
    ck_assert_msg(access(BUNDLED, R_OK) == 0, "no bundled model %s", BUNDLED);
    char script[1024];
    snprintf(script, sizeof script,
             "attn=on;class=Bag;steps=3;n=2;seed=5;generate;wait;query=2,5,1;block=2;head=1;attn_dump=%s;"
             "head=mean;scale=2;attn_dump=%s;key=n;key=k;key=x;attn_dump=%s;quit",
             dir_path("b1.npy"), dir_path("b2.npy"), dir_path("b3.npy"));
    assert_ran(run_view_model(BUNDLED, script, dir_path("attn.png"), dir_path("attn.log")), 0, dir_path("attn.log"));
    char *log = read_text(dir_path("attn.log"));
    ck_assert_msg(strstr(log, "view: attention mala block 2/4  head 1/4 a 1.0000 image 1 query 42 (2,5) step 3"), "%s", log);
    // keys: n = next block (3), k = next head (mean -> 0), x = a one notch up (2 * 2^(1/8))
    ck_assert_msg(strstr(log, "view: attention mala block 3/4  head 0/4 a 2.1810 image 1 query 42"), "%s", log);

    set_threads(1);
    Generator g;
    MalaErr err;
    ck_assert_msg(generator_open_mode(&g, BUNDLED, backend_cpu(), VIEW_MAX_IMAGES_TEST, NET_INFER_ATTN, &err) == 0,
                  "%s", err.msg);
    GenOpts o = gen_opts_default();
    o.kind = SAMPLER_DDIM;
    o.steps = 3;
    int32_t y[2] = {8, 8};
    size_t per = generator_image_floats(&g);
    float *x = calloc(2 * per, sizeof(float));
    generator_noise(&g, x, 5, 0, 2);
    ck_assert_msg(generator_run(&g, &o, x, y, 2, 5, 0, NULL, NULL, &err) == 0, "%s", err.msg);
    const char *files[3] = {dir_path("b1.npy"), dir_path("b2.npy"), dir_path("b3.npy")};
    const int blocks[3] = {2, 2, 3}, heads[3] = {1, -1, 0};
    const float as[3] = {1.0f, 2.0f, exp2f(1.125f)};
    for (int k = 0; k < 3; k++) {
        int L;
        float *shown = load_row(files[k], &L), want[1024];
        ck_assert_int_eq(L, 64);
        ck_assert_int_eq(net_attn_row(g.net, want, blocks[k], heads[k], 1, 5 * 8 + 2, as[k], &err), 0);
        double e = tu_nerr(shown, want, L, 1e-6);
        ck_assert_msg(e < 1e-4, "%s: the viewer's row differs from the library's by %.3g (normalised)", files[k], e);
        free(shown);
    }
    free(x);
    generator_close(&g);

    // the screenshot: the map (right half of the image area) is drawn and not blank
    uint8_t *shot;
    int sw, sh;
    load_rgb(dir_path("attn.png"), &shot, &sw, &sh);
    const int panel = 420, half = (sw - panel) / 2;
    ck_assert_msg(variance(shot, half - 24, 200, sw * 3, panel + half + 12, 100) > 100, "the attention map is blank");
    free(shot);
    free(log);
}
END_TEST

// MALA without RoPE: the shown rows sum to 1 (docs/design.md §1) at every a, and a larger a sharpens them
// (a wider spread of scores). A linear-attention model's rows do not change with a at all.
START_TEST(attention_slider_mala_vs_linear) {
    if (skip_without_display("attention_slider_mala_vs_linear")) return;
    char *mala_flags[] = {"--rope", "0", NULL}, *lin_flags[] = {"--attn", "linear", NULL};
    const char *models[2] = {train_model("norope", "DiT-T/4", mala_flags), train_model("linear", "DiT-T/4", lin_flags)};
    const float scales[3] = {0.25f, 1.0f, 8.0f};
    for (int m = 0; m < 2; m++) {
        char script[2048], f[3][512];
        for (int k = 0; k < 3; k++) snprintf(f[k], sizeof f[k], "%s", dir_path(k == 0 ? "s0.npy" : k == 1 ? "s1.npy" : "s2.npy"));
        snprintf(script, sizeof script,
                 "attn=on;steps=2;n=1;generate;wait;query=1,6;block=1;head=mean;scale=0.25;attn_dump=%s;scale=1;"
                 "attn_dump=%s;scale=8;attn_dump=%s;head=0;quit", f[0], f[1], f[2]);
        assert_ran(run_view_model(models[m], script, NULL, dir_path("slider.log")), 0, dir_path("slider.log"));
        char *log = read_text(dir_path("slider.log"));
        ck_assert_msg(strstr(log, m == 0 ? "view: attention mala" : "view: attention linear"), "%s", log);
        free(log);
        float *r[3];
        int L;
        for (int k = 0; k < 3; k++) r[k] = load_row(f[k], &L);
        if (m == 0) {
            for (int k = 0; k < 3; k++)
                ck_assert_msg(fabs(row_sum(r[k], L) - 1.0) < 1e-4, "MALA a=%g: the row sums to %.6f", scales[k],
                              row_sum(r[k], L));
            for (int k = 1; k < 3; k++)
                ck_assert_msg(row_spread(r[k], L) > 1.5 * row_spread(r[k - 1], L),
                              "MALA: a=%g spread %.4g is not sharper than a=%g's %.4g", scales[k], row_spread(r[k], L),
                              scales[k - 1], row_spread(r[k - 1], L));
        } else {
            for (int k = 0; k < 3; k += 2)
                for (int j = 0; j < L; j++)
                    ck_assert_msg(fabsf(r[k][j] - r[1][j]) <= 1e-5f * fabsf(r[1][j]) + 1e-9f,
                                  "linear: a=%g changed token %d from %.8g to %.8g", scales[k], j, r[1][j], r[k][j]);
        }
        for (int k = 0; k < 3; k++) free(r[k]);
    }
}
END_TEST

// DiG has no attention rows: the view says so, and attn_dump fails with the reason.
START_TEST(attention_view_dig) {
    if (skip_without_display("attention_view_dig")) return;
    const char *model = train_model("dig", "DiG-T/4", NULL);
    assert_ran(run_view_model(model, "attn=on;steps=1;n=1;generate;wait;attn_dump=x.npy;quit", NULL, dir_path("dig.log")), 1,
               dir_path("dig.log"));
    char *log = read_text(dir_path("dig.log"));
    ck_assert_msg(strstr(log, "attn_dump=x.npy: no attention rows: backbone dig"), "%s", log);
    free(log);
}
END_TEST

// At the default window size no text is cut with ".." or runs past its area (the model line, the
// sampler buttons, a DiG model's "no attention rows" explanation beside its grid: wrapped; two
// models with attention on and a dropped input), as the screenshot line reports; without a display
// the one error line is all that is printed.
START_TEST(text_fits) {
    assert_model();
    char *saved[3];
    const char *vars[3] = {"DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR"};
    for (int i = 0; i < 3; i++) {
        saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
        unsetenv(vars[i]);
    }
    char *bare[] = {(char *)mala_bin(), "view", "--ckpt", g_model, "--script", "quit", NULL};
    int rc = run(bare, dir_path("nodisplay.log"), 1);
    for (int i = 0; i < 3; i++)
        if (saved[i]) { setenv(vars[i], saved[i], 1); free(saved[i]); }
    char *log = read_text(dir_path("nodisplay.log"));
    const char *nl = strchr(log, '\n');
    ck_assert_msg(rc == 1 && !strncmp(log, "error: no display", 17) && nl && !nl[1],
                  "without a display: exit %d, expected one error line:\n%s", rc, log);
    free(log);

    if (skip_without_display("text_fits")) return;
    const char *models[2] = {BUNDLED, train_model("dig", "DiG-T/4", NULL)};
    for (int m = 0; m < 2; m++) {
        char *argv[] = {"timeout", "180", (char *)mala_bin(), "view", "--ckpt", (char *)models[m], "--threads", "1",
                        "--script", "attn=on;steps=1;n=1;generate;wait;quit",
                        "--screenshot", (char *)dir_path("fit.png"), NULL};
        assert_ran(run(argv, dir_path("fit.log"), 1), 0, dir_path("fit.log"));
        log = read_text(dir_path("fit.log"));
        ck_assert_msg(strstr(log, "scale") && strstr(log, ", 0 texts cut\n"), "%s: texts cut at the default size:\n%s",
                      models[m], log);
        free(log);
    }
    // two models side by side with attention on (the column headers, the map statistics, DiG's
    // explanation in a half-height area), then after a drop of a grid PNG (the input column, the
    // status line naming the cell and the settings restored)
    char script[2048];
    snprintf(script, sizeof script, "attn=on;steps=1;n=4;generate;wait;save=%s;drop=%s;quit", dir_path("fit_in.png"),
             dir_path("fit_in.png"));
    char *two[] = {"timeout", "180", (char *)mala_bin(), "view", "--ckpt", BUNDLED, "--ckpt", (char *)models[1],
                   "--threads", "1", "--script", script, "--screenshot", (char *)dir_path("fit2.png"), NULL};
    assert_ran(run(two, dir_path("fit2.log"), 1), 0, dir_path("fit2.log"));
    log = read_text(dir_path("fit2.log"));
    ck_assert_msg(strstr(log, "scale") && strstr(log, ", 0 texts cut\n"), "two models: texts cut at the default size:\n%s",
                  log);
    free(log);
}
END_TEST

// ---- two models side by side, saving one image, the settings file ----

// "view: pane P NAME image WxH at X,Y scale S, map WxH at X,Y" for pane p.
static void pane_rect(const char *log, int p, int *iw, int *ih, int *ix, int *iy, int *scale) {
    char key[32];
    snprintf(key, sizeof key, "view: pane %d ", p);
    for (const char *line = strstr(log, key); line; line = strstr(line + 1, key))
        if (sscanf(line, "view: pane %*d %*s image %dx%d at %d,%d scale %d", iw, ih, ix, iy, scale) == 5) return;
    ck_abort_msg("no position of pane %d in: %s", p, log);
}

// The screen region (iw x ih at ix, iy; nearest scaling by `scale`) shows the saved grid exactly,
// but for the query token's outline (the viewer's green, 120 210 140).
static void assert_shows(const uint8_t *shot, int sw, const char *grid_png, int iw, int ih, int ix, int iy, int scale) {
    uint8_t *grid;
    int gw, gh;
    load_rgb(grid_png, &grid, &gw, &gh);
    ck_assert_msg(scale >= 1 && iw == gw * scale && ih == gh * scale, "%s: %dx%d shown %dx%d at scale %d", grid_png, gw,
                  gh, iw, ih, scale);
    ck_assert_msg(variance(shot, iw, ih, sw * 3, ix, iy) > 0, "the grid of %s is blank on screen", grid_png);
    long differ = 0, outline = 0;
    static const uint8_t green[3] = {120, 210, 140};
    for (int y = 0; y < ih; y++)
        for (int x = 0; x < iw; x++) {
            const uint8_t *px = shot + ((size_t)(iy + y) * sw + ix + x) * 3;
            if (!memcmp(px, green, 3)) outline++;
            else differ += memcmp(px, grid + ((size_t)(y / scale) * gw + x / scale) * 3, 3) != 0;
        }
    ck_assert_msg(differ == 0, "%ld screen pixels differ from %s", differ, grid_png);
    ck_assert_msg(outline < iw * ih / 50, "%ld outline pixels on %s", outline, grid_png);
    free(grid);
}

// The bundled MALA model beside a softmax model of another image size (16x16: a 4x4 token grid
// against 8x8): both generate from the same settings, both grids are on screen, and one click
// (here query=) gives both maps, each at the same spot of its own grid.
START_TEST(side_by_side) {
    if (skip_without_display("side_by_side")) return;
    ck_assert_msg(access(BUNDLED, R_OK) == 0, "no bundled model %s", BUNDLED);
    // a folder of two classes of 16x16 RGB images: a model of another size, channels and classes
    char root[600];
    snprintf(root, sizeof root, "%s/img16", g_dir);
    mkdir(root, 0755);
    for (int c = 0; c < 2; c++) {
        char dir[700];
        snprintf(dir, sizeof dir, "%s/%c", root, 'a' + c);
        mkdir(dir, 0755);
        for (int i = 0; i < 4; i++) {
            uint8_t px[16 * 16 * 3];
            for (int j = 0; j < (int)sizeof px; j++) px[j] = (uint8_t)((j * 37 + i * 101 + c * 59) & 255);
            char file[800];
            MalaErr err;
            snprintf(file, sizeof file, "%s/%d.png", dir, i);
            ck_assert_msg(image_write_png(file, px, 16, 16, 3, &err) == 0, "%s", err.msg);
        }
    }
    char *sm_flags[] = {"--data", root, "--image-size", "16", "--attn", "softmax", NULL};
    const char *softmax = train_model("softmax16", "DiT-T/4", sm_flags);
    char script[2048];
    snprintf(script, sizeof script,
             "attn=on;class=1;steps=2;n=4;seed=5;generate;wait;query=2,5,1;attn_dump=%s;pane=1;attn_dump=%s;save=%s;"
             "pane=0;save=%s;quit", dir_path("sa.npy"), dir_path("sb.npy"), dir_path("gb.png"), dir_path("ga.png"));
    char *flags[] = {"--ckpt", BUNDLED, "--ckpt", (char *)softmax, NULL};
    assert_ran(run_view_flags(flags, script, dir_path("side.png"), dir_path("side.log")), 0, dir_path("side.log"));
    char *log = read_text(dir_path("side.log"));
    ck_assert_msg(strstr(log, "view: pane 0 mala-dit-fmnist.safetensors: generated 4 x Trouser (DDIM 2 steps, cfg 4.0, eta 0.0, seed 5)"),
                  "%s", log);
    ck_assert_msg(strstr(log, "view: pane 1 0000001.safetensors: generated 4 x b (DDIM 2 steps, cfg 4.0, eta 0.0, seed 5)"),
                  "%s", log);
    // the same point: token (2,5) of 8x8 on the left, (1,2) = 9 of 4x4 on the right
    ck_assert_msg(strstr(log, "view: attention (pane 0) mala block 2/4  head mean a 1.0000 image 1 query 42 (2,5)"), "%s", log);
    ck_assert_msg(strstr(log, "view: attention (pane 1) softmax block 2/4  head mean a 1.0000 image 1 query 9 (1,2)"), "%s", log);
    int L;
    float *rb = load_row(dir_path("sb.npy"), &L);
    ck_assert_int_eq(L, 16);
    ck_assert_msg(fabs(row_sum(rb, L) - 1.0) < 1e-4, "softmax row sums to %.6f", row_sum(rb, L));
    free(rb);
    float *ra = load_row(dir_path("sa.npy"), &L);
    ck_assert_int_eq(L, 64);
    free(ra);

    uint8_t *shot;
    int sw, sh, r[2][5];
    load_rgb(dir_path("side.png"), &shot, &sw, &sh);
    for (int p = 0; p < 2; p++) {
        pane_rect(log, p, &r[p][0], &r[p][1], &r[p][2], &r[p][3], &r[p][4]);
        char key[32];
        snprintf(key, sizeof key, "view: pane %d ", p);
        int mw = 0, mh = 0, mx = 0, my = 0;
        for (const char *l = strstr(log, key); l; l = strstr(l + 1, key)) {
            const char *m = strstr(l, ", map ");
            if (m && sscanf(m, ", map %dx%d at %d,%d", &mw, &mh, &mx, &my) == 4) break;
        }
        ck_assert_msg(mw > 0 && mh > 0 && mx + mw <= sw && my + mh <= sh, "pane %d map %dx%d at %d,%d", p, mw, mh, mx, my);
        ck_assert_msg(variance(shot, mw, mh, sw * 3, mx, my) > 100, "the attention map of pane %d is blank", p);
    }
    ck_assert_msg(r[0][2] + r[0][0] <= r[1][2], "the grids overlap: pane 0 ends at x %d, pane 1 starts at %d",
                  r[0][2] + r[0][0], r[1][2]);
    assert_shows(shot, sw, dir_path("ga.png"), r[0][0], r[0][1], r[0][2], r[0][3], r[0][4]);
    assert_shows(shot, sw, dir_path("gb.png"), r[1][0], r[1][1], r[1][2], r[1][3], r[1][4]);
    uint8_t *gb;
    int gbw, gbh;
    load_rgb(dir_path("gb.png"), &gb, &gbw, &gbh);
    ck_assert_msg(gbw == 2 * (16 + 2) + 2 && gbh == gbw, "the 16x16 model's grid is %dx%d", gbw, gbh);
    free(gb);
    free(shot);
    free(log);
    // a class only one model knows is refused, saying which
    ck_assert_int_eq(run_view_flags(flags, "class=Bag;generate;quit", NULL, dir_path("side2.log")), 1);
    log = read_text(dir_path("side2.log"));
    ck_assert_msg(strstr(log, "generate: class 8 is not one of the 2 classes of 0000001.safetensors"), "%s", log);
    free(log);
}
END_TEST

// DiG beside MALA: DiG's pane says it has no rows, MALA's map still works; Tab-style switching
// (next_model) loads the next file of --models DIR without a restart.
START_TEST(side_by_side_dig_and_switch) {
    if (skip_without_display("side_by_side_dig_and_switch")) return;
    const char *dig = train_model("dig", "DiG-T/4", NULL);
    char dir[600], link1[700], link2[700], link3[700];
    snprintf(dir, sizeof dir, "%s/models", g_dir);
    mkdir(dir, 0755);
    snprintf(link1, sizeof link1, "%s/a_dig.safetensors", dir);
    snprintf(link2, sizeof link2, "%s/b_mala.safetensors", dir);
    snprintf(link3, sizeof link3, "%s/c_dit.safetensors", dir);
    ck_assert(symlink(dig, link1) == 0 || access(link1, R_OK) == 0);
    ck_assert(symlink(g_model, link2) == 0 || access(link2, R_OK) == 0);
    char cwd[512];
    ck_assert(getcwd(cwd, sizeof cwd) != NULL);
    char bundled[1024];
    snprintf(bundled, sizeof bundled, "%s/%s", cwd, BUNDLED);
    ck_assert(symlink(bundled, link3) == 0 || access(link3, R_OK) == 0);
    char script[2048];
    snprintf(script, sizeof script, "attn=on;steps=1;n=1;generate;wait;pane=1;attn_dump=%s;pane=0;attn_dump=%s;quit",
             dir_path("d1.npy"), dir_path("d0.npy"));
    char *flags[] = {"--models", dir, NULL};
    ck_assert_int_eq(run_view_flags(flags, script, NULL, dir_path("dig2.log")), 1);
    char *log = read_text(dir_path("dig2.log"));
    ck_assert_msg(strstr(log, "view: attention view: click the image to pick a query token (backbone dig"), "%s", log);
    ck_assert_msg(strstr(log, "view: attention (pane 1) mala"), "%s", log);
    ck_assert_msg(strstr(log, "attn_dump=") && strstr(log, "no attention rows: backbone dig"), "%s", log);
    free(log);
    // pane 1 moves on from b_mala to c_dit (the bundled model), then on again past a_dig (pane
    // 0's) back to b_mala
    snprintf(script, sizeof script, "steps=1;n=1;next_model;generate;wait;next_model=1;generate;wait;quit");
    assert_ran(run_view_flags(flags, script, NULL, dir_path("switch.log")), 0, dir_path("switch.log"));
    log = read_text(dir_path("switch.log"));
    const char *a = strstr(log, "now shows "), *b = a ? strstr(a + 1, "now shows ") : NULL;
    ck_assert_msg(a && strstr(a, "c_dit.safetensors") && b && strstr(b, "b_mala.safetensors"), "%s", log);
    ck_assert_msg(strstr(log, "view: pane 1 c_dit.safetensors: generated 1 x"), "%s", log);
    ck_assert_msg(strstr(log, "view: pane 1 b_mala.safetensors: generated 1 x"), "%s", log);
    free(log);
}
END_TEST

// One image of the grid, to a new numbered file every time; an explicit name is taken as given.
START_TEST(save_one_image) {
    if (skip_without_display("save_one_image")) return;
    assert_model();
    char dir[600], script[2048];
    snprintf(dir, sizeof dir, "%s/one", g_dir);
    mkdir(dir, 0755);
    snprintf(script, sizeof script, "class=Bag;steps=2;n=4;seed=7;generate;wait;save=%s;save_one=2;save_one=2;"
             "save_one=3,%s;key=i;quit", dir_path("grid4.png"), dir_path("three.png"));
    char *flags[] = {"--ckpt", g_model, "--save-dir", dir, NULL};
    assert_ran(run_view_flags(flags, script, NULL, dir_path("one.log")), 0, dir_path("one.log"));
    char first[700], second[700];
    snprintf(first, sizeof first, "%s/mala_Bag_seed7_img2.png", dir);
    snprintf(second, sizeof second, "%s/mala_Bag_seed7_img2_2.png", dir);
    uint8_t *grid, *a, *b, *c = NULL;
    int gw, gh, w, h;
    load_rgb(dir_path("grid4.png"), &grid, &gw, &gh);
    load_rgb(first, &a, &w, &h);
    ck_assert_msg(w == S_IMG && h == S_IMG, "%s is %dx%d, the model's images %dx%d", first, w, h, S_IMG, S_IMG);
    load_rgb(second, &b, &w, &h);
    ck_assert_msg(w == S_IMG && h == S_IMG && !memcmp(a, b, (size_t)w * h * 3), "%s differs from %s", second, first);
    char *params = png_params(first);
    ck_assert_msg(strstr(params, "Bag\nSteps: 2, ") == params && strstr(params, ", Seed: 7, ") &&
                  strstr(params, ", Class: 8, Seed index: 2, "), "%s", params);
    free(params);
    // image 2 sits at column 0, row 1 of the 2x2 grid; image 3 at column 1, row 1
    for (int k = 2; k <= 3; k++) {
        const uint8_t *img = k == 2 ? a : NULL;
        if (k == 3) {
            load_rgb(dir_path("three.png"), &c, &w, &h);
            ck_assert(w == S_IMG && h == S_IMG);
            img = c;
        }
        int x0 = 2 + (k % 2) * (S_IMG + 2), y0 = 2 + (k / 2) * (S_IMG + 2);
        for (int y = 0; y < S_IMG; y++)
            ck_assert_msg(!memcmp(img + (size_t)y * S_IMG * 3, grid + ((size_t)(y0 + y) * gw + x0) * 3, S_IMG * 3),
                          "image %d row %d differs from the grid", k, y);
    }
    free(grid);
    free(a);
    free(b);
    free(c);
    char *log = read_text(dir_path("one.log"));
    ck_assert_msg(strstr(log, "(image 2 of pane 0, 32x32)"), "%s", log);
    free(log);
    // the I key (pointer off the grid): the attention view's image, 0, under a new name
    char key_file[700];
    snprintf(key_file, sizeof key_file, "%s/mala_Bag_seed7_img0.png", dir);
    ck_assert_msg(access(key_file, R_OK) == 0, "the I key did not write %s", key_file);
}
END_TEST

// The settings file: written when the viewer closes, read when it opens; a corrupt one is
// ignored with one warning and left as it is; the default path follows XDG_CONFIG_HOME.
START_TEST(settings_round_trip) {
    if (skip_without_display("settings_round_trip")) return;
    assert_model();
    char ini[600];
    snprintf(ini, sizeof ini, "%s", dir_path("conf/mala/viewer.ini"));
    char *flags[] = {"--ckpt", g_model, "--config", (char *)ini, NULL};
    assert_ran(run_view_flags(flags, "class=Bag;cfg=3;steps=3;sampler=ddpm;eta=0.5;seed=42;n=2;attn=on;block=1;head=0;"
                              "scale=2;quit", NULL, dir_path("set1.log")), 0, dir_path("set1.log"));
    char *text = read_text(ini);
    const char *want[] = {"class=Bag\n", "cfg=3\n", "steps=3\n", "sampler=ddpm\n", "eta=0.5\n", "seed=42\n",
                          "seed_mode=fixed\n", "images=2\n", "attn=on\n", "block=1\n", "head=0\n", "scale=2\n"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) ck_assert_msg(strstr(text, want[i]), "no %s in:\n%s", want[i], text);
    free(text);
    // the model's own sampler and steps are not saved: another model starts from its own
    char ini0[600];
    snprintf(ini0, sizeof ini0, "%s", dir_path("conf/mala/viewer0.ini"));
    char *flags0[] = {"--ckpt", g_model, "--config", (char *)ini0, NULL};
    assert_ran(run_view_flags(flags0, "cfg=2;quit", NULL, dir_path("set0.log")), 0, dir_path("set0.log"));
    text = read_text(ini0);
    ck_assert_msg(strstr(text, "cfg=2\n") && !strstr(text, "sampler=") && !strstr(text, "steps="), "%s", text);
    free(text);
    // a second run starts from them: no setting in its script
    char script[1024];
    snprintf(script, sizeof script, "generate;wait;attn_dump=%s;quit", dir_path("set.npy"));
    assert_ran(run_view_flags(flags, script, NULL, dir_path("set2.log")), 0, dir_path("set2.log"));
    char *log = read_text(dir_path("set2.log"));
    ck_assert_msg(strstr(log, "generated 2 x Bag (DDPM 3 steps, cfg 3.0, eta 0.5, seed 42)"), "%s", log);
    ck_assert_msg(strstr(log, "view: attention mala block 1/"), "%s", log);
    ck_assert_msg(strstr(log, "head 0/") && strstr(log, " a 2.0000 "), "%s", log);
    free(log);
    // corrupt: one warning line, the defaults, the file untouched
    const char bad[] = "class=Bag\nsteps=many\n";
    FILE *f = fopen(ini, "w");
    ck_assert(f && fwrite(bad, 1, sizeof bad - 1, f) == sizeof bad - 1);
    fclose(f);
    assert_ran(run_view_flags(flags, "steps=1;n=1;generate;wait;quit", NULL, dir_path("set3.log")), 0, dir_path("set3.log"));
    log = read_text(dir_path("set3.log"));
    const char *w = strstr(log, "warning: ");
    ck_assert_msg(w && strstr(w, "viewer.ini: line 2: bad value 'steps'") && !strstr(w + 1, "warning: "), "%s", log);
    ck_assert_msg(strstr(log, "generated 1 x T-shirt/top (DDIM 1 steps"), "%s", log);
    free(log);
    text = read_text(ini);
    ck_assert_str_eq(text, bad);
    free(text);
    // --no-config: nothing read (the class stays the default)
    char *off[] = {"--ckpt", g_model, "--config", (char *)ini, "--no-config", NULL};
    assert_ran(run_view_flags(off, "quit", NULL, dir_path("set4.log")), 0, dir_path("set4.log"));
    log = read_text(dir_path("set4.log"));
    ck_assert_msg(!strstr(log, "warning"), "%s", log);
    free(log);
    // the default path
    char path[512], *old_xdg = getenv("XDG_CONFIG_HOME") ? strdup(getenv("XDG_CONFIG_HOME")) : NULL;
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("XDG_CONFIG_HOME", "/x/cfg", 1);
    ck_assert(view_settings_default_path(path, sizeof path) == 0);
    ck_assert_str_eq(path, "/x/cfg/mala/viewer.ini");
    unsetenv("XDG_CONFIG_HOME");
    setenv("HOME", "/home/u", 1);
    ck_assert(view_settings_default_path(path, sizeof path) == 0);
    ck_assert_str_eq(path, "/home/u/.config/mala/viewer.ini");
    if (old_xdg) setenv("XDG_CONFIG_HOME", old_xdg, 1);
    if (old_home) setenv("HOME", old_home, 1);
    else unsetenv("HOME");
    free(old_xdg);
    free(old_home);
}
END_TEST

// The parser alone (no display needed): every key, and refusals naming the line.
START_TEST(settings_parser) {
    const char good[] = "# c\n class = Ankle boot \r\ncfg=2.5\nsteps=20\nsampler=ddim\neta=0\nseed=18446744073709551615\n"
                        "seed_mode=random\nimages=16\nattn=off\nblock=0\nhead=mean\nscale=0.25\n\n";
    ViewSettings s, t;
    MalaErr err;
    ck_assert_msg(view_settings_parse(good, sizeof good - 1, "v.ini", &s, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(s.cls, "Ankle boot");
    ck_assert(s.cfg == 2.5f && s.steps == 20 && !strcmp(s.sampler, "ddim") && s.seed == UINT64_MAX && s.seed_random &&
              s.images == 16 && !s.attn && s.block == 0 && s.head == -1 && s.scale == 0.25f);
    char buf[1024];
    size_t n = view_settings_format(&s, buf, sizeof buf);
    ck_assert(n < sizeof buf && view_settings_parse(buf, n, "v.ini", &t, &err) == 0);
    ck_assert(!memcmp(&s, &t, sizeof s));
    const char *bad[][2] = {{"steps=0\n", "line 1: bad value 'steps'"}, {"x\n", "line 1: expected key=value"},
                            {"\nwho=1\n", "line 2: unknown key 'who'"}, {"scale=9\n", "bad value 'scale'"},
                            {"seed=-1\n", "bad value 'seed'"}, {"head=mean2\n", "bad value 'head'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert(view_settings_parse(bad[i][0], strlen(bad[i][0]), "v.ini", &s, &err) == -1);
        ck_assert_msg(strstr(err.msg, bad[i][1]) && !strncmp(err.msg, "v.ini: ", 7), "%s: %s", bad[i][0], err.msg);
    }
}
END_TEST


// Image-to-image, inpainting and class blends driven by script: strength 1 is plain
// generation pixel for pixel, a small strength stays near the input, inpainting keeps the
// unmasked pixels of the input exactly, the blend's endpoints are the two classes, and a dropped
// PNG gives its parameters back.
static double mean_abs_u8(const uint8_t *a, const uint8_t *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += abs(a[i] - b[i]);
    return s / n;
}

static int same_pixels(const char *pa, const char *pb) {
    uint8_t *a, *b;
    int aw, ah, bw, bh;
    load_rgb(pa, &a, &aw, &ah);
    load_rgb(pb, &b, &bw, &bh);
    int same = aw == bw && ah == bh && !memcmp(a, b, (size_t)aw * ah * 3);
    free(a);
    free(b);
    return same;
}

START_TEST(img2img_inpaint_blend) {
    if (skip_without_display("img2img_inpaint_blend")) return;
    assert_model();
    uint8_t in[S_IMG * S_IMG], mask[S_IMG * S_IMG];
    for (int i = 0; i < S_IMG * S_IMG; i++) {
        in[i] = (uint8_t)((i / S_IMG) % 8 < 4 ? 200 : 30);  // stripes
        mask[i] = i / S_IMG < S_IMG / 2 ? 255 : 0;        // the top half regenerated
    }
    MalaErr err;
    ck_assert(image_write_png(tp("in.png"), in, S_IMG, S_IMG, 1, &err) == 0);
    ck_assert(image_write_png(tp("mask.png"), mask, S_IMG, S_IMG, 1, &err) == 0);
    static const char *const names[] = {"i_plain.png", "in.png", "i_s1.png", "i_small.png", "mask.png", "i_inp.png",
                                        "i_paint.png", "i_b0.png", "i_b1.png", "i_sn.png", "i_inp.png"};
    char f[11][512], script[8192];  // tp() keeps 4 names at a time: copies
    for (int i = 0; i < 11; i++) snprintf(f[i], sizeof f[i], "%s", tp(names[i]));
    snprintf(script, sizeof script,
             "class=Bag;steps=4;sampler=ddim;n=1;seed=5;generate;wait;save=%s;"
             "init=%s;strength=1;generate;wait;save=%s;strength=0.05;generate;wait;save=%s;"
             "strength=1;mask=%s;generate;wait;save=%s;mask_clear;paint=4,28,2;erase=4,28,0;generate;wait;save=%s;"
             "init=off;blend=Sneaker,0;generate;wait;save=%s;blend=Sneaker,1;generate;wait;save=%s;"
             "blend=off;class=Sneaker;generate;wait;save=%s;use=0;strength=0.5;class=Bag;drop=%s;quit",
             f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10]);
    assert_ran(run_view(script, NULL, tp("i2i.log")), 0, tp("i2i.log"));
    ck_assert_msg(same_pixels(tp("i_plain.png"), tp("i_s1.png")), "strength 1 differs from plain generation");
    ck_assert_msg(same_pixels(tp("i_plain.png"), tp("i_b0.png")), "blend weight 0 is not the class itself");
    ck_assert_msg(same_pixels(tp("i_sn.png"), tp("i_b1.png")), "blend weight 1 is not class B");
    uint8_t *inrgb, *plain, *small, *inp;
    int w, h;
    load_rgb(tp("in.png"), &inrgb, &w, &h);
    load_rgb(tp("i_plain.png"), &plain, &w, &h);
    load_rgb(tp("i_small.png"), &small, &w, &h);
    load_rgb(tp("i_inp.png"), &inp, &w, &h);
    const size_t half = (size_t)S_IMG * S_IMG * 3 / 2;
    double d_small = mean_abs_u8(small, inrgb, 2 * half), d_plain = mean_abs_u8(plain, inrgb, 2 * half);
    ck_assert_msg(d_small < 2.0 && d_small < d_plain / 4, "strength 0.05: %.2f levels from the input (plain %.2f)",
                  d_small, d_plain);
    ck_assert_msg(!memcmp(inp + half, inrgb + half, half), "inpainting changed kept pixels");
    ck_assert_msg(mean_abs_u8(inp, inrgb, half) > 1.0, "inpainting left the masked half as it was");
    char *log = read_text(tp("i2i.log"));
    size_t log_len = strlen(log);  // the end of the log: check's messages are cut at a few KB
    ck_assert_msg(strstr(log, "settings restored") && !strstr(log, ", 0 settings restored"), "the drop: log of %zu bytes "
                  "ends: %s", log_len, log + (log_len > 1500 ? log_len - 1500 : 0));
    char *pa = png_params(tp("i_inp.png"));
    ck_assert_msg(strstr(pa, "Denoising strength: 1, Init image: viewer input, Mask: painted"), "%s", pa);
    free(pa);
    pa = png_params(tp("i_b1.png"));
    ck_assert_msg(strstr(pa, "Blend: \"8,7,1\""), "%s", pa);
    free(pa);
    free(log);
    free(inrgb);
    free(plain);
    free(small);
    free(inp);

    // the mouse: where the input is drawn, then a click there paints the mask (a disc of the brush)
    char s2[2048];
    snprintf(s2, sizeof s2, "init=%s;brush=3;n=1;quit", f[1]);
    assert_ran(run_view(s2, tp("in_shot.png"), tp("mouse1.log")), 0, tp("mouse1.log"));
    log = read_text(tp("mouse1.log"));
    const char *line = strstr(log, "view: input in.png ");
    int rw, rh, rx, ry, painted;
    ck_assert_msg(line && sscanf(line, "view: input in.png %dx%d at %d,%d, strength %*f, %d mask pixels", &rw, &rh, &rx,
                                 &ry, &painted) == 5 && rw > 0 && painted == 0, "%s", log);
    free(log);
    snprintf(s2, sizeof s2, "init=%s;brush=3;steps=2;n=1;screenshot=%s;click=%d,%d;generate;wait;quit", f[1],
             tp("drawn.png"), rx + rw / 2, ry + rh / 2);  // the screenshot waits until the input is on screen
    assert_ran(run_view(s2, tp("in_shot.png"), tp("mouse2.log")), 0, tp("mouse2.log"));
    log = read_text(tp("mouse2.log"));
    line = NULL;  // the last report: at the screenshot after the run
    for (const char *q = log; (q = strstr(q, "view: input in.png ")); q++) line = q;
    ck_assert_msg(strstr(log, "from the input at strength 0.75, inpainting") && line &&
                  sscanf(line, "view: input in.png %*dx%*d at %*d,%*d, strength %*f, %d mask pixels", &painted) == 1 &&
                  painted == 29, "a click should paint a disc of radius 3 (29 pixels):\n%s", log);
    free(log);
}
END_TEST

// A dropped grid PNG becomes one cell (the first here: the pointer is over no image), not a crop
// across cells: at strength 0.05 the output stays within a few levels of that cell.
START_TEST(drop_grid_takes_one_cell) {
    if (skip_without_display("drop_grid_takes_one_cell")) return;
    assert_model();
    char grid[512], out[512], script[2048];
    snprintf(grid, sizeof grid, "%s", dir_path("dg_grid.png"));
    snprintf(out, sizeof out, "%s", dir_path("dg_out.png"));
    snprintf(script, sizeof script, "class=Bag;steps=4;sampler=ddim;n=4;seed=7;generate;wait;save=%s;drop=%s;"
             "strength=0.05;n=1;generate;wait;save=%s;quit", grid, grid, out);
    assert_ran(run_view(script, NULL, dir_path("dg.log")), 0, dir_path("dg.log"));
    uint8_t *g, *o;
    int gw, gh, w, h;
    load_rgb(grid, &g, &gw, &gh);
    load_rgb(out, &o, &w, &h);
    ck_assert(w == S_IMG && h == S_IMG && gw >= 2 + S_IMG && gh >= 2 + S_IMG);
    uint8_t cell[S_IMG * S_IMG * 3];
    for (int y = 0; y < S_IMG; y++) memcpy(cell + (size_t)y * S_IMG * 3, g + ((size_t)(2 + y) * gw + 2) * 3, S_IMG * 3);
    double d = mean_abs_u8(o, cell, sizeof cell);
    ck_assert_msg(d < 2.0, "the output is %.2f levels from the grid's first cell", d);
    free(g);
    free(o);
}
END_TEST

// A latent model whose run recorded its VAE opens in the viewer without --vae, as in mala sample,
// and its saved PNG names that VAE.
START_TEST(latent_recorded_vae) {
    if (skip_without_display("latent_recorded_vae")) return;
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 1; c.dit.hidden = 32; c.dit.heads = 2; c.dit.patch = 2;
    c.image_size = 4; c.in_channels = 4; c.num_classes = 2; c.latent_scale = 0.18215f;
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    net_init_weights(m, 1);
    ClassNames cn;
    class_names_default(&cn, 2);
    const char *kv[] = {"run.vae", "tests/fixtures/vae_tiny.safetensors"};
    MalaErr err;
    const char *model = dir_path("lat_rec.safetensors");
    char path[600];
    snprintf(path, sizeof path, "%s", model);
    ck_assert_msg(ckpt_save_weights_meta(m, &cn, m->w, ST_F32, kv, 1, path, &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    net_free(m);
    char script[1024];
    snprintf(script, sizeof script, "n=1;steps=2;generate;wait;save=%s;quit", dir_path("lat_rec.png"));
    assert_ran(run_view_model(path, script, NULL, dir_path("lat_rec.log")), 0, dir_path("lat_rec.log"));
    char *params = png_params(dir_path("lat_rec.png"));
    ck_assert_msg(strstr(params, ", VAE: vae_tiny, "), "%s", params);
    ck_assert_msg(strstr(params, "Sampler: dpm++2m"), "a latent model's default sampler: %s", params);
    free(params);
}
END_TEST

// --weights online: a PyTorch training checkpoint's `model` weights in the viewer, as mala sample
// takes them; the same request on its `ema` weights gives other pixels, and again the same ones.
static char *view_weights_png(const char *weights, const char *name) {
    char script[1024], log[700];
    snprintf(script, sizeof script, "n=1;steps=2;seed=3;generate;wait;save=%s;quit", dir_path(name));
    snprintf(log, sizeof log, "%s.log", dir_path(name));
    char *flags[] = {"--ckpt", "tests/fixtures/torchzip_ckpt.pt", "--heads", "2", "--vae",
                     "tests/fixtures/vae_tiny.safetensors", "--weights", (char *)weights, NULL};
    assert_ran(run_view_flags(flags, script, NULL, log), 0, log);
    size_t n;
    char *png = tu_read_file(dir_path(name), &n);
    ck_assert_msg(png && n > 0, "%s was not saved", name);
    return png;
}

START_TEST(weights_online) {
    if (skip_without_display("weights_online")) return;
    char *ema = view_weights_png("ema", "w_ema.png"), *ema2 = view_weights_png("ema", "w_ema2.png"),
         *online = view_weights_png("online", "w_online.png");
    size_t n1, n2, n3;
    free(tu_read_file(dir_path("w_ema.png"), &n1));
    free(tu_read_file(dir_path("w_ema2.png"), &n2));
    free(tu_read_file(dir_path("w_online.png"), &n3));
    ck_assert_msg(n1 == n2 && !memcmp(ema, ema2, n1), "two runs on the ema weights differ");
    ck_assert_msg(n1 != n3 || memcmp(ema, online, n1), "--weights online showed the ema weights' image");
    free(ema);
    free(ema2);
    free(online);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("viewer");
    TCase *tc = tcase_create("viewer");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, fixture_setup, fixture_teardown);
    tcase_add_test(tc, generate_save_and_screenshot);
    tcase_add_test(tc, matches_mala_sample);
    tcase_add_test(tc, keys_preview_and_cancel);
    tcase_add_test(tc, script_errors);
    tcase_add_test(tc, attention_view_bundled);
    tcase_add_test(tc, attention_slider_mala_vs_linear);
    tcase_add_test(tc, attention_view_dig);
    tcase_add_test(tc, side_by_side);
    tcase_add_test(tc, side_by_side_dig_and_switch);
    tcase_add_test(tc, save_one_image);
    tcase_add_test(tc, settings_round_trip);
    tcase_add_test(tc, settings_parser);
    tcase_add_test(tc, text_fits);
    tcase_add_test(tc, img2img_inpaint_blend);
    tcase_add_test(tc, latent_recorded_vae);
    tcase_add_test(tc, weights_online);
    tcase_add_test(tc, drop_grid_takes_one_cell);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }

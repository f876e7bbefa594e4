// `mala view` (app/viewer_*.c, SDL2) driven through the binary with --script under Xvfb: the
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

#include "args.h"
#include "generate.h"
#include "image_io.h"
#include "npy.h"
#include "testutil.h"

#define S_IMG 32         // image side of the model the fixture trains (Fashion-MNIST, padded)
#define WIN_W 800
#define WIN_H 600
#define VIEW_MAX_IMAGES_TEST 16  // the viewer opens its generator for 16 images (app/viewer.h)

static char g_dir[] = "/tmp/mala_viewer_XXXXXX";
static char g_model[512];
static int g_have_xvfb;   // our Xvfb is running and DISPLAY points at it
static pid_t g_xvfb_pid;

static const char *mala_bin(void) { return getenv("MALA_BIN") ? getenv("MALA_BIN") : "./mala"; }

static const char *tp(const char *name) {
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
    int log = open(tp("xvfb.log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
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
    fprintf(stderr, "test_viewer: Xvfb did not start on any display (see %s)\n", tp("xvfb.log"));
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
                    "--sample-every", "0", "--threads", "1", "--out", (char *)tp("run"), NULL};
    if (run(argv, tp("train.log"), 0) != 0) fprintf(stderr, "test_viewer: making the model failed, see %s\n", tp("train.log"));
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
    ck_assert_msg(access(g_model, R_OK) == 0, "no model file %s (see %s)", g_model, tp("train.log"));
}

static void assert_ran(int rc, int want, const char *log) {
    if (rc == want) return;
    char *text = read_text(log);
    ck_abort_msg("mala view exited %d, expected %d (DISPLAY=%s, Xvfb log %s); its output:\n%s", rc, want,
                 getenv("DISPLAY") ? getenv("DISPLAY") : "(unset)", tp("xvfb.log"), text);
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
             "class=Sneaker;cfg=4;steps=5;sampler=ddim;n=4;seed=3;generate;wait;save=%s;quit", tp("out.png"));
    assert_ran(run_view(script, tp("shot.png"), tp("view.log")), 0, tp("view.log"));
    char *log = read_text(tp("view.log"));
    ck_assert_msg(strstr(log, "generated 4 x Sneaker (DDIM 5 steps, cfg 4.0"), "%s", log);

    // the saved grid: 4 images in 2 columns, as torchvision's make_grid(nrow=2) lays them out
    uint8_t *grid, *shot;
    int gw, gh, sw, sh, ew, eh;
    load_rgb(tp("out.png"), &grid, &gw, &gh);
    grid_size(4, 2, &ew, &eh);
    ck_assert_msg(gw == ew && gh == eh, "out.png is %dx%d, expected %dx%d", gw, gh, ew, eh);

    // the screenshot: the window's size; the image area shows the grid, scaled up crisply
    load_rgb(tp("shot.png"), &shot, &sw, &sh);
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
START_TEST(matches_mala_sample) {
    if (skip_without_display("matches_mala_sample")) return;
    assert_model();
    char script[1024];
    snprintf(script, sizeof script, "class=Bag;cfg=2.5;steps=4;sampler=ddpm;n=3;seed=11;generate;wait;save=%s;quit",
             tp("view3.png"));
    assert_ran(run_view(script, NULL, tp("view3.log")), 0, tp("view3.log"));
    char *argv[] = {(char *)mala_bin(), "sample", "--ckpt", g_model, "--class", "Bag", "--cfg-scale", "2.5", "--steps",
                    "4", "--sampler", "ddpm", "--n", "3", "--seed", "11", "--nrow", "2", "--threads", "1",
                    "--out", (char *)tp("sample3.png"), NULL};
    assert_ran(run(argv, tp("sample3.log"), 0), 0, tp("sample3.log"));
    uint8_t *a, *b;
    int aw, ah, bw, bh, ew, eh;
    load_rgb(tp("view3.png"), &a, &aw, &ah);
    load_rgb(tp("sample3.png"), &b, &bw, &bh);
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
}
END_TEST

// Keys go through the same path as a person's; a long run is cancelled while the window keeps
// drawing the live preview.
START_TEST(keys_preview_and_cancel) {
    if (skip_without_display("keys_preview_and_cancel")) return;
    assert_model();
    char script[1024];
    snprintf(script, sizeof script, "class=Sneaker;key=Right;steps=2;key=];n=2;key=M;key=Return;wait;"
             "sampler=ddim;steps=1000;n=4;generate;sleep=1;cancel;wait;size=900x650;screenshot=%s;quit", tp("big.png"));
    double t0 = now_seconds();
    assert_ran(run_view(script, NULL, tp("keys.log")), 0, tp("keys.log"));
    double dt = now_seconds() - t0;
    char *log = read_text(tp("keys.log"));
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
    load_rgb(tp("big.png"), &shot, &sw, &sh);
    ck_assert_msg(sw == 900 && sh == 650, "screenshot after resizing is %dx%d", sw, sh);
    free(shot);
    free(log);
}
END_TEST

START_TEST(script_errors) {
    assert_model();
    // refused while parsing, before any window: exit 2 without needing a display
    const char *bad[][2] = {{"generate;frobnicate;quit", "unknown command"},
                            {"steps=0", "expected an integer from 1 to 1000"},
                            {"n=17", "expected an integer from 1 to 16"},
                            {"sampler=euler", "expected sampler=ddpm|ddim|dpm++2m"},
                            {"key=NoSuchKey", "unknown key name"},
                            {"generate=3", "takes no value"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)mala_bin(), "view", "--ckpt", g_model, "--script", (char *)bad[i][0], NULL};
        int rc = run(argv, tp("err.log"), 1);
        char *log = read_text(tp("err.log"));
        ck_assert_msg(rc == 2 && strstr(log, bad[i][1]), "'%s': exit %d, output: %s", bad[i][0], rc, log);
        free(log);
    }
    char *missing[] = {(char *)mala_bin(), "view", "--ckpt", (char *)tp("none.safetensors"), NULL};
    int rc = run(missing, tp("err.log"), 1);
    char *log = read_text(tp("err.log"));
    ck_assert_msg(rc == 1 && strstr(log, "none.safetensors: cannot read the model file"), "exit %d: %s", rc, log);
    free(log);
    if (skip_without_display("script_errors (unknown class, save before a run)")) return;
    // class names are checked against the model once it is loaded: exit 1
    ck_assert_int_eq(run_view("class=Spaceship;generate;quit", NULL, tp("cls.log")), 1);
    log = read_text(tp("cls.log"));
    ck_assert_msg(strstr(log, "class=Spaceship: unknown class; the model knows: T-shirt/top"), "%s", log);
    free(log);
    ck_assert_int_eq(run_view("save=x.png;quit", NULL, tp("save.log")), 1);
    log = read_text(tp("save.log"));
    ck_assert_msg(strstr(log, "nothing to save yet"), "%s", log);
    free(log);
    // a file that is no model: the worker's error, exit 1
    char *argv[] = {"timeout", "180", (char *)mala_bin(), "view", "--ckpt", (char *)tp("train.log"),
                    "--script", "quit", NULL};
    ck_assert_int_eq(run(argv, tp("bad.log"), 1), 1);
    log = read_text(tp("bad.log"));
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
             tp("b1.npy"), tp("b2.npy"), tp("b3.npy"));
    assert_ran(run_view_model(BUNDLED, script, tp("attn.png"), tp("attn.log")), 0, tp("attn.log"));
    char *log = read_text(tp("attn.log"));
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
    const char *files[3] = {tp("b1.npy"), tp("b2.npy"), tp("b3.npy")};
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
    load_rgb(tp("attn.png"), &shot, &sw, &sh);
    const int panel = 420, half = (sw - panel) / 2;
    ck_assert_msg(variance(shot, half - 24, 200, sw * 3, panel + half + 12, 100) > 100, "the attention map is blank");
    free(shot);
    free(log);
}
END_TEST

// MALA without RoPE: the shown rows sum to 1 (DESIGN 1) at every a, and a larger a sharpens them
// (a wider spread of scores). A linear-attention model's rows do not change with a at all.
START_TEST(attention_slider_mala_vs_linear) {
    if (skip_without_display("attention_slider_mala_vs_linear")) return;
    char *mala_flags[] = {"--rope", "0", NULL}, *lin_flags[] = {"--attn", "linear", NULL};
    const char *models[2] = {train_model("norope", "DiT-T/4", mala_flags), train_model("linear", "DiT-T/4", lin_flags)};
    const float scales[3] = {0.25f, 1.0f, 8.0f};
    for (int m = 0; m < 2; m++) {
        char script[2048], f[3][512];
        for (int k = 0; k < 3; k++) snprintf(f[k], sizeof f[k], "%s", tp(k == 0 ? "s0.npy" : k == 1 ? "s1.npy" : "s2.npy"));
        snprintf(script, sizeof script,
                 "attn=on;steps=2;n=1;generate;wait;query=1,6;block=1;head=mean;scale=0.25;attn_dump=%s;scale=1;"
                 "attn_dump=%s;scale=8;attn_dump=%s;head=0;quit", f[0], f[1], f[2]);
        assert_ran(run_view_model(models[m], script, NULL, tp("slider.log")), 0, tp("slider.log"));
        char *log = read_text(tp("slider.log"));
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
    assert_ran(run_view_model(model, "attn=on;steps=1;n=1;generate;wait;attn_dump=x.npy;quit", NULL, tp("dig.log")), 1,
               tp("dig.log"));
    char *log = read_text(tp("dig.log"));
    ck_assert_msg(strstr(log, "attn_dump=x.npy: no attention rows: backbone dig"), "%s", log);
    free(log);
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }

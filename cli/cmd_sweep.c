// defines: cmd_eval_sweep
// `mala eval sweep`: FD / FID against the guidance scale (the FID-against-guidance figure of the
// DiT and MALA papers), optionally against steps and sampler, with class accuracy and
// precision/recall. Each point is one `mala eval fid --ckpt` child of this program (its own
// process: eval exits on errors) whose JSON line is kept in DIR/points/NAME.json; a point being
// sampled keeps its batches in DIR/points/NAME.partial (eval's --partial), so the same command run
// again skips the finished points and continues the one in progress. Then DIR/sweep.jsonl (the
// points' JSON lines in order), DIR/sweep.md (a table) and DIR/sweep.png (the metric against the
// guidance scale, one line per sampler and step count).
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "cli/commands.h"
#include "formats/json.h"
#include "eval/line_plot.h"
#include "sampler/sampler.h"

#define SWEEP_MAX 64  // values per list

typedef struct {
    char sampler[16];
    int steps;
    double w;
    char name[64];
    char *line;    // the eval JSON line
    JsonValue *r;  // parsed
} Point;

// "a,b,c" into items[] (copied); returns the count, or -1 when empty or too long.
static int split_list(const char *s, char items[][32], int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        size_t k = strcspn(p, ",");
        if (!k || k >= 32 || n == max) return -1;
        memcpy(items[n], p, k);
        items[n++][k] = 0;
        p += k + (p[k] == ',');
        if (p[-1] == ',' && !*p) return -1;
    }
    return n ? n : -1;
}

static int is_number(const char *s, double lo, double hi) {
    char *end;
    double v = strtod(s, &end);
    return end != s && !*end && v >= lo && v <= hi;
}

// Runs `mala eval fid ...` with stdout into out and stderr into log; its exit status.
static int run_child(char **argv, const char *out, const char *log) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) FATAL("eval sweep: fork failed: %s", strerror(errno));
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fl = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fl < 0) _exit(127);
        dup2(fo, 1);
        dup2(fl, 2);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// The last line of a file starting with '{' that parses, into p; 0 when there is none.
static int last_json(const char *path, Point *p) {
    FILE *f = fopen(path, "r");
    char line[16384], last[16384] = "";
    while (f && fgets(line, sizeof line, f))
        if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
    if (f) fclose(f);
    MalaErr err;
    size_t l = strlen(last);
    while (l && (last[l - 1] == '\n' || last[l - 1] == '\r')) last[--l] = 0;
    if (!l || !(p->r = json_parse(last, l, &err))) return 0;
    p->line = xstrdup(last);
    return 1;
}

static double num(const JsonValue *o, const char *key) {
    const JsonValue *v = o ? json_get(o, key) : NULL;
    return v && v->type == JSON_NUMBER ? v->number : NAN;
}

typedef struct {
    const char *ckpt, *ref, *out, *features, *classifier, *inception, *device, *precision, *vae, *cfg_channels,
        *cfg_interval, *label_mode, *scales, *steps, *samplers;
    int num, batch, sample_batch, splits, threads;
    unsigned long long seed;
} SweepArgs;

// The eval child's argv for point p (strings kept in buf).
static void point_argv(const SweepArgs *a, const Point *p, const char *partial, char **argv, char buf[][64]) {
    int n = 0, b = 0;
#define ARG(s) (argv[n++] = (char *)(s))
#define FMT(...) (snprintf(buf[b], 64, __VA_ARGS__), argv[n++] = buf[b++])
    ARG("mala"); ARG("eval"); ARG("fid");
    ARG("--ckpt"); ARG(a->ckpt); ARG("--ref"); ARG(a->ref);
    ARG("--sampler"); ARG(p->sampler); ARG("--steps"); FMT("%d", p->steps); ARG("--cfg-scale"); FMT("%.9g", p->w);
    ARG("--num"); FMT("%d", a->num); ARG("--seed"); FMT("%llu", a->seed); ARG("--partial"); ARG(partial);
    ARG("--batch"); FMT("%d", a->batch); ARG("--splits"); FMT("%d", a->splits); ARG("--threads"); FMT("%d", a->threads);
    if (a->sample_batch) { ARG("--sample-batch"); FMT("%d", a->sample_batch); }
    const char *pass[][2] = {{"--features", a->features}, {"--classifier", a->classifier},
                             {"--inception", a->inception}, {"--device", a->device}, {"--precision", a->precision},
                             {"--vae", a->vae}, {"--cfg-channels", a->cfg_channels},
                             {"--cfg-interval", a->cfg_interval}, {"--label-mode", a->label_mode}};
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++)
        if (pass[i][1]) { ARG(pass[i][0]); ARG(pass[i][1]); }
    argv[n] = NULL;
#undef ARG
#undef FMT
}

// A point's result: kept from an earlier run, or computed now (exits when the child fails).
static void point_result(const SweepArgs *a, Point *p, int *kept) {
    char res[4200], out[4300], log[4300], partial[4300];
    snprintf(res, sizeof res, "%s/points/%s.json", a->out, p->name);
    if (last_json(res, p)) { (*kept)++; return; }
    snprintf(out, sizeof out, "%s/points/%s.out", a->out, p->name);
    snprintf(log, sizeof log, "%s/points/%s.log", a->out, p->name);
    snprintf(partial, sizeof partial, "%s/points/%s.partial", a->out, p->name);
    char *argv[64], buf[16][64];
    point_argv(a, p, partial, argv, buf);
    int rc = run_child(argv, out, log);
    if (rc || !last_json(out, p)) FATAL("eval sweep: point %s failed (exit %d): see %s", p->name, rc, log);
    if (rename(out, res)) FATAL("eval sweep: %s: %s", res, strerror(errno));
}

static void write_outputs(const SweepArgs *a, Point *pts, int np, const char *key) {
    MalaErr err;
    char path[4200];
    JsonBuf jl = {0}, md = {0};
    json_buf_printf(&md, "# eval sweep: %s\n\nModel %s, reference %s, %d images per point, seed %llu.\n\n"
                    "| sampler | steps | cfg scale | %s | class acc | precision | recall |\n"
                    "|---|---|---|---|---|---|---|\n", key, a->ckpt, a->ref, a->num, a->seed, key);
    for (int i = 0; i < np; i++) {
        json_buf_printf(&jl, "%s\n", pts[i].line);
        double v[4] = {num(pts[i].r, key), num(pts[i].r, "class_acc"), num(pts[i].r, "precision"),
                       num(pts[i].r, "recall")};
        json_buf_printf(&md, "| %s | %d | %g |", pts[i].sampler, pts[i].steps, pts[i].w);
        for (int k = 0; k < 4; k++) json_buf_printf(&md, isnan(v[k]) ? " - |" : " %.4f |", v[k]);
        json_buf_puts(&md, "\n");
    }
    // why class accuracy is absent (mala eval fid's "no_class_acc": the model's classes are not the
    // classifier's), once below the table
    for (int i = 0; i < np; i++) {
        const JsonValue *why = pts[i].r ? json_get(pts[i].r, "no_class_acc") : NULL;
        if (why && why->type == JSON_STRING) {
            json_buf_printf(&md, "\nNo class accuracy: %s.\n", why->str);
            break;
        }
    }
    snprintf(path, sizeof path, "%s/sweep.jsonl", a->out);
    if (atomic_write_file(path, jl.buf, jl.len, &err)) FATAL("%s", err.msg);
    snprintf(path, sizeof path, "%s/sweep.md", a->out);
    if (atomic_write_file(path, md.buf, md.len, &err)) FATAL("%s", err.msg);
    json_buf_free(&jl);
    json_buf_free(&md);
    // one series per (sampler, steps): the points are ordered sampler, steps, scale
    PlotSeries ser[SWEEP_MAX];
    double *x = xmalloc((size_t)np * sizeof *x), *y = xmalloc((size_t)np * sizeof *y);
    char names[SWEEP_MAX][48];
    int ns = 0;
    for (int i = 0; i < np; i++) {
        x[i] = pts[i].w;
        y[i] = num(pts[i].r, key);
        if (!i || strcmp(pts[i].sampler, pts[i - 1].sampler) || pts[i].steps != pts[i - 1].steps) {
            if (ns == SWEEP_MAX) break;
            snprintf(names[ns], sizeof names[ns], "%s %d steps", pts[i].sampler, pts[i].steps);
            ser[ns++] = (PlotSeries){names[ns - 1], x + i, y + i, 0};
        }
        ser[ns - 1].n++;
    }
    char title[128], ylabel[64];
    snprintf(title, sizeof title, "%s against guidance (%d images)", key, a->num);
    snprintf(ylabel, sizeof ylabel, "%s", key);
    PlotStyle style = {title, "cfg scale", ylabel, 0};
    snprintf(path, sizeof path, "%s/sweep.png", a->out);
    if (line_plot_png(path, ser, ns, &style, &err)) FATAL("%s", err.msg);
    free(x);
    free(y);
}

int cmd_eval_sweep(int argc, char **argv) {
    SweepArgs a = {.scales = "1,1.5,2,3,4", .steps = "50", .samplers = "ddim", .num = 1000, .batch = 50,
                   .splits = 10, .threads = 0};
    Opt opts[] = {
        {"--ckpt", OPT_STR, &a.ckpt, "FILE", "the model (default: the bundled one)"},
        {"--ref", OPT_STR, &a.ref, "PATH", "reference statistics or images (as eval fid --ref)"},
        {"--out", OPT_STR, &a.out, "DIR", "points/, sweep.jsonl, sweep.md, sweep.png (run again to continue)"},
        {"--cfg-scale", OPT_STR, &a.scales, "W,W,...", "guidance scales (default 1,1.5,2,3,4)"},
        {"--steps", OPT_STR, &a.steps, "N,N,...", "sampling steps (default 50)"},
        {"--sampler", OPT_STR, &a.samplers, "S,S,...", "samplers (default ddim)"},
        {"--num", OPT_INT, &a.num, "N", "images per point (default 1000)", ARG_MIN(2)},
        {"--seed", OPT_U64, &a.seed, "S", "noise seed of every point"},
        {"--features", OPT_STR, &a.features, "inception|fmnist", "as eval fid"},
        {"--classifier", OPT_STR, &a.classifier, "FILE", "as eval fid"},
        {"--inception", OPT_STR, &a.inception, "FILE", "as eval fid"},
        {"--batch", OPT_INT, &a.batch, "N", "feature network batch", ARG_MIN(1)},
        {"--sample-batch", OPT_INT, &a.sample_batch, "B", "images per sampling batch", ARG_MIN(1)},
        {"--splits", OPT_INT, &a.splits, "N", "IS splits", ARG_MIN(1)},
        {"--cfg-channels", OPT_STR, &a.cfg_channels, "N|all", "as eval fid"},
        {"--cfg-interval", OPT_STR, &a.cfg_interval, "LO,HI|none", "as eval fid"},
        {"--label-mode", OPT_STR, &a.label_mode, "balanced|random", "as eval fid"},
        {"--vae", OPT_STR, &a.vae, "FILE", "as eval fid"},
        OPT_THREADS(&a.threads),
        OPT_DEVICE(&a.device),
        OPT_PRECISION(&a.precision),
    };
    args_parse("usage: mala eval sweep --ref PATH --out DIR [--ckpt FILE] [--cfg-scale 1,1.5,2] [--steps 20,50]\n"
               "                       [--sampler ddim,dpm++2m] [eval fid flags]\n\n"
               "FD / FID against the guidance scale (and steps, sampler): one mala eval fid --ckpt per point, each\n"
               "resumable; writes DIR/sweep.jsonl, sweep.md (with class accuracy, precision, recall) and sweep.png.",
               opts, sizeof opts / sizeof opts[0], argc, argv, 2);
    if (!a.ref || !a.out) FATAL("mala eval sweep needs --ref and --out (see mala eval sweep --help)");
    if (!a.ckpt) a.ckpt = default_model_path();
    char sc[SWEEP_MAX][32], st[SWEEP_MAX][32], sa[SWEEP_MAX][32];
    int nsc = split_list(a.scales, sc, SWEEP_MAX), nst = split_list(a.steps, st, SWEEP_MAX),
        nsa = split_list(a.samplers, sa, SWEEP_MAX);
    if (nsc < 0) FATAL("--cfg-scale %s: expected a comma-separated list of scales", a.scales);
    if (nst < 0) FATAL("--steps %s: expected a comma-separated list of step counts", a.steps);
    if (nsa < 0) FATAL("--sampler %s: expected a comma-separated list of samplers", a.samplers);
    for (int i = 0; i < nsc; i++)
        if (!is_number(sc[i], 0, 100)) FATAL("--cfg-scale %s: %s is not a scale in 0..100", a.scales, sc[i]);
    for (int i = 0; i < nst; i++)
        if (!is_number(st[i], 1, 1000) || strchr(st[i], '.')) FATAL("--steps %s: %s is not 1..1000", a.steps, st[i]);
    for (int i = 0; i < nsa; i++) {
        SamplerKind k;
        if (sampler_kind_parse(sa[i], &k))
            FATAL("--sampler %s: %s: expected %s", a.samplers, sa[i], sampler_kind_list());
    }
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/points", a.out);
    make_dirs(dir);
    int np = nsc * nst * nsa, kept = 0;
    Point *pts = xcalloc((size_t)np, sizeof *pts);
    const char *key = NULL;
    for (int i = 0; i < np; i++) {
        Point *p = &pts[i];
        snprintf(p->sampler, sizeof p->sampler, "%s", sa[i / (nst * nsc)]);
        p->steps = atoi(st[i / nsc % nst]);
        p->w = strtod(sc[i % nsc], NULL);
        snprintf(p->name, sizeof p->name, "%s-s%d-w%g", p->sampler, p->steps, p->w);
        for (char *c = p->name; *c; c++)
            if (*c == '+') *c = 'p';
        int before = kept;
        point_result(&a, p, &kept);
        if (!key) key = !isnan(num(p->r, "fid")) ? "fid" : "fd";
        fprintf(stderr, "[sweep] %d/%d %s: %s %.4f%s\n", i + 1, np, p->name, key, num(p->r, key),
                kept > before ? " (kept from an earlier run)" : "");
    }
    if (kept) fprintf(stderr, "[sweep] kept %d of %d points from an earlier run in %s\n", kept, np, dir);
    write_outputs(&a, pts, np, key ? key : "fd");
    fprintf(stderr, "[sweep] wrote %s/sweep.jsonl, sweep.md and sweep.png (%d points)\n", a.out, np);
    for (int i = 0; i < np; i++) {
        json_free(pts[i].r);
        free(pts[i].line);
    }
    free(pts);
    return 0;
}

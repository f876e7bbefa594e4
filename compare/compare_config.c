// defines: compare_config_parse, compare_config_load, compare_steps, compare_eval_points,
//          compare_tflop, compare_tflop_steps, compare_arm_points, compare_arm_budget,
//          compare_config_drift
#include "compare/compare_config.h"
#include "model/net.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

typedef enum { K_STR, K_INT, K_I64, K_F64, K_SEEDS, K_FLAGS } KeyType;
enum { SEC_COMPARE, SEC_ARM };

// What a key may do once a comparison has started (compare_config_drift): change freely (FREE:
// the schedule of evaluations and checkpoints, where the children run, new arms and seeds), only
// grow (GROW), or nothing once a run trained with it (TRAIN), was evaluated with it (EVAL), or
// the reference statistics were computed with it (REF: EVAL's rule too).
enum { FREE, GROW, TRAIN, EVAL, REF };

typedef struct {
    int section;
    const char *key;
    KeyType type;
    size_t off, size;   // into CompareConfig (SEC_COMPARE) or CompareArm (SEC_ARM); size of a string
    double min, max;    // numbers
    int scope;
} Key;

#define CK(k, t, f, lo, hi, sc) \
    {SEC_COMPARE, k, t, offsetof(CompareConfig, f), sizeof(((CompareConfig *)0)->f), lo, hi, sc}
#define AK(k, t, f, lo, hi, sc) {SEC_ARM, k, t, offsetof(CompareArm, f), sizeof(((CompareArm *)0)->f), lo, hi, sc}
static const Key KEYS[] = {
    CK("data", K_STR, data, 0, 0, TRAIN),
    CK("features", K_STR, features, 0, 0, REF),
    CK("ref", K_STR, ref, 0, 0, REF),
    CK("ref_images", K_INT, ref_images, 0, 1e9, REF),
    CK("inception", K_STR, inception, 0, 0, REF),
    CK("lr", K_F64, lr, 1e-8, 1, TRAIN),  // compared as each run's lr, its arm's or this
    CK("batch", K_INT, batch, 1, 65536, TRAIN),
    CK("seeds", K_SEEDS, seeds, 0, 0, FREE),  // but a run that trained keeps its seed
    CK("budget_images", K_I64, budget_images, 1, 1e15, GROW),
    CK("budget_tflop", K_F64, budget_tflop, 1e-9, 1e9, GROW),
    CK("wall_time_s", K_F64, wall_time_s, 0, 1e9, GROW),
    CK("eval_every_images", K_I64, eval_every_images, 1, 1e15, FREE),
    CK("eval_every_tflop", K_F64, eval_every_tflop, 1e-9, 1e9, FREE),
    CK("eval_sampler", K_STR, sampler, 0, 0, EVAL),
    CK("eval_steps", K_INT, eval_steps, 1, 1000, EVAL),
    CK("eval_images", K_INT, eval_images, 2, 1e7, EVAL),
    CK("eval_cfg_scale", K_F64, cfg_scale, 0, 100, EVAL),
    CK("eval_cfg_channels", K_STR, cfg_channels, 0, 0, EVAL),
    CK("eval_seed", K_I64, eval_seed, 0, 1e18, EVAL),
    CK("grid_per_class", K_INT, grid_per_class, 1, 16, FREE),
    CK("log_every", K_INT, log_every, 1, 1e9, FREE),
    CK("ckpt_every", K_INT, ckpt_every, 0, 1e9, FREE),
    CK("threads", K_INT, threads, 0, 1024, FREE),
    CK("device", K_STR, device, 0, 0, FREE),
    CK("precision", K_STR, precision, 0, 0, TRAIN),
    CK("train_flags", K_FLAGS, train_flags, 0, 0, TRAIN),
    CK("gap", K_STR, gap, 0, 0, FREE),
    AK("backbone", K_STR, backbone, 0, 0, TRAIN),
    AK("attention", K_STR, attention, 0, 0, TRAIN),
    AK("preset", K_STR, preset, 0, 0, TRAIN),
    AK("flags", K_FLAGS, flags, 0, 0, TRAIN),
    AK("lr", K_F64, lr, 1e-8, 1, TRAIN),
};
#define NKEYS (int)(sizeof KEYS / sizeof KEYS[0])

// Flags compare sets itself: an arm or train_flags giving one would contradict the shared recipe
// or the run directories.
static const char *const OWN_FLAGS[] = {"--out", "--results-dir", "--resume", "--iters", "--epochs", "--batch",
                                        "--global-batch", "--global-batch-size", "--seed", "--global-seed", "--model",
                                        "--backbone", "--attn", "--data", "--data-path", "--lr", "--sample-every",
                                        "--log-every", "--ckpt-every", "--threads", "--device", "--precision"};
// Flags a comparison cannot take: its budgets count images as steps x batch (--accum would break
// that), every arm starts from its own initialisation (--init), and it writes the runs' evals.csv
// itself (--eval-every would write another into the same file).
static const char *const UNSUPPORTED_FLAGS[] = {"--accum", "--init", "--eval-every"};

static void defaults(CompareConfig *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->data, sizeof c->data, "fashion-mnist");
    snprintf(c->features, sizeof c->features, "fmnist");
    snprintf(c->ref, sizeof c->ref, "fashion-mnist-test");
    c->lr = 1e-4;
    c->batch = 64;
    c->nseeds = 1;
    c->seeds[0] = 0;
    snprintf(c->sampler, sizeof c->sampler, "ddim");
    c->eval_steps = 50;
    c->eval_images = 1000;
    c->cfg_scale = 1.5;
    snprintf(c->cfg_channels, sizeof c->cfg_channels, "all");
    c->grid_per_class = 2;
    c->log_every = 100;
    snprintf(c->device, sizeof c->device, "auto");
    snprintf(c->precision, sizeof c->precision, "auto");
}

static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b), d[40][40];
    if (la >= 40 || lb >= 40) return 99;
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int s = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]), x = d[i - 1][j] + 1, y = d[i][j - 1] + 1;
            d[i][j] = s < x ? (s < y ? s : y) : (x < y ? x : y);
        }
    return d[la][lb];
}

// Splits s into blank-separated words (into buf; pointers in argv). -1 when there are too many.
static int split_flags(const char *s, char *buf, size_t cap, char **argv, int *n) {
    snprintf(buf, cap, "%s", s);
    *n = 0;
    for (char *p = buf; *p;) {
        while (*p == ' ' || *p == '\t') *p++ = 0;
        if (!*p) break;
        if (*n == COMPARE_MAX_FLAGS) return -1;
        argv[(*n)++] = p;
        while (*p && *p != ' ' && *p != '\t') p++;
    }
    return 0;
}

static int check_flags(char **argv, int n, const char *where, const char *name, int line, MalaErr *err) {
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof OWN_FLAGS / sizeof OWN_FLAGS[0]; k++) {
            size_t l = strlen(OWN_FLAGS[k]);
            if (!strncmp(argv[i], OWN_FLAGS[k], l) && (argv[i][l] == 0 || argv[i][l] == '='))
                return mala_errf(err, "%s:%d: %s: %s is set by mala compare itself (%s)", name, line, where,
                                 OWN_FLAGS[k], !strcmp(OWN_FLAGS[k], "--lr") ? "use the key lr" : "use the config's keys");
        }
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof UNSUPPORTED_FLAGS / sizeof UNSUPPORTED_FLAGS[0]; k++) {
            size_t l = strlen(UNSUPPORTED_FLAGS[k]);
            if (!strncmp(argv[i], UNSUPPORTED_FLAGS[k], l) && (argv[i][l] == 0 || argv[i][l] == '='))
                return mala_errf(err, "%s:%d: %s: mala compare does not take %s (its budgets count images as steps x "
                                 "batch, every run starts from its own initialisation, and it evaluates the runs "
                                 "itself)", name, line, where,
                                 UNSUPPORTED_FLAGS[k]);
        }
    return 0;
}

static int set_value(const Key *k, void *base, const char *v, const char *name, int line, MalaErr *err) {
    char *dst = (char *)base + k->off, *end;
    if (k->type == K_STR || k->type == K_FLAGS) {
        if (strlen(v) >= k->size) return mala_errf(err, "%s:%d: %s: value longer than %zu bytes", name, line, k->key, k->size - 1);
        memcpy(dst, v, strlen(v) + 1);
        return 0;
    }
    if (k->type == K_SEEDS) {
        CompareConfig *c = base;
        c->nseeds = 0;
        const char *p = v;
        for (;;) {
            while (*p == ' ' || *p == '\t') p++;
            if (!isdigit((unsigned char)*p)) return mala_errf(err, "%s:%d: seeds: expected integers separated by commas, got '%s'", name, line, v);
            errno = 0;
            unsigned long long s = strtoull(p, &end, 10);
            if (errno) return mala_errf(err, "%s:%d: seeds: '%s' out of range", name, line, v);
            if (c->nseeds == COMPARE_MAX_SEEDS) return mala_errf(err, "%s:%d: seeds: at most %d", name, line, COMPARE_MAX_SEEDS);
            for (int i = 0; i < c->nseeds; i++)
                if (c->seeds[i] == s) return mala_errf(err, "%s:%d: seeds: %llu given twice", name, line, s);
            c->seeds[c->nseeds++] = s;
            p = end;
            while (*p == ' ' || *p == '\t') p++;
            if (!*p) return 0;
            if (*p++ != ',') return mala_errf(err, "%s:%d: seeds: expected integers separated by commas, got '%s'", name, line, v);
        }
    }
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x))
        return mala_errf(err, "%s:%d: %s: expected a number, got '%s'", name, line, k->key, v);
    if (k->type != K_F64 && x != floor(x))
        return mala_errf(err, "%s:%d: %s: expected an integer, got '%s'", name, line, k->key, v);
    if (x < k->min || x > k->max)
        return mala_errf(err, "%s:%d: %s %s: out of range [%g, %g]", name, line, k->key, v, k->min, k->max);
    if (k->type == K_INT) *(int *)dst = (int)x;
    else if (k->type == K_I64) *(int64_t *)dst = (int64_t)x;
    else *(double *)dst = x;
    return 0;
}

static int one_of(const char *v, const char *a, const char *b, const char *c) {
    return !strcmp(v, a) || !strcmp(v, b) || (c && !strcmp(v, c));
}

// The points of a budget_tflop: eval_every_tflop, 2 eval_every_tflop, ... below budget_tflop (by more
// than rounding), and budget_tflop. Their number; into t when t is not NULL.
static int tflop_points(const CompareConfig *c, double *t) {
    const double e = c->eval_every_tflop, b = c->budget_tflop;
    int n = 0;
    for (int64_t i = 1; i * e < b * (1 - 1e-12) && n < 1000; i++, n++)
        if (t) t[n] = (double)i * e;
    if (t) t[n] = b;
    return n + 1;
}

// Exactly one budget, and evaluation points in its unit (at most 1000).
static int budget_keys(CompareConfig *c, const char *name, MalaErr *err) {
    if (c->budget_images && c->budget_tflop)
        return mala_errf(err, "%s: budget_images and budget_tflop exclude each other: give one", name);
    if (!c->budget_images && !c->budget_tflop)
        return mala_errf(err, "%s: [compare] needs budget_images (images seen per arm) or budget_tflop (training "
                              "TFLOP per arm)", name);
    if (c->budget_images) {
        if (c->eval_every_tflop)
            return mala_errf(err, "%s: eval_every_tflop goes with budget_tflop; with budget_images give "
                                  "eval_every_images", name);
        if (!c->eval_every_images) c->eval_every_images = c->budget_images;
        if ((c->budget_images + c->eval_every_images - 1) / c->eval_every_images > 1000)
            return mala_errf(err, "%s: budget_images / eval_every_images gives more than 1000 evaluation points", name);
        return 0;
    }
    if (c->eval_every_images)
        return mala_errf(err, "%s: eval_every_images goes with budget_images; with budget_tflop give "
                              "eval_every_tflop", name);
    if (!c->eval_every_tflop) c->eval_every_tflop = c->budget_tflop;
    if (tflop_points(c, NULL) > 1000)
        return mala_errf(err, "%s: budget_tflop / eval_every_tflop gives more than 1000 evaluation points", name);
    return 0;
}

static int arm_index(const CompareConfig *c, const char *name) {
    for (int i = 0; i < c->narms; i++)
        if (!strcmp(c->arms[i].name, name)) return i;
    return -1;
}

// gap = BASE, TARGET: two different arms of the file.
static int gap_arms(CompareConfig *c, const char *name, MalaErr *err) {
    c->gap_base = c->gap_target = -1;
    if (!c->gap[0]) return 0;
    char buf[COMPARE_STR], *word[3] = {NULL, NULL, NULL};
    snprintf(buf, sizeof buf, "%s", c->gap);
    int n = 0;
    for (char *p = buf; n < 3 && p;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        while (*p == ' ' || *p == '\t') p++;
        size_t l = strlen(p);
        while (l && (p[l - 1] == ' ' || p[l - 1] == '\t')) p[--l] = 0;
        word[n++] = p;
        p = comma ? comma + 1 : NULL;
    }
    if (n != 2 || !word[0][0] || !word[1][0])
        return mala_errf(err, "%s: gap %s: expected two arm names separated by a comma (BASE, TARGET)", name, c->gap);
    c->gap_base = arm_index(c, word[0]);
    c->gap_target = arm_index(c, word[1]);
    for (int i = 0; i < 2; i++)
        if ((i ? c->gap_target : c->gap_base) < 0)
            return mala_errf(err, "%s: gap %s: no [arm %s] in the file", name, c->gap, word[i]);
    if (c->gap_base == c->gap_target) return mala_errf(err, "%s: gap %s: the two arms must differ", name, c->gap);
    return 0;
}

// The checks that need the whole file.
static int validate(CompareConfig *c, const char *name, MalaErr *err) {
    if (!c->narms) return mala_errf(err, "%s: no [arm NAME] section: nothing to compare", name);
    if (budget_keys(c, name, err)) return -1;
    if (!one_of(c->sampler, "ddim", "ddpm", NULL))
        return mala_errf(err, "%s: eval_sampler %s: expected ddim or ddpm", name, c->sampler);
    size_t digits = strspn(c->cfg_channels, "0123456789");
    if (strcmp(c->cfg_channels, "all") && (!digits || c->cfg_channels[digits] || c->cfg_channels[0] == '0' ||
                                           atoi(c->cfg_channels) > 1024))
        return mala_errf(err, "%s: eval_cfg_channels %s: expected all or a channel count 1..1024", name,
                         c->cfg_channels);
    if (!one_of(c->device, "auto", "cpu", "cuda"))
        return mala_errf(err, "%s: device %s: expected auto, cpu or cuda", name, c->device);
    if (!one_of(c->precision, "auto", "fp32", "bf16") && strcmp(c->precision, "tf32"))
        return mala_errf(err, "%s: precision %s: expected auto, fp32, bf16 or tf32", name, c->precision);
    if (!one_of(c->features, "fmnist", "inception", NULL))
        return mala_errf(err, "%s: features %s: expected fmnist or inception", name, c->features);
    if (!c->data[0] || !c->ref[0]) return mala_errf(err, "%s: data and ref must not be empty", name);
    if (split_flags(c->train_flags, c->train_flag_buf, sizeof c->train_flag_buf, c->train_flag, &c->ntrain_flags))
        return mala_errf(err, "%s: train_flags: more than %d words", name, COMPARE_MAX_FLAGS);
    if (check_flags(c->train_flag, c->ntrain_flags, "train_flags", name, 0, err)) return -1;
    for (int i = 0; i < c->narms; i++) {
        CompareArm *a = &c->arms[i];
        if (!a->backbone[0] || !a->preset[0])
            return mala_errf(err, "%s:%d: [arm %s] needs backbone and preset", name, a->line, a->name);
        if (!one_of(a->backbone, "dit", "dig", "dic"))
            return mala_errf(err, "%s:%d: [arm %s] backbone %s: expected dit, dig or dic", name, a->line, a->name, a->backbone);
        if (!strcmp(a->backbone, "dit")) {
            if (!a->attention[0]) snprintf(a->attention, sizeof a->attention, "mala");
            DitConfig probe;
            if (dit_config_attn_setting(&probe, a->attention))
                return mala_errf(err, "%s:%d: [arm %s] attention %s: expected " DIT_ATTN_SETTINGS, name, a->line,
                                 a->name, a->attention);
        } else if (a->attention[0]) {
            return mala_errf(err, "%s:%d: [arm %s] attention is DiT's; a %s arm has none", name, a->line, a->name, a->backbone);
        }
        if (split_flags(a->flags, a->flag_buf, sizeof a->flag_buf, a->flag, &a->nflags))
            return mala_errf(err, "%s:%d: [arm %s] flags: more than %d words", name, a->line, a->name, COMPARE_MAX_FLAGS);
        char where[96];
        snprintf(where, sizeof where, "[arm %s] flags", a->name);
        if (check_flags(a->flag, a->nflags, where, name, a->line, err)) return -1;
    }
    return gap_arms(c, name, err);
}

int compare_config_parse(const char *text, size_t len, const char *name, CompareConfig *c, MalaErr *err) {
    defaults(c);
    snprintf(c->path, sizeof c->path, "%s", name);
    int section = -1, line = 0;
    CompareArm *arm = NULL;
    int seen[COMPARE_MAX_ARMS + 1][NKEYS];
    memset(seen, 0, sizeof seen);
    int compare_sections = 0;
    size_t pos = 0;
    while (pos < len) {
        line++;
        size_t e = pos;
        while (e < len && text[e] != '\n') e++;
        char buf[2048];
        size_t n = e - pos;
        if (n >= sizeof buf) return mala_errf(err, "%s:%d: line longer than %zu bytes", name, line, sizeof buf - 1);
        memcpy(buf, text + pos, n);
        buf[n] = 0;
        pos = e + 1;
        for (size_t i = 0; i < n; i++)
            if (buf[i] == 0 || ((unsigned char)buf[i] < 32 && buf[i] != '\t' && buf[i] != '\r'))
                return mala_errf(err, "%s:%d: control byte 0x%02x in the text", name, line, (unsigned char)buf[i]);
        // comments: a line starting with # or ;, or " #" / " ;" after a value
        char *s = buf;
        while (*s == ' ' || *s == '\t') s++;
        if (*s == '#' || *s == ';') *s = 0;
        for (char *p = s; *p; p++)
            if ((*p == '#' || *p == ';') && p > s && (p[-1] == ' ' || p[-1] == '\t')) { *p = 0; break; }
        size_t l = strlen(s);
        while (l && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\r')) s[--l] = 0;
        if (!l) continue;
        if (*s == '[') {
            if (s[l - 1] != ']') return mala_errf(err, "%s:%d: section header without ']'", name, line);
            s[l - 1] = 0;
            char *h = s + 1;
            while (*h == ' ') h++;
            size_t hl = strlen(h);
            while (hl && h[hl - 1] == ' ') h[--hl] = 0;
            if (!strcmp(h, "compare")) {
                if (compare_sections++) return mala_errf(err, "%s:%d: a second [compare] section", name, line);
                section = SEC_COMPARE;
                arm = NULL;
                continue;
            }
            if (strncmp(h, "arm ", 4))
                return mala_errf(err, "%s:%d: unknown section [%s]: expected [compare] or [arm NAME]", name, line, h);
            char *an = h + 4;
            while (*an == ' ') an++;
            if (!*an || strlen(an) >= sizeof arm->name)
                return mala_errf(err, "%s:%d: [arm NAME]: a name of 1 to %zu characters", name, line, sizeof arm->name - 1);
            for (char *p = an; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '.' && *p != '_' && *p != '-')
                    return mala_errf(err, "%s:%d: [arm %s]: names use letters, digits, '.', '_' and '-'", name, line, an);
            for (int i = 0; i < c->narms; i++)
                if (!strcmp(c->arms[i].name, an))
                    return mala_errf(err, "%s:%d: [arm %s] given twice (first on line %d)", name, line, an, c->arms[i].line);
            if (c->narms == COMPARE_MAX_ARMS) return mala_errf(err, "%s:%d: more than %d arms", name, line, COMPARE_MAX_ARMS);
            arm = &c->arms[c->narms++];
            memset(arm, 0, sizeof *arm);
            snprintf(arm->name, sizeof arm->name, "%s", an);
            arm->line = line;
            section = SEC_ARM;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) return mala_errf(err, "%s:%d: expected 'key = value' or a [section]", name, line);
        *eq = 0;
        char *key = s, *val = eq + 1;
        size_t kl = strlen(key);
        while (kl && (key[kl - 1] == ' ' || key[kl - 1] == '\t')) key[--kl] = 0;
        while (*val == ' ' || *val == '\t') val++;
        if (!kl) return mala_errf(err, "%s:%d: a value without a key", name, line);
        if (section < 0) return mala_errf(err, "%s:%d: '%s' before any section ([compare] or [arm NAME])", name, line, key);
        const Key *k = NULL;
        int ki = -1, best = 99;
        const char *close = NULL;
        for (int i = 0; i < NKEYS; i++) {
            if (KEYS[i].section != section) continue;
            if (!strcmp(KEYS[i].key, key)) { k = &KEYS[i]; ki = i; break; }
            int d = edit_distance(key, KEYS[i].key);
            if (d < best) { best = d; close = KEYS[i].key; }
        }
        const char *sec = section == SEC_COMPARE ? "[compare]" : "[arm]";
        if (!k) {
            if (best <= 2) return mala_errf(err, "%s:%d: unknown key '%s' in %s; did you mean %s?", name, line, key, sec, close);
            return mala_errf(err, "%s:%d: unknown key '%s' in %s", name, line, key, sec);
        }
        int slot = section == SEC_COMPARE ? COMPARE_MAX_ARMS : (int)(arm - c->arms);
        if (seen[slot][ki]) return mala_errf(err, "%s:%d: %s given twice in this section (first on line %d)", name, line, key, seen[slot][ki]);
        seen[slot][ki] = line;
        if (!*val && k->type != K_FLAGS && !(k->type == K_STR && !strcmp(key, "inception")))
            return mala_errf(err, "%s:%d: %s: empty value", name, line, key);
        if (set_value(k, section == SEC_COMPARE ? (void *)c : (void *)arm, val, name, line, err)) return -1;
    }
    return validate(c, name, err);
}

int compare_config_load(const char *path, CompareConfig *c, MalaErr *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return mala_errf(err, "%s: cannot open: %s", path, strerror(errno));
    enum { CAP = 1 << 20 };
    char *buf = xmalloc(CAP + 1);
    size_t n = fread(buf, 1, CAP + 1, f);
    int bad = ferror(f);
    fclose(f);
    int rc;
    if (bad) rc = mala_errf(err, "%s: read error", path);
    else if (n > CAP) rc = mala_errf(err, "%s: larger than 1 MiB: not a compare config", path);
    else rc = compare_config_parse(buf, n, path, c, err);
    free(buf);
    return rc;
}

int64_t compare_steps(const CompareConfig *c, int64_t images) { return (images + c->batch - 1) / c->batch; }

int compare_eval_points(const CompareConfig *c, int64_t **out) {
    int64_t every = c->eval_every_images, budget = c->budget_images;
    int64_t n = (budget + every - 1) / every;  // validate keeps it at most 1000
    int64_t *p = xmalloc((size_t)n * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) p[i] = i + 1 == n ? budget : (i + 1) * every;
    *out = p;
    return (int)n;
}

double compare_tflop(int64_t images, double gflop) { return (double)images * gflop / 1e3; }

int64_t compare_tflop_steps(const CompareConfig *c, double tflop, double gflop) {
    const int64_t s = llround(tflop * 1e3 / (gflop * c->batch));
    return s > 1 ? s : 1;
}

int compare_arm_points(const CompareConfig *c, double gflop, int64_t **images, double **tflop) {
    if (c->budget_images) {
        if (tflop) *tflop = NULL;
        return compare_eval_points(c, images);
    }
    double *t = xmalloc(1001 * sizeof(double));
    int64_t *im = xmalloc(1001 * sizeof(int64_t));
    const int n = tflop_points(c, t);
    int m = 0;
    for (int i = 0; i < n; i++) {
        const int64_t s = compare_tflop_steps(c, t[i], gflop);
        if (m && im[m - 1] == s * c->batch) m--;  // the same step as the point before: the later one
        im[m] = s * c->batch;
        t[m++] = t[i];
    }
    *images = im;
    if (tflop) *tflop = t;
    else free(t);
    return m;
}

int64_t compare_arm_budget(const CompareConfig *c, double gflop) {
    return c->budget_images ? c->budget_images : compare_tflop_steps(c, c->budget_tflop, gflop) * c->batch;
}

// A key's value as text: exact (%.17g) to compare, short (%g) for a message; flags with single blanks.
static void key_text(const Key *k, const void *base, int exact, char *buf, size_t cap) {
    const char *p = (const char *)base + k->off;
    if (k->type == K_STR) snprintf(buf, cap, "%s", p);
    else if (k->type == K_INT) snprintf(buf, cap, "%d", *(const int *)p);
    else if (k->type == K_I64) snprintf(buf, cap, "%lld", (long long)*(const int64_t *)p);
    else if (k->type == K_F64) snprintf(buf, cap, exact ? "%.17g" : "%g", *(const double *)p);
    else if (k->type == K_FLAGS) {
        size_t n = 0;
        for (const char *q = p; *q && n + 1 < cap; q++) {
            if (*q == ' ' || *q == '\t') continue;
            if (n && (q[-1] == ' ' || q[-1] == '\t')) buf[n++] = ' ';
            if (n + 1 < cap) buf[n++] = *q;
        }
        buf[n] = 0;
    } else buf[0] = 0;  // seeds: compared run by run
}

static int seed_of(const CompareConfig *c, uint64_t s) {
    for (int i = 0; i < c->nseeds; i++)
        if (c->seeds[i] == s) return 1;
    return 0;
}

static const CompareArm *arm_of(const CompareConfig *c, const char *name) {
    const int i = arm_index(c, name);
    return i < 0 ? NULL : &c->arms[i];
}

// The first key of the section (b_*: the configs, or two arms) whose scope is in `scopes` that differs.
static const Key *differs(const void *b_old, const void *b_new, int section, unsigned scopes, char *was, char *now,
                          size_t cap) {
    for (int i = 0; i < NKEYS; i++) {
        const Key *k = &KEYS[i];
        if (k->section != section || !(scopes >> k->scope & 1) || !strcmp(k->key, "lr")) continue;
        char a[COMPARE_STR], b[COMPARE_STR];
        key_text(k, b_old, 1, a, sizeof a);
        key_text(k, b_new, 1, b, sizeof b);
        if (strcmp(a, b)) {
            key_text(k, b_old, 0, was, cap);
            key_text(k, b_new, 0, now, cap);
            return k;
        }
    }
    return NULL;
}

static double run_lr(const CompareConfig *c, const CompareArm *a) { return a->lr > 0 ? a->lr : c->lr; }

// A GROW key that got smaller (wall_time_s 0: no cap, the largest).
static const char *shrunk(const CompareConfig *o, const CompareConfig *n, char *was, char *now, size_t cap) {
    if (n->budget_tflop < o->budget_tflop) {
        snprintf(was, cap, "%g", o->budget_tflop);
        snprintf(now, cap, "%g", n->budget_tflop);
        return "budget_tflop";
    }
    if (n->budget_images < o->budget_images) {
        snprintf(was, cap, "%lld", (long long)o->budget_images);
        snprintf(now, cap, "%lld", (long long)n->budget_images);
        return "budget_images";
    }
    if (o->wall_time_s == 0 ? n->wall_time_s > 0 : n->wall_time_s > 0 && n->wall_time_s < o->wall_time_s) {
        snprintf(was, cap, "%g", o->wall_time_s);
        snprintf(now, cap, "%g", n->wall_time_s);
        return "wall_time_s";
    }
    return NULL;
}

int compare_config_drift(const CompareConfig *old, const CompareConfig *now, const char *stored,
                         int (*state)(const char *run, void *ctx), void *ctx, const char *ref_stats, MalaErr *err) {
    char was[COMPARE_STR], is[COMPARE_STR], key[96];
    const Key *k;
    if (ref_stats && (k = differs(old, now, SEC_COMPARE, 1u << REF, was, is, sizeof was)))
        return mala_errf(err, "%s: %s %s differs from %s in %s, with which %s was computed (a changed evaluation "
                              "needs a new --out)", now->path, k->key, is, was, stored, ref_stats);
    for (int a = 0; a < old->narms; a++)
        for (int s = 0; s < old->nseeds; s++) {
            const CompareArm *ao = &old->arms[a], *an = arm_of(now, ao->name);
            char run[96];
            snprintf(run, sizeof run, "%s-s%llu", ao->name, (unsigned long long)old->seeds[s]);
            const int st = state(run, ctx);  // 0 not started, 1 trained, 2 evaluated
            if (!st) continue;
            if (!an || !seed_of(now, old->seeds[s])) {
                if (an) snprintf(key, sizeof key, "seed %llu", (unsigned long long)old->seeds[s]);
                else snprintf(key, sizeof key, "[arm %s]", ao->name);
                return mala_errf(err, "%s: no %s, but run %s of %s has trained (a comparison keeps its runs)",
                                 now->path, key, run, stored);
            }
            const char *what = "trained";
            if ((k = differs(old, now, SEC_COMPARE, 1u << TRAIN, was, is, sizeof was)))
                snprintf(key, sizeof key, "%s", k->key);
            else if ((k = differs(ao, an, SEC_ARM, 1u << TRAIN, was, is, sizeof was)))
                snprintf(key, sizeof key, "[arm %s] %s", an->name, k->key);
            else if (run_lr(old, ao) != run_lr(now, an)) {
                snprintf(key, sizeof key, an->lr > 0 ? "[arm %s] lr" : "lr", an->name);
                snprintf(was, sizeof was, "%g", run_lr(old, ao));
                snprintf(is, sizeof is, "%g", run_lr(now, an));
            } else if (st == 2 && (k = differs(old, now, SEC_COMPARE, 1u << EVAL | 1u << REF, was, is, sizeof was))) {
                snprintf(key, sizeof key, "%s", k->key);
                what = "evaluated";
            } else if (!old->budget_tflop != !now->budget_tflop) {
                const int t = now->budget_tflop > 0;
                return mala_errf(err, "%s: %s replaces %s of %s, with which run %s has trained (a comparison keeps "
                                      "its budget's unit: a new --out)", now->path,
                                 t ? "budget_tflop" : "budget_images", t ? "budget_images" : "budget_tflop", stored,
                                 run);
            } else {
                const char *g = shrunk(old, now, was, is, sizeof was);
                if (!g) continue;
                return mala_errf(err, "%s: %s %s is below %s in %s, and run %s has trained (it may only grow)",
                                 now->path, g, is, was, stored, run);
            }
            return mala_errf(err, "%s: %s %s differs from %s in %s, with which run %s was %s (a changed %s needs a "
                                  "new --out)", now->path, key, is, was, stored, run, what,
                             !strcmp(what, "trained") ? "recipe" : "evaluation");
        }
    return 0;
}

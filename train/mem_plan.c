// defines: memory_available, memory_cgroup_free, memory_resident, gen_memory_bytes, train_grid_images,
//          train_memory_plan, train_memory_fits, train_memory_check
#include "train/mem_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sampler/diffusion.h"
#include "core/dist.h"
#include "formats/safetensors.h"
#include "model/vae.h"

// What the program holds beyond its own allocations once a step has run: OpenBLAS's buffers,
// OpenMP's thread stacks, allocator slack (measured: peak RSS less the counted bytes of tiny runs).
#define MEM_RUNTIME_BYTES (16.0 * (1 << 20))

// The first number after `key` in a "key value" file (/proc/meminfo's kB rows times kb), -1 if absent.
static double file_key(const char *path, const char *key, double unit) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    size_t k = strlen(key);
    double v = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && (line[k] == ' ' || line[k] == ':' || line[k] == '\t')) {
            v = strtod(line + k + 1 + strspn(line + k + 1, " \t:"), NULL) * unit;
            break;
        }
    fclose(f);
    return v;
}

// A file holding one number ("max" or missing: -1).
static double file_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = "";
    char *ok = fgets(buf, sizeof buf, f);
    fclose(f);
    char *end;
    double v = ok ? strtod(buf, &end) : 0;
    return ok && end != buf ? v : -1;
}

double memory_cgroup_free(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/memory.max", dir);
    double max = file_number(path);
    if (max < 0) return -1;
    snprintf(path, sizeof path, "%s/memory.current", dir);
    double cur = file_number(path);
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    double file = file_key(path, "file", 1);  // page cache: reclaimed before the limit kills
    if (cur < 0) cur = 0;
    if (file > 0 && file < cur) cur -= file;
    return max > cur ? max - cur : 0;
}

// The tightest cgroup limit on this process: v2 (its own directory, then the mount's root), v1.
static double cgroup_free(double *limit) {
    char rel[4200] = "", dir[4300];
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        char line[4096];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "0::", 3)) { snprintf(rel, sizeof rel, "%s", line + 3); rel[strcspn(rel, "\n")] = 0; }
        fclose(f);
    }
    double best = -1;
    const char *dirs[2] = {rel, ""};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !rel[0]) break;
        snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", dirs[i]);
        double free_b = memory_cgroup_free(dir);
        if (free_b >= 0 && (best < 0 || free_b < best)) {
            best = free_b;
            snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/memory.max");
            *limit = file_number(dir);
        }
    }
    double v1 = file_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    double v1_used = file_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
    if (v1 > 0 && v1 < 1e18 && v1_used >= 0) {  // v1 reports "no limit" as a huge number
        double free_b = v1 > v1_used ? v1 - v1_used : 0;
        if (best < 0 || free_b < best) { best = free_b; *limit = v1; }
    }
    return best;
}

static double parse_size(const char *s) {
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024.0 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    }
    return v;
}

double memory_available(double *total) {
    const char *test = getenv("MALA_TEST_MEMORY");
    if (test && *test) {
        double v = parse_size(test);
        if (total) *total = v;
        return v;
    }
    double avail = file_key("/proc/meminfo", "MemAvailable", 1024), all = file_key("/proc/meminfo", "MemTotal", 1024);
    if (all <= 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        all = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    }
    if (avail < 0) avail = all;
    double limit = -1, cg = cgroup_free(&limit);
    if (cg >= 0 && cg < avail) avail = cg;
    if (limit > 0 && limit < all) all = limit;
    if (total) *total = all;
    return avail;
}

double memory_resident(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long long size = 0, rss = 0;
    int got = fscanf(f, "%llu %llu", &size, &rss);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? (double)rss * (double)page : 0;
}

// ---- what the commands allocate ----

// A plan's parts, each in host memory or in the backend's own (a GPU's).
static void add(MemPlan *p, int part, double bytes, int on_device) {
    p->part[part] += bytes;
    p->total += bytes;
    if (on_device) p->device += bytes;
}

static double gen_parts(MemPlan *p, int part, const NetConfig *c, const Backend *be, int n) {
    const int dev = !backend_on_host(be);
    const double per = (double)c->in_channels * c->image_size * c->image_size;
    const double cout = c->in_channels * (c->learn_sigma ? 2 : 1) * (double)c->image_size * c->image_size;
    double before = p->total;
    add(p, part, (double)net_arena_bytes(c, be, 2 * n, NET_INFER), dev);   // weights and activations
    add(p, part, 4.0 * n * (per + 2 * per + 2 * cout + 4 + 3 * per), dev);  // d_x; sampler xin, out, t, y, x0s, noise
    add(p, part, 4.0 * n * per + 8.0 * n, 0);                               // host x0 and labels
    return p->total - before;
}

double gen_memory_bytes(const NetConfig *c, const Backend *be, int n, double *device) {
    MemPlan p = {{0}};
    gen_parts(&p, MEM_GRID, c, be, n);
    if (device) *device = p.device;
    return p.total;
}

int train_grid_images(const NetConfig *c, int images) {
    return images > 0 ? images : c->num_classes == 0 ? 16 : c->num_classes <= 16 ? 4 * c->num_classes : 64;
}

// The VAE a latent model's grids decode through (pipeline/decode.c sizes it): 0 when it cannot be read.
static double grid_vae_bytes(const NetConfig *c, const Backend *be, const char *path, int n, double *out_floats) {
    VaeConfig vc;
    MalaErr err;
    if (!path || vae_config_read(path, &vc, &err)) return 0;
    const int S = c->image_size * vae_factor(&vc), batch = vae_batch_for(&vc, be, S, S, (size_t)2 << 30, n < 8 ? n : 8);
    *out_floats = (double)vc.out_channels * S * S;
    return (double)vae_weight_bytes(&vc) + (double)vae_activation_bytes(&vc, be, batch, S, S);
}

void train_memory_plan(MemPlan *p, const NetConfig *c, const Backend *be, const TrainMemArgs *a) {
    memset(p, 0, sizeof *p);
    const int dev = !backend_on_host(be), B = a->batch, W = a->world > 1 ? a->world : 1, zero = a->zero && W > 1;
    const int K = a->accum > 1 ? a->accum : 1;
    const double per = (double)c->in_channels * c->image_size * c->image_size;
    const double outn = per * (c->learn_sigma ? 2 : 1);
    size_t nt;
    const double nf = (double)net_param_floats(c, &nt), block = (double)((nt + W - 1) / W);
    const double arena = (double)net_arena_bytes(c, be, B, NET_TRAIN), weights = 4 * nf;

    // trainer_new: the weights (in the arena), grad, m, v, EMA; ZeRO-1 keeps a block of m and v
    add(p, MEM_MODEL, weights, dev);
    add(p, MEM_MODEL, zero ? 4 * ((block * W > nf ? block * W : nf) + nf + 3 * block) : 16 * nf, dev);
    if (dev && W > 1) add(p, MEM_MODEL, 4.0 * nt + (zero ? 4 * block : 0), 0);  // host staging of the all-reduce
    // the arena's activations and workspaces; the step's inputs, draws, outputs and loss terms
    add(p, MEM_ACT, arena - weights, dev);
    add(p, MEM_ACT, 1000.0 * DIFF_COEFS * 8 + 16.0 * B + 4 * (3 * B * per + 2 * B * outn + B) + 16.0 * B, dev);
    if (W > 1 || K > 1) add(p, MEM_ACT, 8.0 * W * B * K, dev);  // the optimiser step's draws
    add(p, MEM_ACT, 16.0 * B, 0);
    // the loader's two batches, its bytes and permutation; the command's step of global batches
    add(p, MEM_DATA, 8 * B * per + B * per + 8.0 * a->data_n + 16.0 * B + 4.0 * W * B * K * (per + 1), 0);
    // checkpoints: host copies of weights, EMA, m, v (none on the CPU backend); ZeRO gathers m, v
    double save = (dev ? 16 * nf : 0) + (zero ? 8 * block * W : 0), hash = W > 1 ? 8 * nf : 0;
    add(p, MEM_STAGING, save > hash ? save : hash, 0);
    if (a->grids) {
        const int n = train_grid_images(c, a->grid_images);
        double out_floats = per;
        gen_parts(p, MEM_GRID, c, be, n);
        if (c->latent_scale > 0) add(p, MEM_GRID, grid_vae_bytes(c, be, a->vae, n, &out_floats), dev);
        add(p, MEM_GRID, 4.0 * n * (per + out_floats + 1), 0);  // the grid's noise, images, labels
    }
    add(p, MEM_HELD, memory_resident() + MEM_RUNTIME_BYTES, 0);
}

// ---- the check ----

static int plan_fits(const MemPlan *p, double avail) {
    return p->total - p->device - p->part[MEM_HELD] + MEM_RUNTIME_BYTES <= avail;
}

// Expands the first {a,b,...} of pattern (recursively): "DiT-{S,B}/{2,4}" -> DiT-S/2, DiT-S/4, ...
static void expand(const char *pattern, void (*fn)(const char *, void *), void *ctx) {
    const char *open = strchr(pattern, '{'), *close = open ? strchr(open, '}') : NULL;
    if (!open || !close) { fn(pattern, ctx); return; }
    for (const char *s = open + 1; s < close;) {
        size_t len = strcspn(s, ",}");
        char name[128];
        snprintf(name, sizeof name, "%.*s%.*s%s", (int)(open - pattern), pattern, (int)len, s, close + 1);
        expand(name, fn, ctx);
        s += len + (s[len] == ',');
    }
}

typedef struct {
    const NetConfig *c;
    const Backend *be;
    const TrainMemArgs *a;
    double avail, best_flops;
    char best[64];
} PresetSearch;

// A preset of fewer FLOPs than the model asked for that fits at its batch; the largest such.
static void try_preset(const char *name, void *ctx) {
    PresetSearch *s = ctx;
    NetConfig t = *s->c;
    MalaErr err;
    if (net_config_preset(&t, name, &err) || net_config_validate(&t, &err) || net_check_learnable(&t, &err)) return;
    double flops = net_flops_per_image(&t);
    if (flops >= net_flops_per_image(s->c) || flops <= s->best_flops) return;
    MemPlan p;
    train_memory_plan(&p, &t, s->be, s->a);
    if (!plan_fits(&p, s->avail)) return;
    s->best_flops = flops;
    snprintf(s->best, sizeof s->best, "%s", name);
}

static void describe_parts(char *buf, size_t n, const MemPlan *p) {
    static const char *names[MEM_PARTS] = {"weights, gradient, EMA and AdamW moments", "activations", "sample grids",
                                           "data loader", "checkpoint copies", "program and data set"};
    buf[0] = 0;
    for (int i = 0; i < MEM_PARTS; i++) {
        if (p->part[i] < 0.5) continue;
        char h[32];
        human_bytes(h, sizeof h, p->part[i]);
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%s %s", buf[0] ? ", " : "", names[i], h);
    }
}

// What would fit instead, after ": " of the error.
static void suggest(char *buf, size_t n, const NetConfig *c, const Backend *be, const TrainMemArgs *a, int batch_fixed,
                    const char *preset, double avail) {
    buf[0] = 0;
    TrainMemArgs t = *a;
    MemPlan p;
    if (!batch_fixed) {
        int lo = 0, hi = a->batch - 1;  // the largest per-process batch in 1..batch-1 that fits (0: none)
        while (lo < hi) {
            t.batch = lo + (hi - lo + 1) / 2;
            train_memory_plan(&p, c, be, &t);
            if (plan_fits(&p, avail)) lo = t.batch;
            else hi = t.batch - 1;
        }
        if (lo) snprintf(buf, n, "--batch %d fits", lo * (a->world > 1 ? a->world : 1));
        else snprintf(buf, n, "not even --batch %d fits", a->world > 1 ? a->world : 1);
    } else {
        snprintf(buf, n, "a resumed run keeps its batch");
    }
    if (a->grids) {
        t = *a;
        t.grids = 0;
        train_memory_plan(&p, c, be, &t);
        if (plan_fits(&p, avail))
            snprintf(buf + strlen(buf), n - strlen(buf), "; --sample-every 0 (no sample grids) fits");
    }
    PresetSearch s = {c, be, a, avail, 0, ""};
    expand(net_backbone(c->backbone)->presets, try_preset, &s);
    if (s.best[0])
        snprintf(buf + strlen(buf), n - strlen(buf), "; or a smaller model at this batch: --model %s", s.best);
    else
        snprintf(buf + strlen(buf), n - strlen(buf), "; no smaller %s preset fits at this batch", preset);
    if (a->world > 1 && !a->zero) {
        t = *a;
        t.zero = 1;
        train_memory_plan(&p, c, be, &t);
        snprintf(buf + strlen(buf), n - strlen(buf), "; --zero 1 (AdamW's moments sharded over the %d processes) %s",
                 a->world, plan_fits(&p, avail) ? "fits" : "is not enough alone");
    }
}

int train_memory_fits(const NetConfig *c, const Backend *be, const TrainMemArgs *a) {
    MemPlan p;
    train_memory_plan(&p, c, be, a);
    double avail = memory_available(NULL);
    return !dist_any(!(avail <= 0 || plan_fits(&p, avail)));
}

int train_memory_check(const NetConfig *c, const Backend *be, const TrainMemArgs *a, int global_batch, int batch_fixed,
                       const char *preset, int say, MalaErr *err) {
    MemPlan p;
    train_memory_plan(&p, c, be, a);
    double total = 0, avail = memory_available(&total);
    const double held = p.part[MEM_HELD] - MEM_RUNTIME_BYTES;  // resident already, so not in avail
    char need_s[32], have_s[32], all_s[32], dev_s[64] = "", parts[512];
    human_bytes(need_s, sizeof need_s, p.total);
    human_bytes(have_s, sizeof have_s, avail + held);
    human_bytes(all_s, sizeof all_s, total > avail + held ? total : avail + held);
    if (p.device > 0) {
        char d[32];
        human_bytes(d, sizeof d, p.device);
        snprintf(dev_s, sizeof dev_s, ", %s of it in %s memory", d, be->name);
    }
    describe_parts(parts, sizeof parts, &p);
    const char *each = a->world > 1 ? " per process" : "";
    const int fits = avail <= 0 || plan_fits(&p, avail);
    if (!dist_any(!fits)) {  // every rank decides alike (its memory may differ): all start or none
        if (say)
            fprintf(stderr, "preparing %s for batch %d: about %s of memory%s%s (%s); %s available\n", preset,
                    global_batch, need_s, each, dev_s, parts, have_s);
        return 0;
    }
    err->msg[0] = 0;  // a rank that fits stops quietly beside the one that says why
    if (!fits) {
        char fix[512], rank[32] = "";
        suggest(fix, sizeof fix, c, be, a, batch_fixed, preset, avail);
        if (a->world > 1) snprintf(rank, sizeof rank, "rank %d: ", dist_rank());
        mala_errf(err, "%s--batch %d: training %s needs about %s of memory%s%s (%s); this machine has %s available (%s "
                  "in all): %s", rank, global_batch, preset, need_s, each, dev_s, parts, have_s, all_s, fix);
    }
    return -1;
}

// defines: view_init, view_model_ready, view_free, view_do, view_generate, view_save, view_busy,
//          view_grid_cols, view_message
// What each action does to the viewer's settings. Keys, mouse clicks and script commands all go
// through view_do, so the three stay consistent.
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "image_io.h"
#include "viewer.h"

// Step counts the -/+ controls move through (a script may set any count from 1 to 1000).
static const int STEP_PRESETS[] = {1, 2, 3, 4, 5, 8, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 250, 500, 1000};
#define N_PRESETS (int)(sizeof STEP_PRESETS / sizeof STEP_PRESETS[0])
#define CFG_MAX 20.0f
#define CFG_STEP 0.5f
#define ETA_STEP 0.1f

void view_init(View *v) {
    memset(v, 0, sizeof *v);
    v->opts = gen_opts_default();
    v->opts.kind = SAMPLER_DDIM;  // interactive default: 50 deterministic DDIM steps
    v->opts.steps = 50;
    v->n = VIEW_MAX_IMAGES;
    v->save_dir = ".";
    v->list_cls = -1;
    v->attn_sel = (AttnSel){.on = 0, .block = 0, .head = -1, .image = 0, .query = 0, .a = 1.0f, .id = 1};
    view_message(v, "loading the model...");
}

void view_model_ready(View *v) {
    size_t floats = (size_t)VIEW_MAX_IMAGES * v->model.C * v->model.S * v->model.S;
    v->frame.x = xcalloc(floats, sizeof(float));
    v->result.x = xcalloc(floats, sizeof(float));
    if (v->model.has_attn) {
        const AttnRowInfo *in = &v->model.attn;
        v->attn.row = xcalloc((size_t)in->gh * in->gw, sizeof(float));
        v->attn_sel.query = (in->gh / 2) * in->gw + in->gw / 2;  // the centre token until a click
        v->attn_sel.block = in->blocks / 2;
    }
    v->model_ready = 1;
    view_message(v, "ready: Enter generates, H shows the keys");
}

void view_free(View *v) {
    free(v->frame.x);
    free(v->result.x);
    free(v->attn.row);
    v->attn.row = NULL;
    class_names_free(&v->model.classes);
    v->frame.x = v->result.x = NULL;
}

void view_message(View *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
}

int view_busy(const View *v) { return v->st.phase == WORKER_RUNNING; }

int view_grid_cols(int n) {
    int c = 1;
    while (c * c < n) c++;
    return c;
}

static int steps_neighbour(int steps, int dir) {
    if (dir > 0) {
        for (int i = 0; i < N_PRESETS; i++)
            if (STEP_PRESETS[i] > steps) return STEP_PRESETS[i];
        return steps;
    }
    for (int i = N_PRESETS - 1; i >= 0; i--)
        if (STEP_PRESETS[i] < steps) return STEP_PRESETS[i];
    return steps;
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

// Rounds to the control's grid so repeated +/- never drifts (0.1 steps in float).
static float step_value(float x, float step, int dir, float lo, float hi) {
    return clampf(roundf(x / step + dir) * step, lo, hi);
}

static void set_class(View *v, int k) {
    int K = v->model.classes.n;
    if (K < 1) return;
    v->cls = ((k % K) + K) % K;
}

static uint64_t random_seed(void) {
    static uint64_t counter;
    uint64_t z = SDL_GetPerformanceCounter() + 0x9E3779B97F4A7C15ull * ++counter;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (z ^ (z >> 31)) % 1000000ull;  // short enough to read and type
}

int view_generate(View *v) {
    if (!v->model_ready) {
        view_message(v, "the model is still loading");
        return -1;
    }
    if (view_busy(v)) {
        view_message(v, "already generating (Esc cancels)");
        return -1;
    }
    if (v->seed_random) v->seed = random_seed();
    ViewRequest r = {v->opts, v->n, v->cls, v->seed};
    if (worker_submit(v->worker, &r)) {
        view_message(v, "the generator is not ready");
        return -1;
    }
    v->st.phase = WORKER_RUNNING;  // until the next poll says otherwise
    v->run_previews = 0;
    view_message(v, "generating %d x %s, seed %llu", r.n, v->model.classes.names[r.cls], (unsigned long long)r.seed);
    return 0;
}

// "<dir>/mala_<class>_seed<seed>.png", with _2, _3, ... when taken.
static void pick_name(View *v, char *path, size_t n) {
    char cls[64];
    snprintf(cls, sizeof cls, "%s", v->model.classes.names[v->result.req.cls]);
    for (char *p = cls; *p; p++)
        if (!isalnum((unsigned char)*p)) *p = '-';
    unsigned long long seed = (unsigned long long)v->result.req.seed;
    snprintf(path, n, "%s/mala_%s_seed%llu.png", v->save_dir, cls, seed);
    for (int i = 2; access(path, F_OK) == 0; i++) snprintf(path, n, "%s/mala_%s_seed%llu_%d.png", v->save_dir, cls, seed, i);
}

int view_save(View *v, const char *path, MalaErr *err) {
    if (v->result.n == 0) return mala_errf(err, "nothing to save yet: no run has finished");
    char auto_path[4096];
    if (!path) {
        pick_name(v, auto_path, sizeof auto_path);
        path = auto_path;
    }
    const Frame *r = &v->result;
    int S = v->model.S;
    if (image_save_grid(path, r->x, r->n, v->model.C, S, S, view_grid_cols(r->n), VIEW_GRID_PAD, err)) return -1;
    view_message(v, "saved %s", path);
    return 0;
}

static void save_now(View *v) {
    MalaErr err;
    if (view_save(v, NULL, &err)) view_message(v, "%s", err.msg);
}

static void cancel_or_quit(View *v, int quit_when_idle) {
    if (view_busy(v)) {
        worker_cancel(v->worker);
        view_message(v, "cancelling...");
    } else if (quit_when_idle) {
        v->quit = 1;
    }
}

void view_do(View *v, Action a, int arg) {
    GenOpts *o = &v->opts;
    switch (a) {
    case ACT_NONE: break;
    case ACT_CLASS_PREV: set_class(v, v->cls - 1); break;
    case ACT_CLASS_NEXT: set_class(v, v->cls + 1); break;
    case ACT_CLASS_SET: set_class(v, arg); break;
    case ACT_CFG_DOWN: o->cfg_scale = step_value(o->cfg_scale, CFG_STEP, -1, 1.0f, CFG_MAX); break;
    case ACT_CFG_UP: o->cfg_scale = step_value(o->cfg_scale, CFG_STEP, 1, 1.0f, CFG_MAX); break;
    case ACT_SAMPLER: o->kind = (SamplerKind)((o->kind + 1) % SAMPLER_KIND_COUNT); break;
    case ACT_STEPS_DOWN: o->steps = steps_neighbour(o->steps, -1); break;
    case ACT_STEPS_UP: o->steps = steps_neighbour(o->steps, 1); break;
    case ACT_ETA_DOWN: o->eta = step_value(o->eta, ETA_STEP, -1, 0.0f, 1.0f); break;
    case ACT_ETA_UP: o->eta = step_value(o->eta, ETA_STEP, 1, 0.0f, 1.0f); break;
    case ACT_SEED_DOWN: v->seed -= v->seed > 0; v->seed_random = 0; break;
    case ACT_SEED_UP: v->seed++; v->seed_random = 0; break;
    case ACT_SEED_MODE: v->seed_random = !v->seed_random; break;
    case ACT_N_DOWN: v->n = v->n > 1 ? v->n - 1 : 1; break;
    case ACT_N_UP: v->n = v->n < VIEW_MAX_IMAGES ? v->n + 1 : VIEW_MAX_IMAGES; break;
    case ACT_GENERATE: view_generate(v); break;
    case ACT_CANCEL: cancel_or_quit(v, arg); break;
    case ACT_SAVE: save_now(v); break;
    case ACT_HELP: v->help = !v->help; break;
    case ACT_QUIT: v->quit = 1; break;
    case ACT_ATTN: case ACT_BLOCK_PREV: case ACT_BLOCK_NEXT: case ACT_HEAD_PREV: case ACT_HEAD_NEXT:
    case ACT_SCALE_DOWN: case ACT_SCALE_UP: case ACT_SCALE_SET: view_attn_do(v, a, arg); break;
    }
}

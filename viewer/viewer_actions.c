// defines: view_init, view_pane_open, view_pane_close, view_pane_ready, view_free, view_ready,
//          view_image_at, view_save_one, view_pane_name, view_do, view_generate, view_save, view_busy,
//          view_grid_cols, view_message
// What each action does to the viewer's settings. Keys, mouse clicks and script commands all go
// through view_do, so the three stay consistent.
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "formats/image_io.h"
#include "viewer/viewer.h"
#include "pipeline/gen_params.h"

// Step counts the -/+ controls move through (a script may set any count from 1 to 1000).
static const int STEP_PRESETS[] = {1, 2, 3, 4, 5, 8, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 250, 500, 1000};
#define N_PRESETS (int)(sizeof STEP_PRESETS / sizeof STEP_PRESETS[0])
#define CFG_MAX 20.0f
#define CFG_STEP 0.5f
#define ETA_STEP 0.1f

void view_init(View *v) {
    memset(v, 0, sizeof *v);
    v->opts = gen_opts_default();
    v->opts.kind = v->default_kind = SAMPLER_DDIM;  // interactive default: 50 deterministic DDIM steps
    v->opts.steps = v->default_steps = 50;
    v->n = VIEW_MAX_IMAGES;
    v->save_dir = ".";
    v->list_cls = -1;
    v->attn_sel = (AttnSel){.on = 0, .block = -1, .head = -1, .image = 0, .query = 0, .a = 1.0f, .id = 1};
    view_input_init(v);
    view_message(v, "loading the model...");
}

void view_pane_ready(View *v, int p) {
    Pane *pn = &v->pane[p];
    size_t floats = (size_t)VIEW_MAX_IMAGES * pn->model.C * pn->model.S * pn->model.S;
    pn->frame.x = xcalloc(floats, sizeof(float));
    pn->result.x = xcalloc(floats, sizeof(float));
    pn->ready = 1;
    int first_attn = view_attn_ref(v) == p && !(v->attn_fx > 0);  // the first grid seen: its centre token
    if (pn->model.has_attn) {
        const AttnRowInfo *in = &pn->model.attn;
        pn->attn.row = xcalloc((size_t)in->gh * in->gw, sizeof(float));
        if (first_attn) {
            v->attn_fx = ((float)(in->gw / 2) + 0.5f) / (float)in->gw;
            v->attn_fy = ((float)(in->gh / 2) + 0.5f) / (float)in->gh;
            if (v->attn_sel.block < 0) v->attn_sel.block = in->blocks / 2;
        }
    }
    if (p == 0 && v->cls >= pn->model.classes.n) v->cls = 0;  // a model with fewer classes took the left pane
    if (p == 0) view_config_model_ready(v);
    MalaErr err;
    if (p == 0 && v->in.pending && view_input_load(v, v->in.pending, &err))
        fprintf(stderr, "warning: --init-image: %s\n", err.msg);
    if (p == 0) v->in.pending = NULL;
    if (pn->model.has_attn) view_attn_send(v, p);
    if (!view_ready(v)) return;
    const ModelInfo *a = &v->pane[0].model, *b = &v->pane[v->npanes - 1].model;
    if (v->npanes > 1 && (a->C != b->C || a->S != b->S))
        view_message(v, "ready; the models differ in image size (%dx%dx%d, %dx%dx%d): same seed, each its own noise",
                     a->S, a->S, a->C, b->S, b->S, b->C);
    else if (v->npanes > 1 && a->classes.n != b->classes.n)
        view_message(v, "ready; the models know %d and %d classes: only classes both know generate", a->classes.n,
                     b->classes.n);
    else view_message(v, "ready: Enter generates, H shows the keys");
}

void view_pane_open(View *v, int p, int k) {
    view_pane_close(v, p);
    Pane *pn = &v->pane[p];
    v->model_at[p] = k;
    pn->path = v->models[k];
    pn->worker = worker_start(pn->path, v->be, v->threads, v->wake, NULL);
}

void view_pane_close(View *v, int p) {
    Pane *pn = &v->pane[p];
    if (pn->worker) worker_stop(pn->worker);
    free(pn->frame.x);
    free(pn->result.x);
    free(pn->attn.row);
    class_names_free(&pn->model.classes);
    if (pn->tex) SDL_DestroyTexture(pn->tex);
    memset(pn, 0, sizeof *pn);
}

void view_free(View *v) {
    for (int p = 0; p < VIEW_MAX_PANES; p++) view_pane_close(v, p);
    view_input_free(v);
}

int view_ready(const View *v) {
    for (int p = 0; p < v->npanes; p++)
        if (!v->pane[p].ready) return 0;
    return v->npanes > 0;
}

const char *view_pane_name(const View *v, int p) {
    const char *path = v->pane[p].path ? v->pane[p].path : "";
    const char *base = strrchr(path, '/');
    return base ? base + 1 : path;
}

int view_image_at(const View *v, int x, int y, int *image, float *fx, float *fy) {
    for (int p = 0; p < v->npanes; p++) {
        const Pane *pn = &v->pane[p];
        SDL_Rect r = pn->image_rect;
        if (!pn->ready || pn->frame.n == 0 || r.w <= 0 || x < r.x || y < r.y || x >= r.x + r.w || y >= r.y + r.h)
            continue;
        // window pixel -> grid pixel -> (image, pixel in the image): make_grid puts image k at
        // column k % cols, row k / cols, each cell S + pad wide after a leading pad (none for n = 1)
        const int S = pn->model.S, cell = S + VIEW_GRID_PAD, cols = view_grid_cols(pn->frame.n);
        const int pad = pn->frame.n == 1 ? 0 : VIEW_GRID_PAD;
        int gx = (int)((long long)(x - r.x) * pn->tex_w / r.w) - pad;
        int gy = (int)((long long)(y - r.y) * pn->tex_h / r.h) - pad;
        if (gx < 0 || gy < 0 || gx % cell >= S || gy % cell >= S) return -1;  // on the padding
        int k = (gy / cell) * cols + gx / cell;
        if (gx / cell >= cols || k >= pn->frame.n) return -1;
        *image = k;
        *fx = ((float)(gx % cell) + 0.5f) / (float)S;
        *fy = ((float)(gy % cell) + 0.5f) / (float)S;
        return p;
    }
    return -1;
}

void view_message(View *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
}

int view_busy(const View *v) {
    for (int p = 0; p < v->npanes; p++)
        if (v->pane[p].st.phase == WORKER_RUNNING) return 1;
    return 0;
}

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
    int K = v->pane[0].model.classes.n;
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
    for (int p = 0; p < v->npanes; p++) {
        const Pane *pn = &v->pane[p];
        if (pn->st.phase == WORKER_FAILED) {
            view_message(v, "%s could not be loaded: %s", view_pane_name(v, p), pn->st.msg);
            return -1;
        }
        if (!pn->ready) {
            view_message(v, "the model is still loading");
            return -1;
        }
        if (v->cls >= pn->model.classes.n) {
            view_message(v, "class %d is not one of the %d classes of %s", v->cls, pn->model.classes.n,
                         view_pane_name(v, p));
            return -1;
        }
    }
    if (view_busy(v)) {
        view_message(v, "already generating (Esc cancels)");
        return -1;
    }
    ViewRequest r = {v->opts, v->n, v->cls, v->seed}, rp[VIEW_MAX_PANES];  // the same request for every model
    for (int p = 0; p < v->npanes; p++) {  // with the input, the mask and the blend (viewer_input.c)
        rp[p] = r;
        if (view_input_request(v, p, &rp[p])) return -1;
    }
    if (v->seed_random) r.seed = v->seed = random_seed();
    for (int p = 0; p < v->npanes; p++) {
        rp[p].seed = r.seed;
        if (worker_submit_init(v->pane[p].worker, &rp[p], v->in.img, v->in.mask)) {
            view_message(v, "the generator is not ready");
            for (int q = 0; q < p; q++) worker_cancel(v->pane[q].worker);
            return -1;
        }
    }
    for (int p = 0; p < v->npanes; p++) {
        v->pane[p].st.phase = WORKER_RUNNING;  // until the next poll says otherwise
        v->pane[p].run_previews = 0;
    }
    view_message(v, "generating %d x %s, seed %llu", r.n, v->pane[0].model.classes.names[r.cls],
                 (unsigned long long)r.seed);
    return 0;
}

// Creates path only when it does not exist yet (O_EXCL): the writer then replaces this empty
// reserved file, so no earlier file is ever overwritten, even by another viewer saving at once.
static int reserve(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) return errno == EEXIST ? 1 : -1;
    close(fd);
    return 0;
}

// "<dir>/mala_[<model>_]<class>_seed<seed>[_img<k>].png", then _2, _3, ... when taken; the name
// is reserved on disk. -1 with err when the folder cannot be written.
static int pick_name(View *v, int p, int k, char *path, size_t n, MalaErr *err) {
    const Pane *pn = &v->pane[p];
    char cls[64], model[72] = "", img[24] = "";
    snprintf(cls, sizeof cls, "%s", pn->model.classes.names[pn->result.req.cls]);
    for (char *c = cls; *c; c++)
        if (!isalnum((unsigned char)*c)) *c = '-';
    if (v->npanes > 1) {  // two models: the file's name tells them apart
        snprintf(model, sizeof model, "%s", view_pane_name(v, p));
        char *dot = strrchr(model, '.');
        if (dot && dot != model) *dot = 0;
        for (char *c = model; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '-') *c = '-';
        strcat(model, "_");
    }
    if (k >= 0) snprintf(img, sizeof img, "_img%d", k);
    unsigned long long seed = (unsigned long long)pn->result.req.seed;
    for (int i = 1; i < 100000; i++) {
        char num[16] = "";
        if (i > 1) snprintf(num, sizeof num, "_%d", i);
        snprintf(path, n, "%s/mala_%s%s_seed%llu%s%s.png", v->save_dir, model, cls, seed, img, num);
        int rc = reserve(path);
        if (rc == 0) return 0;
        if (rc < 0) return mala_errf(err, "%s: cannot create: %s", path, strerror(errno));
    }
    return mala_errf(err, "%s: every numbered name is taken", path);
}

// The saved PNG's generation parameters (pipeline/gen_params.h): n images of pane pn's latest run,
// the first at index first of its noise; NULL with err when the model file cannot be hashed.
static char *save_params(const Pane *pn, int n, int first, MalaErr *err) {
    const ViewRequest *q = &pn->result.req;
    int32_t *labels = xmalloc((size_t)n * sizeof *labels);
    for (int i = 0; i < n; i++) labels[i] = q->cls;
    GenParams gp = {.model_path = pn->path, .vae_path = worker_vae_path(pn->worker), .classes = &pn->model.classes,
                    .labels = labels, .n = n, .seed = q->seed, .first = first, .opts = &q->opts,
                    .channels = pn->model.C, .width = pn->model.S, .height = pn->model.S,
                    .strength = q->init ? q->strength : 0.0f, .init_path = q->init ? "viewer input" : NULL,
                    .mask_path = q->mask ? "painted" : NULL, .resample = q->resample};
    char *text = gen_params_text(&gp, err);
    free(labels);
    return text;
}

int view_save(View *v, int p, const char *path, MalaErr *err) {
    const Pane *pn = &v->pane[p];
    if (pn->result.n == 0) return mala_errf(err, "nothing to save yet: no run has finished");
    char auto_path[4096];
    if (!path) {
        if (pick_name(v, p, -1, auto_path, sizeof auto_path, err)) return -1;
        path = auto_path;
    }
    const Frame *r = &pn->result;
    int S = pn->model.S;
    char *params = save_params(pn, r->n, 0, err);
    if (!params || image_save_grid_text(path, r->x, r->n, pn->model.C, S, S, view_grid_cols(r->n), VIEW_GRID_PAD,
                                        GEN_PARAMS_KEYWORD, params, err)) {
        free(params);
        if (path == auto_path) remove(path);
        return -1;
    }
    free(params);
    view_message(v, "saved %s", path);
    return 0;
}

int view_save_one(View *v, int p, int k, const char *path, MalaErr *err) {
    const Pane *pn = &v->pane[p];
    if (pn->result.n == 0) return mala_errf(err, "nothing to save yet: no run has finished");
    if (k < 0 || k >= pn->result.n) return mala_errf(err, "image %d is not in the grid of %d", k, pn->result.n);
    char auto_path[4096];
    if (!path) {
        if (pick_name(v, p, k, auto_path, sizeof auto_path, err)) return -1;
        path = auto_path;
    }
    const int C = pn->model.C, S = pn->model.S;
    char *params = save_params(pn, 1, k, err);
    if (!params || image_save_grid_text(path, pn->result.x + (size_t)k * C * S * S, 1, C, S, S, 1, VIEW_GRID_PAD,
                                        GEN_PARAMS_KEYWORD, params, err)) {
        free(params);
        if (path == auto_path) remove(path);
        return -1;
    }
    free(params);
    view_message(v, "saved %s", path);
    return 0;
}

static void save_now(View *v) {
    MalaErr err;
    char saved[sizeof v->message] = "";
    for (int p = 0; p < v->npanes; p++) {
        if (view_save(v, p, NULL, &err)) {
            view_message(v, "%s", err.msg);
            return;
        }
        size_t len = strlen(saved);
        snprintf(saved + len, sizeof saved - len, "%s%s", p ? ", " : "", v->message + 6);  // after "saved "
    }
    view_message(v, "saved %s", saved);
}

// The image under the pointer, else the attention view's image of the first model.
static void save_one_now(View *v) {
    MalaErr err;
    int k = v->attn_sel.image;
    float fx, fy;
    int p = view_image_at(v, v->mouse_x, v->mouse_y, &k, &fx, &fy);
    if (p < 0) p = 0;
    if (view_save_one(v, p, k, NULL, &err)) view_message(v, "%s", err.msg);
}

// Pane p moves on to the next model file that no other pane shows.
static void next_model(View *v, int p) {
    if (p < 0 || p >= v->npanes) return;
    if (view_busy(v)) {
        view_message(v, "a run is in progress (Esc cancels it first)");
        return;
    }
    int k = v->model_at[p];
    for (int tries = 0; tries < v->nmodels; tries++) {
        k = (k + 1) % v->nmodels;
        int taken = 0;
        for (int q = 0; q < v->npanes; q++) taken |= q != p && v->model_at[q] == k;
        if (!taken) break;
    }
    if (k == v->model_at[p]) {
        view_message(v, "no other model file to switch to (--models DIR or more --ckpt)");
        return;
    }
    view_pane_open(v, p, k);
    view_message(v, "loading %s (%d/%d)...", view_pane_name(v, p), k + 1, v->nmodels);
}

static void cancel_or_quit(View *v, int quit_when_idle) {
    if (view_busy(v)) {
        for (int p = 0; p < v->npanes; p++)
            if (v->pane[p].st.phase == WORKER_RUNNING) worker_cancel(v->pane[p].worker);
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
    case ACT_SAMPLER_SET: if (arg >= 0 && arg < SAMPLER_KIND_COUNT) o->kind = (SamplerKind)arg; break;
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
    case ACT_SAVE_ONE: save_one_now(v); break;
    case ACT_NEXT_MODEL: next_model(v, arg); break;
    case ACT_HELP: v->help = !v->help; break;
    case ACT_QUIT: v->quit = 1; break;
    case ACT_ATTN: case ACT_BLOCK_PREV: case ACT_BLOCK_NEXT: case ACT_HEAD_PREV: case ACT_HEAD_NEXT:
    case ACT_SCALE_DOWN: case ACT_SCALE_UP: case ACT_SCALE_SET: view_attn_do(v, a, arg); break;
    case ACT_USE_INPUT: case ACT_INPUT_OFF: case ACT_STRENGTH_DOWN: case ACT_STRENGTH_UP: case ACT_BRUSH_DOWN:
    case ACT_BRUSH_UP: case ACT_ERASE: case ACT_MASK_CLEAR: case ACT_MASK_INVERT: case ACT_BLEND: case ACT_BLEND_B_PREV:
    case ACT_BLEND_B_NEXT: case ACT_BLEND_W_DOWN: case ACT_BLEND_W_UP: case ACT_STRENGTH_SET: case ACT_BLEND_W_SET:
        view_input_do(v, a, arg);
        break;
    }
}

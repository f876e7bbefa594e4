// defines: view_input_init, view_input_free, view_input_do, view_input_load, view_input_use, view_mask_load,
//          view_mask_paint, view_input_mouse, view_input_request, view_input_drop
// Image-to-image, inpainting and class blends in the viewer (docs/view.md "Image-to-image"): the
// input image (a file from --init-image or a drop, or a generated image: "use as input"), the
// mask painted over it with the mouse (1 regenerate: drawn red), and the settings a request
// carries to the worker, which runs them through generator_run_init as `mala sample` does.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/png_text.h"
#include "pipeline/gen_inputs.h"
#include "pipeline/gen_params.h"
#include "viewer/viewer.h"

#define STRENGTH_STEP 0.05f
#define BLEND_STEP 0.05f
#define BRUSH_MAX 64

void view_input_init(View *v) {
    ViewInput *in = &v->in;
    memset(in, 0, sizeof *in);
    in->strength = 0.75f;
    in->brush = 2;
    in->blend_b = 1;
    in->blend_w = 0.5f;
}

void view_input_free(View *v) {
    ViewInput *in = &v->in;
    free(in->img);
    free(in->mask);
    if (in->tex) SDL_DestroyTexture(in->tex);
    in->img = in->mask = NULL;
    in->tex = NULL;
    in->on = 0;
}

// Buffers for the first pane's image size; 0, or -1 with err before the model is loaded.
static int ensure(View *v, MalaErr *err) {
    ViewInput *in = &v->in;
    const ModelInfo *m = &v->pane[0].model;
    if (!v->pane[0].ready) return mala_errf(err, "the model is still loading");
    if (in->img && in->C == m->C && in->S == m->S) return 0;
    free(in->img);
    free(in->mask);
    if (in->tex) SDL_DestroyTexture(in->tex);  // made for the old size
    in->tex = NULL;
    in->C = m->C;
    in->S = m->S;
    in->img = xcalloc((size_t)in->C * in->S * in->S, sizeof(float));
    in->mask = xcalloc((size_t)in->S * in->S, sizeof(float));
    return 0;
}

static void mask_changed(ViewInput *in) {
    in->masked = 0;
    for (size_t i = 0; i < (size_t)in->S * in->S && !in->masked; i++) in->masked = in->mask[i] > 0.5f;
    in->seq++;
}

static void loaded(View *v, const char *name) {
    ViewInput *in = &v->in;
    snprintf(in->name, sizeof in->name, "%s", name);
    memset(in->mask, 0, (size_t)in->S * in->S * sizeof(float));
    in->on = 1;
    mask_changed(in);
    view_message(v, "input: %s, strength %.2f", in->name, in->strength);
}

int view_input_load(View *v, const char *path, MalaErr *err) {
    if (ensure(v, err)) return -1;
    ViewInput *in = &v->in;
    if (gen_load_image(path, in->C, in->S, in->img, err)) return -1;
    const char *base = strrchr(path, '/');
    loaded(v, base ? base + 1 : path);
    return 0;
}

// A grid PNG's cell k (of n, each cw x ch; VIEW_GRID_PAD apart as our grids are): a grid taken
// whole would be cropped across cells.
static int view_input_load_cell(View *v, const char *path, int k, int n, int cw, int ch, MalaErr *err) {
    if (ensure(v, err)) return -1;
    ViewInput *in = &v->in;
    if (gen_load_grid_cell(path, in->C, in->S, k, cw, ch, VIEW_GRID_PAD, in->img, err)) return -1;
    const char *base = strrchr(path, '/');
    char name[sizeof in->name];
    snprintf(name, sizeof name, "%.60s (image %d of %d)", base ? base + 1 : path, k, n);
    loaded(v, name);
    return 0;
}

int view_input_use(View *v, int p, int k, MalaErr *err) {
    if (ensure(v, err)) return -1;
    const Pane *pn = &v->pane[p];
    ViewInput *in = &v->in;
    if (k < 0 || k >= pn->result.n) return mala_errf(err, "use: image %d is not in the latest grid (%d images)", k, pn->result.n);
    if (pn->model.C != in->C || pn->model.S != in->S)
        return mala_errf(err, "use: pane %d's images are %dx%dx%d, the input is %dx%dx%d", p, pn->model.S, pn->model.S,
                         pn->model.C, in->S, in->S, in->C);
    memcpy(in->img, pn->result.x + (size_t)k * in->C * in->S * in->S, (size_t)in->C * in->S * in->S * sizeof(float));
    char name[64];
    snprintf(name, sizeof name, "image %d", k);
    loaded(v, name);
    return 0;
}

int view_mask_load(View *v, const char *path, MalaErr *err) {
    ViewInput *in = &v->in;
    if (!in->on) return mala_errf(err, "mask=%s: load an input image first (init=FILE or use=K)", path);
    if (gen_load_mask(path, in->S, in->mask, err)) return -1;
    mask_changed(in);
    return 0;
}

void view_mask_paint(View *v, int x, int y, int r, int erase) {
    ViewInput *in = &v->in;
    if (!in->on) return;
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++) {
            int px = x + dx, py = y + dy;
            if (px < 0 || py < 0 || px >= in->S || py >= in->S || dx * dx + dy * dy > r * r) continue;
            in->mask[(size_t)py * in->S + px] = erase ? 0.0f : 1.0f;
        }
    mask_changed(in);
}

int view_input_mouse(View *v, int x, int y, int down) {
    ViewInput *in = &v->in;
    SDL_Rect r = in->rect;
    if (down == 0) in->painting = 0;
    if (!in->on || r.w <= 0 || x < r.x || y < r.y || x >= r.x + r.w || y >= r.y + r.h) return 0;
    if (down > 0) in->painting = 1;
    if (!in->painting) return 0;
    view_mask_paint(v, (int)((long long)(x - r.x) * in->S / r.w), (int)((long long)(y - r.y) * in->S / r.h),
                    in->brush, in->erase);
    return 1;
}

int view_input_request(View *v, int p, ViewRequest *r) {
    const ViewInput *in = &v->in;
    const Pane *pn = &v->pane[p];
    r->init = in->on;
    r->mask = in->on && in->masked;
    r->strength = in->strength;
    r->resample = r->mask && r->opts.kind != SAMPLER_DPMPP_2M ? in->resample : 0;
    r->opts.blend = in->blend;
    r->opts.blend_a = v->cls;
    r->opts.blend_b = in->blend_b;
    r->opts.blend_w = in->blend_w;
    if (in->on && (pn->model.C != in->C || pn->model.S != in->S)) {
        view_message(v, "the input is %dx%dx%d; %s makes %dx%dx%d images", in->S, in->S, in->C, view_pane_name(v, p),
                     pn->model.S, pn->model.S, pn->model.C);
        return -1;
    }
    if (in->blend && in->blend_b >= pn->model.classes.n) {
        view_message(v, "blend class %d is not one of %s's %d classes", in->blend_b, view_pane_name(v, p),
                     pn->model.classes.n);
        return -1;
    }
    return 0;
}

// The settings a PNG's parameters name (pipeline/gen_params.h): class, sampler, steps, guidance,
// eta, seed, strength, resample and blend, each when the model can take it. Returns how many.
static int restore_params(View *v, const char *text) {
    GenParsed gp;
    gen_params_parse(text, &gp);
    const int K = v->pane[0].model.classes.n;
    int got = 0;
    SamplerKind kind;
    GenOpts *o = &v->opts;
    if (gp.have & GP_STEPS) { o->steps = gp.steps; got++; }
    if ((gp.have & GP_SAMPLER) && !sampler_kind_parse(gp.sampler, &kind)) { o->kind = kind; got++; }
    if ((gp.have & GP_CFG) && gp.cfg_scale >= 1.0f) { o->cfg_scale = gp.cfg_scale; got++; }
    if ((gp.have & GP_ETA) && gp.eta <= 1.0f) { o->eta = gp.eta; got++; }
    if (gp.have & GP_SEED) { v->seed = gp.seed; v->seed_random = 0; got++; }
    if ((gp.have & GP_CLASS) && gp.cls < K) { v->cls = gp.cls; got++; }
    if (gp.have & GP_STRENGTH) { v->in.strength = gp.strength; got++; }
    if (gp.have & GP_RESAMPLE) { v->in.resample = gp.resample; got++; }
    v->in.blend = 0;
    if ((gp.have & GP_BLEND) && gp.blend_a < K && gp.blend_b < K) {
        v->in.blend = 1;
        v->cls = gp.blend_a;
        v->in.blend_b = gp.blend_b;
        v->in.blend_w = gp.blend_w;
        got++;
    }
    return got;
}

void view_input_drop(View *v, const char *path) {
    MalaErr err;
    int restored = 0, grid_n = 0, cw = 0, ch = 0, cell = 0;
    size_t len = 0;
    FILE *f = fopen(path, "rb");
    uint8_t *bytes = NULL;
    if (f) {  // a PNG with our parameters (at most the size image_load accepts)
        bytes = xmalloc(PNG_TEXT_MAX_BYTES * 4);
        len = fread(bytes, 1, PNG_TEXT_MAX_BYTES * 4, f);
        fclose(f);
        char *text = NULL;
        if (len > 8 && !memcmp(bytes, "\x89PNG", 4) && png_text_find(bytes, len, path, "parameters", &text, &err) == 1) {
            restored = restore_params(v, text);
            GenParsed gp;
            gen_params_parse(text, &gp);
            if (gp.have & GP_GRID) {  // one cell: the one at the drop point's image in our grid, else the first
                grid_n = gp.grid_n;
                cw = gp.cell_w;
                ch = gp.cell_h;
                float fx, fy;
                if (view_image_at(v, v->mouse_x, v->mouse_y, &cell, &fx, &fy) < 0 || cell < 0 || cell >= grid_n) cell = 0;
            }
        }
        free(text);
        free(bytes);
    }
    if (grid_n ? view_input_load_cell(v, path, cell, grid_n, cw, ch, &err) : view_input_load(v, path, &err)) {
        view_message(v, "%s", err.msg);
        return;
    }
    if (restored) view_message(v, "input: %s; %d settings from its PNG", v->in.name, restored);
    fprintf(stderr, "view: dropped %s: input %dx%dx%d, %d settings restored\n", path, v->in.S, v->in.S, v->in.C, restored);
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

// The image under the pointer, else image 0 of the first pane, becomes the input.
static void use_now(View *v) {
    MalaErr err;
    int k = 0;
    float fx, fy;
    int p = view_image_at(v, v->mouse_x, v->mouse_y, &k, &fx, &fy);
    if (p < 0) p = 0;
    if (view_input_use(v, p, k, &err)) view_message(v, "%s", err.msg);
}

void view_input_do(View *v, Action a, int arg) {
    ViewInput *in = &v->in;
    const int K = v->pane[0].model.classes.n;
    switch (a) {
    case ACT_USE_INPUT: use_now(v); break;
    case ACT_INPUT_OFF: in->on = 0; in->masked = 0; view_message(v, "input off: plain generation"); break;
    case ACT_STRENGTH_DOWN: in->strength = clampf(roundf(in->strength / STRENGTH_STEP - 1) * STRENGTH_STEP, 0.05f, 1); break;
    case ACT_STRENGTH_UP: in->strength = clampf(roundf(in->strength / STRENGTH_STEP + 1) * STRENGTH_STEP, 0.05f, 1); break;
    case ACT_STRENGTH_SET: in->strength = clampf((float)arg / 100.0f, 0.01f, 1); break;
    case ACT_BRUSH_DOWN: in->brush = in->brush > 0 ? in->brush - 1 : 0; break;
    case ACT_BRUSH_UP: in->brush = in->brush < BRUSH_MAX ? in->brush + 1 : BRUSH_MAX; break;
    case ACT_ERASE: in->erase = !in->erase; break;
    case ACT_MASK_CLEAR:
        if (in->mask) memset(in->mask, 0, (size_t)in->S * in->S * sizeof(float));
        if (in->mask) mask_changed(in);
        break;
    case ACT_MASK_INVERT:
        for (size_t i = 0; in->mask && i < (size_t)in->S * in->S; i++) in->mask[i] = in->mask[i] > 0.5f ? 0.0f : 1.0f;
        if (in->mask) mask_changed(in);
        break;
    case ACT_BLEND: in->blend = !in->blend; break;
    case ACT_BLEND_B_PREV: if (K > 0) in->blend_b = (in->blend_b - 1 + K) % K; in->blend = 1; break;
    case ACT_BLEND_B_NEXT: if (K > 0) in->blend_b = (in->blend_b + 1) % K; in->blend = 1; break;
    case ACT_BLEND_W_DOWN: in->blend_w = clampf(roundf(in->blend_w / BLEND_STEP - 1) * BLEND_STEP, 0, 1); in->blend = 1; break;
    case ACT_BLEND_W_UP: in->blend_w = clampf(roundf(in->blend_w / BLEND_STEP + 1) * BLEND_STEP, 0, 1); in->blend = 1; break;
    case ACT_BLEND_W_SET: in->blend_w = clampf((float)arg / 100.0f, 0, 1); in->blend = 1; break;
    default: break;
    }
}

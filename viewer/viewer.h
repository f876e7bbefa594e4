// mala view: the SDL2 desktop viewer. Its parts share this header:
//   viewer_main.c    the command: flags, window, event loop, keys and mouse -> actions
//   viewer_actions.c what an action does to the settings; generate, cancel, save
//   viewer_worker.c  the generation thread, the only caller of the generate.h API
//   viewer_ui.c      layout, widgets, drawing, screenshots (SDL renderer)
//   viewer_font.c    text drawn from stb_easy_font's built-in glyphs (no font files)
//   viewer_script.c  --script: parsing, then execution between frames
//   viewer_config.c  the settings file between runs (its parser: view_settings.c, without SDL)
//   viewer_input.c   image-to-image, inpainting and class blends: the input image, its mask, painting
// Threads: the UI thread owns the window and the View; the worker owns the Generator. They
// share only the Worker struct (viewer_worker.c), under its mutex.
#ifndef MALA_VIEWER_H
#define MALA_VIEWER_H

#include <SDL.h>
#include <stdint.h>

#include "pipeline/generate.h"

#define VIEW_MAX_IMAGES 16  // grid size 1..16; the generator is opened for this batch
#define VIEW_GRID_PAD 2     // torchvision make_grid padding, as `mala sample --out`

// ---- the generation thread (viewer_worker.c) ----

// One run: n images of class cls, noise and per-step noise seeded by seed (as `mala sample
// --class cls --n n --seed seed`, so the same settings give the same images).
// With init set, every image starts from the input image the submit handed over (worker_submit):
// image-to-image at strength, inpainting where the mask is 1 (mask set) with resample jumps.
typedef struct {
    GenOpts opts;
    int n, cls;
    uint64_t seed;
    int init, mask, resample;
    float strength;
} ViewRequest;

typedef enum { WORKER_LOADING, WORKER_IDLE, WORKER_RUNNING, WORKER_FAILED } WorkerPhase;
typedef enum { RUN_NONE, RUN_DONE, RUN_CANCELLED, RUN_FAILED } RunOutcome;

typedef struct {
    int C, S;              // channels and side of one image
    int has_attn;          // the backbone has attention rows (net_attn_info)
    AttnRowInfo attn;      // their geometry, when it has
    char attn_why[MALA_ERR_LEN];  // why not, when it has none (DiG, DiC)
    char arch[80];         // "depth 4, hidden 128, patch 4"
    char data[80];         // "mala, 32x32x1, 10 classes"
    ClassNames classes;
} ModelInfo;

typedef struct {
    WorkerPhase phase;
    RunOutcome outcome;        // of the latest finished run
    int step, nsteps;          // progress of the current (or latest) run
    double steps_per_s, seconds;
    uint64_t seq;              // bumps with every new frame (a preview or a result)
    char msg[MALA_ERR_LEN];    // why loading or the latest run failed
} WorkerStatus;

// Images [n, C, S, S] in [-1, 1]: a step's predicted x0 (final = 0) or a finished run (final = 1).
typedef struct {
    float *x;
    int n, final;
    ViewRequest req;
} Frame;

// The attention map to show: the row of query token `query` of grid image `image` in block
// `block`, head `head` (< 0: the mean over heads), the query scaled by a. id changes with every
// new selection, so a map can be matched to the selection it answers.
typedef struct {
    int on, block, head, image, query;
    float a;
    uint64_t id;
} AttnSel;

typedef struct {
    float *row;            // [gh*gw] scores (host), valid when ok
    int ok;
    AttnSel sel;           // what it answers
    int step;              // the sampling step whose forward it comes from (0: none yet)
    uint64_t frame_seq;    // WorkerStatus.seq when it was computed (the frame it belongs to)
    char msg[MALA_ERR_LEN];  // why there is no row
} AttnMap;

typedef struct Worker Worker;
typedef void (*WakeFn)(void *ctx);  // called from the worker whenever its status changes

// Starts the thread, which opens the model file and then waits for requests.
Worker *worker_start(const char *path, const Backend *be, int threads, WakeFn wake, void *wake_ctx);
// Latent models (docs/design.md §8): the VAE file every worker started afterwards decodes frames with
// (NULL: none), and the check that a model and the flag agree (a latent model needs --vae).
void worker_set_vae(const char *vae_path);
// A latent model needs vae_path; a pixel model refuses one unless pixel_ok (two panes: the VAE is
// for the latent one). An unconditional model (num_classes 0) is refused.
int worker_check_vae(const char *model, const char *vae_path, int pixel_ok, MalaErr *err);
// Fills *out (class names copied) and returns 0 once the model is loaded; -1 before or on failure.
int worker_model(Worker *w, ModelInfo *out);
// The VAE file the loaded model's frames decode through; NULL for a pixel model or before loading.
const char *worker_vae_path(Worker *w);
// Queues a run; -1 unless the worker is idle. The phase is WORKER_RUNNING when this returns 0.
// With r->init: image [C, S, S] (the model's output images; copied) and with r->mask the mask
// [S, S] (1 regenerate), which the worker encodes / brings to the model's grid.
int worker_submit(Worker *w, const ViewRequest *r);
int worker_submit_init(Worker *w, const ViewRequest *r, const float *image, const float *mask);
void worker_cancel(Worker *w);  // the run stops after its current step
// Copies the status into *st and, when a newer frame exists than *seen, the frame into *f
// (f->x holds VIEW_MAX_IMAGES images) and updates *seen. Returns 1 when a frame was copied.
int worker_poll(Worker *w, WorkerStatus *st, Frame *f, uint64_t *seen);
// Asks for the attention map of sel (computed from the last forward: after every step of a run,
// and at once when idle). Off (sel.on = 0) computes nothing.
void worker_set_attn(Worker *w, const AttnSel *sel);
// Copies the newest map into *m (m->row holds gh*gw floats) when it is newer than *seen; 1 then.
int worker_poll_attn(Worker *w, AttnMap *m, uint64_t *seen);
// Cancels any run, joins the thread, closes the model and frees everything.
void worker_stop(Worker *w);

// ---- the view: settings and what is shown (owned by the UI thread) ----

typedef enum {
    ACT_NONE, ACT_CLASS_PREV, ACT_CLASS_NEXT, ACT_CLASS_SET, ACT_CFG_DOWN, ACT_CFG_UP, ACT_SAMPLER,
    ACT_STEPS_DOWN, ACT_STEPS_UP, ACT_ETA_DOWN, ACT_ETA_UP, ACT_SEED_DOWN, ACT_SEED_UP, ACT_SEED_MODE,
    ACT_N_DOWN, ACT_N_UP, ACT_GENERATE, ACT_CANCEL, ACT_SAVE, ACT_HELP, ACT_QUIT,
    ACT_SAMPLER_SET,  // arg: a SamplerKind
    ACT_SAVE_ONE,     // one image: the one under the pointer, else the attention view's image
    ACT_NEXT_MODEL,   // arg: the pane that moves on to the next model file
    // the attention view (viewer_attn.c)
    ACT_ATTN, ACT_BLOCK_PREV, ACT_BLOCK_NEXT, ACT_HEAD_PREV, ACT_HEAD_NEXT, ACT_SCALE_DOWN, ACT_SCALE_UP,
    ACT_SCALE_SET, // arg: slider notch 0..ATTN_NOTCHES-1
    // image-to-image, inpainting, blends (viewer_input.c)
    ACT_USE_INPUT, ACT_INPUT_OFF, ACT_STRENGTH_DOWN, ACT_STRENGTH_UP, ACT_BRUSH_DOWN, ACT_BRUSH_UP, ACT_ERASE,
    ACT_MASK_CLEAR, ACT_MASK_INVERT, ACT_BLEND, ACT_BLEND_B_PREV, ACT_BLEND_B_NEXT, ACT_BLEND_W_DOWN, ACT_BLEND_W_UP,
    ACT_STRENGTH_SET,  // arg: percent 1..100
    ACT_BLEND_W_SET    // arg: percent 0..100
} Action;

// The input of image-to-image and inpainting, and the class blend (viewer_input.c).
typedef struct {
    int on;                 // an input image is loaded
    char name[256];         // its file's name, or "image K" of a run
    int C, S;               // its size: the first pane's output images
    float *img;             // [C, S, S] in [-1, 1]
    float *mask;            // [S, S]: 1 regenerate, 0 keep
    int masked;             // any mask pixel is 1: the run inpaints
    float strength;         // (0, 1]
    int brush, erase, resample;
    int painting;           // the left button is down over the input
    SDL_Rect rect;          // where the input was last drawn
    uint64_t tex_seq, seq;  // the texture shows version tex_seq of img + mask
    SDL_Texture *tex;
    int blend, blend_b;     // the class blend: the chosen class (A) and blend_b (B), weight blend_w
    float blend_w;
    const char *pending;    // --init-image: loaded once the first model is
} ViewInput;

#define ATTN_A_MIN 0.25f
#define ATTN_A_MAX 8.0f
#define ATTN_NOTCHES 41  // slider positions: a = 2^(-2 + 5 i / 40), a quarter of an octave (2^0.125) apart

#define VIEW_MAX_PANES 2  // models shown side by side

// One model on screen: its worker, what it generated and where it was drawn.
typedef struct {
    const char *path;        // its model file (one of View.models)
    Worker *worker;
    ModelInfo model;
    int ready;               // the model is loaded and the frames allocated
    WorkerStatus st;
    uint64_t seen;
    Frame frame;   // shown: the latest preview or result
    Frame result;  // the latest finished run: what Save writes
    int run_previews;        // step previews (predicted x0) drawn for the latest run
    SDL_Texture *tex;
    int tex_w, tex_h;
    uint64_t tex_seq;        // frame seq the texture shows
    SDL_Rect image_rect;     // where the grid was last drawn (for clicks, logs and tests)
    int image_scale;
    AttnMap attn;            // the newest map of this model
    uint64_t attn_seen;
    SDL_Rect attn_rect;      // where the map was last drawn
} Pane;

typedef struct {
    // settings for the next run
    int cls, n, seed_random;
    uint64_t seed;
    GenOpts opts;
    SamplerKind default_kind;  // the model's starting sampler and steps (view_config_model_defaults):
    int default_steps;         // the settings file keeps a sampler or steps only when it differs
    // the models: every --ckpt, then the files of --models DIR; pane p shows models[model_at[p]]
    const char *const *models;
    int nmodels, npanes, model_at[VIEW_MAX_PANES];
    Pane pane[VIEW_MAX_PANES];
    const Backend *be;
    int threads;
    WakeFn wake;
    const char *save_dir;
    // interface state
    int help, quit, mouse_x, mouse_y;
    int list_top, list_cls;  // first class shown in the list; the class it last scrolled to
    char message[320];
    const char *shot_path;   // screenshot wanted at the next frame
    int shot_failed;
    char pending_class[64];  // a class name from the settings file, resolved once the model is loaded
    // rendering
    SDL_Window *win;
    SDL_Renderer *ren;
    // the attention view: the selection (sent to every worker; the query point is kept as a
    // fraction of the image, so models with different token grids answer the same spot)
    AttnSel attn_sel;
    float attn_fx, attn_fy;
    ViewInput in;           // image-to-image, inpainting, blends
} View;

// viewer_actions.c
void view_init(View *v);
// Starts pane p's worker on models[k] (closing the one it had).
void view_pane_open(View *v, int p, int k);
void view_pane_close(View *v, int p);    // stops its worker, frees its frames and texture
void view_pane_ready(View *v, int p);    // allocates its frames once its model is known
void view_free(View *v);
int view_ready(const View *v);           // every pane's model is loaded
// The pane whose image grid holds window pixel (x, y), with the image and the point as a fraction
// of that image; -1 when none.
int view_image_at(const View *v, int x, int y, int *image, float *fx, float *fy);
// Writes image k of pane p's latest finished run as PNG; path NULL picks a new numbered name.
int view_save_one(View *v, int p, int k, const char *path, MalaErr *err);
const char *view_pane_name(const View *v, int p);  // the model file's name without its folder
void view_do(View *v, Action a, int arg);  // keys, clicks and scripts all end up here
int view_generate(View *v);              // -1 (with a message) when busy or not loaded
// Writes pane p's latest finished grid as PNG; path NULL picks a new name in save_dir.
int view_save(View *v, int p, const char *path, MalaErr *err);
int view_busy(const View *v);            // a run is in progress
int view_grid_cols(int n);               // images per grid row: ceil(sqrt(n))
void view_message(View *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// viewer_attn.c
void view_attn_do(View *v, Action a, int arg);
// A click at window pixel (x, y): over an image of the grid, with the view on, picks the query
// token under it. Returns 1 when it did.
int view_attn_pick(View *v, int x, int y);
// Sets the query to token (col, row) of grid image `image`; -1 with err when out of range.
int view_attn_query(View *v, int col, int row, int image, MalaErr *err);
int view_attn_ready(const View *v);        // every shown map answers the current selection and frame
int view_attn_ref(const View *v);          // the first pane with attention rows, -1 when none
// The selection as pane p's worker sees it: the query point on its grid, block and head clamped.
AttnSel view_attn_sel(const View *v, int p);
void view_attn_send(View *v, int p);       // hands pane p's selection to its worker
// Sharpness of a row of L scores: sum, top / mean (the largest score over the mean |score|; 1 for
// a flat row, which MALA's rows are not quite, having negative scores) and the entropy of the
// positive part normalised to sum 1 (nats; log L for a flat row).
void attn_stats(const float *row, int L, double *sum, double *top_mean, double *entropy);
// Writes pane p's shown row as a float32 .npy [gh, gw] and logs its statistics.
int view_attn_dump(View *v, int p, const char *path, MalaErr *err);
void view_attn_label(const View *v, int p, char *buf, size_t n);  // "block 2/4  head mean"

// viewer_input.c
void view_input_init(View *v);
void view_input_free(View *v);
void view_input_do(View *v, Action a, int arg);
// Loads an image file as the input (center-cropped to the first pane's size); -1 with err.
int view_input_load(View *v, const char *path, MalaErr *err);
// Image k of pane p's latest finished run becomes the input.
int view_input_use(View *v, int p, int k, MalaErr *err);
// The mask from a PNG (white regenerate), or painted: a disc of radius r (input pixels) at (x, y),
// erased when erase. 
int view_mask_load(View *v, const char *path, MalaErr *err);
void view_mask_paint(View *v, int x, int y, int r, int erase);
// A mouse press / drag at window pixel (x, y): paints on the input when over it; 1 when it did.
int view_input_mouse(View *v, int x, int y, int down);
// The request's input fields from the settings (0), or -1 with a message when pane p cannot take it.
int view_input_request(View *v, int p, ViewRequest *r);
// A file dropped on the window: a PNG with our parameters restores the settings it names, and
// every image becomes the input.
void view_input_drop(View *v, const char *path);

// viewer_config.c: the settings file (view_settings.h) between runs
// The sampler a fresh View starts with for `model`: DPM-Solver++ (2M), 20 steps for a latent model
// (DiT-XL/2 on a CPU: seconds per step), the 50 DDIM steps of view_init for a pixel model. Call it
// before view_config_load, whose saved settings (and a script's commands after it) win. The file
// keeps a sampler or a step count only when the person chose one other than the model's start,
// so a session on a pixel model saves none that would hold back a latent model's next session.
void view_config_model_defaults(View *v, const char *model);
// Applies the file at path to v's settings (the class by name once the model is loaded). A
// corrupt file is ignored with a one-line warning on stderr; returns -1 then (it is not
// overwritten at the end), else 0 (also when there is no file yet).
int view_config_load(View *v, const char *path);
void view_config_model_ready(View *v);  // resolves the class name the file gave
// Writes v's settings to path atomically; a failure is a one-line warning.
void view_config_save(const View *v, const char *path);

// ---- drawing (viewer_ui.c) ----

typedef struct {
    SDL_Rect r;
    Action act;
    int arg;
} Hit;

#define UI_MAX_HITS 160
#define UI_MAX_CUTS 16
typedef struct {
    Hit hit[UI_MAX_HITS];
    int n;
    SDL_Rect list;   // the class list, for the mouse wheel
    int cuts;        // texts of the frame cut with ".." to fit (logged with a screenshot)
    char cut[UI_MAX_CUTS][2][96];  // the first ones: the text, and what was shown
} UiHits;

// Draws the whole window into the renderer (not presented) and records the clickable areas and
// the texts it had to cut.
void ui_draw(View *v, UiHits *hits);
// The action under (x, y), ACT_NONE when none.
Action ui_hit(const UiHits *h, int x, int y, int *arg);
// Re-uploads pane p's shown frame into its texture when it changed. -1 with err on failure.
int ui_update_texture(View *v, int p, MalaErr *err);
// Reads the rendered (not yet presented) frame and writes it as an RGB PNG of the output size.
int ui_screenshot(SDL_Renderer *ren, const char *path, MalaErr *err);
void ui_scroll_list(View *v, int rows);

// ---- text (viewer_font.c) ----

int font_width(const char *s, int scale);
int font_height(int scale);  // of one line of capitals, without descenders
void font_draw(SDL_Renderer *ren, int x, int y, int scale, SDL_Color c, const char *s);
// Copies s into buf (size n), cut with ".." so it is at most max_w pixels wide; 1 when it was cut.
int font_fit(char *buf, size_t n, const char *s, int scale, int max_w);

// ---- scripts (viewer_script.c) ----

typedef enum {
    SC_CLASS, SC_CFG, SC_STEPS, SC_SAMPLER, SC_ETA, SC_N, SC_SEED, SC_GENERATE, SC_WAIT, SC_CANCEL,
    SC_SAVE, SC_SCREENSHOT, SC_HELP, SC_SLEEP, SC_KEY, SC_CLICK, SC_SIZE, SC_QUIT,
    SC_ATTN, SC_QUERY, SC_BLOCK, SC_HEAD, SC_SCALE, SC_ATTN_DUMP, SC_PANE, SC_SAVE_ONE, SC_NEXT_MODEL,
    SC_INIT, SC_USE, SC_STRENGTH, SC_MASK, SC_PAINT, SC_ERASE, SC_MASK_CLEAR, SC_MASK_INVERT, SC_BRUSH, SC_RESAMPLE,
    SC_BLEND, SC_DROP
} ScriptOp;

typedef struct {
    ScriptOp op;
    char *arg;      // the text after '=' (NULL when none)
    double num;     // the parsed number, for numeric commands; the key code for key=
} ScriptCmd;

typedef struct {
    ScriptCmd *cmd;
    int n, pc;
    int started;    // cmd[pc] began and is waiting (generate, sleep, screenshot)
    int pane;       // the pane save, save_one and attn_dump act on (pane=)
    double until;   // sleep deadline
} Script;

typedef enum { SCRIPT_BLOCKED, SCRIPT_END, SCRIPT_QUIT, SCRIPT_ERROR } ScriptState;

// Parses "class=Sneaker;cfg=4;generate;wait;save=out.png;quit". Unknown commands and bad values
// are refused here, before any window opens; class names are checked when they run.
int script_parse(Script *s, const char *text, MalaErr *err);
void script_free(Script *s);
// Runs commands until one has to wait for a later frame (SCRIPT_BLOCKED), the script ends, quits
// or fails (err set).
ScriptState script_step(Script *s, View *v, MalaErr *err);
const char *script_usage(void);

#endif

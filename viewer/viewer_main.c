// defines: cmd_view
// mala view: an SDL2 window to generate images interactively. The UI thread (this file) handles
// events, runs --script commands between frames and draws; generation happens on the worker
// thread (viewer_worker.c), which wakes the event loop with a user event whenever it has news,
// so the loop sleeps in SDL_WaitEventTimeout instead of polling and never waits for a step.
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "formats/view_settings.h"
#include "formats/image_io.h"
#include "viewer/viewer.h"

#define MIN_W 640
#define MIN_H 560
#define FRAME_S (1.0 / 60)  // at most 60 redraws a second, however fast the steps come

typedef struct {
    const char *ckpt, *models_dir, *device, *precision, *script, *screenshot, *save_dir, *config;
    const char *vae;  // latent models: the VAE that decodes their frames
    const char *cfg_channels;  // --cfg-channels N|all (every pane), and its value (gen_cfg_channels_parse)
    int cfg_ch;
    const char *init_image;  // the input of image-to-image / inpainting
    const char *weights;     // a training checkpoint's "ema" or "online" weights (every pane)
    int threads, width, height, no_config;
} ViewArgs;

static Uint32 g_wake_type;       // SDL user event the worker pushes
static atomic_int g_wake_pending; // at most one wake event queued at a time

static void wake_ui(void *ctx) {
    if (atomic_exchange(&g_wake_pending, 1)) return;
    SDL_Event e;
    memset(&e, 0, sizeof e);
    e.type = g_wake_type;
    SDL_PushEvent(&e);
}

// ---- events ----

static Action key_action(const View *v, SDL_Keycode k, Uint16 mod, int *arg) {
    *arg = 0;
    switch (k) {
    case SDLK_TAB: *arg = mod & KMOD_SHIFT ? 0 : v->npanes - 1; return ACT_NEXT_MODEL;
    case SDLK_i: return ACT_SAVE_ONE;
    case SDLK_RETURN: case SDLK_KP_ENTER: case SDLK_SPACE: return ACT_GENERATE;
    case SDLK_ESCAPE: *arg = 1; return ACT_CANCEL;  // cancels a run, quits when idle
    case SDLK_q: return ACT_QUIT;
    case SDLK_LEFT: return ACT_CLASS_PREV;
    case SDLK_RIGHT: return ACT_CLASS_NEXT;
    case SDLK_UP: return ACT_CFG_UP;
    case SDLK_DOWN: return ACT_CFG_DOWN;
    case SDLK_m: return ACT_SAMPLER;
    case SDLK_LEFTBRACKET: return ACT_STEPS_DOWN;
    case SDLK_RIGHTBRACKET: return ACT_STEPS_UP;
    case SDLK_COMMA: return ACT_ETA_DOWN;
    case SDLK_PERIOD: return ACT_ETA_UP;
    case SDLK_PAGEDOWN: return ACT_SEED_DOWN;
    case SDLK_PAGEUP: return ACT_SEED_UP;
    case SDLK_r: return ACT_SEED_MODE;
    case SDLK_MINUS: case SDLK_KP_MINUS: return ACT_N_DOWN;
    case SDLK_PLUS: case SDLK_EQUALS: case SDLK_KP_PLUS: return ACT_N_UP;
    case SDLK_s: return ACT_SAVE;
    case SDLK_h: case SDLK_F1: return ACT_HELP;
    case SDLK_a: return ACT_ATTN;
    case SDLK_b: return ACT_BLOCK_PREV;
    case SDLK_n: return ACT_BLOCK_NEXT;
    case SDLK_j: return ACT_HEAD_PREV;
    case SDLK_k: return ACT_HEAD_NEXT;
    case SDLK_z: return ACT_SCALE_DOWN;
    case SDLK_x: return ACT_SCALE_UP;
    case SDLK_u: return ACT_USE_INPUT;
    case SDLK_BACKSPACE: return ACT_INPUT_OFF;
    case SDLK_f: return ACT_STRENGTH_DOWN;
    case SDLK_g: return ACT_STRENGTH_UP;
    case SDLK_9: return ACT_BRUSH_DOWN;
    case SDLK_0: return ACT_BRUSH_UP;
    case SDLK_e: return ACT_ERASE;
    case SDLK_c: return ACT_MASK_CLEAR;
    case SDLK_v: return ACT_MASK_INVERT;
    case SDLK_l: return ACT_BLEND;
    case SDLK_o: return ACT_BLEND_B_PREV;
    case SDLK_p: return ACT_BLEND_B_NEXT;
    case SDLK_7: return ACT_BLEND_W_DOWN;
    case SDLK_8: return ACT_BLEND_W_UP;
    default: return ACT_NONE;
    }
}

static void on_key(View *v, SDL_Keycode k, Uint16 mod) {
    if (v->help && (k == SDLK_ESCAPE || k == SDLK_h || k == SDLK_F1)) {
        v->help = 0;  // Esc closes the overlay before it cancels or quits
        return;
    }
    int arg;
    Action a = key_action(v, k, mod, &arg);
    view_do(v, a, arg);
}

static void on_event(View *v, const UiHits *hits, const SDL_Event *e) {
    int arg = 0;
    if (e->type == g_wake_type) {
        atomic_store(&g_wake_pending, 0);
    } else if (e->type == SDL_QUIT) {
        v->quit = 1;
    } else if (e->type == SDL_KEYDOWN) {
        on_key(v, e->key.keysym.sym, e->key.keysym.mod);
    } else if (e->type == SDL_MOUSEMOTION) {
        v->mouse_x = e->motion.x;
        v->mouse_y = e->motion.y;
        if (v->in.painting) view_input_mouse(v, e->motion.x, e->motion.y, -1);  // a drag paints on
    } else if (e->type == SDL_MOUSEBUTTONUP && e->button.button == SDL_BUTTON_LEFT) {
        view_input_mouse(v, e->button.x, e->button.y, 0);
    } else if (e->type == SDL_DROPFILE) {
        view_input_drop(v, e->drop.file);
        SDL_free(e->drop.file);
    } else if (e->type == SDL_MOUSEBUTTONDOWN && e->button.button == SDL_BUTTON_LEFT) {
        Action a = ui_hit(hits, e->button.x, e->button.y, &arg);
        if (a == ACT_NONE && view_input_mouse(v, e->button.x, e->button.y, 1)) return;  // painting the mask
        if (a != ACT_NONE || !view_attn_pick(v, e->button.x, e->button.y)) view_do(v, a, arg);
    } else if (e->type == SDL_MOUSEWHEEL) {
        SDL_Rect l = hits->list;
        if (v->mouse_x >= l.x && v->mouse_x < l.x + l.w && v->mouse_y >= l.y && v->mouse_y < l.y + l.h)
            ui_scroll_list(v, -e->wheel.y);
    }
}

// Sleeps until an event (or timeout_ms), then handles everything queued. Returns 1 when there
// was an event.
static int pump_events(View *v, const UiHits *hits, int timeout_ms) {
    SDL_Event e;
    if (!SDL_WaitEventTimeout(&e, timeout_ms)) return 0;
    do on_event(v, hits, &e);
    while (SDL_PollEvent(&e));
    return 1;
}

// ---- the worker's news ----

static void log_run_end(const View *v, int p) {
    const Pane *pn = &v->pane[p];
    const WorkerStatus *st = &pn->st;
    const ViewRequest *r = &pn->frame.req;
    char who[300] = "", from[160] = "";
    const char *kind = sampler_kind_label(r->opts.kind);
    if (v->npanes > 1) snprintf(who, sizeof who, "pane %d %s: ", p, view_pane_name(v, p));
    if (r->init) snprintf(from, sizeof from, ", from the input at strength %.2f%s", r->strength, r->mask ? ", inpainting" : "");
    if (r->opts.blend && r->opts.blend_b < pn->model.classes.n)
        snprintf(from + strlen(from), sizeof from - strlen(from), ", blend %.2f of %s", r->opts.blend_w,
                 pn->model.classes.names[r->opts.blend_b]);
    if (st->outcome == RUN_DONE)
        fprintf(stderr, "view: %sgenerated %d x %s (%s %d steps, cfg %.1f, eta %.1f, seed %llu%s) in %.2f s, "
                "%.1f steps/s on %s, %d step previews shown\n", who, r->n, pn->model.classes.names[r->cls], kind,
                r->opts.steps, r->opts.cfg_scale, r->opts.eta, (unsigned long long)r->seed, from, st->seconds,
                st->steps_per_s, v->be->name, pn->run_previews);
    else if (st->outcome == RUN_CANCELLED)
        fprintf(stderr, "view: %scancelled at step %d/%d after %.2f s, %d step previews shown\n", who, st->step,
                st->nsteps, st->seconds, pn->run_previews);
    else if (st->outcome == RUN_FAILED)
        fprintf(stderr, "view: %sgeneration failed: %s\n", who, st->msg);
}

// Takes pane p's status and newest frame; returns 1 when something changed.
static int poll_pane(View *v, int p) {
    Pane *pn = &v->pane[p];
    WorkerPhase before = pn->st.phase;
    int changed = 0;
    if (!pn->worker) return 0;
    if (!pn->ready && worker_model(pn->worker, &pn->model) == 0) {
        view_pane_ready(v, p);
        changed = 1;
    }
    int fresh = worker_poll(pn->worker, &pn->st, &pn->frame, &pn->seen);
    if (pn->ready && pn->model.has_attn) changed |= worker_poll_attn(pn->worker, &pn->attn, &pn->attn_seen);
    if (fresh && pn->frame.final) {
        const Frame *f = &pn->frame;
        memcpy(pn->result.x, f->x, (size_t)f->n * pn->model.C * pn->model.S * pn->model.S * sizeof(float));
        pn->result.n = f->n;
        pn->result.final = 1;
        pn->result.req = f->req;
    }
    if (before == WORKER_RUNNING && pn->st.phase == WORKER_IDLE) {
        log_run_end(v, p);
        if (!view_busy(v)) {
            if (pn->st.outcome == RUN_CANCELLED) view_message(v, "cancelled");
            else if (pn->st.outcome == RUN_DONE) view_message(v, "done: S saves the grid, I one image");
        }
    }
    return changed || fresh || before != pn->st.phase;
}

static int poll_worker(View *v) {
    int changed = 0;
    for (int p = 0; p < v->npanes; p++) changed |= poll_pane(v, p);
    return changed;
}

static int pane_failed(const View *v) {
    for (int p = 0; p < v->npanes; p++)
        if (v->pane[p].st.phase == WORKER_FAILED) return p;
    return -1;
}

// ---- frames ----

static void draw_frame(View *v, UiHits *hits) {
    MalaErr err;
    for (int p = 0; p < v->npanes; p++) {
        Pane *pn = &v->pane[p];
        uint64_t shown = pn->tex_seq;
        if (ui_update_texture(v, p, &err)) view_message(v, "%s", err.msg);
        if (pn->tex_seq != shown && !pn->frame.final) pn->run_previews++;
    }
    ui_draw(v, hits);
    if (v->shot_path) {
        if (ui_screenshot(v->ren, v->shot_path, &err)) {
            v->shot_failed = 1;
            view_message(v, "%s", err.msg);
        } else {
            SDL_Rect r = v->pane[0].image_rect;
            int w, h;
            SDL_GetRendererOutputSize(v->ren, &w, &h);
            fprintf(stderr, "view: screenshot %s %dx%d, image %dx%d at %d,%d scale %d, %d texts cut\n", v->shot_path, w,
                    h, r.w, r.h, r.x, r.y, v->pane[0].image_scale, hits->cuts);
            const ViewInput *in = &v->in;
            if (in->on) {
                int painted = 0;
                for (int i = 0; i < in->S * in->S; i++) painted += in->mask[i] > 0.5f;
                fprintf(stderr, "view: input %s %dx%d at %d,%d, strength %.2f, %d mask pixels\n", in->name, in->rect.w,
                        in->rect.h, in->rect.x, in->rect.y, in->strength, painted);
            }
            for (int i = 0; i < hits->cuts && i < UI_MAX_CUTS; i++)
                fprintf(stderr, "view: text cut to fit: '%s' shown as '%s'\n", hits->cut[i][0], hits->cut[i][1]);
            for (int p = 0; p < v->npanes && v->npanes > 1; p++) {
                const Pane *pn = &v->pane[p];
                fprintf(stderr, "view: pane %d %s image %dx%d at %d,%d scale %d, map %dx%d at %d,%d\n", p,
                        view_pane_name(v, p), pn->image_rect.w, pn->image_rect.h, pn->image_rect.x, pn->image_rect.y,
                        pn->image_scale, pn->attn_rect.w, pn->attn_rect.h, pn->attn_rect.x, pn->attn_rect.y);
            }
        }
        v->shot_path = NULL;
    }
    SDL_RenderPresent(v->ren);
}

// The script (possibly empty) starts once the model is loaded; when it ends the --screenshot is
// taken, and a `quit` then closes the window.
typedef struct {
    Script *sc;
    const char *final_shot;
    int headless;        // a script or a screenshot was asked for: errors end the program
    int over, quit_after, shot_asked;
} ScriptRun;

// Runs the script's next commands; returns 1 when they changed something, -1 on an error.
static int advance_script(View *v, ScriptRun *r) {
    if (r->over || !view_ready(v)) return 0;
    MalaErr err;
    int pc = r->sc->pc;
    ScriptState ss = script_step(r->sc, v, &err);
    if (ss == SCRIPT_ERROR) {
        fprintf(stderr, "error: --script: %s\n", err.msg);
        return -1;
    }
    r->over = ss == SCRIPT_END || ss == SCRIPT_QUIT;
    r->quit_after = ss == SCRIPT_QUIT;
    if (r->over && r->final_shot && !r->shot_asked) {
        v->shot_path = r->final_shot;
        r->shot_asked = 1;
    }
    return r->sc->pc != pc;
}

// How long the loop may sleep: until the next allowed frame when one is due, briefly while a
// script runs, else until the worker or the user does something.
static int wait_ms(const View *v, const ScriptRun *r, int dirty, double last_draw) {
    if (dirty) {
        int ms = (int)((last_draw + FRAME_S - now_seconds()) * 1000) + 1;
        return ms > 0 ? ms : 0;
    }
    return (!r->over && view_ready(v)) || v->shot_path ? 10 : 500;
}

// The event loop; returns the exit status.
static int run_loop(View *v, ScriptRun *r) {
    UiHits hits = {0};
    int dirty = 1;
    double last_draw = 0;
    while (!v->quit) {
        dirty |= pump_events(v, &hits, wait_ms(v, r, dirty, last_draw));
        dirty |= poll_worker(v);
        int failed = pane_failed(v);
        if (failed >= 0 && r->headless) {
            fprintf(stderr, "error: %s\n", v->pane[failed].st.msg);
            return 1;
        }
        int changed = advance_script(v, r);
        if (changed < 0) return 1;
        dirty |= changed;
        if (v->shot_path || (dirty && now_seconds() - last_draw >= FRAME_S)) {
            draw_frame(v, &hits);
            last_draw = now_seconds();
            dirty = 0;
        }
        if (v->shot_failed && r->shot_asked) {
            fprintf(stderr, "error: --screenshot: %s\n", v->message);
            return 1;
        }
        if (r->quit_after && !v->shot_path) v->quit = 1;
    }
    return 0;
}

// ---- setup ----

// No X11 or Wayland display named and no driver chosen: said before SDL_Init, whose Wayland probe
// would print libwayland's XDG_RUNTIME_DIR complaint ahead of our error.
static int no_display(void) {
    const char *x11 = getenv("DISPLAY"), *wl = getenv("WAYLAND_DISPLAY");
    if (getenv("SDL_VIDEODRIVER") || (x11 && *x11) || (wl && *wl)) return 0;
    fprintf(stderr, "error: no display to open a window on (DISPLAY and WAYLAND_DISPLAY are unset); run under a "
            "desktop or xvfb-run, or set SDL_VIDEODRIVER=offscreen to run a --script without a window\n");
    return 1;
}

static int open_window(View *v, int w, int h) {
    if (no_display()) return -1;
    if (SDL_Init(SDL_INIT_VIDEO)) {
        fprintf(stderr, "error: cannot start SDL video (is there a display? DISPLAY=%s): %s\n",
                getenv("DISPLAY") ? getenv("DISPLAY") : "(unset)", SDL_GetError());
        return -1;
    }
    const char *drv = SDL_GetCurrentVideoDriver();
    if (!getenv("SDL_VIDEODRIVER") && drv && (!strcmp(drv, "offscreen") || !strcmp(drv, "dummy"))) {
        const char *x11 = getenv("DISPLAY"), *wl = getenv("WAYLAND_DISPLAY");
        fprintf(stderr, "error: no display to open a window on (DISPLAY=%s, WAYLAND_DISPLAY=%s; SDL fell back to its "
                "'%s' driver); run under a desktop or xvfb-run, or set SDL_VIDEODRIVER=offscreen to run a --script "
                "without a window\n", x11 ? x11 : "(unset)", wl ? wl : "(unset)", drv);
        return -1;
    }
    g_wake_type = SDL_RegisterEvents(1);
    v->win = SDL_CreateWindow("mala view", SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED, w, h, SDL_WINDOW_RESIZABLE);
    if (v->win) v->ren = SDL_CreateRenderer(v->win, -1, 0);
    if (!v->win || !v->ren) {
        fprintf(stderr, "error: cannot open a %dx%d window: %s\n", w, h, SDL_GetError());
        return -1;
    }
    SDL_SetWindowMinimumSize(v->win, MIN_W, MIN_H);
    return 0;
}

static void close_window(View *v) {
    if (v->ren) SDL_DestroyRenderer(v->ren);
    if (v->win) SDL_DestroyWindow(v->win);
    SDL_Quit();
}

static void parse_view_args(ViewArgs *a, int argc, char **argv) {
    static int torch_heads;  // --heads, handed to the .pt loader (ckpt_torch_options)
    *a = (ViewArgs){.save_dir = ".", .width = 1100, .height = 720, .cfg_channels = "all", .weights = "ema"};
    Opt opts[] = {
        {"--ckpt", OPT_STR, &a->ckpt, "FILE", "model or training checkpoint (default: the bundled Fashion-MNIST model); "
         "twice: two models side by side"},
        {"--models", OPT_STR, &a->models_dir, "DIR", "the model files (*.safetensors) of DIR, side by side; Tab cycles them"},
        {"--vae", OPT_STR, &a->vae, "FILE", "latent models: the VAE that decodes their samples"},
        {"--heads", OPT_INT, &torch_heads, "N", "a PyTorch .pt: attention heads (default: its args, else DiT's "
         "preset)", ARG_MIN(1), ARG_MAX(1024)},
        {"--weights", OPT_STR, &a->weights, "ema|online", "a training checkpoint's EMA (default) or online weights "
         "(a PyTorch .pt's `ema` or `model`)"},
        {"--cfg-channels", OPT_STR, &a->cfg_channels, "N|all", "guide the first N eps channels (DiT: 3), the rest "
         "conditional; default all"},
        {"--init-image", OPT_STR, &a->init_image, "FILE", "start from this image (image-to-image; paint a mask on it "
         "to inpaint; also: drop a file on the window, or U on a generated image)"},
        OPT_DEVICE(&a->device),
        OPT_PRECISION(&a->precision),
        OPT_THREADS(&a->threads),
        {"--script", OPT_STR, &a->script, "CMDS", "run commands, e.g. \"class=Sneaker;generate;wait;save=a.png;quit\""},
        {"--screenshot", OPT_STR, &a->screenshot, "FILE", "save the window as PNG when the script ends"},
        {"--save-dir", OPT_STR, &a->save_dir, "DIR", "where S / I / the Save button write PNGs"},
        {"--config", OPT_STR, &a->config, "FILE", "the settings file (default: $XDG_CONFIG_HOME/mala/viewer.ini, "
         "else ~/.config/mala/viewer.ini; scripted runs use one only when given here or in $MALA_VIEW_CONFIG)"},
        {"--no-config", OPT_FLAG, &a->no_config, NULL, "neither read nor write the settings file (also MALA_VIEW_CONFIG=off)"},
        {"--width", OPT_INT, &a->width, "W", "window width", ARG_MIN(MIN_W), ARG_MAX(16384)},
        {"--height", OPT_INT, &a->height, "H", "window height", ARG_MIN(MIN_H), ARG_MAX(16384)},
    };
    char usage[6144];
    snprintf(usage, sizeof usage, "usage: mala view [flags]\n\nOpens a window to generate images with the model: pick a class, "
             "guidance, sampler,\nsteps, eta, seed and grid size, watch the predicted x0 at every step, save PNGs.\n"
             "Two models (--ckpt A --ckpt B, or --models DIR) run side by side on the same seed and settings.\n"
             "Press H in the window for the keys.\n\n%s\n--screenshot is taken when the script ends (without "
             "--script: once the model is loaded).", script_usage());
    args_parse(usage, opts, sizeof opts / sizeof opts[0], argc, argv, 1);
    ckpt_torch_options(weights_online("--weights", a->weights), torch_heads);
    if (gen_cfg_channels_parse(a->cfg_channels, &a->cfg_ch))
        FATAL("--cfg-channels %s: expected all or a channel count 1..1024", a->cfg_channels);
}

// The model files: every --ckpt in order (the flag table keeps only the last), then DIR's
// *.safetensors sorted by name. Returns the count, or -1 after printing why.
static int collect_models(int argc, char **argv, const char *dir, char ***out) {
    int n = 0, cap = 8;
    char **m = xmalloc(cap * sizeof *m);
    for (int i = 1; i < argc; i++) {
        const char *val = NULL;
        if (!strcmp(argv[i], "--ckpt") && i + 1 < argc) val = argv[++i];
        else if (!strncmp(argv[i], "--ckpt=", 7)) val = argv[i] + 7;
        else if (!strcmp(argv[i], "--script") || !strcmp(argv[i], "--screenshot")) i++;  // values, not flags
        if (!val) continue;
        if (n == cap) m = realloc(m, (cap *= 2) * sizeof *m);
        m[n++] = xstrdup(val);
    }
    if (dir) {
        struct dirent **ents;
        int k = scandir(dir, &ents, NULL, alphasort), found = 0;
        if (k < 0) {
            fprintf(stderr, "error: --models %s: cannot read the folder: %s\n", dir, strerror(errno));
            free(m);
            return -1;
        }
        for (int i = 0; i < k; i++) {
            const char *name = ents[i]->d_name;
            size_t len = strlen(name);
            if (len > 12 && !strcmp(name + len - 12, ".safetensors") && name[0] != '.') {
                if (n == cap) m = realloc(m, (cap *= 2) * sizeof *m);
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", dir, name);
                m[n++] = xstrdup(path);
                found++;
            }
            free(ents[i]);
        }
        free(ents);
        if (!found) {
            fprintf(stderr, "error: --models %s: no model files (*.safetensors) in the folder\n", dir);
            for (int i = 0; i < n; i++) free(m[i]);
            free(m);
            return -1;
        }
    }
    if (n == 0) m[n++] = xstrdup(default_model_path());
    *out = m;
    return n;
}

// The settings file to use, NULL for none: --no-config or MALA_VIEW_CONFIG=off disables it,
// --config or MALA_VIEW_CONFIG names it; otherwise the default path, but only for a person's
// session: a scripted run stays reproducible and leaves the person's settings alone.
static const char *config_path(const ViewArgs *a, char *buf, size_t n) {
    const char *env = getenv("MALA_VIEW_CONFIG");
    if (a->no_config || (env && (!strcmp(env, "off") || !strcmp(env, "0") || !*env))) return NULL;
    if (a->config) return a->config;
    if (env) return env;
    if (a->script || a->screenshot) return NULL;
    return view_settings_default_path(buf, n) == 0 ? buf : NULL;
}

int cmd_view(int argc, char **argv) {
    ViewArgs a;
    parse_view_args(&a, argc, argv);
    Script script;
    MalaErr err;
    if (script_parse(&script, a.script ? a.script : "", &err)) {
        fprintf(stderr, "error: --script: %s\n", err.msg);
        return 2;
    }
    char **models;
    int nmodels = collect_models(argc, argv, a.models_dir, &models);
    if (nmodels < 0) {
        script_free(&script);
        return 1;
    }
    int rc = 1;
    for (int i = 0; i < nmodels; i++) {
        if (access(models[i], R_OK)) {
            fprintf(stderr, "error: %s: cannot read the model file: %s%s\n", models[i], strerror(errno),
                    a.ckpt || a.models_dir ? "" : " (the bundled model is missing: train one with `mala train` and pass --ckpt)");
            goto out;
        }
        if (worker_check_vae(models[i], a.vae, nmodels > 1, &err)) {  // before a window opens
            fprintf(stderr, "error: %s\n", err.msg);
            goto out;
        }
    }
    int iw, ih;
    if (a.init_image && image_check(a.init_image, &iw, &ih, &err)) {
        fprintf(stderr, "error: --init-image %s\n", err.msg);
        goto out;
    }
    worker_set_vae(a.vae);
    const Backend *be = backend_select(a.device, a.precision);
    char cfg_buf[4096];
    const char *cfg = config_path(&a, cfg_buf, sizeof cfg_buf);
    View v;
    view_init(&v);
    v.opts.cfg_channels = a.cfg_ch;
    v.models = (const char *const *)models;
    v.nmodels = nmodels;
    v.npanes = nmodels < VIEW_MAX_PANES ? nmodels : VIEW_MAX_PANES;
    v.be = be;
    v.threads = a.threads;
    v.wake = wake_ui;
    v.save_dir = a.save_dir;
    view_config_model_defaults(&v, models[0]);  // the left pane's model; saved settings override it
    if (view_config_load(&v, cfg)) cfg = NULL;  // corrupt: ignored, and kept as it is
    v.in.pending = a.init_image;
    if (open_window(&v, a.width, a.height) == 0) {
        for (int p = 0; p < v.npanes; p++) view_pane_open(&v, p, p);
        ScriptRun run = {&script, a.screenshot, a.script || a.screenshot, 0, 0, 0};
        rc = run_loop(&v, &run);
        if (rc == 0) view_config_save(&v, cfg);
    }
    view_free(&v);
    close_window(&v);
out:
    for (int i = 0; i < nmodels; i++) free(models[i]);
    free(models);
    script_free(&script);
    return rc;
}

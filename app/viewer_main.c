// defines: cmd_view
// mala view: an SDL2 window to generate images interactively. The UI thread (this file) handles
// events, runs --script commands between frames and draws; generation happens on the worker
// thread (viewer_worker.c), which wakes the event loop with a user event whenever it has news,
// so the loop sleeps in SDL_WaitEventTimeout instead of polling and never waits for a step.
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "viewer.h"

#define MIN_W 640
#define MIN_H 560
#define FRAME_S (1.0 / 60)  // at most 60 redraws a second, however fast the steps come

typedef struct {
    const char *ckpt, *device, *precision, *script, *screenshot, *save_dir;
    int threads, width, height;
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

static Action key_action(SDL_Keycode k, int *arg) {
    *arg = 0;
    switch (k) {
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
    default: return ACT_NONE;
    }
}

static void on_key(View *v, SDL_Keycode k) {
    if (v->help && (k == SDLK_ESCAPE || k == SDLK_h || k == SDLK_F1)) {
        v->help = 0;  // Esc closes the overlay before it cancels or quits
        return;
    }
    int arg;
    Action a = key_action(k, &arg);
    view_do(v, a, arg);
}

static void on_event(View *v, const UiHits *hits, const SDL_Event *e) {
    int arg = 0;
    if (e->type == g_wake_type) {
        atomic_store(&g_wake_pending, 0);
    } else if (e->type == SDL_QUIT) {
        v->quit = 1;
    } else if (e->type == SDL_KEYDOWN) {
        on_key(v, e->key.keysym.sym);
    } else if (e->type == SDL_MOUSEMOTION) {
        v->mouse_x = e->motion.x;
        v->mouse_y = e->motion.y;
    } else if (e->type == SDL_MOUSEBUTTONDOWN && e->button.button == SDL_BUTTON_LEFT) {
        Action a = ui_hit(hits, e->button.x, e->button.y, &arg);
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

static void log_run_end(const View *v) {
    const WorkerStatus *st = &v->st;
    const ViewRequest *r = &v->frame.req;
    if (st->outcome == RUN_DONE)
        fprintf(stderr, "view: generated %d x %s (%s %d steps, cfg %.1f, eta %.1f, seed %llu) in %.2f s, "
                "%.1f steps/s, %d step previews shown\n", r->n, v->model.classes.names[r->cls],
                sampler_kind_label(r->opts.kind), r->opts.steps, r->opts.cfg_scale, r->opts.eta,
                (unsigned long long)r->seed, st->seconds, st->steps_per_s, v->run_previews);
    else if (st->outcome == RUN_CANCELLED)
        fprintf(stderr, "view: cancelled at step %d/%d after %.2f s, %d step previews shown\n", st->step,
                st->nsteps, st->seconds, v->run_previews);
    else if (st->outcome == RUN_FAILED)
        fprintf(stderr, "view: generation failed: %s\n", st->msg);
}

// Takes the worker's status and newest frame; returns 1 when something changed.
static int poll_worker(View *v) {
    WorkerPhase before = v->st.phase;
    int changed = 0;
    if (!v->model_ready && worker_model(v->worker, &v->model) == 0) {
        view_model_ready(v);
        changed = 1;
    }
    int fresh = worker_poll(v->worker, &v->st, &v->frame, &v->seen);
    if (v->model_ready && v->model.has_attn) changed |= worker_poll_attn(v->worker, &v->attn, &v->attn_seen);
    if (fresh && v->frame.final) {
        const Frame *f = &v->frame;
        memcpy(v->result.x, f->x, (size_t)f->n * v->model.C * v->model.S * v->model.S * sizeof(float));
        v->result.n = f->n;
        v->result.final = 1;
        v->result.req = f->req;
    }
    if (before == WORKER_RUNNING && v->st.phase == WORKER_IDLE) {
        log_run_end(v);
        if (v->st.outcome == RUN_CANCELLED) view_message(v, "cancelled");
        else if (v->st.outcome == RUN_DONE) view_message(v, "done: S saves the grid");
    }
    return changed || fresh || before != v->st.phase;
}

// ---- frames ----

static void draw_frame(View *v, UiHits *hits) {
    MalaErr err;
    uint64_t shown = v->tex_seq;
    if (ui_update_texture(v, &err)) view_message(v, "%s", err.msg);
    if (v->tex_seq != shown && !v->frame.final) v->run_previews++;
    ui_draw(v, hits);
    if (v->shot_path) {
        if (ui_screenshot(v->ren, v->shot_path, &err)) {
            v->shot_failed = 1;
            view_message(v, "%s", err.msg);
        } else {
            SDL_Rect r = v->image_rect;
            int w, h;
            SDL_GetRendererOutputSize(v->ren, &w, &h);
            fprintf(stderr, "view: screenshot %s %dx%d, image %dx%d at %d,%d scale %d\n", v->shot_path, w, h, r.w,
                    r.h, r.x, r.y, v->image_scale);
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
    if (r->over || !v->model_ready) return 0;
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
    return (!r->over && v->model_ready) || v->shot_path ? 10 : 500;
}

// The event loop; returns the exit status.
static int run_loop(View *v, ScriptRun *r) {
    UiHits hits = {0};
    int dirty = 1;
    double last_draw = 0;
    while (!v->quit) {
        dirty |= pump_events(v, &hits, wait_ms(v, r, dirty, last_draw));
        dirty |= poll_worker(v);
        if (v->st.phase == WORKER_FAILED && r->headless) {
            fprintf(stderr, "error: %s\n", v->st.msg);
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

static int open_window(View *v, int w, int h) {
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
    if (v->tex) SDL_DestroyTexture(v->tex);
    if (v->ren) SDL_DestroyRenderer(v->ren);
    if (v->win) SDL_DestroyWindow(v->win);
    SDL_Quit();
}

static void parse_view_args(ViewArgs *a, int argc, char **argv) {
    *a = (ViewArgs){.save_dir = ".", .width = 1100, .height = 720};
    Opt opts[] = {
        {"--ckpt", OPT_STR, &a->ckpt, "FILE", "model or training checkpoint (default: the bundled Fashion-MNIST model)"},
        OPT_DEVICE(&a->device),
        OPT_PRECISION(&a->precision),
        OPT_THREADS(&a->threads),
        {"--script", OPT_STR, &a->script, "CMDS", "run commands, e.g. \"class=Sneaker;generate;wait;save=a.png;quit\""},
        {"--screenshot", OPT_STR, &a->screenshot, "FILE", "save the window as PNG when the script ends"},
        {"--save-dir", OPT_STR, &a->save_dir, "DIR", "where S / the Save button writes PNGs"},
        {"--width", OPT_INT, &a->width, "W", "window width", ARG_MIN(MIN_W), ARG_MAX(16384)},
        {"--height", OPT_INT, &a->height, "H", "window height", ARG_MIN(MIN_H), ARG_MAX(16384)},
    };
    char usage[6144];
    snprintf(usage, sizeof usage, "usage: mala view [flags]\n\nOpens a window to generate images with the model: pick a class, "
             "guidance, sampler,\nsteps, eta, seed and grid size, watch the predicted x0 at every step, save PNGs.\n"
             "Press H in the window for the keys.\n\n%s\n--screenshot is taken when the script ends (without "
             "--script: once the model is loaded).", script_usage());
    args_parse(usage, opts, sizeof opts / sizeof opts[0], argc, argv, 1);
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
    const Backend *be = backend_select(a.device, a.precision);
    const char *path = a.ckpt ? a.ckpt : default_model_path();
    if (access(path, R_OK)) {
        fprintf(stderr, "error: %s: cannot read the model file: %s%s\n", path, strerror(errno),
                a.ckpt ? "" : " (the bundled model is missing: train one with `mala train` and pass --ckpt)");
        script_free(&script);
        return 1;
    }
    View v;
    view_init(&v);
    v.model_path = path;
    v.save_dir = a.save_dir;
    int rc = 1;
    if (open_window(&v, a.width, a.height) == 0) {
        v.worker = worker_start(path, be, a.threads, wake_ui, NULL);
        ScriptRun run = {&script, a.screenshot, a.script || a.screenshot, 0, 0, 0};
        rc = run_loop(&v, &run);
        worker_stop(v.worker);
    }
    view_free(&v);
    close_window(&v);
    script_free(&script);
    return rc;
}

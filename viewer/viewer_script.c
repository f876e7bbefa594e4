// defines: script_parse, script_free, script_step, script_usage
// `mala view --script "..."`: semicolon-separated commands run in order between frames, so the
// window keeps drawing while a script waits for a run. Grammar (spaces around items are ignored):
//
//   script  := command (';' command)*
//   command := name | name '=' value
//
// Numbers and names are checked when the script is parsed, before the window opens; class names
// when the command runs (the model is loaded by then).
#include <errno.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "core/suggest.h"
#include "cli/args.h"
#include "viewer/viewer.h"

typedef enum { ARG_NONE, ARG_TEXT, ARG_OPT_TEXT, ARG_NUM, ARG_INT } ArgKind;

typedef struct {
    const char *name;
    ScriptOp op;
    ArgKind arg;
    double lo, hi;  // ARG_NUM / ARG_INT range
    const char *syntax, *help;
} ScriptSpec;

static const ScriptSpec SPECS[] = {
    {"class", SC_CLASS, ARG_TEXT, 0, 0, "class=NAME|K", "class by name (any case) or number"},
    {"cfg", SC_CFG, ARG_NUM, 0, 100, "cfg=W", "guidance scale (1 = none)"},
    {"steps", SC_STEPS, ARG_INT, 1, 1000, "steps=N", "sampling steps, 1..1000"},
    {"sampler", SC_SAMPLER, ARG_TEXT, 0, 0, "sampler=NAME", "a sampler kind (mala sample --sampler's names)"},
    {"eta", SC_ETA, ARG_NUM, 0, 1, "eta=E", "DDIM noise, 0..1"},
    {"n", SC_N, ARG_INT, 1, VIEW_MAX_IMAGES, "n=N", "images in the grid, 1..16"},
    {"seed", SC_SEED, ARG_TEXT, 0, 0, "seed=S|random", "fixed seed, or a new one each run"},
    {"generate", SC_GENERATE, ARG_NONE, 0, 0, "generate", "start a run (after the current one ends)"},
    {"wait", SC_WAIT, ARG_NONE, 0, 0, "wait", "until the current run ends (fails if it failed)"},
    {"cancel", SC_CANCEL, ARG_NONE, 0, 0, "cancel", "stop the current run after its step"},
    {"save", SC_SAVE, ARG_OPT_TEXT, 0, 0, "save[=FILE]", "the latest finished grid as PNG (of the pane=)"},
    {"save_one", SC_SAVE_ONE, ARG_TEXT, 0, 0, "save_one=K[,FILE]", "image K of that grid alone (no FILE: a new name)"},
    {"pane", SC_PANE, ARG_INT, 0, VIEW_MAX_PANES - 1, "pane=P", "the model (0 left, 1 right) save, save_one, attn_dump use"},
    {"next_model", SC_NEXT_MODEL, ARG_OPT_TEXT, 0, 0, "next_model[=P]", "pane P (default the right one) loads the next model file"},
    {"screenshot", SC_SCREENSHOT, ARG_TEXT, 0, 0, "screenshot=FILE", "the window as PNG"},
    {"help", SC_HELP, ARG_OPT_TEXT, 0, 0, "help[=on|off]", "the key overlay"},
    {"sleep", SC_SLEEP, ARG_NUM, 0, 3600, "sleep=SECONDS", "pause the script (the window keeps running)"},
    {"key", SC_KEY, ARG_TEXT, 0, 0, "key=NAME", "press a key as a person would (SDL names: Return, Left, F1, s)"},
    {"click", SC_CLICK, ARG_TEXT, 0, 0, "click=X,Y", "click the left mouse button at window pixel X,Y"},
    {"size", SC_SIZE, ARG_TEXT, 0, 0, "size=WxH", "resize the window"},
    {"attn", SC_ATTN, ARG_TEXT, 0, 0, "attn=on|off", "the attention map beside the image"},
    {"query", SC_QUERY, ARG_TEXT, 0, 0, "query=X,Y[,K]", "query token at column X, row Y of image K (0)"},
    {"block", SC_BLOCK, ARG_INT, 0, 1000, "block=N", "attention block, 0-based"},
    {"head", SC_HEAD, ARG_TEXT, 0, 0, "head=N|mean", "attention head, or the mean over heads"},
    {"scale", SC_SCALE, ARG_NUM, ATTN_A_MIN, ATTN_A_MAX, "scale=A", "query scale a, 0.25..8 (slider notches)"},
    {"attn_dump", SC_ATTN_DUMP, ARG_TEXT, 0, 0, "attn_dump=FILE", "the shown row as .npy [gh,gw] (waits for it)"},
    {"init", SC_INIT, ARG_TEXT, 0, 0, "init=FILE|off", "the input image (image-to-image), or none"},
    {"use", SC_USE, ARG_INT, 0, VIEW_MAX_IMAGES - 1, "use=K", "image K of the latest grid (of the pane=) as the input"},
    {"strength", SC_STRENGTH, ARG_NUM, 0.01, 1, "strength=S", "image-to-image strength, 0.01..1 (1: from noise)"},
    {"mask", SC_MASK, ARG_TEXT, 0, 0, "mask=FILE", "the inpainting mask from a PNG (white regenerates)"},
    {"paint", SC_PAINT, ARG_TEXT, 0, 0, "paint=X,Y[,R]", "paint the mask: a disc at input pixel X,Y (radius R: brush)"},
    {"erase", SC_ERASE, ARG_TEXT, 0, 0, "erase=X,Y[,R]", "erase the mask there"},
    {"mask_clear", SC_MASK_CLEAR, ARG_NONE, 0, 0, "mask_clear", "clear the mask (no inpainting)"},
    {"mask_invert", SC_MASK_INVERT, ARG_NONE, 0, 0, "mask_invert", "invert the mask"},
    {"brush", SC_BRUSH, ARG_INT, 0, 64, "brush=R", "brush radius in input pixels"},
    {"resample", SC_RESAMPLE, ARG_INT, 0, 100, "resample=R", "inpainting: RePaint jumps per step (DDPM, DDIM)"},
    {"blend", SC_BLEND, ARG_TEXT, 0, 0, "blend=B,W|off", "class blend: (1-W) the class + W class B"},
    {"drop", SC_DROP, ARG_TEXT, 0, 0, "drop=FILE", "drop a file on the window (input; a PNG's parameters restored)"},
    {"quit", SC_QUIT, ARG_NONE, 0, 0, "quit", "close the viewer"},
};
#define N_SPECS (int)(sizeof SPECS / sizeof SPECS[0])

const char *script_usage(void) {
    static char buf[4096];
    if (buf[0]) return buf;
    size_t len = snprintf(buf, sizeof buf, "--script runs these commands in order, separated by ';', between frames once "
                          "the model is loaded:");
    for (int i = 0; i < N_SPECS && len < sizeof buf; i++)
        len += snprintf(buf + len, sizeof buf - len, "\n  %-17s %s", SPECS[i].syntax, SPECS[i].help);
    return buf;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n')) *--e = 0;
    return s;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || errno) return -1;
    *out = x;
    return 0;
}

static int parse_bool(const char *s, int *out) {
    if (!strcasecmp(s, "on") || !strcasecmp(s, "true") || !strcmp(s, "1")) *out = 1;
    else if (!strcasecmp(s, "off") || !strcasecmp(s, "false") || !strcmp(s, "0")) *out = 0;
    else return -1;
    return 0;
}

static int check_number(const ScriptSpec *sp, ScriptCmd *c, const char *item, MalaErr *err) {
    char *end;
    errno = 0;
    c->num = strtod(c->arg, &end);
    int ok = !*end && !errno && isfinite(c->num) && c->num >= sp->lo && c->num <= sp->hi &&
             (sp->arg == ARG_NUM || c->num == (long)c->num);
    if (ok) return 0;
    return mala_errf(err, "'%s': expected %s from %g to %g", item, sp->arg == ARG_INT ? "an integer" : "a number", sp->lo,
                     sp->hi);
}

// The commands whose text values have a form of their own.
static int check_text(ScriptCmd *c, const char *item, MalaErr *err) {
    const char *v = c->arg;
    uint64_t seed;
    int on, x, y;
    char end;
    switch (c->op) {
    case SC_SAMPLER: {
        SamplerKind k;
        if (sampler_kind_parse(v, &k)) return mala_errf(err, "'%s': expected sampler=%s", item, sampler_kind_list());
        return 0;
    }
    case SC_SEED:
        if (strcasecmp(v, "random") && parse_u64(v, &seed))
            return mala_errf(err, "'%s': expected a non-negative integer or 'random'", item);
        return 0;
    case SC_HELP:
        if (v && parse_bool(v, &on)) return mala_errf(err, "'%s': expected help=on or help=off", item);
        return 0;
    case SC_SAVE:
        if (v && !*v) return mala_errf(err, "'%s': empty file name", item);
        return 0;
    case SC_KEY:
        if ((c->num = SDL_GetKeyFromName(v)) == SDLK_UNKNOWN)
            return mala_errf(err, "'%s': unknown key name (SDL's names: Return, Escape, Left, Up, PageUp, F1, s, ...)", item);
        return 0;
    case SC_CLICK:
        if (sscanf(v, "%d,%d%c", &x, &y, &end) != 2 || x < 0 || y < 0)
            return mala_errf(err, "'%s': expected click=X,Y with pixel coordinates", item);
        return 0;
    case SC_ATTN:
        if (parse_bool(v, &on)) return mala_errf(err, "'%s': expected attn=on or attn=off", item);
        return 0;
    case SC_QUERY: {
        int k = 0, got = sscanf(v, "%d,%d,%d%c", &x, &y, &k, &end);
        if ((got != 2 && got != 3) || x < 0 || y < 0 || k < 0 || k >= VIEW_MAX_IMAGES)
            return mala_errf(err, "'%s': expected query=X,Y or query=X,Y,K (token column, row; image)", item);
        return 0;
    }
    case SC_HEAD:
        if (strcasecmp(v, "mean") && (sscanf(v, "%d%c", &x, &end) != 1 || x < 0))
            return mala_errf(err, "'%s': expected head=N (0-based) or head=mean", item);
        return 0;
    case SC_SAVE_ONE: {
        int off = 0;
        if (sscanf(v, "%d%n", &x, &off) != 1 || x < 0 || x >= VIEW_MAX_IMAGES || (v[off] && (v[off] != ',' || !v[off + 1])))
            return mala_errf(err, "'%s': expected save_one=K or save_one=K,FILE (K: the image, 0..15)", item);
        return 0;
    }
    case SC_NEXT_MODEL:
        if (v && (sscanf(v, "%d%c", &x, &end) != 1 || x < 0 || x >= VIEW_MAX_PANES))
            return mala_errf(err, "'%s': expected next_model or next_model=P (pane 0 or 1)", item);
        return 0;
    case SC_PAINT: case SC_ERASE: {
        int r = 0, got = sscanf(v, "%d,%d,%d%c", &x, &y, &r, &end);
        if ((got != 2 && got != 3) || x < 0 || y < 0 || r < 0 || r > 64)
            return mala_errf(err, "'%s': expected %s=X,Y or %s=X,Y,R (input pixels; radius 0..64)", item,
                             c->op == SC_PAINT ? "paint" : "erase", c->op == SC_PAINT ? "paint" : "erase");
        return 0;
    }
    case SC_BLEND: {
        const char *comma = strrchr(v, ',');
        char *e2;
        double w = comma ? strtod(comma + 1, &e2) : -1;
        if (strcasecmp(v, "off") && (!comma || comma == v || e2 == comma + 1 || *e2 || !(w >= 0 && w <= 1)))
            return mala_errf(err, "'%s': expected blend=B,W (a class, a weight in [0, 1]) or blend=off", item);
        return 0;
    }
    case SC_SIZE:
        if (sscanf(v, "%dx%d%c", &x, &y, &end) != 2 || x < 1 || y < 1 || x > 16384 || y > 16384)
            return mala_errf(err, "'%s': expected size=WxH, e.g. size=1280x800", item);
        return 0;
    default: return 0;
    }
}

// Checks a command's value against its spec; fills c->num for numbers and keys.
static int check_value(const ScriptSpec *sp, ScriptCmd *c, const char *item, MalaErr *err) {
    if (sp->arg == ARG_NONE && c->arg) return mala_errf(err, "'%s': %s takes no value", item, sp->name);
    if (sp->arg != ARG_NONE && sp->arg != ARG_OPT_TEXT && (!c->arg || !*c->arg))
        return mala_errf(err, "'%s': %s needs a value: %s", item, sp->name, sp->syntax);
    if (sp->arg == ARG_NUM || sp->arg == ARG_INT) return check_number(sp, c, item, err);
    return check_text(c, item, err);
}

static int parse_item(ScriptCmd *c, char *item, MalaErr *err) {
    char *eq = strchr(item, '=');
    char *name = item, *value = NULL;
    char shown[128];
    snprintf(shown, sizeof shown, "%s", item);
    if (eq) {
        *eq = 0;
        name = trim(item);
        value = trim(eq + 1);
    }
    for (int i = 0; i < N_SPECS; i++) {
        if (strcasecmp(name, SPECS[i].name)) continue;
        c->op = SPECS[i].op;
        c->arg = value ? xstrdup(value) : NULL;
        return check_value(&SPECS[i], c, shown, err);
    }
    char known[256] = "";
    const char *names[N_SPECS];
    size_t len = 0;
    for (int i = 0; i < N_SPECS; i++) {
        names[i] = SPECS[i].name;
        if (len < sizeof known) len += snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", names[i]);
    }
    const char *s = text_suggest(name, names, N_SPECS);
    if (s) return mala_errf(err, "'%s': unknown command; did you mean %s? (known: %s)", shown, s, known);
    return mala_errf(err, "'%s': unknown command (known: %s)", shown, known);
}

int script_parse(Script *s, const char *text, MalaErr *err) {
    memset(s, 0, sizeof *s);
    char *copy = xstrdup(text), *save = NULL;
    int cap = 0;
    for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        char *item = trim(tok);
        if (!*item) continue;
        if (s->n == cap) s->cmd = realloc(s->cmd, (cap = cap ? 2 * cap : 16) * sizeof(ScriptCmd));
        ScriptCmd *c = &s->cmd[s->n++];
        memset(c, 0, sizeof *c);
        if (parse_item(c, item, err)) {
            free(copy);
            script_free(s);
            return -1;
        }
    }
    free(copy);
    return 0;
}

void script_free(Script *s) {
    for (int i = 0; i < s->n; i++) free(s->cmd[i].arg);
    free(s->cmd);
    memset(s, 0, sizeof *s);
}

// ---- execution ----

typedef enum { CMD_DONE, CMD_WAIT, CMD_QUIT, CMD_ERROR } CmdResult;

static CmdResult unknown_class(const View *v, const char *name, MalaErr *err) {
    const ClassNames *cn = &v->pane[0].model.classes;
    char list[MALA_ERR_LEN / 2] = "";
    size_t len = 0;
    for (int i = 0; i < cn->n && len < sizeof list; i++)
        len += snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", cn->names[i]);
    mala_errf(err, "class=%s: unknown class; the model knows: %s", name, list);
    return CMD_ERROR;
}

static CmdResult run_generate(View *v, MalaErr *err) {
    if (view_busy(v)) return CMD_WAIT;  // the previous run ends first
    if (view_generate(v)) {
        mala_errf(err, "generate: %s", v->message);
        return CMD_ERROR;
    }
    return CMD_DONE;
}

static CmdResult run_wait(View *v, MalaErr *err) {
    if (view_busy(v)) return CMD_WAIT;
    for (int p = 0; p < v->npanes; p++)
        if (v->pane[p].st.outcome == RUN_FAILED) {
            mala_errf(err, "generation failed: %s", v->pane[p].st.msg);
            return CMD_ERROR;
        }
    return CMD_DONE;
}

static CmdResult pane_ok(const Script *s, const View *v, const char *what, MalaErr *err) {
    if (s->pane < v->npanes) return CMD_DONE;
    mala_errf(err, "%s: pane=%d, but one model is shown (two: --ckpt A --ckpt B or --models DIR)", what, s->pane);
    return CMD_ERROR;
}

static CmdResult run_save_one(Script *s, View *v, const char *arg, MalaErr *err) {
    if (pane_ok(s, v, "save_one", err) != CMD_DONE) return CMD_ERROR;
    int k = atoi(arg);
    const char *comma = strchr(arg, ',');
    if (view_save_one(v, s->pane, k, comma ? comma + 1 : NULL, err)) return CMD_ERROR;
    fprintf(stderr, "view: %s (image %d of pane %d, %dx%d)\n", v->message, k, s->pane, v->pane[s->pane].model.S,
            v->pane[s->pane].model.S);
    return CMD_DONE;
}

// Starts the switch; the script then pauses until the new model is loaded (advance_script waits
// for every pane).
static CmdResult run_next_model(View *v, const char *arg, MalaErr *err) {
    int p = arg ? atoi(arg) : v->npanes - 1;
    if (p >= v->npanes) {
        mala_errf(err, "next_model=%d: one model is shown", p);
        return CMD_ERROR;
    }
    int before = v->model_at[p];
    view_do(v, ACT_NEXT_MODEL, p);
    if (v->model_at[p] == before) {
        mala_errf(err, "next_model: %s", v->message);
        return CMD_ERROR;
    }
    fprintf(stderr, "view: pane %d now shows %s\n", p, v->models[v->model_at[p]]);
    return CMD_DONE;
}

static CmdResult run_screenshot(Script *s, View *v, const char *path, MalaErr *err) {
    if (!s->started) {
        v->shot_path = path;  // taken by the next frame
        v->shot_failed = 0;
        s->started = 1;
        return CMD_WAIT;
    }
    if (v->shot_path) return CMD_WAIT;
    if (v->shot_failed) {
        mala_errf(err, "screenshot=%s: %s", path, v->message);
        return CMD_ERROR;
    }
    return CMD_DONE;
}

static CmdResult run_sleep(Script *s, double seconds) {
    if (!s->started) {
        s->started = 1;
        s->until = now_seconds() + seconds;
    }
    return now_seconds() < s->until ? CMD_WAIT : CMD_DONE;
}

static void push_key(Uint32 win, SDL_Keycode key) {
    SDL_Event e;
    memset(&e, 0, sizeof e);
    e.type = SDL_KEYDOWN;
    e.key.timestamp = SDL_GetTicks();
    e.key.windowID = win;
    e.key.state = SDL_PRESSED;
    e.key.keysym.sym = key;
    e.key.keysym.scancode = SDL_GetScancodeFromKey(key);
    SDL_PushEvent(&e);
    e.type = SDL_KEYUP;
    e.key.state = SDL_RELEASED;
    SDL_PushEvent(&e);
}

static void push_click(Uint32 win, int x, int y) {
    SDL_Event e;
    memset(&e, 0, sizeof e);
    e.type = SDL_MOUSEMOTION;  // the pointer moves there first, as a real one would
    e.motion.timestamp = SDL_GetTicks();
    e.motion.windowID = win;
    e.motion.x = x;
    e.motion.y = y;
    SDL_PushEvent(&e);
    memset(&e, 0, sizeof e);
    e.type = SDL_MOUSEBUTTONDOWN;
    e.button.timestamp = SDL_GetTicks();
    e.button.windowID = win;
    e.button.button = SDL_BUTTON_LEFT;
    e.button.state = SDL_PRESSED;
    e.button.clicks = 1;
    e.button.x = x;
    e.button.y = y;
    SDL_PushEvent(&e);
    e.type = SDL_MOUSEBUTTONUP;
    e.button.state = SDL_RELEASED;
    SDL_PushEvent(&e);
}

// Queues the events a key press or a click makes, so they take the same path as a person's;
// the command finishes on the next step, after the event loop has handled them.
static CmdResult run_input(Script *s, View *v, const ScriptCmd *c) {
    if (s->started) return CMD_DONE;
    s->started = 1;
    Uint32 win = SDL_GetWindowID(v->win);
    int x = 0, y = 0;
    if (c->op == SC_KEY) push_key(win, (SDL_Keycode)c->num);
    else if (sscanf(c->arg, "%d,%d", &x, &y) == 2) push_click(win, x, y);
    return CMD_WAIT;
}

// Resizes the window and waits (up to 5 s) until the renderer has the new size.
static CmdResult run_size(Script *s, View *v, const char *arg, MalaErr *err) {
    int w = 0, h = 0, ow, oh;
    sscanf(arg, "%dx%d", &w, &h);
    if (!s->started) {
        SDL_SetWindowSize(v->win, w, h);
        s->started = 1;
        s->until = now_seconds() + 5;
    }
    SDL_GetWindowSize(v->win, &ow, &oh);
    if (ow == w && oh == h) return CMD_DONE;
    if (now_seconds() < s->until) return CMD_WAIT;
    mala_errf(err, "size=%s: the window stayed %dx%d (below the minimum size, or the window manager refused)", arg, ow, oh);
    return CMD_ERROR;
}

// Sets the attention selection field by field (the same rules as the keys: block and head in
// range), then hands it to the worker.
static CmdResult run_attn(View *v, const ScriptCmd *c, MalaErr *err) {
    AttnSel *sel = &v->attn_sel;
    int x = 0, y = 0, k = 0, on = 1, ref = view_attn_ref(v);
    if (c->op != SC_ATTN && ref < 0) {
        mala_errf(err, "%s: no attention rows: %s", c->op == SC_QUERY ? "query" : c->op == SC_BLOCK ? "block" : "head",
                  v->pane[0].model.attn_why);
        return CMD_ERROR;
    }
    AttnRowInfo most = {0};  // block and head are checked against the largest model shown
    for (int p = 0; p < v->npanes; p++) {
        const Pane *pn = &v->pane[p];
        if (!pn->model.has_attn) continue;
        if (pn->model.attn.blocks > most.blocks) most.blocks = pn->model.attn.blocks;
        if (pn->model.attn.heads > most.heads) most.heads = pn->model.attn.heads;
    }
    const AttnRowInfo *in = &most;
    switch (c->op) {
    case SC_ATTN:
        parse_bool(c->arg, &on);
        if (on != sel->on) view_do(v, ACT_ATTN, 0);
        if (on) fprintf(stderr, "view: %s\n", v->message);  // what the window says about the models' rows
        return CMD_DONE;
    case SC_QUERY:
        sscanf(c->arg, "%d,%d,%d", &x, &y, &k);
        if (view_attn_query(v, x, y, k, err)) return CMD_ERROR;
        return CMD_DONE;
    case SC_BLOCK:
        if ((int)c->num >= in->blocks) {
            mala_errf(err, "block=%d: the model has blocks 0..%d", (int)c->num, in->blocks - 1);
            return CMD_ERROR;
        }
        sel->block = (int)c->num;
        break;
    case SC_HEAD:
        if (!strcasecmp(c->arg, "mean")) x = -1;
        else sscanf(c->arg, "%d", &x);
        if (x >= in->heads) {
            mala_errf(err, "head=%d: the model has heads 0..%d (or mean)", x, in->heads - 1);
            return CMD_ERROR;
        }
        sel->head = x;
        break;
    default: break;
    }
    sel->id++;
    for (int p = 0; p < v->npanes; p++) view_attn_send(v, p);
    return CMD_DONE;
}

// attn_dump waits until the map answers the current selection and the newest frame.
static CmdResult run_attn_dump(Script *s, View *v, const char *path, MalaErr *err) {
    if (pane_ok(s, v, "attn_dump", err) != CMD_DONE) return CMD_ERROR;
    const Pane *pn = &v->pane[s->pane];
    if (!v->attn_sel.on) {
        mala_errf(err, "attn_dump=%s: the attention view is off (attn=on first)", path);
        return CMD_ERROR;
    }
    if (!pn->model.has_attn) {
        mala_errf(err, "attn_dump=%s: no attention rows: %s", path, pn->model.attn_why);
        return CMD_ERROR;
    }
    if (view_busy(v) || !view_attn_ready(v)) return CMD_WAIT;
    if (view_attn_dump(v, s->pane, path, err)) return CMD_ERROR;
    return CMD_DONE;
}

// The input, the mask and the blend (viewer_input.c).
static CmdResult run_input_cmd(Script *s, View *v, const ScriptCmd *c, MalaErr *err) {
    int x = 0, y = 0, r = v->in.brush;
    switch (c->op) {
    case SC_INIT:
        if (!strcasecmp(c->arg, "off")) { view_do(v, ACT_INPUT_OFF, 0); return CMD_DONE; }
        if (view_input_load(v, c->arg, err)) return CMD_ERROR;
        fprintf(stderr, "view: %s\n", v->message);
        return CMD_DONE;
    case SC_USE:
        if (pane_ok(s, v, "use", err) != CMD_DONE || view_input_use(v, s->pane, (int)c->num, err)) return CMD_ERROR;
        return CMD_DONE;
    case SC_STRENGTH: v->in.strength = (float)c->num; return CMD_DONE;
    case SC_MASK: return view_mask_load(v, c->arg, err) ? CMD_ERROR : CMD_DONE;
    case SC_PAINT: case SC_ERASE:
        if (!v->in.on) {
            mala_errf(err, "%s: load an input image first (init=FILE or use=K)", c->op == SC_PAINT ? "paint" : "erase");
            return CMD_ERROR;
        }
        sscanf(c->arg, "%d,%d,%d", &x, &y, &r);
        view_mask_paint(v, x, y, r, c->op == SC_ERASE);
        return CMD_DONE;
    case SC_MASK_CLEAR: view_do(v, ACT_MASK_CLEAR, 0); return CMD_DONE;
    case SC_MASK_INVERT: view_do(v, ACT_MASK_INVERT, 0); return CMD_DONE;
    case SC_BRUSH: v->in.brush = (int)c->num; return CMD_DONE;
    case SC_RESAMPLE: v->in.resample = (int)c->num; return CMD_DONE;
    case SC_BLEND: {
        if (!strcasecmp(c->arg, "off")) { v->in.blend = 0; return CMD_DONE; }
        char name[256];
        const char *comma = strrchr(c->arg, ',');
        snprintf(name, sizeof name, "%.*s", (int)(comma - c->arg), c->arg);
        int k = class_names_find(&v->pane[0].model.classes, name);
        if (k < 0) return unknown_class(v, name, err);
        v->in.blend = 1;
        v->in.blend_b = k;
        v->in.blend_w = strtof(comma + 1, NULL);
        return CMD_DONE;
    }
    default: return CMD_DONE;
    }
}

// drop=FILE: an SDL_DROPFILE event, handled by the event loop as a person's drop.
static CmdResult run_drop(Script *s, View *v, const char *path) {
    if (s->started) return CMD_DONE;
    s->started = 1;
    SDL_Event e;
    memset(&e, 0, sizeof e);
    e.type = SDL_DROPFILE;
    e.drop.timestamp = SDL_GetTicks();
    e.drop.windowID = SDL_GetWindowID(v->win);
    e.drop.file = SDL_strdup(path);
    SDL_PushEvent(&e);
    return CMD_WAIT;
}

static CmdResult run_cmd(Script *s, View *v, const ScriptCmd *c, MalaErr *err) {
    int k, on = 1;
    if (!view_ready(v)) return CMD_WAIT;  // a model is loading (next_model): the script waits for it
    switch (c->op) {
    case SC_CLASS:
        if ((k = class_names_find(&v->pane[0].model.classes, c->arg)) < 0) return unknown_class(v, c->arg, err);
        view_do(v, ACT_CLASS_SET, k);
        return CMD_DONE;
    case SC_CFG: v->opts.cfg_scale = (float)c->num; return CMD_DONE;
    case SC_STEPS: v->opts.steps = (int)c->num; return CMD_DONE;
    case SC_SAMPLER: sampler_kind_parse(c->arg, &v->opts.kind); return CMD_DONE;
    case SC_ETA: v->opts.eta = (float)c->num; return CMD_DONE;
    case SC_N: v->n = (int)c->num; return CMD_DONE;
    case SC_SEED:
        v->seed_random = !strcasecmp(c->arg, "random");
        if (!v->seed_random) parse_u64(c->arg, &v->seed);
        return CMD_DONE;
    case SC_GENERATE: return run_generate(v, err);
    case SC_WAIT: return run_wait(v, err);
    case SC_CANCEL:
        for (int p = 0; p < v->npanes; p++)
            if (v->pane[p].st.phase == WORKER_RUNNING) worker_cancel(v->pane[p].worker);
        return CMD_DONE;
    case SC_SAVE:
        if (pane_ok(s, v, "save", err) != CMD_DONE || view_save(v, s->pane, c->arg, err)) return CMD_ERROR;
        fprintf(stderr, "view: %s\n", v->message);
        return CMD_DONE;
    case SC_SCREENSHOT: return run_screenshot(s, v, c->arg, err);
    case SC_HELP:
        if (c->arg) parse_bool(c->arg, &on);
        v->help = on;
        return CMD_DONE;
    case SC_SLEEP: return run_sleep(s, c->num);
    case SC_KEY: case SC_CLICK: return run_input(s, v, c);
    case SC_SIZE: return run_size(s, v, c->arg, err);
    case SC_ATTN: case SC_QUERY: case SC_BLOCK: case SC_HEAD: return run_attn(v, c, err);
    case SC_SCALE:
        view_do(v, ACT_SCALE_SET, (int)lroundf((log2f((float)c->num) + 2.0f) * (ATTN_NOTCHES - 1) / 5.0f));
        return CMD_DONE;
    case SC_ATTN_DUMP: return run_attn_dump(s, v, c->arg, err);
    case SC_PANE: s->pane = (int)c->num; return CMD_DONE;
    case SC_SAVE_ONE: return run_save_one(s, v, c->arg, err);
    case SC_NEXT_MODEL: return run_next_model(v, c->arg, err);
    case SC_INIT: case SC_USE: case SC_STRENGTH: case SC_MASK: case SC_PAINT: case SC_ERASE: case SC_MASK_CLEAR:
    case SC_MASK_INVERT: case SC_BRUSH: case SC_RESAMPLE: case SC_BLEND:
        return run_input_cmd(s, v, c, err);
    case SC_DROP: return run_drop(s, v, c->arg);
    case SC_QUIT: return CMD_QUIT;
    }
    return CMD_DONE;
}

ScriptState script_step(Script *s, View *v, MalaErr *err) {
    while (s->pc < s->n) {
        CmdResult r = run_cmd(s, v, &s->cmd[s->pc], err);
        if (r == CMD_WAIT) return SCRIPT_BLOCKED;
        if (r == CMD_ERROR) return SCRIPT_ERROR;
        s->pc++;
        s->started = 0;
        if (r == CMD_QUIT) return SCRIPT_QUIT;
    }
    return SCRIPT_END;
}

// defines: ui_draw, ui_hit, ui_update_texture, ui_screenshot, ui_scroll_list
// The viewer's window, drawn immediate-mode: every frame lays out the control panel (left), the
// image area (right) and the status bar (bottom) from the window size, and records each
// clickable rectangle with its action so a click maps to the same view_do as a key.
#include <math.h>
#include <string.h>

#include "formats/image_io.h"
#include "viewer/viewer.h"
#include "core/progress.h"

#define TS 2           // text scale (font units -> pixels)
#define PANEL_W 420
#define PAD 12
#define ROW_H 30
#define LIST_ROW_H 22
#define BTN_H 36
#define STATUS_H 64
#define LABEL_W 106    // control labels; the [-] value [+] group starts after them
#define SMALL_BTN 28
#define VALUE_W 130

static const SDL_Color C_BG = {22, 24, 28, 255}, C_PANEL = {34, 37, 43, 255}, C_TEXT = {228, 230, 235, 255},
                       C_DIM = {135, 142, 153, 255}, C_ACCENT = {86, 156, 255, 255}, C_BTN = {52, 57, 66, 255},
                       C_HOT = {72, 79, 92, 255}, C_SEL = {44, 84, 140, 255}, C_ERR = {255, 112, 100, 255},
                       C_OK = {120, 210, 140, 255}, C_TRACK = {44, 48, 56, 255}, C_SHADE = {16, 17, 20, 255},
                       C_DONE = {40, 100, 64, 255};

typedef struct {
    View *v;
    UiHits *hits;
    int w, h;
    int clip_b;  // text must end above this y (the current area's bottom; 0: the status bar's top)
} Ui;

// ---- primitives ----

static void fill(Ui *u, SDL_Rect r, SDL_Color c) {
    SDL_SetRenderDrawColor(u->v->ren, c.r, c.g, c.b, c.a);
    SDL_RenderFillRect(u->v->ren, &r);
}

static void text(Ui *u, int x, int y, SDL_Color c, const char *s) { font_draw(u->v->ren, x, y, TS, c, s); }

static void count_cut(Ui *u, const char *s, const char *shown) {
    UiHits *h = u->hits;
    if (h->cuts < UI_MAX_CUTS) {
        snprintf(h->cut[h->cuts][0], sizeof h->cut[0][0], "%.90s", s);
        snprintf(h->cut[h->cuts][1], sizeof h->cut[0][1], "%.90s", shown);
    }
    h->cuts++;
}

// Text vertically centred in r; align -1 left (after a small inset), 0 centre, 1 right. Text cut
// with ".." to fit r, and text that runs past the bottom of its area (into the status bar or the
// next pane) or off the window, is counted in hits->cuts for the screenshot line.
static void text_in(Ui *u, SDL_Rect r, int align, SDL_Color c, const char *s) {
    char buf[256];
    if (font_fit(buf, sizeof buf, s, TS, r.w - 8)) count_cut(u, s, buf);
    int tw = font_width(buf, TS);
    int x = align < 0 ? r.x + 4 : align > 0 ? r.x + r.w - tw - 4 : r.x + (r.w - tw) / 2;
    int y = r.y + (r.h - font_height(TS)) / 2;
    int bottom = u->clip_b ? u->clip_b : u->h - STATUS_H;
    if (y + font_height(TS) > bottom) count_cut(u, s, "(runs past the bottom of its area)");
    else if (x + tw > u->w) count_cut(u, s, "(runs off the window)");
    text(u, x, y, c, buf);
}

#define WRAP_MAX 12

// Splits s into at most WRAP_MAX lines of at most max_w pixels, breaking between words (inside a
// word only when it is wider than a line alone); returns the number of lines.
static int wrap_lines(const char *s, int max_w, char lines[WRAP_MAX][256]) {
    int n = 0;
    lines[0][0] = 0;
    while (*s && n < WRAP_MAX) {
        while (*s == ' ') s++;
        size_t wl = strcspn(s, " ");
        if (!wl) break;
        char cand[256];
        snprintf(cand, sizeof cand, "%s%s%.*s", lines[n], lines[n][0] ? " " : "", (int)wl, s);
        if (font_width(cand, TS) <= max_w) {
            snprintf(lines[n], sizeof lines[n], "%s", cand);
            s += wl;
        } else if (lines[n][0]) {  // the word starts the next line
            if (++n < WRAP_MAX) lines[n][0] = 0;
        } else {  // a word wider than a line: as much of it as fits
            size_t k = 1;
            while (k < wl && k < sizeof cand - 1) {
                snprintf(cand, sizeof cand, "%.*s", (int)k + 1, s);
                if (font_width(cand, TS) > max_w) break;
                k++;
            }
            snprintf(lines[n], sizeof lines[n], "%.*s", (int)k, s);
            s += k;
            if (++n < WRAP_MAX) lines[n][0] = 0;
        }
    }
    return n < WRAP_MAX && lines[n][0] ? n + 1 : n;
}

// s word-wrapped to r's width, a line (r.h high) every `step` pixels from r.y; returns the y of the
// line after the last.
static int text_wrap(Ui *u, SDL_Rect r, int step, SDL_Color c, const char *s) {
    char lines[WRAP_MAX][256];
    int n = wrap_lines(s, r.w - 8, lines);
    for (int i = 0; i < n; i++, r.y += step) text_in(u, r, -1, c, lines[i]);
    return r.y;
}

// A key hint, right-aligned in r, left out when it does not fit whole.
static void hint(Ui *u, SDL_Rect r, const char *s) {
    if (font_width(s, TS) <= r.w - 8) text_in(u, r, 1, C_DIM, s);
}

static int inside(SDL_Rect r, int x, int y) { return x >= r.x && y >= r.y && x < r.x + r.w && y < r.y + r.h; }

static void add_hit(Ui *u, SDL_Rect r, Action a, int arg) {
    if (u->hits->n < UI_MAX_HITS) u->hits->hit[u->hits->n++] = (Hit){r, a, arg};
}

static void button(Ui *u, SDL_Rect r, const char *label, Action a, int arg, int selected) {
    int hot = inside(r, u->v->mouse_x, u->v->mouse_y);
    fill(u, r, selected ? C_SEL : hot ? C_HOT : C_BTN);
    text_in(u, r, 0, C_TEXT, label);
    add_hit(u, r, a, arg);
}

// ---- the control panel ----

// "label   [-]  value  [+]   hint" on one row.
static void stepper(Ui *u, int y, const char *label, const char *value, Action down, Action up, const char *key,
                    int enabled) {
    SDL_Rect row = {PAD, y, PANEL_W - 2 * PAD, ROW_H};
    text_in(u, (SDL_Rect){row.x, y, LABEL_W, ROW_H}, -1, C_TEXT, label);
    int x = PAD + LABEL_W, by = y + (ROW_H - SMALL_BTN) / 2;
    button(u, (SDL_Rect){x, by, SMALL_BTN, SMALL_BTN}, "-", down, 0, 0);
    text_in(u, (SDL_Rect){x + SMALL_BTN, y, VALUE_W, ROW_H}, 0, enabled ? C_ACCENT : C_DIM, value);
    button(u, (SDL_Rect){x + SMALL_BTN + VALUE_W, by, SMALL_BTN, SMALL_BTN}, "+", up, 0, 0);
    int hx = x + 2 * SMALL_BTN + VALUE_W;
    hint(u, (SDL_Rect){hx, y, row.x + row.w - hx, ROW_H}, key);
}

// "label   [ a | b ]   hint": two buttons, the active one highlighted; a click on the other toggles.
static void toggle(Ui *u, int y, const char *label, const char *a, const char *b, int b_on, Action act, const char *key) {
    text_in(u, (SDL_Rect){PAD, y, LABEL_W, ROW_H}, -1, C_TEXT, label);
    int x = PAD + LABEL_W, bw = (2 * SMALL_BTN + VALUE_W) / 2, by = y + (ROW_H - SMALL_BTN) / 2;
    button(u, (SDL_Rect){x, by, bw, SMALL_BTN}, a, b_on ? act : ACT_NONE, 0, !b_on);
    button(u, (SDL_Rect){x + bw, by, bw, SMALL_BTN}, b, b_on ? ACT_NONE : act, 0, b_on);
    int hx = x + 2 * bw;
    hint(u, (SDL_Rect){hx, y, PANEL_W - PAD - hx, ROW_H}, key);
}

// "label   [ ddpm | ddim | ... ]   hint": one button per sampler kind, the active one highlighted.
static void sampler_list(Ui *u, int y, SamplerKind active) {
    text_in(u, (SDL_Rect){PAD, y, LABEL_W, ROW_H}, -1, C_TEXT, "Sampler");
    const int x = PAD + LABEL_W, hint_w = 28, by = y + (ROW_H - SMALL_BTN) / 2;
    const int w = PANEL_W - PAD - x - hint_w, n = SAMPLER_KIND_COUNT;
    int need = 0;  // each button its label's width plus an equal share of the rest ("DPM++2M" is wide)
    for (int k = 0; k < n; k++) need += font_width(sampler_kind_label((SamplerKind)k), TS) + 8;
    for (int k = 0, x0 = x; k < n; k++) {
        const char *name = sampler_kind_label((SamplerKind)k);
        int bw = font_width(name, TS) + 8 + (w - need) / n;
        if (k == n - 1) bw = x + w - x0;
        button(u, (SDL_Rect){x0, by, bw, SMALL_BTN}, name, ACT_SAMPLER_SET, k, (int)active == k);
        x0 += bw;
    }
    hint(u, (SDL_Rect){x + w, y, hint_w, ROW_H}, "M");
}

#define CONTROLS_H (8 * ROW_H + 2 * BTN_H + 3 * PAD)

static void draw_controls(Ui *u, int y) {
    View *v = u->v;
    const GenOpts *o = &v->opts;
    char buf[64];
    snprintf(buf, sizeof buf, o->cfg_scale == 1.0f ? "%.1f off" : "%.1f", o->cfg_scale);
    stepper(u, y, "Guidance", buf, ACT_CFG_DOWN, ACT_CFG_UP, "Up/Dn", 1);
    sampler_list(u, y += ROW_H, o->kind);
    snprintf(buf, sizeof buf, "%d", o->steps);
    stepper(u, y += ROW_H, "Steps", buf, ACT_STEPS_DOWN, ACT_STEPS_UP, "[ ]", 1);
    snprintf(buf, sizeof buf, "%.1f", o->eta);
    stepper(u, y += ROW_H, "Eta", buf, ACT_ETA_DOWN, ACT_ETA_UP, ", .", o->kind == SAMPLER_DDIM);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v->seed);
    stepper(u, y += ROW_H, "Seed", buf, ACT_SEED_DOWN, ACT_SEED_UP, "PgUp/Dn", !v->seed_random);
    toggle(u, y += ROW_H, "New seed", "fixed", "random", v->seed_random, ACT_SEED_MODE, "R");
    snprintf(buf, sizeof buf, "%d", v->n);
    stepper(u, y += ROW_H, "Images", buf, ACT_N_DOWN, ACT_N_UP, "- +", 1);
    const ClassNames *cn = &v->pane[0].model.classes;
    if (v->in.blend && v->in.blend_b < cn->n) snprintf(buf, sizeof buf, "%.2f %s", v->in.blend_w, cn->names[v->in.blend_b]);
    else snprintf(buf, sizeof buf, "off");
    stepper(u, y += ROW_H, "Blend", buf, ACT_BLEND_W_DOWN, ACT_BLEND_W_UP, "L O P", v->in.blend);
    y += ROW_H + PAD;
    SDL_Rect gen = {PAD, y, PANEL_W - 2 * PAD, BTN_H};
    if (view_busy(v)) button(u, gen, "Cancel (Esc)", ACT_CANCEL, 0, 1);
    else button(u, gen, "Generate (Enter)", ACT_GENERATE, 0, 0);
    y += BTN_H + PAD;
    int third = (PANEL_W - 4 * PAD) / 3;
    button(u, (SDL_Rect){PAD, y, third, BTN_H}, "Grid (S)", ACT_SAVE, 0, 0);
    button(u, (SDL_Rect){2 * PAD + third, y, third, BTN_H}, "Image (I)", ACT_SAVE_ONE, 0, 0);
    button(u, (SDL_Rect){3 * PAD + 2 * third, y, third, BTN_H}, "Help (H)", ACT_HELP, 0, v->help);
}

static void draw_class_list(Ui *u, int y, int rows) {
    View *v = u->v;
    const ClassNames *cn = &v->pane[0].model.classes;
    if (v->cls != v->list_cls) {  // a new class: scroll it into view (the wheel may move away)
        if (v->cls < v->list_top) v->list_top = v->cls;
        if (v->cls >= v->list_top + rows) v->list_top = v->cls - rows + 1;
        v->list_cls = v->cls;
    }
    if (v->list_top > cn->n - rows) v->list_top = cn->n - rows;
    if (v->list_top < 0) v->list_top = 0;
    SDL_Rect box = {PAD, y, PANEL_W - 2 * PAD, rows * LIST_ROW_H};
    u->hits->list = box;
    fill(u, box, C_TRACK);
    for (int r = 0; r < rows && v->list_top + r < cn->n; r++) {
        int k = v->list_top + r;
        SDL_Rect row = {box.x, y + r * LIST_ROW_H, box.w, LIST_ROW_H};
        if (k == v->cls) fill(u, row, C_SEL);
        else if (inside(row, v->mouse_x, v->mouse_y)) fill(u, row, C_HOT);
        char label[160];
        snprintf(label, sizeof label, "%d  %s", k, cn->names[k]);
        text_in(u, row, -1, k == v->cls ? C_TEXT : C_DIM, label);
        add_hit(u, row, ACT_CLASS_SET, k);
    }
}

static void draw_panel(Ui *u) {
    View *v = u->v;
    const ModelInfo *m = &v->pane[0].model;
    fill(u, (SDL_Rect){0, 0, PANEL_W, u->h}, C_PANEL);
    font_draw(v->ren, PAD, PAD, 3, C_TEXT, "MALA-DiT viewer");
    int y = PAD + 3 * font_height(1) + PAD;
    if (v->npanes == 1) {
        y = text_wrap(u, (SDL_Rect){PAD, y, PANEL_W - 2 * PAD, 20}, 20, C_DIM, view_pane_name(v, 0));
        if (!v->pane[0].ready) return;
        y = text_wrap(u, (SDL_Rect){PAD, y, PANEL_W - 2 * PAD, 20}, 20, C_DIM, m->arch);
        y = text_wrap(u, (SDL_Rect){PAD, y, PANEL_W - 2 * PAD, 20}, 20, C_DIM, m->data) - 20;
    } else {  // each column names its model; here: which file is where, and the switch keys
        for (int p = 0; p < v->npanes; p++) {
            char buf[320];
            snprintf(buf, sizeof buf, "%c  %s", 'A' + p, view_pane_name(v, p));
            text_in(u, (SDL_Rect){PAD, y + 20 * p, PANEL_W - 2 * PAD, 20}, -1, C_DIM, buf);
        }
        char buf[96];
        snprintf(buf, sizeof buf, "Tab: B's next model (%d files)", v->nmodels);
        text_in(u, (SDL_Rect){PAD, y += 40, PANEL_W - 2 * PAD, 20}, -1, C_DIM, buf);
        if (!v->pane[0].ready) return;
    }
    y += 20 + PAD / 2;
    text_in(u, (SDL_Rect){PAD, y, PANEL_W - 2 * PAD, 24}, -1, C_TEXT, "Class");
    hint(u, (SDL_Rect){PAD, y, PANEL_W - 2 * PAD, 24}, "Left/Right");
    y += 26;
    int free_rows = (u->h - y - CONTROLS_H - PAD) / LIST_ROW_H;
    int rows = free_rows < 3 ? 3 : free_rows;
    if (rows > m->classes.n) rows = m->classes.n;
    draw_class_list(u, y, rows);
    draw_controls(u, y + rows * LIST_ROW_H + PAD);
}

// ---- the attention view ----

// A dark-to-bright ramp (black, purple, orange, pale yellow) for t in [0, 1].
static SDL_Color heat(double t) {
    static const double K[4][3] = {{0, 0, 4}, {120, 28, 109}, {237, 105, 37}, {252, 255, 164}};
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double f = t * 3;
    int i = f >= 3 ? 2 : (int)f;
    f -= i;
    SDL_Color c = {(Uint8)(K[i][0] + f * (K[i + 1][0] - K[i][0])), (Uint8)(K[i][1] + f * (K[i + 1][1] - K[i][1])),
                   (Uint8)(K[i][2] + f * (K[i + 1][2] - K[i][2])), 255};
    return c;
}

static void outline(Ui *u, SDL_Rect r, SDL_Color c) {
    SDL_SetRenderDrawColor(u->v->ren, c.r, c.g, c.b, c.a);
    SDL_RenderDrawRect(u->v->ren, &r);
}

// The query token's cell on the grid image, in window pixels.
static SDL_Rect query_cell(const View *v, int p) {
    const Pane *pn = &v->pane[p];
    const AttnRowInfo *in = &pn->model.attn;
    const AttnSel sel = view_attn_sel(v, p);
    const int S = pn->model.S, cols = view_grid_cols(pn->frame.n), k = sel.image;
    const int tc = sel.query % in->gw, tr = sel.query / in->gw, pad = pn->frame.n == 1 ? 0 : VIEW_GRID_PAD;
    double fx = (double)pn->image_rect.w / pn->tex_w, fy = (double)pn->image_rect.h / pn->tex_h;
    int gx = pad + (k % cols) * (S + VIEW_GRID_PAD) + tc * S / in->gw;
    int gy = pad + (k / cols) * (S + VIEW_GRID_PAD) + tr * S / in->gh;
    SDL_Rect r = {pn->image_rect.x + (int)(gx * fx), pn->image_rect.y + (int)(gy * fy), (int)(S / in->gw * fx),
                  (int)(S / in->gh * fy)};
    if (r.w < 3) r.w = 3;
    if (r.h < 3) r.h = 3;
    return r;
}

// The slider for a: ATTN_NOTCHES clickable notches on a log scale, 1/4 .. 8.
static void draw_slider(Ui *u, SDL_Rect r) {
    View *v = u->v;
    fill(u, r, C_TRACK);
    const int n = ATTN_NOTCHES;
    int knob = (int)lroundf((log2f(v->attn_sel.a) + 2.0f) * (n - 1) / 5.0f);
    for (int i = 0; i < n; i++) {
        SDL_Rect h = {r.x + (int)((long long)r.w * i / n), r.y, (int)((long long)r.w * (i + 1) / n) - (int)((long long)r.w * i / n), r.h};
        if (i <= knob) fill(u, (SDL_Rect){h.x, r.y + r.h / 2 - 2, h.w, 4}, C_SEL);
        if (i == knob) fill(u, (SDL_Rect){h.x + h.w / 2 - 4, r.y, 8, r.h}, C_ACCENT);
        add_hit(u, h, ACT_SCALE_SET, i);
    }
}

// Pane p's map in area: a heading, the heat map as large as fits, the sharpness numbers and the
// slider (compact: a shorter heading, for the half-height area of a side-by-side column).
static void draw_attn_in(Ui *u, int p, SDL_Rect area, int compact);

static void draw_attn(Ui *u, int p, SDL_Rect area, int compact) {
    int saved = u->clip_b;
    u->clip_b = area.y + area.h;
    draw_attn_in(u, p, area, compact);
    u->clip_b = saved;
}

static void draw_attn_in(Ui *u, int p, SDL_Rect area, int compact) {
    View *v = u->v;
    Pane *pn = &v->pane[p];
    fill(u, area, C_SHADE);
    SDL_Rect line = {area.x + PAD, area.y + PAD / 2, area.w - 2 * PAD, 22};
    pn->attn_rect = (SDL_Rect){0, 0, 0, 0};
    if (!pn->ready) return;
    if (!pn->model.has_attn) {  // wrapped to the area's width: a side-by-side column is narrow
        const int dig = strstr(pn->model.data, "dig") == pn->model.data;
        line.y = text_wrap(u, line, 24, C_ACCENT, "Attention map (A)") + 2;
        if (!compact) line.y = text_wrap(u, line, 24, C_ERR, "no attention rows for this model:");  // attn_why says it
        line.y = text_wrap(u, line, 24, C_DIM, pn->model.attn_why);
        line.y = text_wrap(u, line, 24, C_DIM, dig ? "DiG mixes tokens by gated linear recurrence (GLA);"
                                                   : "DiC mixes tokens by convolutions only;");
        text_wrap(u, line, 24, C_DIM,
                  dig ? "its gates/decay are not exposed: nothing to show" : "there is no map to show");
        return;
    }
    const AttnRowInfo *in = &pn->model.attn;
    char buf[160], label[96];
    view_attn_label(v, p, label, sizeof label);
    if (compact) {  // "mala  block 2/4  head mean" without the word head
        char *h = strstr(label, "head ");
        if (h) memmove(h, h + 5, strlen(h + 5) + 1);
        snprintf(buf, sizeof buf, "%s  %s", in->kind, label);
        line.y = text_wrap(u, line, 24, C_ACCENT, buf) - 24;
    } else {  // wrapped: the map's half of a small window is narrow
        snprintf(buf, sizeof buf, "Attention map: %s", in->kind);
        hint(u, line, "A");
        const int key_w = font_width("A", TS) + 8;
        line.w -= key_w;
        line.y = text_wrap(u, line, 24, C_ACCENT, buf);
        line.w += key_w;
        line.y = text_wrap(u, line, 24, C_TEXT, label);
        line.y = text_wrap(u, line, 24, C_DIM, "B N  J K  Z X  click") - 24;
    }
    int top = line.y + 26, bottom_h = 4 * 24 + 30 + PAD;
    int side = area.w - 2 * PAD < area.h - (top - area.y) - bottom_h ? area.w - 2 * PAD : area.h - (top - area.y) - bottom_h;
    int cell = side / (in->gw > in->gh ? in->gw : in->gh);
    if (cell < 1) cell = 1;
    SDL_Rect map = {area.x + (area.w - cell * in->gw) / 2, top, cell * in->gw, cell * in->gh};
    pn->attn_rect = map;
    const int L = in->gh * in->gw, have = pn->attn.step > 0 && pn->attn.row;
    int y = map.y + map.h + PAD;
    if (!have || !pn->attn.ok) {
        fill(u, map, C_TRACK);
        text_in(u, map, 0, pn->attn.ok || !have ? C_DIM : C_ERR, !have ? "generate to see the map" : pn->attn.msg);
    } else {
        float lo = pn->attn.row[0], hi = pn->attn.row[0];
        for (int j = 1; j < L; j++) {
            lo = pn->attn.row[j] < lo ? pn->attn.row[j] : lo;
            hi = pn->attn.row[j] > hi ? pn->attn.row[j] : hi;
        }
        for (int j = 0; j < L; j++)
            fill(u, (SDL_Rect){map.x + (j % in->gw) * cell, map.y + (j / in->gw) * cell, cell, cell},
                 heat(hi > lo ? (pn->attn.row[j] - lo) / (hi - lo) : 0.5));
        const AttnSel *q = &pn->attn.sel;
        outline(u, (SDL_Rect){map.x + (q->query % in->gw) * cell, map.y + (q->query / in->gw) * cell, cell, cell},
                C_OK);
        double sum, tm, ent;
        attn_stats(pn->attn.row, L, &sum, &tm, &ent);
        if (compact) {
            snprintf(buf, sizeof buf, "top/mean %.2f", tm);  // a line each: a column is narrow
            text_in(u, (SDL_Rect){line.x, y, line.w, 22}, -1, C_TEXT, buf);
            snprintf(buf, sizeof buf, "ent %.2f/%.2f", ent, log((double)L));
            text_in(u, (SDL_Rect){line.x, y + 24, line.w, 22}, -1, C_TEXT, buf);
            snprintf(buf, sizeof buf, "sum %.4f  step %d", sum, pn->attn.step);
            text_in(u, (SDL_Rect){line.x, y + 48, line.w, 22}, -1, C_DIM, buf);
        } else {
            snprintf(buf, sizeof buf, "top/mean %.2f", tm);
            text_in(u, (SDL_Rect){line.x, y, line.w, 22}, -1, C_TEXT, buf);
            snprintf(buf, sizeof buf, "entropy %.2f (flat %.2f)", ent, log((double)L));
            text_in(u, (SDL_Rect){line.x, y + 24, line.w, 22}, -1, C_TEXT, buf);
            snprintf(buf, sizeof buf, "sum %.4f  step %d", sum, pn->attn.step);
            text_in(u, (SDL_Rect){line.x, y + 48, line.w, 22}, -1, C_DIM, buf);
        }
    }
    int sy = y + 72;
    snprintf(buf, sizeof buf, "query scale a %.2f", v->attn_sel.a);
    text_in(u, (SDL_Rect){line.x, sy, line.w, 22}, -1, C_TEXT, buf);
    draw_slider(u, (SDL_Rect){line.x, sy + 24, line.w, 24});
}

// ---- the image area and the status bar ----

// Pane p's grid, as large as whole-pixel scaling allows, centred in area.
static void draw_grid(Ui *u, int p, SDL_Rect area) {
    View *v = u->v;
    Pane *pn = &v->pane[p];
    fill(u, area, C_BG);
    pn->image_rect = (SDL_Rect){0, 0, 0, 0};
    if (!pn->tex || pn->frame.n == 0) {
        const char *msg = pn->st.phase == WORKER_FAILED ? "the model could not be loaded (see below)"
                          : !pn->ready ? "loading the model..." : "no images yet: press Enter to generate";
        text_in(u, area, 0, pn->st.phase == WORKER_FAILED ? C_ERR : C_DIM, msg);
        return;
    }
    int aw = area.w - 2 * PAD, ah = area.h - 2 * PAD;
    int s = aw / pn->tex_w < ah / pn->tex_h ? aw / pn->tex_w : ah / pn->tex_h;
    int dw = pn->tex_w * s, dh = pn->tex_h * s;
    if (s < 1) {  // larger than the window: shrink to fit, keeping the aspect ratio
        double f = (double)aw / pn->tex_w < (double)ah / pn->tex_h ? (double)aw / pn->tex_w : (double)ah / pn->tex_h;
        dw = (int)(pn->tex_w * f);
        dh = (int)(pn->tex_h * f);
    }
    SDL_Rect dst = {area.x + (area.w - dw) / 2, area.y + (area.h - dh) / 2, dw, dh};
    SDL_RenderCopy(v->ren, pn->tex, NULL, &dst);
    pn->image_rect = dst;
    pn->image_scale = s;
    if (v->attn_sel.on && pn->model.has_attn && v->attn_sel.image < pn->frame.n) outline(u, query_cell(v, p), C_OK);
}

#define HEAD_H 24  // a side-by-side column's heading

// The input image with the mask over it in red, into v->in.tex when either changed.
static void input_texture(View *v) {
    ViewInput *in = &v->in;
    if (in->tex && in->tex_seq == in->seq) return;
    const int S = in->S, hw = S * S;
    uint8_t *rgb = xmalloc((size_t)hw * 3);
    for (int i = 0; i < hw; i++)
        for (int c = 0; c < 3; c++) {
            float x = in->img[(size_t)(in->C == 3 ? c : 0) * hw + i];
            int val = (int)((x + 1.0f) * 127.5f + 0.5f);
            val = val < 0 ? 0 : val > 255 ? 255 : val;
            if (in->mask[i] > 0.5f) val = (val + (c == 0 ? 255 : 0)) / 2;
            rgb[(size_t)i * 3 + c] = (uint8_t)val;
        }
    if (!in->tex) {
        in->tex = SDL_CreateTexture(v->ren, SDL_PIXELFORMAT_RGB24, SDL_TEXTUREACCESS_STREAMING, S, S);
        if (in->tex) SDL_SetTextureScaleMode(in->tex, SDL_ScaleModeNearest);
    }
    if (in->tex) SDL_UpdateTexture(in->tex, NULL, rgb, S * 3);
    free(rgb);
    in->tex_seq = in->seq;
}

// The strength slider: 100 clickable notches, 0.01 .. 1.
static void strength_slider(Ui *u, SDL_Rect r) {
    fill(u, r, C_TRACK);
    int knob = (int)lroundf(u->v->in.strength * 100) - 1;
    for (int i = 0; i < 100; i++) {
        SDL_Rect h = {r.x + (int)((long long)r.w * i / 100), r.y, (int)((long long)r.w * (i + 1) / 100) - (int)((long long)r.w * i / 100), r.h};
        if (i <= knob) fill(u, (SDL_Rect){h.x, r.y + r.h / 2 - 2, h.w, 4}, C_SEL);
        if (i == knob) fill(u, (SDL_Rect){h.x + h.w / 2 - 3, r.y, 6, r.h}, C_ACCENT);
        add_hit(u, h, ACT_STRENGTH_SET, i + 1);
    }
}

// The input column: its name, the image with the mask (paint with the mouse), the strength
// slider and the brush controls.
static void draw_input(Ui *u, SDL_Rect area) {
    View *v = u->v;
    ViewInput *in = &v->in;
    fill(u, area, C_SHADE);
    SDL_Rect line = {area.x + PAD, area.y + PAD / 2, area.w - 2 * PAD, 22};
    char buf[320];
    snprintf(buf, sizeof buf, "Input: %s", in->name);
    line.y = text_wrap(u, line, 24, C_ACCENT, buf);
    line.y = text_wrap(u, line, 24, C_DIM, in->masked ? "inpainting the red area" : "paint a mask to inpaint") - 24;
    int top = line.y + 26, bottom = 5 * 30 + PAD;
    int side = area.w - 2 * PAD < area.h - (top - area.y) - bottom ? area.w - 2 * PAD : area.h - (top - area.y) - bottom;
    int scale = side / in->S > 0 ? side / in->S : 1;
    SDL_Rect img = {area.x + (area.w - scale * in->S) / 2, top, scale * in->S, scale * in->S};
    input_texture(v);
    if (in->tex) SDL_RenderCopy(v->ren, in->tex, NULL, &img);
    in->rect = img;
    int y = img.y + img.h + PAD;
    snprintf(buf, sizeof buf, "strength %.2f", in->strength);
    text_in(u, (SDL_Rect){line.x, y, line.w, 22}, -1, C_TEXT, buf);
    strength_slider(u, (SDL_Rect){line.x, y + 24, line.w, 22});
    y += 52;
    snprintf(buf, sizeof buf, "brush %d", in->brush);
    text_in(u, (SDL_Rect){line.x, y, line.w - 56, 26}, -1, C_TEXT, buf);
    button(u, (SDL_Rect){line.x + line.w - 54, y, 26, 26}, "-", ACT_BRUSH_DOWN, 0, 0);
    button(u, (SDL_Rect){line.x + line.w - 26, y, 26, 26}, "+", ACT_BRUSH_UP, 0, 0);
    y += 30;
    const char *labels[4] = {"Erase", "Clear", "Invert", "Off"};
    const Action acts[4] = {ACT_ERASE, ACT_MASK_CLEAR, ACT_MASK_INVERT, ACT_INPUT_OFF};
    for (int i = 0; i < 4; i++)
        button(u, (SDL_Rect){line.x + line.w * (i % 2) / 2, y + 30 * (i / 2), line.w / 2 - 2, 26}, labels[i], acts[i], 0,
               i == 0 && in->erase);
}

static void draw_image(Ui *u, SDL_Rect area) {
    View *v = u->v;
    v->in.rect = (SDL_Rect){0, 0, 0, 0};
    if (v->in.on && v->in.img) {  // the input takes the left part
        // two model columns need the room for their headings and map numbers: the input 3/10
        int w = v->npanes > 1 ? area.w * 3 / 10 : area.w < 700 ? area.w / 2 : area.w * 2 / 5;
        draw_input(u, (SDL_Rect){area.x, area.y, w, area.h});
        area.x += w;
        area.w -= w;
    }
    if (v->npanes == 1) {
        if (v->attn_sel.on) {  // the map takes the right half
            int half = area.w / 2;
            draw_attn(u, 0, (SDL_Rect){area.x + half, area.y, area.w - half, area.h}, 0);
            area.w = half;
        }
        draw_grid(u, 0, area);
        return;
    }
    // side by side: a column per model, its name on top, its map under its grid
    for (int p = 0; p < v->npanes; p++) {
        const Pane *pn = &v->pane[p];
        int x0 = area.x + area.w * p / v->npanes, x1 = area.x + area.w * (p + 1) / v->npanes;
        SDL_Rect col = {x0, area.y, x1 - x0, area.h};
        SDL_Rect head = {col.x, col.y, col.w, HEAD_H};
        fill(u, head, C_PANEL);
        char buf[320], size[48] = "";
        snprintf(buf, sizeof buf, "%c  %s", 'A' + p, view_pane_name(v, p));
        char *ext = strstr(buf, ".safetensors");
        if (ext && !ext[12]) *ext = 0;
        if (pn->ready) snprintf(size, sizeof size, "%dx%dx%d", pn->model.S, pn->model.S, pn->model.C);
        // the size is left out before the name is cut (the panel names the file in full)
        if (font_width(buf, TS) + font_width(size, TS) + 20 > head.w) size[0] = 0;
        hint(u, head, size);
        text_in(u, (SDL_Rect){head.x, head.y, head.w - (size[0] ? font_width(size, TS) + 12 : 0), head.h}, -1, C_TEXT, buf);
        SDL_Rect body = {col.x, col.y + HEAD_H, col.w, col.h - HEAD_H};
        if (v->attn_sel.on) {
            int gh = body.h * 12 / 25;
            draw_grid(u, p, (SDL_Rect){body.x, body.y, body.w, gh});
            draw_attn(u, p, (SDL_Rect){body.x, body.y + gh, body.w, body.h - gh}, 1);
        } else {
            draw_grid(u, p, body);
        }
        if (p > 0) fill(u, (SDL_Rect){col.x, col.y, 2, col.h}, C_PANEL);  // the divider
    }
}

// The progress line of pane p: live during a run, a summary afterwards; with the device (narrow:
// the short form, for half the bar or a small window).
static void progress_text(const View *v, int p, int narrow, char *buf, size_t n) {
    const Pane *pn = &v->pane[p];
    const WorkerStatus *st = &pn->st;
    const ViewRequest *r = &pn->frame.req;
    const char *dev = v->be->name;
    const char *kind = sampler_kind_label(r->opts.kind) ? sampler_kind_label(r->opts.kind) : "?";
    if (pn->st.phase == WORKER_RUNNING && narrow)
        snprintf(buf, n, "%d/%d  %.1f steps/s  %s", st->step, st->nsteps, st->steps_per_s, dev);
    else if (pn->st.phase == WORKER_RUNNING) {  // the time left at the rate so far
        char eta[32] = "--";
        if (st->steps_per_s > 0) progress_format_eta(eta, sizeof eta, (st->nsteps - st->step) / st->steps_per_s);
        snprintf(buf, n, "step %d/%d   %.1f steps/s   %.1f s   ETA %s   %s", st->step, st->nsteps, st->steps_per_s,
                 st->seconds, eta, dev);
    }
    else if (st->outcome == RUN_DONE && narrow)
        snprintf(buf, n, "done  %.1f steps/s  %s", st->steps_per_s, dev);
    else if (st->outcome == RUN_DONE)
        snprintf(buf, n, "done: %d image%s, %s %d steps in %.1f s (%.1f steps/s, %s)", r->n, r->n == 1 ? "" : "s", kind,
                 st->nsteps, st->seconds, st->steps_per_s, dev);
    else if (st->outcome == RUN_CANCELLED) snprintf(buf, n, "cancelled at step %d/%d (%s)", st->step, st->nsteps, dev);
    else if (st->outcome == RUN_FAILED) snprintf(buf, n, "failed: %s", st->msg);
    else if (pn->st.phase == WORKER_LOADING) snprintf(buf, n, "loading on %s", dev);
    else snprintf(buf, n, "idle   device %s", dev);
}

static void draw_status(Ui *u, SDL_Rect bar) {
    View *v = u->v;
    fill(u, bar, C_PANEL);
    char buf[MALA_ERR_LEN + 64];
    int failed = -1;
    for (int p = 0; p < v->npanes; p++) {  // a progress track per model
        const Pane *pn = &v->pane[p];
        const WorkerStatus *st = &pn->st;
        int x0 = bar.x + PAD + (bar.w - PAD) * p / v->npanes, x1 = bar.x + (bar.w - PAD) * (p + 1) / v->npanes;
        SDL_Rect track = {x0, bar.y + 8, x1 - x0, 24};
        fill(u, track, C_TRACK);
        if (st->nsteps > 0 && st->step > 0) {
            SDL_Rect done = track;
            done.w = (int)((long long)track.w * st->step / st->nsteps);
            fill(u, done, st->phase == WORKER_RUNNING ? C_SEL : st->outcome == RUN_DONE ? C_DONE : C_HOT);
        }
        progress_text(v, p, v->npanes > 1, buf, sizeof buf);
        if (font_width(buf, TS) > track.w - 8) progress_text(v, p, 1, buf, sizeof buf);
        text_in(u, track, -1, C_TEXT, buf);
        if (failed < 0 && (st->phase == WORKER_FAILED || st->outcome == RUN_FAILED)) failed = p;
    }
    SDL_Rect line = {bar.x + PAD, bar.y + 36, bar.w - 2 * PAD, 24};
    text_in(u, line, -1, failed >= 0 ? C_ERR : !strncmp(v->message, "saved", 5) ? C_OK : C_DIM,
            failed >= 0 ? v->pane[failed].st.msg : v->message);
    const Pane *p0 = &v->pane[0];
    if (p0->frame.n > 0 && failed < 0) {
        const ViewRequest *r = &p0->frame.req;
        snprintf(buf, sizeof buf, "%s  seed %llu  cfg %.1f", p0->model.classes.names[r->cls],
                 (unsigned long long)r->seed, r->opts.cfg_scale);
        int tw = font_width(buf, TS), mw = font_width(v->message, TS);
        if (mw + tw + 40 < line.w) text_in(u, line, 1, C_DIM, buf);
    }
}

// ---- help overlay ----

static const char *const HELP[][2] = {
    {"Enter, Space", "generate"},
    {"Esc", "cancel the run; quit when idle"},
    {"Q", "quit"},
    {"Left, Right", "class (or click the list; wheel scrolls)"},
    {"Up, Down", "guidance scale +/- 0.5"},
    {"M", "next sampler (or click the list)"},
    {"[  ]", "steps - / +"},
    {",  .", "eta - / + 0.1 (DDIM)"},
    {"PgDn, PgUp", "seed - / + 1"},
    {"R", "seed: fixed / new each run"},
    {"-  +", "images in the grid (1..16)"},
    {"S", "save the grid as PNG (each model's)"},
    {"I", "save one image (under the pointer) as PNG"},
    {"Tab, Shift+Tab", "next model file in pane B / A"},
    {"H, F1", "show / hide this help"},
    {"A", "attention map (click the image: query token)"},
    {"B N / J K", "attention block - / +, head - / + (mean)"},
    {"Z  X", "query scale a - / + (slider: 1/4 .. 8)"},
    {"U, drop, Bksp", "input: image under pointer, a file; off"},
    {"F G, mouse", "strength - / +; paint mask (9 0 E C V)"},
    {"L, O P, 7 8", "blend on/off, class B - / +, weight - / +"},
};
#define HELP_N (int)(sizeof HELP / sizeof HELP[0])

static void draw_help(Ui *u) {
    SDL_SetRenderDrawBlendMode(u->v->ren, SDL_BLENDMODE_BLEND);
    fill(u, (SDL_Rect){0, 0, u->w, u->h}, (SDL_Color){0, 0, 0, 150});
    SDL_SetRenderDrawBlendMode(u->v->ren, SDL_BLENDMODE_NONE);
    int bw = 700, bh = 76 + HELP_N * 24;
    SDL_Rect box = {(u->w - bw) / 2, (u->h - bh) / 2, bw, bh};
    fill(u, (SDL_Rect){box.x - 2, box.y - 2, box.w + 4, box.h + 4}, C_ACCENT);
    fill(u, box, C_SHADE);
    text(u, box.x + 24, box.y + 20, C_ACCENT, "Keys (mouse: click the controls)");
    for (int i = 0; i < HELP_N; i++) {
        int y = box.y + 56 + i * 24;
        text(u, box.x + 24, y, C_TEXT, HELP[i][0]);
        text(u, box.x + 200, y, C_DIM, HELP[i][1]);
    }
    add_hit(u, (SDL_Rect){0, 0, u->w, u->h}, ACT_HELP, 0);  // a click anywhere closes it
}

// ---- entry points ----

void ui_draw(View *v, UiHits *hits) {
    Ui u = {v, hits, 0, 0, 0};
    SDL_GetRendererOutputSize(v->ren, &u.w, &u.h);
    hits->n = hits->cuts = 0;
    hits->list = (SDL_Rect){0, 0, 0, 0};
    SDL_SetRenderDrawBlendMode(v->ren, SDL_BLENDMODE_NONE);
    u.clip_b = u.h;  // the panel runs the window's full height
    draw_panel(&u);
    u.clip_b = u.h - STATUS_H;
    draw_image(&u, (SDL_Rect){PANEL_W, 0, u.w - PANEL_W, u.h - STATUS_H});
    u.clip_b = u.h;  // the status bar and the help overlay end at the window's bottom
    draw_status(&u, (SDL_Rect){PANEL_W, u.h - STATUS_H, u.w - PANEL_W, STATUS_H});
    if (v->help) {
        hits->n = 0;  // the overlay takes every click and the wheel
        hits->list = (SDL_Rect){0, 0, 0, 0};
        draw_help(&u);
    }
}

Action ui_hit(const UiHits *h, int x, int y, int *arg) {
    for (int i = h->n - 1; i >= 0; i--)
        if (inside(h->hit[i].r, x, y)) {
            *arg = h->hit[i].arg;
            return h->hit[i].act;
        }
    return ACT_NONE;
}

void ui_scroll_list(View *v, int rows) {
    v->list_top += rows;  // ui_draw clamps it to the list
    if (v->list_top < 0) v->list_top = 0;
}

int ui_update_texture(View *v, int p, MalaErr *err) {
    Pane *pn = &v->pane[p];
    if (!pn->ready || pn->tex_seq == pn->seen || pn->frame.n == 0) return 0;
    uint8_t *rgb;
    int gw, gh, S = pn->model.S;
    if (image_grid_u8(&rgb, &gw, &gh, pn->frame.x, pn->frame.n, pn->model.C, S, S, view_grid_cols(pn->frame.n),
                      VIEW_GRID_PAD, err))
        return -1;
    if (!pn->tex || gw != pn->tex_w || gh != pn->tex_h) {
        if (pn->tex) SDL_DestroyTexture(pn->tex);
        pn->tex = SDL_CreateTexture(v->ren, SDL_PIXELFORMAT_RGB24, SDL_TEXTUREACCESS_STREAMING, gw, gh);
        if (!pn->tex) {
            free(rgb);
            return mala_errf(err, "cannot create a %dx%d texture: %s", gw, gh, SDL_GetError());
        }
        SDL_SetTextureScaleMode(pn->tex, SDL_ScaleModeNearest);
        pn->tex_w = gw;
        pn->tex_h = gh;
    }
    SDL_UpdateTexture(pn->tex, NULL, rgb, gw * 3);
    free(rgb);
    pn->tex_seq = pn->seen;
    return 0;
}

int ui_screenshot(SDL_Renderer *ren, const char *path, MalaErr *err) {
    int w, h;
    if (SDL_GetRendererOutputSize(ren, &w, &h)) return mala_errf(err, "screenshot: %s", SDL_GetError());
    uint8_t *px = xmalloc((size_t)w * h * 3);
    int rc = SDL_RenderReadPixels(ren, NULL, SDL_PIXELFORMAT_RGB24, px, w * 3);
    if (rc) rc = mala_errf(err, "screenshot: cannot read the window's pixels: %s", SDL_GetError());
    else rc = image_write_png(path, px, w, h, 3, err);
    free(px);
    return rc;
}

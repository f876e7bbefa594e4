// defines: view_attn_do, view_attn_pick, view_attn_query, view_attn_ready, view_attn_ref, view_attn_sel,
//          view_attn_send, attn_stats, view_attn_dump, view_attn_label
// The attention view's settings: which query token (a click on the grid), block, head (or the
// mean over heads) and the query-magnitude factor a (docs/design.md §1: scaling phi(q) sharpens MALA's row
// and leaves linear attention's unchanged). Every change goes to the worker, which computes the
// row from the last forward (net_attn_row, one O(L d) row per head). With two models side by side
// both get the same selection: the query is a point of the image (each model takes the token
// under it on its own grid), block and head are clamped to what each model has.
#include <math.h>
#include <string.h>

#include "formats/npy.h"
#include "viewer/viewer.h"

static float notch_a(int i) { return exp2f(-2.0f + 5.0f * (float)i / (float)(ATTN_NOTCHES - 1)); }
static int a_notch(float a) { return (int)lroundf((log2f(a) + 2.0f) * (float)(ATTN_NOTCHES - 1) / 5.0f); }

int view_attn_ref(const View *v) {
    for (int p = 0; p < v->npanes; p++)
        if (v->pane[p].ready && v->pane[p].model.has_attn) return p;
    return -1;
}

AttnSel view_attn_sel(const View *v, int p) {
    AttnSel s = v->attn_sel;
    const Pane *pn = &v->pane[p];
    if (!pn->model.has_attn) return s;
    const AttnRowInfo *in = &pn->model.attn;
    int col = (int)(v->attn_fx * (float)in->gw), row = (int)(v->attn_fy * (float)in->gh);
    col = col < 0 ? 0 : col >= in->gw ? in->gw - 1 : col;
    row = row < 0 ? 0 : row >= in->gh ? in->gh - 1 : row;
    s.query = row * in->gw + col;
    s.block = s.block < 0 ? 0 : s.block >= in->blocks ? in->blocks - 1 : s.block;
    s.head = s.head >= in->heads ? in->heads - 1 : s.head;
    return s;
}

void view_attn_send(View *v, int p) {
    Pane *pn = &v->pane[p];
    if (!pn->worker || !pn->ready || !pn->model.has_attn) return;
    AttnSel s = view_attn_sel(v, p);
    worker_set_attn(pn->worker, &s);
}

static void send(View *v) {
    v->attn_sel.id++;
    for (int p = 0; p < v->npanes; p++) view_attn_send(v, p);
}

// The most blocks and heads of the models shown (the keys cycle over these; each model clamps).
static void attn_extent(const View *v, int *blocks, int *heads) {
    *blocks = *heads = 1;
    for (int p = 0; p < v->npanes; p++) {
        const Pane *pn = &v->pane[p];
        if (!pn->ready || !pn->model.has_attn) continue;
        if (pn->model.attn.blocks > *blocks) *blocks = pn->model.attn.blocks;
        if (pn->model.attn.heads > *heads) *heads = pn->model.attn.heads;
    }
}

static void no_rows_message(View *v) {
    char buf[sizeof v->message] = "";
    for (int p = 0; p < v->npanes; p++) {
        const Pane *pn = &v->pane[p];
        if (!pn->ready || pn->model.has_attn) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, "%s%s", len ? "; " : "", pn->model.attn_why);
    }
    if (view_attn_ref(v) < 0) view_message(v, "no attention rows: %s", buf);
    else if (*buf) view_message(v, "attention view: click the image to pick a query token (%s)", buf);
    else view_message(v, "attention view: click the image to pick a query token");
}

void view_attn_do(View *v, Action a, int arg) {
    AttnSel *s = &v->attn_sel;
    int blocks, heads;
    attn_extent(v, &blocks, &heads);
    if (s->block < 0 || s->block >= blocks) s->block = s->block < 0 ? 0 : blocks - 1;
    if (s->head >= heads) s->head = heads - 1;
    int notch = a_notch(s->a);
    switch (a) {
    case ACT_ATTN:
        s->on = !s->on;
        if (s->on) no_rows_message(v);
        break;
    case ACT_BLOCK_PREV: s->block = (s->block + blocks - 1) % blocks; break;
    case ACT_BLOCK_NEXT: s->block = (s->block + 1) % blocks; break;
    // head -1 is the mean: the cycle is mean, 0, 1, ..., heads-1
    case ACT_HEAD_PREV: s->head = s->head <= -1 ? heads - 1 : s->head - 1; break;
    case ACT_HEAD_NEXT: s->head = s->head >= heads - 1 ? -1 : s->head + 1; break;
    case ACT_SCALE_DOWN: s->a = notch_a(notch > 0 ? notch - 1 : 0); break;
    case ACT_SCALE_UP: s->a = notch_a(notch < ATTN_NOTCHES - 1 ? notch + 1 : ATTN_NOTCHES - 1); break;
    case ACT_SCALE_SET: s->a = notch_a(arg < 0 ? 0 : arg >= ATTN_NOTCHES ? ATTN_NOTCHES - 1 : arg); break;
    default: return;
    }
    send(v);
}

int view_attn_query(View *v, int col, int row, int image, MalaErr *err) {
    int r = view_attn_ref(v);
    if (r < 0) return mala_errf(err, "no attention rows: %s", v->pane[0].model.attn_why);
    const AttnRowInfo *in = &v->pane[r].model.attn;
    if (col < 0 || col >= in->gw || row < 0 || row >= in->gh)
        return mala_errf(err, "token %d,%d is outside the %dx%d token grid", col, row, in->gw, in->gh);
    const int n = v->pane[r].frame.n;
    if (image < 0 || image >= VIEW_MAX_IMAGES || (n > 0 && image >= n))
        return mala_errf(err, "image %d is not in the grid of %d", image, n);
    v->attn_fx = ((float)col + 0.5f) / (float)in->gw;  // the token's centre, on every model's grid
    v->attn_fy = ((float)row + 0.5f) / (float)in->gh;
    v->attn_sel.image = image;
    send(v);
    return 0;
}

int view_attn_pick(View *v, int x, int y) {
    int image;
    float fx, fy;
    if (!v->attn_sel.on || view_attn_ref(v) < 0 || view_image_at(v, x, y, &image, &fx, &fy) < 0) return 0;
    v->attn_fx = fx;
    v->attn_fy = fy;
    v->attn_sel.image = image;
    send(v);
    return 1;
}

int view_attn_ready(const View *v) {
    if (!v->attn_sel.on || view_attn_ref(v) < 0) return 0;
    for (int p = 0; p < v->npanes; p++) {
        const Pane *pn = &v->pane[p];
        if (!pn->ready) return 0;
        if (pn->model.has_attn && (pn->attn.sel.id != v->attn_sel.id || pn->attn.frame_seq != pn->seen || pn->attn.step <= 0))
            return 0;
    }
    return 1;
}

void attn_stats(const float *row, int L, double *sum, double *top_mean, double *entropy) {
    double s = 0, top = -INFINITY, pos = 0, mag = 0;
    for (int j = 0; j < L; j++) {
        s += row[j];
        mag += fabs(row[j]);
        top = fmax(top, row[j]);
        if (row[j] > 0) pos += row[j];
    }
    double e = 0;
    for (int j = 0; j < L; j++)
        if (row[j] > 0) e -= row[j] / pos * log(row[j] / pos);
    *sum = s;
    *top_mean = mag > 0 ? top / (mag / L) : 0;
    *entropy = e;
}

void view_attn_label(const View *v, int p, char *buf, size_t n) {
    const AttnSel s = view_attn_sel(v, p);
    const AttnRowInfo *in = &v->pane[p].model.attn;
    char head[16];
    if (s.head < 0) snprintf(head, sizeof head, "mean");
    else snprintf(head, sizeof head, "%d/%d", s.head, in->heads);
    snprintf(buf, n, "block %d/%d  head %s", s.block, in->blocks, head);
}

int view_attn_dump(View *v, int p, const char *path, MalaErr *err) {
    const Pane *pn = &v->pane[p];
    if (!pn->model.has_attn) return mala_errf(err, "no attention rows: %s", pn->model.attn_why);
    if (!view_attn_ready(v)) return mala_errf(err, "no attention map to write (attn=on and a finished run first)");
    if (!pn->attn.ok) return mala_errf(err, "%s", pn->attn.msg);
    const AttnRowInfo *in = &pn->model.attn;
    const int L = in->gh * in->gw;
    NpyArray a;
    npy_wrap(&a, "<f4", pn->attn.row, 2, (const int64_t[]){in->gh, in->gw});
    if (npy_save(path, &a, err)) return -1;
    double sum, tm, ent;
    attn_stats(pn->attn.row, L, &sum, &tm, &ent);
    const AttnSel s = view_attn_sel(v, p);
    char label[96], which[48] = "";
    view_attn_label(v, p, label, sizeof label);
    if (v->npanes > 1) snprintf(which, sizeof which, " (pane %d)", p);
    fprintf(stderr, "view: attention%s %s %s a %.4f image %d query %d (%d,%d) step %d: sum %.6f top/mean %.4f "
            "entropy %.4f -> %s\n", which, in->kind, label, s.a, s.image, s.query, s.query % in->gw, s.query / in->gw,
            pn->attn.step, sum, tm, ent, path);
    view_message(v, "wrote %s", path);
    return 0;
}

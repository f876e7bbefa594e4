// defines: view_attn_do, view_attn_pick, view_attn_query, view_attn_ready, attn_stats, view_attn_dump,
//          view_attn_label
// The attention view's settings: which query token (a click on the grid), block, head (or the
// mean over heads) and the query-magnitude factor a (DESIGN 1: scaling phi(q) sharpens MALA's row
// and leaves linear attention's unchanged). Every change goes to the worker, which computes the
// row from the last forward (net_attn_row, one O(L d) row per head).
#include <math.h>
#include <string.h>

#include "npy.h"
#include "viewer.h"

static float notch_a(int i) { return exp2f(-2.0f + 5.0f * (float)i / (float)(ATTN_NOTCHES - 1)); }
static int a_notch(float a) { return (int)lroundf((log2f(a) + 2.0f) * (float)(ATTN_NOTCHES - 1) / 5.0f); }

static void send(View *v) {
    v->attn_sel.id++;
    if (v->worker) worker_set_attn(v->worker, &v->attn_sel);
}

void view_attn_do(View *v, Action a, int arg) {
    AttnSel *s = &v->attn_sel;
    const AttnRowInfo *in = &v->model.attn;
    const int blocks = v->model.has_attn ? in->blocks : 1, heads = v->model.has_attn ? in->heads : 1;
    int notch = a_notch(s->a);
    switch (a) {
    case ACT_ATTN:
        s->on = !s->on;
        if (s->on && !v->model.has_attn) view_message(v, "no attention rows: %s", v->model.attn_why);
        else if (s->on) view_message(v, "attention view: click the image to pick a query token");
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
    if (!v->model.has_attn) return mala_errf(err, "no attention rows: %s", v->model.attn_why);
    const AttnRowInfo *in = &v->model.attn;
    if (col < 0 || col >= in->gw || row < 0 || row >= in->gh)
        return mala_errf(err, "token %d,%d is outside the %dx%d token grid", col, row, in->gw, in->gh);
    if (image < 0 || image >= VIEW_MAX_IMAGES || (v->frame.n > 0 && image >= v->frame.n))
        return mala_errf(err, "image %d is not in the grid of %d", image, v->frame.n);
    v->attn_sel.query = row * in->gw + col;
    v->attn_sel.image = image;
    send(v);
    return 0;
}

int view_attn_pick(View *v, int x, int y) {
    SDL_Rect r = v->image_rect;
    if (!v->attn_sel.on || !v->model.has_attn || v->frame.n == 0 || r.w <= 0 || x < r.x || y < r.y ||
        x >= r.x + r.w || y >= r.y + r.h)
        return 0;
    // window pixel -> grid pixel -> (image, pixel in the image): make_grid puts image k at column
    // k % cols, row k / cols, each cell S + pad wide after a leading pad
    const int S = v->model.S, cell = S + VIEW_GRID_PAD, cols = view_grid_cols(v->frame.n);
    int gx = (int)((long long)(x - r.x) * v->tex_w / r.w) - VIEW_GRID_PAD;
    int gy = (int)((long long)(y - r.y) * v->tex_h / r.h) - VIEW_GRID_PAD;
    if (gx < 0 || gy < 0 || gx % cell >= S || gy % cell >= S) return 0;  // on the padding
    int image = (gy / cell) * cols + gx / cell;
    if (gx / cell >= cols || image >= v->frame.n) return 0;
    const AttnRowInfo *in = &v->model.attn;
    MalaErr err;
    if (view_attn_query(v, (gx % cell) * in->gw / S, (gy % cell) * in->gh / S, image, &err)) return 0;
    return 1;
}

int view_attn_ready(const View *v) {
    return v->attn_sel.on && v->model.has_attn && v->attn.sel.id == v->attn_sel.id && v->attn.frame_seq == v->seen &&
           v->attn.step > 0;
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

void view_attn_label(const View *v, char *buf, size_t n) {
    const AttnSel *s = &v->attn_sel;
    char head[16];
    if (s->head < 0) snprintf(head, sizeof head, "mean");
    else snprintf(head, sizeof head, "%d/%d", s->head, v->model.attn.heads);
    snprintf(buf, n, "block %d/%d  head %s", s->block, v->model.attn.blocks, head);
}

int view_attn_dump(View *v, const char *path, MalaErr *err) {
    if (!view_attn_ready(v)) return mala_errf(err, "no attention map to write (attn=on and a finished run first)");
    if (!v->attn.ok) return mala_errf(err, "%s", v->attn.msg);
    const AttnRowInfo *in = &v->model.attn;
    const int L = in->gh * in->gw;
    NpyArray a;
    npy_wrap(&a, "<f4", v->attn.row, 2, (const int64_t[]){in->gh, in->gw});
    if (npy_save(path, &a, err)) return -1;
    double sum, tm, ent;
    attn_stats(v->attn.row, L, &sum, &tm, &ent);
    const AttnSel *s = &v->attn_sel;
    char label[96];
    view_attn_label(v, label, sizeof label);
    fprintf(stderr, "view: attention %s %s a %.4f image %d query %d (%d,%d) step %d: sum %.6f top/mean %.4f "
            "entropy %.4f -> %s\n", in->kind, label, s->a, s->image, s->query, s->query % in->gw, s->query / in->gw,
            v->attn.step, sum, tm, ent, path);
    view_message(v, "wrote %s", path);
    return 0;
}

// DiT's attention rows for the viewer (NetOps attn_info / attn_row): the row of one query token of
// the last forward, from the block's qkv (and qkr) that dit.c keeps in NET_INFER_ATTN mode, through
// the backend's explicit-row op (O(L d) per head; the L x L matrix is never formed).
// defines: dit_attn_info, dit_attn_row
#include "model/dit.h"

_Static_assert((int)ATTN_MALA == (int)ATTN_ROW_MALA && (int)ATTN_SOFTMAX == (int)ATTN_ROW_SOFTMAX &&
                   (int)ATTN_LINEAR == (int)ATTN_ROW_LINEAR,
               "AttnKind and attn_row's kinds must agree");

void dit_attn_info(const Net *n, AttnRowInfo *info) {
    const Dit *m = n->impl;
    info->blocks = n->cfg.dit.depth;
    info->heads = n->cfg.dit.heads;
    info->gh = info->gw = m->gh;
    info->kind = attn_kind_name(n->cfg.dit.attn);
}

void dit_attn_row(Net *n, float *row, int block, int head, int image, int query, float a) {
    const Dit *m = n->impl;
    const DitConfig *c = &n->cfg.dit;
    const size_t rows = (size_t)n->max_batch * m->T, H = c->hidden;
    AttnShape s = {n->last_batch, m->T, c->hidden, c->heads, m->gh, m->gh};
    const float *qkv = m->keep_qkv + (size_t)block * rows * 3 * H;
    const float *qkr = c->rope ? m->keep_qkr + (size_t)block * rows * 2 * H : NULL;
    // AttnKind and the op's ATTN_ROW_* share their numbers (backend.h)
    n->be->attn_row(m->row, qkv, qkr, s, (int)c->attn, image, head, query, a);
    n->be->to_host(row, m->row, (size_t)m->T * sizeof(float));
}

// ZeRO-1 (docs/design.md §9; as llm.c's zero.cuh): AdamW's moments split over the ranks. A step
// reduce-scatters the gradient (each rank gets the sum of its block), updates its block of the
// weights and moments, and all-gathers the weights; checkpoints gather m and v on rank 0, so a
// checkpoint is the one an unsharded run writes.
// defines: trainer_zero1, trainer_opt_state_bytes, zero_reduce_grad, zero_gather_weights,
//          zero_gather_moment, zero_take_block
#include "train/trainer_zero.h"

#include <math.h>
#include <string.h>

#include "core/dist.h"

void trainer_zero1(Trainer *tr) {
    if (tr->world == 1 || tr->zero) return;
    const Backend *be = tr->be;
    size_t nf = tr->net->n_floats, nt = tr->net->n_trainable;
    size_t b = dist_block(nt), full = b * tr->world;
    tr->zero = 1;
    tr->zblock = b;
    tr->zoff = b * tr->rank < nt ? b * tr->rank : nt;
    tr->zlen = tr->zoff + b < nt ? b : nt - tr->zoff;
    tr->grad_floats = full > nf ? full : nf;
    // one block again: grad [grad_floats], ema [nf], m, v, gshard [zblock]
    be->release(tr->d_opt);
    tr->d_opt = be->alloc((tr->grad_floats + nf + 3 * b) * sizeof(float));
    tr->grad = tr->d_opt;
    tr->ema = tr->grad + tr->grad_floats;
    tr->m = tr->ema + nf;
    tr->v = tr->m + b;
    tr->gshard = tr->v + b;
    be->zero(tr->grad, tr->grad_floats * sizeof(float));  // the padding past n_floats stays zero
    be->zero(tr->m, 3 * b * sizeof(float));
    if (tr->host_grad) {  // host staging for a backend without NCCL: whole vectors and a block
        free(tr->host_grad);
        tr->host_grad = xcalloc(full, sizeof(float));
        tr->host_shard = xcalloc(b, sizeof(float));
    }
}

size_t trainer_opt_state_bytes(const Trainer *tr) {
    return 2 * (tr->zero ? tr->zblock : tr->net->n_floats) * sizeof(float);
}

double zero_reduce_grad(Trainer *tr) {
    const Backend *be = tr->be;
    size_t b = tr->zblock;
    if (!tr->host_grad) {
        dist_reduce_scatter_f32(tr->grad, tr->gshard, b);
    } else {
        be->sync();
        if (dist_reduce_scatter_f32_device(tr->grad, tr->gshard, b) != 0) {  // no NCCL: through the host
            be->to_host(tr->host_grad, tr->grad, tr->net->n_trainable * sizeof(float));
            dist_reduce_scatter_f32(tr->host_grad, tr->host_shard, b);
            be->to_device(tr->gshard, tr->host_shard, b * sizeof(float));
        }
    }
    double ss = 0;
    if (tr->zlen) {
        be->scale(tr->gshard, 1.0f / (float)tr->world, tr->zlen);
        ss = be->sumsq(tr->gshard, tr->zlen);
    }
    dist_sum_f64(&ss, 1);
    return sqrt(ss);
}

void zero_gather_weights(Trainer *tr) {
    const Backend *be = tr->be;
    float *w = tr->net->w;
    size_t b = tr->zblock, nt = tr->net->n_trainable;
    // grad is free until the next backward: the gather's whole vector (w has no room for the padding)
    if (tr->zlen) be->copy(tr->grad + tr->zoff, w + tr->zoff, tr->zlen * sizeof(float));
    if (!tr->host_grad) {
        dist_allgather_f32(tr->grad, b);
    } else {
        be->sync();
        if (dist_allgather_f32_device(tr->grad, b) != 0) {
            if (tr->zlen) be->to_host(tr->host_grad + tr->zoff, w + tr->zoff, tr->zlen * sizeof(float));
            dist_allgather_f32(tr->host_grad, b);
            be->to_device(w, tr->host_grad, nt * sizeof(float));
            return;
        }
    }
    be->copy(w, tr->grad, nt * sizeof(float));
}

float *zero_gather_moment(const Trainer *tr, const float *block) {
    size_t b = tr->zblock, nf = tr->net->n_floats, full = b * tr->world;
    int root = tr->rank == 0;
    float *host = xcalloc(root ? (full > nf ? full : nf) : b, sizeof(float));
    if (tr->zlen) tr->be->to_host(host + (root ? tr->zoff : 0), block, tr->zlen * sizeof(float));
    dist_gather_f32(host, b, 0);
    if (root) return host;
    free(host);
    return NULL;
}

void zero_take_block(const Trainer *tr, float *block, const float *full) {
    tr->be->zero(block, tr->zblock * sizeof(float));
    if (tr->zlen) tr->be->copy(block, full + tr->zoff, tr->zlen * sizeof(float));
}

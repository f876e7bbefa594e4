// defines: train_opts_default, trainer_new, trainer_free, trainer_shard, trainer_global_batch,
//          trainer_step_images, trainer_weights_hash, trainer_init_weights, trainer_step,
//          trainer_step_given, trainer_save, trainer_load, trainer_peek, trainer_export_ema
#include "train/trainer.h"

#include <math.h>
#include <string.h>

#include "core/dist.h"
#include "formats/st_meta.h"
#include "train/train_meta.h"
#include "train/trainer_zero.h"

void train_opts_default(TrainOpts *o) {
    o->lr = 1e-4f;
    o->warmup = 0;
    o->decay_start = o->decay_end = 0;
    o->lr_end = 0.0f;
    o->weight_decay = 0.0f;
    o->beta1 = 0.9f;
    o->beta2 = 0.999f;
    o->eps = 1e-8f;
    o->grad_clip = 0.0f;
    o->ema_decay = 0.9999f;
    o->label_drop = 0.1f;
    o->max_bad_steps = 20;
    o->seed = 0;
    o->accum = 1;
}

float train_lr(const TrainOpts *o, uint64_t step) {
    float lr = o->lr;
    if (o->warmup > 0 && step < (uint64_t)o->warmup) lr *= (float)step / o->warmup;
    if (o->decay_end > o->decay_start && step > o->decay_start) {
        const double f =
            step >= o->decay_end ? 1.0 : (double)(step - o->decay_start) / (double)(o->decay_end - o->decay_start);
        lr = (float)(o->lr + (o->lr_end - (double)o->lr) * f);
    }
    return lr;
}

static void alloc_step_bits(Trainer *tr);

Trainer *trainer_new(const NetConfig *c, const ClassNames *cn, const TrainOpts *o, const Backend *be, int batch) {
    Trainer *tr = xcalloc(1, sizeof *tr);
    tr->be = be;
    tr->opt = *o;
    tr->batch = batch;
    tr->world = 1;
    CHECK(o->accum >= 1, "accum %d", o->accum);
    class_names_copy(&tr->classes, cn);
    tr->net = net_create(c, be, batch, NET_TRAIN);
    size_t nf = tr->net->n_floats;
    tr->d_opt = be->alloc(4 * nf * sizeof(float));
    tr->grad = tr->d_opt;
    tr->m = tr->grad + nf;
    tr->v = tr->m + nf;
    tr->ema = tr->v + nf;
    tr->grad_floats = nf;
    diffusion_init_dit(&tr->diff);
    size_t img = (size_t)batch * c->in_channels * c->image_size * c->image_size;
    size_t outn = (size_t)batch * tr->net->out_channels * c->image_size * c->image_size;
    size_t coefs = (size_t)tr->diff.num_timesteps * DIFF_COEFS * sizeof(double);
    tr->loss_host = xmalloc(2 * (size_t)batch * sizeof(double));
    // one backend block for the step's inputs, draws, output, output gradient and loss terms
    size_t f = 3 * img + 2 * outn + (size_t)batch, i32 = 4 * (size_t)batch;
    tr->d_mem = be->alloc(coefs + 2 * batch * sizeof(double) + f * sizeof(float) + i32 * sizeof(int32_t));
    char *p = tr->d_mem;
    tr->d_coefs = (double *)p; p += coefs;
    tr->d_loss = (double *)p; p += 2 * batch * sizeof(double);
    tr->d_x0 = (float *)p; p += img * sizeof(float);
    tr->d_noise = (float *)p; p += img * sizeof(float);
    tr->d_xt = (float *)p; p += img * sizeof(float);
    tr->d_out = (float *)p; p += outn * sizeof(float);
    tr->d_dout = (float *)p; p += outn * sizeof(float);
    tr->d_tf = (float *)p; p += batch * sizeof(float);
    tr->d_bits = (uint32_t *)p; p += 2 * batch * sizeof(uint32_t);
    tr->d_t = (int32_t *)p; p += batch * sizeof(int32_t);
    tr->d_y = (int32_t *)p;  // the batch's labels, then the dropout in place
    be->to_device(tr->d_coefs, tr->diff.coefs, coefs);
    alloc_step_bits(tr);
    return tr;
}

void trainer_free(Trainer *tr) {
    if (!tr) return;
    tr->be->release(tr->d_mem);
    tr->be->release(tr->d_opt);
    if (tr->d_gbits) tr->be->release(tr->d_gbits);
    free(tr->host_grad);
    free(tr->host_shard);
    free(tr->loss_host);
    diffusion_free(&tr->diff);
    class_names_free(&tr->classes);
    net_free(tr->net);
    free(tr);
}

// The step's draws when they are sliced (more than one process or micro-batch).
static void alloc_step_bits(Trainer *tr) {
    if (tr->d_gbits) tr->be->release(tr->d_gbits);
    tr->d_gbits = NULL;
    tr->gbits_images = 0;
    if (tr->world == 1 && tr->opt.accum == 1) return;
    tr->gbits_images = trainer_step_images(tr);
    tr->d_gbits = tr->be->alloc(2 * (size_t)tr->gbits_images * sizeof(uint32_t));
}

void trainer_shard(Trainer *tr, int rank, int world) {
    CHECK(world >= 1 && rank >= 0 && rank < world, "rank %d of %d", rank, world);
    tr->rank = rank;
    tr->world = world;
    free(tr->host_grad);
    tr->host_grad = NULL;
    alloc_step_bits(tr);
    if (world == 1) return;
    if (!backend_on_host(tr->be)) tr->host_grad = xmalloc(tr->net->n_trainable * sizeof(float));
}

int trainer_global_batch(const Trainer *tr) { return tr->batch * tr->world; }

int trainer_step_images(const Trainer *tr) { return trainer_global_batch(tr) * tr->opt.accum; }

uint64_t trainer_weights_hash(const Trainer *tr) {
    size_t n = tr->net->n_floats;
    float *host = xmalloc(2 * n * sizeof(float));
    tr->be->to_host(host, tr->net->w, n * sizeof(float));
    tr->be->to_host(host + n, tr->ema, n * sizeof(float));
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {  // 2n floats = n 64-bit words
        uint64_t w;
        memcpy(&w, host + 2 * i, sizeof w);
        h = (h ^ w) * 0x100000001b3ull;
    }
    free(host);
    return h;
}

// Sums the gradient over the ranks and divides by their number: the mean over the global batch,
// each rank's gradient being the mean over its equal slice.
static void allreduce_grad(Trainer *tr) {
    size_t n = tr->net->n_trainable;
    if (!tr->host_grad) {
        dist_sum_f32(tr->grad, n);  // host memory: MPI_Allreduce in place
    } else {
        tr->be->sync();
        if (dist_sum_f32_device(tr->grad, n) != 0) {  // no NCCL: through the host
            tr->be->to_host(tr->host_grad, tr->grad, n * sizeof(float));
            dist_sum_f32(tr->host_grad, n);
            tr->be->to_device(tr->grad, tr->host_grad, n * sizeof(float));
        }
    }
    tr->be->scale(tr->grad, 1.0f / (float)tr->world, n);
}

void trainer_init_weights(Trainer *tr) {
    Net *n = tr->net;
    size_t bytes = n->n_floats * sizeof(float);
    net_init_weights(n, tr->opt.seed);
    tr->be->copy(tr->ema, n->w, bytes);
    tr->be->zero(tr->m, trainer_opt_state_bytes(tr));  // m and v, one after the other
    tr->step = tr->batches = tr->skipped_total = 0;
    tr->bad_in_a_row = 0;
}

// One micro-batch from the draws in d_bits and d_noise and the batch in d_x0 / d_y: forward, loss,
// and (when finite) its gradient added into grad. sums[2] gain the global micro-batch's loss sums
// (mse, vb; every rank gets the same, so all skip or none). Returns whether they are finite.
static int micro_step(Trainer *tr, double sums[2]) {
    Net *n = tr->net;
    const Backend *be = tr->be;
    const NetConfig *c = &n->cfg;
    const int B = tr->batch, C = c->in_channels;
    const size_t hw = (size_t)c->image_size * c->image_size;

    // DiT's LabelEmbedder.token_drop, t ~ U{0..T-1}, x_t = q_sample(x0, t, eps)
    be->diffusion_prepare(tr->d_xt, tr->d_tf, tr->d_t, tr->d_y, tr->d_bits, tr->d_x0, tr->d_noise, tr->d_y,
                          tr->d_coefs, tr->diff.num_timesteps, tr->opt.label_drop, c->num_classes, B, (size_t)C * hw);
    tr->batches++;
    net_forward(n, tr->d_out, tr->d_xt, tr->d_tf, tr->d_y, B);
    be->diffusion_loss(tr->d_dout, tr->d_loss, tr->d_loss + B, tr->d_out, tr->d_x0, tr->d_noise, tr->d_t, tr->d_coefs,
                       tr->diff.vb_scale, B, C, hw, c->learn_sigma);
    be->to_host(tr->loss_host, tr->d_loss, 2 * (size_t)B * sizeof(double));
    double s[2] = {0, 0};
    for (int b = 0; b < B; b++) { s[0] += tr->loss_host[b]; s[1] += tr->loss_host[B + b]; }
    if (tr->world > 1) dist_sum_f64(s, 2);
    sums[0] += s[0];
    sums[1] += s[1];
    if (!isfinite(s[0] + s[1])) return 0;
    net_backward(n, tr->grad, tr->d_dout, B);  // d(mean over the micro-batch), added
    return 1;
}

// The optimiser step from the micro-batches' gradients summed in grad (when all were finite):
// their mean over the micro-batches and the ranks, clipping, AdamW, EMA.
static StepStats step_update(Trainer *tr, const double sums[2], int finite) {
    Net *n = tr->net;
    const Backend *be = tr->be;
    StepStats st = {0};
    st.mse = sums[0] / trainer_step_images(tr);
    st.vb = sums[1] / trainer_step_images(tr);
    st.loss = st.mse + st.vb;
    if (finite && isfinite(st.loss)) {
        if (tr->opt.accum > 1) be->scale(tr->grad, 1.0f / (float)tr->opt.accum, n->n_trainable);
        if (tr->zero) {
            st.grad_norm = zero_reduce_grad(tr);
        } else {
            if (tr->world > 1) allreduce_grad(tr);
            st.grad_norm = sqrt(be->sumsq(tr->grad, n->n_trainable));
        }
    }
    if (!finite || !isfinite(st.loss) || !isfinite(st.grad_norm)) {
        st.skipped = 1;
        tr->skipped_total++;
        tr->bad_in_a_row++;
        return st;
    }
    tr->bad_in_a_row = 0;
    // the gradient, weights and moments this rank updates: all of them, or its ZeRO-1 block
    float *g = tr->zero ? tr->gshard : tr->grad, *w = tr->zero ? n->w + tr->zoff : n->w;
    size_t len = tr->zero ? tr->zlen : n->n_trainable;
    if (tr->opt.grad_clip > 0 && st.grad_norm > tr->opt.grad_clip && len)  // torch clip_grad_norm_
        be->scale(g, (float)(tr->opt.grad_clip / (st.grad_norm + 1e-6)), len);
    tr->step++;
    const float lr = train_lr(&tr->opt, tr->step);
    if (len)
        be->adamw(w, g, tr->m, tr->v, len, lr, tr->opt.beta1, tr->opt.beta2, tr->opt.eps, tr->opt.weight_decay,
                  (int)tr->step);
    if (tr->zero) zero_gather_weights(tr);
    be->ema(tr->ema, n->w, n->n_trainable, tr->opt.ema_decay);
    be->weights_changed();  // (reduced-precision copies of the weights: made again at their next use)
    return st;
}

static void upload_batch(Trainer *tr, const float *x0, const int32_t *y) {
    const NetConfig *c = &tr->net->cfg;
    size_t img = (size_t)tr->batch * c->in_channels * c->image_size * c->image_size;
    tr->be->to_device(tr->d_x0, x0, img * sizeof(float));
    if (c->num_classes == 0)  // unconditional: label 0 for every image, the label table's one row
        tr->be->zero(tr->d_y, (size_t)tr->batch * sizeof(int32_t));
    else
        tr->be->to_device(tr->d_y, y, (size_t)tr->batch * sizeof(int32_t));
}

// The draws of micro-batch k of the step about to be taken (tr->batches = step x accum + k):
// this rank's slice of the step's bits (its timesteps, then its dropouts) and the noise of its
// images, image j of the step from stream step x images + j.
static void draw_micro(Trainer *tr, int k) {
    const NetConfig *c = &tr->net->cfg;
    const size_t B = (size_t)tr->batch, per = (size_t)c->in_channels * c->image_size * c->image_size;
    const size_t G = (size_t)trainer_global_batch(tr), S = (size_t)trainer_step_images(tr);
    const uint64_t step = tr->batches / (uint64_t)tr->opt.accum;
    const size_t off = k * G + (size_t)tr->rank * B;  // this slice's first image in the step
    if (!tr->d_gbits) {
        tr->be->rand_bits(tr->d_bits, 2 * B, tr->opt.seed, step);
    } else {
        CHECK((int)S == tr->gbits_images, "step of %zu images, draws for %d", S, tr->gbits_images);
        if (k == 0) tr->be->rand_bits(tr->d_gbits, 2 * S, tr->opt.seed, step);
        tr->be->copy(tr->d_bits, tr->d_gbits + off, B * sizeof(uint32_t));
        tr->be->copy(tr->d_bits + B, tr->d_gbits + S + off, B * sizeof(uint32_t));
    }
    tr->be->rand_normal(tr->d_noise, (int)B, per, tr->opt.seed ^ TRAIN_NOISE_KEY, step * S + off, 1);
}

// Micro-batch k's slice of given draws (trainer_step_given's layout).
static void upload_draws(Trainer *tr, int k, const uint32_t *bits, const float *noise) {
    const NetConfig *c = &tr->net->cfg;
    const size_t B = (size_t)tr->batch, KB = B * tr->opt.accum;
    const size_t per = (size_t)c->in_channels * c->image_size * c->image_size;
    tr->be->to_device(tr->d_bits, bits + k * B, B * sizeof(uint32_t));
    tr->be->to_device(tr->d_bits + B, bits + KB + k * B, B * sizeof(uint32_t));
    tr->be->to_device(tr->d_noise, noise + k * B * per, B * per * sizeof(float));
}

// The step over opt.accum micro-batches of x0 / y; the draws given (bits, noise) or drawn.
// A micro-batch after a non-finite one is not run (the step is skipped) but still consumed.
static StepStats run_step(Trainer *tr, const float *x0, const int32_t *y, const uint32_t *bits, const float *noise) {
    const NetConfig *c = &tr->net->cfg;
    const size_t B = (size_t)tr->batch, per = (size_t)c->in_channels * c->image_size * c->image_size;
    double sums[2] = {0, 0};
    int finite = 1;
    tr->be->zero(tr->grad, tr->grad_floats * sizeof(float));
    for (int k = 0; k < tr->opt.accum; k++) {
        if (!finite) {
            tr->batches++;
            continue;
        }
        upload_batch(tr, x0 + k * B * per, y + k * B);
        if (bits) upload_draws(tr, k, bits, noise);
        else draw_micro(tr, k);
        finite = micro_step(tr, sums);
    }
    return step_update(tr, sums, finite);
}

StepStats trainer_step(Trainer *tr, const float *x0, const int32_t *y) { return run_step(tr, x0, y, NULL, NULL); }

StepStats trainer_step_given(Trainer *tr, const float *x0, const int32_t *y, const uint32_t *bits, const float *noise) {
    return run_step(tr, x0, y, bits, noise);
}

// ---- checkpoints ----

int trainer_save(const Trainer *tr, const char *path, MalaErr *err) {
    const Net *m = tr->net;
    size_t bytes = m->n_floats * sizeof(float);
    float *zm = NULL, *zv = NULL;  // ZeRO-1: the moments gathered on rank 0
    if (tr->zero) {
        zm = zero_gather_moment(tr, tr->m);
        zv = zero_gather_moment(tr, tr->v);
        if (tr->rank != 0) return 0;
    }
    // host memory (the CPU backend) is written from where it lies: no staging copy of 4 x the weights
    const int in_host = backend_on_host(tr->be);
    float *host = in_host ? NULL : xmalloc(4 * bytes);
    float *w = in_host ? m->w : host, *ema = in_host ? tr->ema : host + m->n_floats;
    float *mo = zm ? zm : in_host ? tr->m : host + 2 * m->n_floats;
    float *vo = zv ? zv : in_host ? tr->v : host + 3 * m->n_floats;
    if (!in_host) {
        tr->be->to_host(w, m->w, bytes);
        tr->be->to_host(ema, tr->ema, bytes);
        if (!zm) tr->be->to_host(mo, tr->m, bytes);
        if (!zv) tr->be->to_host(vo, tr->v, bytes);
    }
    StWriter *wr = st_writer_new();
    ckpt_write_config(wr, &m->cfg, &tr->classes);
    st_writer_meta_u64(wr, "step", tr->step);
    st_writer_meta_u64(wr, "batches", tr->batches);
    st_writer_meta_u64(wr, "skipped", tr->skipped_total);
    train_meta_write(wr, &tr->opt, trainer_global_batch(tr));
    for (int i = 0; i < tr->n_meta; i++) st_writer_meta(wr, tr->meta[2 * i], tr->meta[2 * i + 1]);
    ckpt_add_tensors(wr, m, "", w, ST_F32);
    ckpt_add_tensors(wr, m, "ema.", ema, ST_F32);
    ckpt_add_tensors(wr, m, "opt.m.", mo, ST_F32);
    ckpt_add_tensors(wr, m, "opt.v.", vo, ST_F32);
    int rc = st_writer_save(wr, path, err);
    st_writer_free(wr);
    free(host);
    free(zm);
    free(zv);
    return rc;
}

int trainer_peek(const char *path, NetConfig *c, ClassNames *cn, TrainOpts *o, int *batch, MalaErr *err) {
    StFile f;
    if (st_open(&f, path, err)) return -1;
    int rc = ckpt_read_config(&f, c, cn, err);
    if (!rc && (rc = train_meta_read(&f, o, batch, err))) class_names_free(cn);
    st_close(&f);
    return rc;
}

int trainer_load(Trainer *tr, const char *path, MalaErr *err) {
    StFile f;
    if (st_open(&f, path, err)) return -1;
    Net *m = tr->net;
    uint64_t step, batches, skipped;
    int rc = -1;
    if (train_meta_need_u64(&f, "step", 0, UINT64_MAX, &step, err) ||
        train_meta_need_u64(&f, "batches", 0, UINT64_MAX, &batches, err) ||
        train_meta_need_u64(&f, "skipped", 0, UINT64_MAX, &skipped, err))
        goto done;
    if (ckpt_load_tensors(m, &f, "", m->w, err) || ckpt_load_tensors(m, &f, "ema.", tr->ema, err))
        goto done;
    if (!tr->zero) {
        if (ckpt_load_tensors(m, &f, "opt.m.", tr->m, err) || ckpt_load_tensors(m, &f, "opt.v.", tr->v, err)) goto done;
    } else {  // each rank reads its block of the moments, through grad (free until the first step)
        if (ckpt_load_tensors(m, &f, "opt.m.", tr->grad, err)) goto done;
        zero_take_block(tr, tr->m, tr->grad);
        if (ckpt_load_tensors(m, &f, "opt.v.", tr->grad, err)) goto done;
        zero_take_block(tr, tr->v, tr->grad);
    }
    tr->step = step;
    tr->batches = batches;
    tr->skipped_total = skipped;
    tr->bad_in_a_row = 0;
    rc = 0;
done:
    st_close(&f);
    return rc;
}

int trainer_export_ema(const Trainer *tr, const char *path, StDtype dtype, MalaErr *err) {
    const Net *m = tr->net;
    float *host = xmalloc(m->n_floats * sizeof(float));
    tr->be->to_host(host, tr->ema, m->n_floats * sizeof(float));
    int rc = ckpt_save_weights(m, &tr->classes, host, dtype, path, err);
    free(host);
    return rc;
}

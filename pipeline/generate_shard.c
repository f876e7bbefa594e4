// defines: sharded_gen_init, sharded_gen_free, sharded_gen_next, sharded_gen_serve
#include "pipeline/generate_shard.h"

#include <string.h>

#include "core/dist.h"

void sharded_gen_init(ShardedGen *s, Generator *g, const GenOpts *o, uint64_t seed, int n, int batch) {
    CHECK(batch >= 1 && batch <= g->max_batch, "batch %d of a generator for %d", batch, g->max_batch);
    memset(s, 0, sizeof *s);
    s->g = g;
    s->o = *o;
    s->seed = seed;
    s->n = n;
    s->batch = batch;
    s->rank = dist_rank();
    s->world = dist_world();
    size_t per = generator_image_floats(g);
    s->buf = xcalloc((size_t)(s->rank == 0 ? s->world : 1) * batch * per, sizeof(float));
    s->y = xmalloc((size_t)batch * sizeof(int32_t));
}

void sharded_gen_free(ShardedGen *s) {
    free(s->buf);
    free(s->y);
    memset(s, 0, sizeof *s);
}

static int shard_step(void *ctx, int i, int n, const float *x0) {
    const ShardedGen *s = ctx;
    if (s->on_step && s->on_step(s->step_ctx, i, n, x0)) return 1;
    return s->cancel && *s->cancel != 0;
}

// Round r: this rank samples batch r * world + rank (if the run has it) into its place of buf,
// then rank 0 gathers the round's batches. Returns the round's first image.
static int run_round(ShardedGen *s, int r, MalaErr *err) {
    int first = (r * s->world + s->rank) * s->batch, K = s->g->net->cfg.num_classes;
    size_t per = generator_image_floats(s->g);
    float *x = s->buf;  // rank 0's own batch is the round's first
    if (first < s->n) {
        int nb = s->n - first < s->batch ? s->n - first : s->batch;
        if (s->given_y) memcpy(s->y, s->given_y + first, (size_t)nb * sizeof(int32_t));
        else gen_labels(s->y, s->labels, s->seed, first, nb, K);
        if (!s->store || !batch_store_load(s->store, first / s->batch, x, nb)) {
            if (s->given_noise) memcpy(x, s->given_noise + per * first, (size_t)nb * per * sizeof(float));
            else generator_noise(s->g, x, s->seed, first, nb);
            GenInit gi;
            if (s->init) {  // this batch's input images
                gi = *s->init;
                gi.image += per * first;
                if (gi.mask) gi.mask += (size_t)s->g->net->cfg.image_size * s->g->net->cfg.image_size * first;
            }
            s->batch_first = first;
            s->batch_n = nb;
            int rc = generator_run_init(s->g, &s->o, s->init ? &gi : NULL, x, s->y, nb, s->seed, first,
                                        s->cancel || s->on_step ? shard_step : NULL, s, err);
            if (rc < 0) return -1;
            s->batches_run++;
            if (rc == SAMPLER_CANCELLED) s->cancelled = 1;
            else if (s->store) batch_store_save(s->store, first / s->batch, x, nb);
        }
    }
    if (s->cancel && dist_any(s->cancelled || *s->cancel)) {  // every rank votes once a round
        s->cancelled = 1;
        mala_errf(err, "the sampling was cancelled");
        return -1;
    }
    dist_gather_f32(s->buf, (size_t)s->batch * per, 0);
    return r * s->world * s->batch;
}

int sharded_gen_next(ShardedGen *s, float *x, int max, MalaErr *err) {
    if (s->next >= s->n || max < 1) return 0;
    if (s->next >= s->round_first + s->round_n) {
        int r = s->next / (s->world * s->batch);
        if ((s->round_first = run_round(s, r, err)) < 0) return -1;
        int left = s->n - s->round_first;
        s->round_n = left < s->world * s->batch ? left : s->world * s->batch;
    }
    int in_batch = s->batch - s->next % s->batch, k = s->n - s->next;
    if (k > in_batch) k = in_batch;
    if (k > max) k = max;
    size_t per = generator_image_floats(s->g);
    memcpy(x, s->buf + (size_t)(s->next - s->round_first) * per, (size_t)k * per * sizeof(float));
    s->next += k;
    return k;
}

int sharded_gen_serve(ShardedGen *s, MalaErr *err) {
    int batches = (s->n + s->batch - 1) / s->batch, rounds = (batches + s->world - 1) / s->world;
    for (int r = 0; r < rounds; r++)
        if (run_round(s, r, err) < 0) return -1;
    return 0;
}

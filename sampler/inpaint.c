// defines: sampler_last_index, sampler_start_abar, inpaint_draw, inpaint_merge, inpaint_jump
//
// RePaint (Lugmayr et al. 2022, Algorithm 1 with jump length 1) and SDEdit's start (Meng et al.
// 2022) on the sampler's processes (sampler.h). Every update runs through the op table (copy,
// scale, add, mul_fwd), in backend memory.
#include "sampler/inpaint.h"

#include <math.h>

int sampler_last_index(const Sampler *s) {
    const Diffusion *d = sampler_process(s);
    return s->cfg.kind == SAMPLER_DPMPP_2M && d->num_timesteps > s->cfg.num_steps ? 1 : 0;
}

double sampler_start_abar(const Sampler *s, int skip) {
    const Diffusion *d = sampler_process(s);
    return d->alphas_cumprod[d->num_timesteps - 1 - skip];
}

// The alpha-bar the step from index i lands on: the data (1) after the last step.
static double reached_abar(const Sampler *s, int i) {
    return i <= sampler_last_index(s) ? 1.0 : sampler_process(s)->alphas_cumprod_prev[i];
}

void inpaint_draw(Sampler *s, float *out, size_t count, int step, int draw) {
    const SamplerInit *in = &s->init;
    if (in->draw) in->draw(in->draw_ctx, out, count, step, draw);
    else s->be->rand_normal(out, 1, count, s->cfg.seed ^ (0xd1b54a32d192ed03ull * (uint64_t)draw),
                            s->runs * 1024 + step, 1);
}

void inpaint_merge(Sampler *s, float *x, int n, int i, int step, int j) {
    const Backend *be = s->be;
    const SamplerInit *in = &s->init;
    const size_t count = (size_t)n * s->C * s->hw;
    const double ab = reached_abar(s, i);
    float *known = in->work;
    be->copy(known, in->known, count * sizeof(float));
    if (ab < 1.0) {  // x_known = sqrt(abar) x0 + sqrt(1 - abar) z
        inpaint_draw(s, s->noise, count, step, 3 * j + 1);
        be->scale(known, (float)sqrt(ab), count);
        be->scale(s->noise, (float)sqrt(1.0 - ab), count);
        be->add(known, known, s->noise, count);
    }
    // x = known + m (x - known): where m = 0 the known value itself, bit for bit
    be->scale(known, -1.0f, count);
    be->add(x, x, known, count);
    be->mul_fwd(x, x, in->mask, count);
    be->scale(known, -1.0f, count);
    be->add(x, x, known, count);
}

void inpaint_jump(Sampler *s, float *x, int n, int i, int step, int j) {
    const Backend *be = s->be;
    const size_t count = (size_t)n * s->C * s->hw;
    const double r = sampler_process(s)->alphas_cumprod[i] / reached_abar(s, i);  // q(x_i | x_reached)
    inpaint_draw(s, s->noise, count, step, 3 * j + 2);
    be->scale(x, (float)sqrt(r), count);
    be->scale(s->noise, (float)sqrt(1.0 - r), count);
    be->add(x, x, s->noise, count);
}

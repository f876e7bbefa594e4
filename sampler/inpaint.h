// Image-to-image and inpainting inside a sampler run (sampler.h, SamplerInit): the RePaint merge
// of the known region, its resampling jump, and where SDEdit starts. For sampler.c.
#ifndef MALA_INPAINT_H
#define MALA_INPAINT_H

#include "sampler/sampler.h"

// The index of the current process whose step lands on the data: 1 for DPM-Solver++ on its N + 1
// point grid, else 0.
int sampler_last_index(const Sampler *s);
// Draw `draw` of step `step` into out[count] (backend memory): the init's draw hook, else
// rand_normal under cfg.seed on a stream of its own.
void inpaint_draw(Sampler *s, float *out, size_t count, int step, int draw);
// After the step from index i (pass j): x = m x + (1 - m) x_known(abar the step reached).
void inpaint_merge(Sampler *s, float *x, int n, int i, int step, int j);
// x back from the level the step from index i reached to index i's (one forward-process jump).
void inpaint_jump(Sampler *s, float *x, int n, int i, int step, int j);

#endif

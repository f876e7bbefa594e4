// --eval-every's settings: their defaults, the flag, and their run.eval metadata (written and read
// back), apart from the evaluations themselves so that a checkpoint's metadata reader needs none of them.
// defines: eval_every_default, eval_every_parse, eval_every_meta, eval_every_meta_read
#include "train/train_eval.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void eval_every_default(EvalEvery *e) {
    memset(e, 0, sizeof *e);
    e->images = 10000;
    e->steps = 50;
    snprintf(e->sampler, sizeof e->sampler, "ddim");
    e->cfg_scale = 1.5f;
    snprintf(e->ref, sizeof e->ref, "fashion-mnist-test");
}

int eval_every_parse(const char *s, EvalEvery *e, MalaErr *err) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int steps = *end == 's' && !end[1];
    if (end == s || s[0] == '-' || errno || (*end && !steps))
        return mala_errf(err, "--eval-every %s: expected N (training images, e.g. 64000) or Ns (optimiser steps), "
                         "0 for none", s);
    e->every = v;
    e->in_steps = steps;
    return 0;
}

void eval_every_meta(const EvalEvery *e, char *buf, size_t cap) {
    if (!e->every) {  // off: an empty value (mala info leaves it out)
        snprintf(buf, cap, "%s", "");
        return;
    }
    snprintf(buf, cap, "every=%llu;unit=%s;images=%d;steps=%d;sampler=%s;cfg_scale=%.9g;ref=%s;inception=%s",
             (unsigned long long)e->every, e->in_steps ? "steps" : "images", e->images, e->steps, e->sampler,
             e->cfg_scale, e->ref, e->inception);
}

int eval_every_meta_read(const char *s, EvalEvery *e) {
    EvalEvery r;
    eval_every_default(&r);
    int found = 0;
    for (const char *p = s; *p;) {
        const char *nl = strchr(p, ';'), *eq = strchr(p, '=');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (!eq || eq > p + len) return -1;
        char key[32], val[1024];
        size_t kl = (size_t)(eq - p), vl = len - kl - 1;
        if (kl >= sizeof key || vl >= sizeof val) return -1;
        memcpy(key, p, kl); key[kl] = 0;
        memcpy(val, eq + 1, vl); val[vl] = 0;
        if (!strcmp(key, "every")) r.every = strtoull(val, NULL, 10), found++;
        else if (!strcmp(key, "unit")) r.in_steps = !strcmp(val, "steps");
        else if (!strcmp(key, "images")) r.images = atoi(val);
        else if (!strcmp(key, "steps")) r.steps = atoi(val);
        else if (!strcmp(key, "sampler")) snprintf(r.sampler, sizeof r.sampler, "%.15s", val);
        else if (!strcmp(key, "cfg_scale")) r.cfg_scale = strtof(val, NULL);
        else if (!strcmp(key, "ref")) snprintf(r.ref, sizeof r.ref, "%s", val);
        else if (!strcmp(key, "inception")) snprintf(r.inception, sizeof r.inception, "%s", val);
        p += len + (nl != NULL);
    }
    if (!found || r.images < 1 || r.steps < 1) return -1;
    *e = r;
    return 0;
}

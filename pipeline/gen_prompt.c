// defines: gen_prompt_parse, gen_prompt_class, gen_prompt_blend
#include "pipeline/gen_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/suggest.h"

int gen_prompt_class(const ClassNames *cn, const char *text, const char *what, int *k, MalaErr *err) {
    const int K = cn->n;
    if (!K) return mala_errf(err, "%s %s: an unconditional model (num_classes 0) samples without classes", what, text);
    if ((*k = class_names_find(cn, text)) >= 0) return 0;
    if (K > 20) {  // ImageNet's 1000: the closest name
        const char *s = text_suggest(text, (const char *const *)cn->names, K);
        return mala_errf(err, "%s %s: unknown class (the model has %d, by name or number 0..%d)%s%s%s", what, text, K,
                         K - 1, s ? "; did you mean " : "", s ? s : "", s ? "?" : "");
    }
    char list[MALA_ERR_LEN] = "";
    for (int i = 0; i < K; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), " %s%s", cn->names[i], i + 1 < K ? "," : "");
    return mala_errf(err, "%s %s: unknown class; the model knows:%s", what, text, list);
}

int gen_prompt_blend(const ClassNames *cn, const char *s, const char *what, GenPrompt *out, MalaErr *err) {
    char copy[512];
    if (strlen(s) >= sizeof copy) return mala_errf(err, "%s: %zu bytes, longer than a blend of two classes", what, strlen(s));
    strcpy(copy, s);
    char *c1 = strchr(copy, ','), *c2 = c1 ? strrchr(copy, ',') : NULL;
    if (!c1 || c2 == c1)
        return mala_errf(err, "%s %s: expected A,B,w (two classes by name or number and a weight in [0, 1])", what, s);
    *c1 = *c2 = 0;
    char *end;
    double w = strtod(c2 + 1, &end);
    if (end == c2 + 1 || *end || !(w >= 0.0 && w <= 1.0))
        return mala_errf(err, "%s %s: the weight %s must be a number in [0, 1]", what, s, c2 + 1);
    int a = class_names_find(cn, copy), b = class_names_find(cn, c1 + 1);
    if (a < 0 || b < 0)
        return mala_errf(err, "%s %s: unknown class '%s' (the model has %d classes)", what, s, a < 0 ? copy : c1 + 1, cn->n);
    *out = (GenPrompt){.cls = -1, .blend = 1, .a = a, .b = b, .w = (float)w};
    return 0;
}

// "w1 A + w2 B": both weights non-negative with a positive sum.
static int weighted_blend(const ClassNames *cn, const char *s, const char *plus, const char *what, GenPrompt *out,
                          MalaErr *err) {
    const char *part[2] = {s, plus + 1};
    size_t len[2] = {(size_t)(plus - s), strlen(plus + 1)};
    double w[2];
    int k[2];
    for (int i = 0; i < 2; i++) {
        char t[256];
        snprintf(t, sizeof t, "%.*s", (int)(len[i] < sizeof t ? len[i] : sizeof t - 1), part[i]);
        char *end, *p = t;
        while (*p == ' ') p++;
        w[i] = strtod(p, &end);
        if (end == p || *end != ' ' || !(w[i] >= 0 && w[i] <= 1e6))
            return mala_errf(err, "%s %s: expected \"w1 A + w2 B\" (two weights, each before its class)", what, s);
        while (*end == ' ') end++;
        size_t n = strlen(end);
        while (n && end[n - 1] == ' ') end[--n] = 0;
        if (!*end) return mala_errf(err, "%s %s: expected \"w1 A + w2 B\" (two weights, each before its class)", what, s);
        if (gen_prompt_class(cn, end, what, &k[i], err)) return -1;
    }
    if (!(w[0] + w[1] > 0)) return mala_errf(err, "%s %s: the weights add up to 0", what, s);
    *out = (GenPrompt){.cls = -1, .blend = 1, .a = k[0], .b = k[1], .w = (float)(w[1] / (w[0] + w[1]))};
    return 0;
}

int gen_prompt_parse(const ClassNames *cn, const char *text, const char *what, GenPrompt *out, MalaErr *err) {
    *out = (GenPrompt){.cls = -1};
    while (*text == ' ') text++;
    size_t n = strlen(text);
    while (n && text[n - 1] == ' ') n--;
    if (n >= 512) return mala_errf(err, "%s: %zu bytes, longer than any class or blend", what, n);
    char t[512];
    memcpy(t, text, n);
    t[n] = 0;
    if (!n || !strcmp(t, "*")) return 0;
    const char *plus = strchr(t, '+');
    if (plus && !strchr(t, ',')) return weighted_blend(cn, t, plus, what, out, err);
    if (strchr(t, ',')) return gen_prompt_blend(cn, t, what, out, err);
    return gen_prompt_class(cn, t, what, &out->cls, err);
}

// defines: args_parse, args_usage, args_given, args_check_memory
#include "cli/args.h"
#include "core/suggest.h"
#include "train/mem_plan.h"  // defines: memory_available

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

void args_usage(const char *usage, const Opt *opts, int n) {
    printf("%s\n\nOptions:\n", usage);
    for (int i = 0; i < n; i++) {
        const Opt *o = &opts[i];
        char left[64], def[64] = "", alias[64] = "";
        snprintf(left, sizeof left, "%s%s%s", o->name, o->meta ? " " : "", o->meta ? o->meta : "");
        if (!strstr(o->help, "default")) {
            switch (o->type) {
            case OPT_INT: snprintf(def, sizeof def, " (default %d)", *(int *)o->dst); break;
            case OPT_U64: snprintf(def, sizeof def, " (default %llu)", (unsigned long long)*(uint64_t *)o->dst); break;
            case OPT_FLOAT: snprintf(def, sizeof def, " (default %g)", *(float *)o->dst); break;
            case OPT_STR: if (*(const char **)o->dst) snprintf(def, sizeof def, " (default %s)", *(const char **)o->dst); break;
            case OPT_BOOL: snprintf(def, sizeof def, " (default %s)", *(int *)o->dst ? "true" : "false"); break;
            case OPT_FLAG: break;
            }
        }
        if (o->alias) snprintf(alias, sizeof alias, " [also %s]", o->alias);
        printf("  %-26s %s%s%s\n", left, o->help, def, alias);
    }
    printf("  %-26s %s\n", "--help", "show this help");
}

int args_given(const Opt *opts, int n, const void *dst) {
    for (int i = 0; i < n; i++)
        if (opts[i].dst == dst) return opts[i].given;
    return 0;
}

static void unknown_flag(const char *arg, size_t len, const Opt *opts, int n) {
    char word[160];
    snprintf(word, sizeof word, "%.*s", (int)(len < sizeof word ? len : sizeof word - 1), arg);
    const char *cands[2 * 64 + 1];
    int k = 0;
    for (int i = 0; i < n && k + 2 < (int)(sizeof cands / sizeof *cands); i++) {
        cands[k++] = opts[i].name;
        if (opts[i].alias) cands[k++] = opts[i].alias;
    }
    cands[k++] = "--help";
    const char *s = arg[0] == '-' ? text_suggest(word, cands, k) : NULL;
    if (s) fprintf(stderr, "error: unknown flag '%s'; did you mean %s? (see --help)\n", word, s);
    else fprintf(stderr, "error: unknown %s '%s' (see --help)\n", arg[0] == '-' ? "flag" : "argument", arg);
    exit(2);
}

static int parse_bool(const char *v, int *out) {
    if (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1")) *out = 1;
    else if (!strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcmp(v, "0")) *out = 0;
    else return -1;
    return 0;
}

static void bad_value(const char *name, const char *v, const char *want) {
    fprintf(stderr, "error: %s %s: expected %s\n", name, v, want);
    exit(2);
}

static void check_range(const Opt *o, const char *v, double x) {
    if ((o->has_min && x < o->min) || (o->has_max && x > o->max)) {
        if (o->has_min && o->has_max) fprintf(stderr, "error: %s %s: must be between %g and %g\n", o->name, v, o->min, o->max);
        else if (o->has_min) fprintf(stderr, "error: %s %s: must be at least %g\n", o->name, v, o->min);
        else fprintf(stderr, "error: %s %s: must be at most %g\n", o->name, v, o->max);
        exit(2);
    }
}

static int name_is(const char *name, const char *arg, size_t len) {
    return name && strlen(name) == len && !strncmp(name, arg, len);
}

void args_parse(const char *usage, Opt *opts, int n, int argc, char **argv, int first) {
    for (int a = first; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { args_usage(usage, opts, n); exit(0); }
        const char *eq = arg[0] == '-' ? strchr(arg, '=') : NULL;
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        Opt *o = NULL;
        int negate = 0;
        for (int i = 0; i < n && !o; i++) {
            if (name_is(opts[i].name, arg, len) || name_is(opts[i].alias, arg, len)) o = &opts[i];
            else if (opts[i].type == OPT_BOOL && !strncmp(arg, "--no-", 5) && strlen(opts[i].name) == len - 3 &&
                     !strncmp(opts[i].name + 2, arg + 5, len - 5)) { o = &opts[i]; negate = 1; }
        }
        if (!o) unknown_flag(arg, len, opts, n);
        o->given = 1;
        if (negate) { *(int *)o->dst = 0; continue; }
        if (o->type == OPT_FLAG) { *(int *)o->dst = 1; continue; }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (o->type == OPT_BOOL && (a + 1 >= argc || argv[a + 1][0] == '-')) { *(int *)o->dst = 1; continue; }
            if (a + 1 >= argc) { fprintf(stderr, "error: %s needs a value (%s)\n", o->name, o->meta ? o->meta : ""); exit(2); }
            v = argv[++a];
        }
        char *end;
        errno = 0;
        switch (o->type) {
        case OPT_INT: {
            long x = strtol(v, &end, 10);
            if (!*v || *end || errno || x < -2147483647L || x > 2147483647L) bad_value(o->name, v, "an integer");
            check_range(o, v, (double)x);
            *(int *)o->dst = (int)x;
            break;
        }
        case OPT_U64: {
            unsigned long long x = strtoull(v, &end, 10);
            if (!*v || *end || errno || v[0] == '-') bad_value(o->name, v, "a non-negative integer");
            check_range(o, v, (double)x);
            *(uint64_t *)o->dst = x;
            break;
        }
        case OPT_FLOAT: {
            float x = strtof(v, &end);
            if (!*v || *end || errno) bad_value(o->name, v, "a number");
            if (!isfinite(x)) bad_value(o->name, v, "a finite number");
            check_range(o, v, (double)x);
            *(float *)o->dst = x;
            break;
        }
        case OPT_STR: *(const char **)o->dst = v; break;
        case OPT_BOOL: if (parse_bool(v, (int *)o->dst)) bad_value(o->name, v, "true or false"); break;
        case OPT_FLAG: break;
        }
    }
}

void args_check_memory(const char *flag, long long value, double bytes, const char *what) {
    double total, have = memory_available(&total);
    if (have <= 0 || bytes <= have) return;
    char need_s[32], have_s[32], total_s[32];
    human_bytes(need_s, sizeof need_s, bytes);
    human_bytes(have_s, sizeof have_s, have);
    human_bytes(total_s, sizeof total_s, total);
    fprintf(stderr, "error: %s %lld: needs at least %s of memory for %s; this machine has %s available (%s in all)\n",
            flag, value, need_s, what, have_s, total_s);
    exit(2);
}


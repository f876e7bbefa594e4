// defines: args_parse, args_usage, set_threads
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void openblas_set_num_threads(int n);

void args_usage(const char *usage, const Opt *opts, int n) {
    printf("%s\n\nOptions:\n", usage);
    for (int i = 0; i < n; i++) {
        const Opt *o = &opts[i];
        char left[64], def[64] = "";
        snprintf(left, sizeof left, "%s%s%s", o->name, o->meta ? " " : "", o->meta ? o->meta : "");
        switch (o->type) {
        case OPT_INT: snprintf(def, sizeof def, " (default %d)", *(int *)o->dst); break;
        case OPT_U64: snprintf(def, sizeof def, " (default %llu)", (unsigned long long)*(uint64_t *)o->dst); break;
        case OPT_FLOAT: snprintf(def, sizeof def, " (default %g)", *(float *)o->dst); break;
        case OPT_STR: if (*(const char **)o->dst) snprintf(def, sizeof def, " (default %s)", *(const char **)o->dst); break;
        case OPT_BOOL: snprintf(def, sizeof def, " (default %s)", *(int *)o->dst ? "true" : "false"); break;
        case OPT_FLAG: break;
        }
        printf("  %-26s %s%s\n", left, o->help, def);
    }
    printf("  %-26s %s\n", "--help", "show this help");
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

void args_parse(const char *usage, const Opt *opts, int n, int argc, char **argv, int first) {
    for (int a = first; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) { args_usage(usage, opts, n); exit(0); }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const Opt *o = NULL;
        int negate = 0;
        for (int i = 0; i < n && !o; i++) {
            if (strlen(opts[i].name) == len && !strncmp(opts[i].name, arg, len)) o = &opts[i];
            else if (opts[i].type == OPT_BOOL && !strncmp(arg, "--no-", 5) && strlen(opts[i].name) == len - 3 &&
                     !strncmp(opts[i].name + 2, arg + 5, len - 5)) { o = &opts[i]; negate = 1; }
        }
        if (!o) {
            fprintf(stderr, "error: unknown %s '%s' (see --help)\n", arg[0] == '-' ? "flag" : "argument", arg);
            exit(2);
        }
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
            *(int *)o->dst = (int)x;
            break;
        }
        case OPT_U64: {
            unsigned long long x = strtoull(v, &end, 10);
            if (!*v || *end || errno || v[0] == '-') bad_value(o->name, v, "a non-negative integer");
            *(uint64_t *)o->dst = x;
            break;
        }
        case OPT_FLOAT: {
            float x = strtof(v, &end);
            if (!*v || *end || errno) bad_value(o->name, v, "a number");
            *(float *)o->dst = x;
            break;
        }
        case OPT_STR: *(const char **)o->dst = v; break;
        case OPT_BOOL: if (parse_bool(v, (int *)o->dst)) bad_value(o->name, v, "true or false"); break;
        case OPT_FLAG: break;
        }
    }
}

void set_threads(int n) {
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    openblas_set_num_threads(n);
}

// launch_rewrite IN.cu OUT.cpp: the CUDA emulator's (tests/cuda_emu) source pass. Copies IN to OUT
// with every kernel launch
//     kernel<<<grid, block>>>(args)
// replaced by
//     emu_launch("kernel", __FILE__, __LINE__, dim3(grid), dim3(block), emu_bind(kernel, args))
// and nothing else changed: OUT starts with #line 1 "IN" and keeps every line break, so compiler
// messages and sanitizer reports point into IN. Comments, string and character literals are copied
// as they are; launches inside macro definitions are rewritten too. The callee is an identifier,
// possibly qualified (ns::k) or with template arguments (k<float>). A launch with a third or fourth
// configuration argument (dynamic shared memory, stream) is an error: the emulator has neither.
// It is a scanner, not a C++ parser: raw string literals are not recognised.
#define _POSIX_C_SOURCE 200809L  // strdup, strndup

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static const char *g_path, *g_src;

static void put(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        b->p = realloc(b->p, b->cap);
        if (!b->p) { perror("launch_rewrite"); exit(1); }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void puts_b(Buf *b, const char *s) { put(b, s, strlen(s)); }

static void die(size_t at, const char *fmt, ...) {
    int line = 1;
    for (size_t i = 0; i < at; i++) line += g_src[i] == '\n';
    fprintf(stderr, "%s:%d: launch_rewrite: ", g_path, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

// If a comment or a string or character literal starts at s[i], the index just past it; else i.
// A quote between two hex digits is a digit separator (1'000); an unterminated literal is not one.
static size_t skip_lexeme(const char *s, size_t i) {
    if (s[i] == '/' && s[i + 1] == '/') {
        while (s[i] && s[i] != '\n') i++;
        return i;
    }
    if (s[i] == '/' && s[i + 1] == '*') {
        const char *e = strstr(s + i + 2, "*/");
        if (!e) die(i, "unterminated comment");
        return (size_t)(e + 2 - s);
    }
    if (s[i] == '"' || (s[i] == '\'' && !(i > 0 && isxdigit((unsigned char)s[i - 1]) &&
                                           isxdigit((unsigned char)s[i + 1])))) {
        const char q = s[i];
        for (size_t j = i + 1; s[j] && s[j] != '\n'; j++) {
            if (s[j] == '\\' && s[j + 1]) j++;
            else if (s[j] == q) return j + 1;
        }
    }
    return i;
}

// Without stop: the index just past the ')' that closes the one opened before s[i]. With stop:
// the index just past the first `stop` outside brackets, whose top-level commas are counted (the
// first 8 stored). 0 when there is none.
static size_t scan_to(const char *s, size_t i, const char *stop, size_t *commas, int *ncommas) {
    int depth = 0;
    for (;;) {
        const size_t j = skip_lexeme(s, i);
        if (j != i) { i = j; continue; }
        if (!s[i]) return 0;
        if (stop && depth == 0 && !strncmp(s + i, stop, strlen(stop))) return i + strlen(stop);
        if (strchr("([{", s[i])) depth++;
        else if (strchr(")]}", s[i]) && --depth < 0) return !stop && s[i] == ')' ? i + 1 : 0;
        else if (s[i] == ',' && depth == 0 && commas) {
            if (*ncommas < 8) commas[*ncommas] = i;
            (*ncommas)++;
        }
        i++;
    }
}

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i])) return 0;
    return 1;
}

// Rewrites the launch whose <<< is at s[i]; the callee is at the end of out. Returns the index
// just past the launch's closing parenthesis.
static size_t rewrite_launch(const char *s, size_t i, Buf *out) {
    // the callee: [ns::]name[<template args>], then blanks, at the end of out
    size_t end = out->n, k;
    while (end > 0 && isspace((unsigned char)out->p[end - 1])) end--;
    k = end;
    if (k > 0 && out->p[k - 1] == '>') {
        int depth = 0;
        do {
            k--;
            depth += out->p[k] == '>' ? 1 : out->p[k] == '<' ? -1 : 0;
        } while (k > 0 && depth > 0);
    }
    for (;;) {
        if (k > 0 && (isalnum((unsigned char)out->p[k - 1]) || out->p[k - 1] == '_')) k--;
        else if (k > 1 && out->p[k - 1] == ':' && out->p[k - 2] == ':') k -= 2;
        else break;
    }
    if (k == end) die(i, "a kernel launch without a kernel name before <<<");
    char *callee = strndup(out->p + k, end - k), *gap = strdup(out->p + end);
    out->n = k;

    size_t commas[8];
    int ncommas = 0;
    const size_t cfg = i + 3, cfg_end = scan_to(s, cfg, ">>>", commas, &ncommas);
    if (!cfg_end) die(i, "no >>> closes this kernel launch");
    if (ncommas != 1)
        die(i, "a launch with %d configuration arguments; the emulator supports <<<grid, block>>> only "
               "(no dynamic shared memory, no streams)", ncommas + 1);
    size_t p = cfg_end;
    while (isspace((unsigned char)s[p])) p++;
    if (s[p] != '(') die(i, "no argument list after >>>");
    const size_t args = p + 1, args_end = scan_to(s, args, NULL, NULL, NULL);
    if (!args_end) die(i, "unbalanced parentheses in the kernel arguments");

    puts_b(out, "emu_launch(");
    puts_b(out, gap);
    puts_b(out, "\"");
    puts_b(out, callee);
    puts_b(out, "\", __FILE__, __LINE__, dim3(");
    put(out, s + cfg, commas[0] - cfg);
    puts_b(out, "), dim3(");
    put(out, s + commas[0] + 1, cfg_end - 3 - commas[0] - 1);
    puts_b(out, "),");
    put(out, s + cfg_end, p - cfg_end);  // the blanks between >>> and (
    puts_b(out, " emu_bind(");
    puts_b(out, callee);
    if (!is_blank(s + args, args_end - 1 - args)) puts_b(out, isspace((unsigned char)s[args]) ? "," : ", ");
    put(out, s + args, args_end - args);  // the arguments and the closing parenthesis
    puts_b(out, ")");
    free(callee);
    free(gap);
    return args_end;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: launch_rewrite IN.cu OUT.cpp\n");
        return 2;
    }
    g_path = argv[1];
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    Buf src = {0}, out = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) put(&src, chunk, n);
    fclose(f);
    put(&src, "", 0);  // an empty file still gets a terminated buffer
    g_src = src.p;

    puts_b(&out, "#line 1 \"");
    puts_b(&out, argv[1]);
    puts_b(&out, "\"\n");
    for (size_t i = 0; src.p[i];) {
        const size_t j = skip_lexeme(src.p, i);
        if (j != i) {
            put(&out, src.p + i, j - i);
            i = j;
        } else if (!strncmp(src.p + i, "<<<", 3)) {
            i = rewrite_launch(src.p, i, &out);
        } else {
            put(&out, src.p + i, 1);
            i++;
        }
    }

    FILE *o = fopen(argv[2], "wb");
    if (!o || fwrite(out.p, 1, out.n, o) != out.n || fclose(o) != 0) {
        perror(argv[2]);
        remove(argv[2]);
        return 1;
    }
    free(src.p);
    free(out.p);
    return 0;
}

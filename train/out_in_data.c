// defines: refuse_out_in_data
#include "train/run_guard.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

// The absolute path `p` names, existing or not: the realpath of its longest existing prefix, then
// the rest of it with "." and ".." applied (a part that does not exist yet is no symbolic link).
static void resolve_path(const char *p, char *out, size_t cap) {
    char head[4096], tail[4096] = "", r[PATH_MAX];
    snprintf(head, sizeof head, "%s", p);
    while (!realpath(head[0] ? head : ".", r)) {
        char *slash = strrchr(head, '/'), *last = slash ? slash + 1 : head;
        size_t hl = strlen(last), tl = strlen(tail);
        if (!head[0] || hl + tl + 2 > sizeof tail) {  // no working directory, or a path too long: as given
            snprintf(out, cap, "%s", p);
            return;
        }
        memmove(tail + hl + 1, tail, tl + 1);  // tail = last/tail
        memcpy(tail, last, hl);
        tail[hl] = '/';
        if (!slash) head[0] = 0;
        else if (slash == head) head[1] = 0;
        else *slash = 0;
    }
    snprintf(out, cap, "%s", r);
    for (char *save = NULL, *part = strtok_r(tail, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, ".")) continue;
        if (!strcmp(part, "..")) {
            char *slash = strrchr(out, '/');
            if (slash == out) out[1] = 0;
            else if (slash) *slash = 0;
            continue;
        }
        size_t l = strlen(out);
        snprintf(out + l, cap - l, "%s%s", l > 1 ? "/" : "", part);
    }
}

int refuse_out_in_data(const char *out, const char *spec, MalaErr *err) {
    const char *root = spec;
    const char *names[2] = {"fashion-mnist-test", "fashion-mnist"};
    for (int t = 0; t < 2; t++) {
        size_t l = strlen(names[t]);
        if (!strncmp(spec, names[t], l) && (spec[l] == 0 || spec[l] == ':')) {
            root = spec[l] == ':' ? spec + l + 1 : getenv("MALA_FASHION_MNIST_DIR");
            if (!root || !root[0]) return 0;  // the system's copy (read-only)
            break;
        }
    }
    char d[PATH_MAX], o[4096];
    if (!realpath(root, d)) return 0;  // no such data: its own error follows
    resolve_path(out, o, sizeof o);
    size_t l = strlen(d);
    if (!strcmp(o, d) || (!strncmp(o, d, l) && (o[l] == '/' || (l == 1 && d[0] == '/'))))
        return mala_errf(err, "--out %s is %s --data %s (%s): the run's files would become part of the data; choose "
                         "a directory outside it", out, strcmp(o, d) ? "inside" : "the same directory as", spec, d);
    return 0;
}

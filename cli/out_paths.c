// defines: out_check_file, out_check_dir
#include "cli/out_paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"

// mkdir -p for flag's value; the first part that cannot be made is named.
static void make_parents(const char *flag, const char *value, const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) FATAL("%s %s: path too long", flag, value);
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/') continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (mkdir(p, 0755) && errno != EEXIST)
            FATAL("%s %s: cannot create directory %s: %s", flag, value, p, strerror(errno));
        if (stat(p, &st) || !S_ISDIR(st.st_mode)) FATAL("%s %s: %s exists and is not a directory", flag, value, p);
        *s = c;
        if (!c) break;
    }
}

// Creates and removes a file in dir: the one test of "can write here" that sees read-only
// mounts, permissions and ACLs alike.
static void probe_writable(const char *flag, const char *value, const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/.mala-write-test-XXXXXX", dir);
    int fd = mkstemp(p);
    if (fd < 0) FATAL("%s %s: cannot write in %s: %s", flag, value, dir, strerror(errno));
    close(fd);
    unlink(p);
}

void out_check_file(const char *flag, const char *path, int force, int (*replaceable)(const char *path)) {
    if (!*path) FATAL("%s: empty path", flag);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) FATAL("%s %s: is a directory (give a file name)", flag, path);
        if (!force && !(replaceable && replaceable(path)))
            FATAL("%s %s: exists; pass --force to replace it, or choose another name", flag, path);
    }
    size_t n = strlen(path);
    if (path[n - 1] == '/') FATAL("%s %s: names a directory (give a file name)", flag, path);
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) FATAL("out of memory");
    make_parents(flag, path, dir);
    probe_writable(flag, path, dir);
    free(dir);
}

int out_check_dir(const char *flag, const char *dir, int force, int (*is_ours)(const char *name)) {
    if (!*dir) FATAL("%s: empty path", flag);
    make_parents(flag, dir, dir);
    probe_writable(flag, dir, dir);
    DIR *d = opendir(dir);
    if (!d) FATAL("%s %s: cannot read directory: %s", flag, dir, strerror(errno));
    int held = 0, removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        held++;
        struct stat st;
        if (!force || !is_ours || !is_ours(e->d_name)) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0)) FATAL("%s %s: cannot remove the earlier %s: %s", flag, dir, e->d_name,
                                                    strerror(errno));
        removed++;
    }
    closedir(d);
    if (held && !force)
        FATAL("%s %s: already holds %d file%s; pass --force to replace an earlier run's images, or choose another "
              "directory", flag, dir, held, held == 1 ? "" : "s");
    return removed;
}

// defines: dirs_make, atomic_open, atomic_put, atomic_fail, atomic_commit, atomic_abort, atomic_write_file,
//          atomic_remove_stale
#include "formats/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *errno_hint(int e) {
    if (e == ENOSPC) return " (disk full?)";
    if (e == EDQUOT) return " (disk quota exceeded?)";
    if (e == EFBIG) return " (file size limit?)";
    return "";
}

static void release(AtomicFile *af) {
    free(af->path);
    free(af->tmp);
    memset(af, 0, sizeof *af);
}

int atomic_open(AtomicFile *af, const char *path, MalaErr *err) {
    memset(af, 0, sizeof *af);
    size_t n = strlen(path);
    af->path = xstrdup(path);
    af->tmp = xmalloc(n + 5);
    memcpy(af->tmp, path, n);
    memcpy(af->tmp + n, ".tmp", 5);
    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        mala_errf(err, "%s: cannot create: %s", path, strerror(errno));
        release(af);
        return -1;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        mala_errf(err, "%s: cannot open for writing: %s", path, strerror(e));
        release(af);
        return -1;
    }
    return 0;
}

void atomic_fail(AtomicFile *af) {
    if (!af->err_no) af->err_no = errno ? errno : EIO;
}

void atomic_put(AtomicFile *af, const void *p, size_t n) {
    const char *c = p;
    while (n && !af->err_no) {
        size_t k = n > (1u << 30) ? (1u << 30) : n;
        errno = 0;
        if (fwrite(c, 1, k, af->f) != k) { atomic_fail(af); return; }
        c += k;
        n -= k;
    }
}

void atomic_abort(AtomicFile *af) {
    if (af->f) fclose(af->f);
    unlink(af->tmp);
    release(af);
}

// fsync of the directory holding path, so that the rename survives a crash.
static int sync_dir(const char *path, MalaErr *err) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) FATAL("out of memory");
    int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        rc = mala_errf(err, "%s: saved, but syncing its directory %s failed: %s", path, dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return rc;
}

int atomic_commit(AtomicFile *af, MalaErr *err) {
    errno = 0;
    if (!af->err_no && (fflush(af->f) != 0 || ferror(af->f))) atomic_fail(af);
    // EINVAL: the file does not support syncing (a FIFO or a special file); nothing to make durable
    if (!af->err_no && fsync(fileno(af->f)) != 0 && errno != EINVAL) atomic_fail(af);
    errno = 0;
    if (fclose(af->f) != 0) atomic_fail(af);
    af->f = NULL;
    if (af->err_no) {
        int e = af->err_no;
        mala_errf(err, "%s: write failed: %s%s", af->path, strerror(e), errno_hint(e));
        atomic_abort(af);
        return -1;
    }
    if (rename(af->tmp, af->path) != 0) {
        mala_errf(err, "%s: cannot rename the new file into place: %s", af->path, strerror(errno));
        atomic_abort(af);
        return -1;
    }
    int rc = sync_dir(af->path, err);
    release(af);
    return rc;
}

int atomic_write_file(const char *path, const void *buf, size_t len, MalaErr *err) {
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    atomic_put(&af, buf, len);
    return atomic_commit(&af, err);
}

int atomic_remove_stale(const char *dir, const char *ext, MalaErr *err) {
    DIR *d = opendir(dir);
    if (!d) return mala_errf(err, "%s: cannot read directory: %s", dir, strerror(errno));
    size_t el = strlen(ext);
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n <= el + 4 || memcmp(e->d_name + n - el - 4, ext, el) || strcmp(e->d_name + n - 4, ".tmp")) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) removed++;
    }
    closedir(d);
    return removed;
}

int dirs_make(const char *path, MalaErr *err) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return mala_errf(err, "%s: path too long", path);
    for (char *s = p + 1; ; s++) {  // every prefix ending at a '/', then the whole path
        if (*s && *s != '/') continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (mkdir(p, 0755) && errno != EEXIST) return mala_errf(err, "%s: cannot create directory: %s", p, strerror(errno));
        if (stat(p, &st) || !S_ISDIR(st.st_mode)) return mala_errf(err, "%s: exists and is not a directory", p);
        *s = c;
        if (!c) break;
    }
    return 0;
}

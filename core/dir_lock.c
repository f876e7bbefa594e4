// defines: dir_lock_take, dir_lock_release
#include "core/dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int dir_lock_take(DirLock *l, const char *dir, const char *what, MalaErr *err) {
    l->fd = -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return mala_errf(err, "%s: cannot open the lock file: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        char holder[256] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(fd, holder, sizeof holder - 1, 0) : -1;
        close(fd);
        if (e != EWOULDBLOCK) return mala_errf(err, "%s: cannot lock: %s", path, strerror(e));
        holder[n > 0 ? n : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        long pid = 0;
        char doing[200] = "";
        if (sscanf(holder, "%ld %199[^\n]", &pid, doing) >= 1 && pid > 0)
            return mala_errf(err, "%s is in use by process %ld (%s): wait for it to end or stop it; two writers "
                             "would mix their files", dir, pid, doing[0] ? doing : "mala");
        return mala_errf(err, "%s is in use by another process (%s is locked): wait for it to end or stop it; two "
                         "writers would mix their files", dir, path);
    }
    char line[256];
    int len = snprintf(line, sizeof line, "%ld %s\n", (long)getpid(), what);
    // without the note the lock still holds; the next process then says "another process"
    int noted = ftruncate(fd, 0) == 0 && pwrite(fd, line, (size_t)len, 0) == len;
    (void)noted;
    l->fd = fd;
    return 0;
}

void dir_lock_release(DirLock *l) {
    if (l->fd >= 0) close(l->fd);  // closing the last descriptor drops the flock
    l->fd = -1;
}

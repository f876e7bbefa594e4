// One writer per directory: an exclusive flock on DIR/.lock, held until dir_lock_release or the
// end of the process (the kernel drops it however the process ends, kill -9 included, so a lock
// is never stale). The file holds the holder's PID and what it is doing, for the refusal message
// of the next process; the descriptor is close-on-exec, so child programs do not inherit it.
// defines: DirLock, dir_lock_take, dir_lock_release
#ifndef MALA_DIR_LOCK_H
#define MALA_DIR_LOCK_H

#include "core/common.h"

typedef struct {
    int fd;  // -1: not held
} DirLock;

// Takes dir's lock (dir must exist). 0 when taken; -1 with err "DIR is in use by process PID
// (WHAT): ..." when another process holds it, or why the lock file cannot be opened. what: the
// holder's activity, for the other process's message ("mala train").
int dir_lock_take(DirLock *l, const char *dir, const char *what, MalaErr *err);
void dir_lock_release(DirLock *l);

#endif

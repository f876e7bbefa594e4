// The one way this program replaces a file: write <path>.tmp, flush and fsync it, rename it over
// <path>, then fsync the directory so that the rename itself survives a crash. Every write is
// checked; on any failure <path>.tmp is removed, <path> is left as it was, and err says what
// failed, naming <path> first (a full disk: "PATH: write failed: No space left on device").
//
//     AtomicFile af;
//     if (atomic_open(&af, path, err)) return -1;
//     atomic_put(&af, header, n); atomic_put(&af, data, m);   // or fwrite(af.f) and atomic_fail
//     return atomic_commit(&af, err);
//
// A process killed mid-write leaves <path>.tmp behind (never a half-written <path>); the next
// atomic_open of the same path truncates it, and atomic_remove_stale clears a directory of them.
#ifndef MALA_ATOMIC_FILE_H
#define MALA_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "core/common.h"  // defines: MalaErr

typedef struct {
    char *path, *tmp;
    FILE *f;         // the temporary file, open for writing
    int err_no;      // the first failing errno (0 = fine so far)
} AtomicFile;

// Creates (or truncates) <path>.tmp.
int atomic_open(AtomicFile *af, const char *path, MalaErr *err);
// Writes n bytes to the temporary file; after a failure further writes are skipped and the
// commit reports the first error.
void atomic_put(AtomicFile *af, const void *p, size_t n);
// Records a failure of a write made directly on af->f (errno, or EIO when it is 0).
void atomic_fail(AtomicFile *af);
// Flush, fsync, close, rename, fsync of the directory. Frees af either way.
int atomic_commit(AtomicFile *af, MalaErr *err);
// Closes and removes the temporary file (after a failure the caller reported); frees af.
void atomic_abort(AtomicFile *af);
// atomic_open + atomic_put + atomic_commit.
int atomic_write_file(const char *path, const void *buf, size_t len, MalaErr *err);

// Removes the regular files in dir whose names end in <ext>.tmp (leftovers of killed writers,
// e.g. ext ".safetensors"); returns how many, or -1 with err set when dir cannot be read.
int atomic_remove_stale(const char *dir, const char *ext, MalaErr *err);
// mkdir -p: path and every folder above it (0755); an existing non-directory on the way is an error.
int dirs_make(const char *path, MalaErr *err);

#endif

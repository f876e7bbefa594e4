// Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c, built and run by tests/fuzz/fuzz.mk).
#ifndef MALA_FUZZ_UTIL_H
#define MALA_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

// The input as a regular file, for loaders that take a path: one memfd per process, rewritten
// for every input; its path is /proc/self/fd/N.
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("mala-fuzz", MFD_CLOEXEC);
        if (fd < 0) { perror("memfd_create"); abort(); }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) abort();
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
    return path;
}

#endif

// Shared helpers: error reporting, checked allocation, timing.
#ifndef MALA_COMMON_H
#define MALA_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

// Fatal error with file:line, a message and a hint; for CLI paths only.
// Library code that a GUI may call returns an error string instead (see ERRBUF).
#define FATAL(...) do { fprintf(stderr, "error: "); fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n"); exit(1); } while (0)
#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s: ", \
    __FILE__, __LINE__, #cond); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } } while (0)

// Library-level error buffer: functions that can fail on bad input return non-zero
// and describe the failure here in one line (file name first). The longest line is the memory
// plan's refusal with what would fit instead (train/mem_plan.h), over 512 bytes under MPI on a GPU.
#define MALA_ERR_LEN 1024
typedef struct { char msg[MALA_ERR_LEN]; } MalaErr;
int mala_errf(MalaErr *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);

double now_seconds(void);           // monotonic wall clock
size_t peak_rss_bytes(void);        // peak resident set size of this process
int num_threads(void);              // OpenMP threads in use
// "1.5 GB", "512 bytes": bytes in binary units with one decimal.
void human_bytes(char *buf, size_t n, double bytes);
int is_regular_file(const char *path);  // exists and is a regular file (not a folder)

#endif

// Command-line flags: one table per subcommand gives parsing, defaults and --help text.
#ifndef MALA_ARGS_H
#define MALA_ARGS_H

#include <stdint.h>

typedef enum { OPT_INT, OPT_U64, OPT_FLOAT, OPT_STR, OPT_FLAG, OPT_BOOL } OptType;

typedef struct {
    const char *name;   // "--batch"
    OptType type;
    void *dst;          // int*, uint64_t*, float*, const char**, int* (flag / bool)
    const char *meta;   // "N" in "--batch N"
    const char *help;
} Opt;

// Parses argv[first..argc) into the table's destinations (which hold the defaults). --help prints
// usage and exits 0; an unknown flag, a missing or malformed value, or a stray argument prints a
// one-line error and exits 2. OPT_BOOL takes true/false/on/off/1/0; --no-X sets a bool X to 0.
// The rows every command that computes shares: the op backend and CUDA's product precision.
#define OPT_DEVICE(var) {"--device", OPT_STR, (var), "cpu|cuda", "op backend (default: cuda if present)"}
#define OPT_PRECISION(var) \
    {"--precision", OPT_STR, (var), "tf32|fp32", "CUDA matrix products: tf32 tensor cores (default) or full fp32"}

void args_parse(const char *usage, const Opt *opts, int n, int argc, char **argv, int first);
void args_usage(const char *usage, const Opt *opts, int n);
// Applies --threads to OpenMP and OpenBLAS (0 = all cores).
void set_threads(int n);

#endif

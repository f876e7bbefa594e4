// Command-line flags: one table per subcommand gives parsing, defaults, allowed ranges, DiT's
// names for the same flags, and the --help text.
#ifndef MALA_ARGS_H
#define MALA_ARGS_H

#include <stddef.h>
#include <stdint.h>

typedef enum { OPT_INT, OPT_U64, OPT_FLOAT, OPT_STR, OPT_FLAG, OPT_BOOL } OptType;

typedef struct {
    const char *name;   // "--batch"
    OptType type;
    void *dst;          // int*, uint64_t*, float*, const char**, int* (flag / bool)
    const char *meta;   // "N" in "--batch N"
    const char *help;   // a row whose help names its own default ("default ...") gets no printed one
    const char *alias;  // another name with the same meaning (facebookresearch/DiT's), or NULL
    double min, max;    // the allowed range of a number, where has_min / has_max
    unsigned char has_min, has_max;
    int given;          // set by args_parse: the flag (or its alias) was on the command line
} Opt;

// Optional fields of a row: {"--batch", OPT_INT, &b, "B", "batch size", ARG_MIN(1), ARG_ALIAS("--global-batch-size")}
#define ARG_MIN(v) .has_min = 1, .min = (v)
#define ARG_MAX(v) .has_max = 1, .max = (v)
#define ARG_ALIAS(a) .alias = (a)

#define ARGS_MAX_THREADS 1024

// Parses argv[first..argc) into the table's destinations (which hold the defaults) and marks the
// rows given. --help prints usage and exits 0. These print a one-line error naming the flag and
// exit 2: an unknown flag (with "did you mean --X?" when one is close), a missing or malformed
// value, a number outside the row's range, a float that is not finite (nan, inf), a stray
// argument. OPT_BOOL takes true/false/on/off/1/0; --no-X sets a bool X to 0.
void args_parse(const char *usage, Opt *opts, int n, int argc, char **argv, int first);
void args_usage(const char *usage, const Opt *opts, int n);
// Whether the row writing to dst was given on the command line (0 for a dst not in the table).
int args_given(const Opt *opts, int n, const void *dst);
// Exits 2 with "FLAG VALUE: needs at least X of memory for WHAT; this machine has Y available (Z
// in all)" when bytes exceed what can be allocated (memory_available in mem_plan.h).
void args_check_memory(const char *flag, long long value, double bytes, const char *what);

// The rows every command that computes shares: threads, the op backend and the products' precision.
#define OPT_THREADS(var) \
    {"--threads", OPT_INT, (var), "N", "CPU threads (0 = all cores)", ARG_MIN(0), ARG_MAX(ARGS_MAX_THREADS)}
#define OPT_DEVICE(var) {"--device", OPT_STR, (var), "cpu|cuda", "op backend (default: cuda if present)"}
#define OPT_PRECISION(var)                                                                                         \
    {"--precision", OPT_STR, (var), "fp32|bf16|tf32|int8",                                                         \
     "matrix products: CPU fp32 or bf16 (oneDNN), CUDA tf32 tensor cores, bf16 or fp32; int8: sampling on the CPU "  \
     "with the DiT blocks' linears in int8 (oneDNN) (default: fp32 on the CPU, tf32 on CUDA)"}


#endif

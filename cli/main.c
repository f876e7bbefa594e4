// mala: train, sample, evaluate and view class-conditional DiT / MALA diffusion models.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/suggest.h"
#include "cpu/blas_core.h"
#include "cli/commands.h"
#ifdef MALA_NCCL
#include "cuda/nccl/dist_nccl.h"  // defines: dist_nccl_ops
#endif

typedef struct { const char *name; int (*run)(int, char **); const char *help; } Command;

static const Command COMMANDS[] = {
    {"train", cmd_train, "train a model (Fashion-MNIST, an image folder, or a latent set from encode), resumable"},
    {"sample", cmd_sample, "generate images with DDPM, DDIM or DPM-Solver++ and classifier-free guidance"},
    {"eval", cmd_eval, "FID statistics, FID and Inception Score (pytorch-fid's network and conventions)"},
    {"bench", cmd_bench, "measure throughput: bench train | sample | inception | vae"},
    {"encode", cmd_encode, "encode an image folder once through the VAE into a latent set for training"},
    {"vae", cmd_vae, "Stable Diffusion's VAE on its own: vae encode (images -> latents) | vae decode"},
    {"export", cmd_export, "write a checkpoint's EMA weights as a small model file for sampling"},
    {"import", cmd_import, "convert a PyTorch DiT state dict or training checkpoint (.pt) into a model file"},
    {"compare", cmd_compare, "train and evaluate several models at an equal budget; results table and plots"},
    {"info", cmd_info, "print a model file's configuration, parameters, training state and tensors"},
    {"serve", cmd_serve, "serve the models over HTTP: AUTOMATIC1111's and OpenAI's image APIs and a web page"},
    {"view", cmd_view, "open a window to generate images interactively (SDL2)"},
};
#define NCOMMANDS (int)(sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: mala <command> [flags]   (mala <command> --help for its flags)\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-8s %s\n", COMMANDS[i].name, COMMANDS[i].help);
    fprintf(f, "  %-8s %s\n", "help", "this list");
}

// Starts this binary again through its resolved path, not /proc/self/exe, whose name ("exe") the
// kernel would take as the process name (ps, top, pgrep, the OOM killer's log). On failure carry
// on with the defaults.
static void reexec(char **argv) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        execv(self, argv);
    }
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv) {
    // libgomp's idle workers spin by default and then fight OpenBLAS and other processes for
    // the cores (2-6x slower steps on a busy 2-core machine). The policy is read when libgomp
    // loads, so set it and start again; a user's own setting wins.
    // OpenBLAS reads OPENBLAS_CORETYPE when it loads too (blas_core.h: on a CPU model it does
    // not know it runs its SSE3 kernels); both only when the user has not chosen.
    if (!getenv("MALA_NO_REEXEC") && (!getenv("OMP_WAIT_POLICY") || (!getenv("OPENBLAS_CORETYPE") && blas_core_for_cpu()))) {
        if (!getenv("OMP_WAIT_POLICY")) setenv("OMP_WAIT_POLICY", "passive", 1);
        if (!getenv("OPENBLAS_CORETYPE") && blas_core_for_cpu()) setenv("OPENBLAS_CORETYPE", blas_core_for_cpu(), 1);
        setenv("MALA_NO_REEXEC", "1", 1);
        reexec(argv);
    }
#ifdef MALA_BLIS
    // BLIS reads BLIS_ARCH_TYPE at its first call; Debian's build picks its AVX2 kernels on
    // CPUs whose FMA unit count it does not know, AVX-512 ones included.
    if (!getenv("BLIS_ARCH_TYPE") && blas_core_for_cpu())
        setenv("BLIS_ARCH_TYPE", strcmp(blas_core_for_cpu(), "SkylakeX") ? "haswell" : "skx", 1);
#endif
#ifdef MALA_NCCL
    dist_set_device_ops(dist_nccl_ops());  // before any command's dist_init
#endif
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].run(argc - 1, argv + 1);
    const char *names[NCOMMANDS];
    for (int i = 0; i < NCOMMANDS; i++) names[i] = COMMANDS[i].name;
    const char *s = text_suggest(argv[1], names, NCOMMANDS);
    fprintf(stderr, "error: unknown command '%s'%s%s%s (mala help lists the commands)\n", argv[1],
            s ? "; did you mean " : "", s ? s : "", s ? "?" : "");
    return 2;
}

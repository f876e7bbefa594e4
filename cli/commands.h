// The subcommands of `mala`; each parses its own flags (args.h) and returns an exit status.
#ifndef MALA_COMMANDS_H
#define MALA_COMMANDS_H

#include "cli/args.h"
#include "train/mem_plan.h"
#include "model/net.h"
#include "model/vae.h"

int cmd_train(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_serve(int argc, char **argv);
// mala compare --config FILE --out DIR (cli/cmd_compare.c).
int cmd_compare(int argc, char **argv);
// mala eval stats|fid|is (argv[0] is "eval"): one JSON line on stdout, a readable summary and
// progress on stderr.
int cmd_eval(int argc, char **argv);
int cmd_eval_sweep(int argc, char **argv);  // mala eval sweep (cli/cmd_sweep.c)
// FID Inception forward throughput: one JSON line with img/s. argv[0] is the command name.
int cmd_bench_inception(int argc, char **argv);
// The CPU's linear forward in fp32, bf16 and int8, interleaved: cli/cmd_bench_gemm.c.
int cmd_bench_gemm(int argc, char **argv);
// mala vae encode|decode|preview-fit (argv[0] is "vae") and mala bench vae (argv[0] is "vae"):
// cli/cmd_vae.c, preview-fit in cli/cmd_vae_fit.c (argv[0] is "preview-fit").
int cmd_vae(int argc, char **argv);
int cmd_vae_preview_fit(int argc, char **argv);
int cmd_bench_vae(int argc, char **argv);
// mala encode: an image folder -> a latent set (data/latents.h): cli/cmd_encode.c.
int cmd_encode(int argc, char **argv);
// The --vae file's configuration (exits with a one-line error on a bad file), and the file loaded
// for batches of `batch` images of h x w pixels (batch 0: the most up to 8 whose activations fit
// 2 GiB; at most n when n > 0), the memory checked first; *batch_out (may be NULL) gets the batch.
void vae_peek(const char *path, VaeConfig *c);
Vae *vae_open_for(const char *path, const Backend *be, int batch, int n, int h, int w, int *batch_out);

// Model-shape flags shared by train and bench: --model, --attn, --rope, --lepe, --gate,
// --image-size, --channels, --classes, --learn-sigma, --backbone, --cpe, --ffn-dwconv. The attention
// flags (--attn to --gate, --cpe, --ffn-dwconv) are DiT's.
typedef struct {
    const char *preset, *default_preset, *attn, *backbone;
    char preset_buf[64];
    int rope, lepe, gate;      // -1 = the attention kind's default
    int cpe, ffn_dwconv;       // -1 = the attention kind's default
    int image_size, channels, classes, learn_sigma;
} ModelOpts;

#define MODEL_OPTS_N 12
void model_opts_default(ModelOpts *mo, const char *preset);
void model_opts_table(ModelOpts *mo, Opt *out);  // fills MODEL_OPTS_N entries
// Builds the configuration; exits with a one-line error on a bad preset or combination.
void model_opts_config(ModelOpts *mo, NetConfig *c);
// --resume: exits with a one-line error when a model flag given (opts: the MODEL_OPTS_N rows
// model_opts_table filled) contradicts the checkpoint's configuration c.
void model_opts_check_resumed(const ModelOpts *mo, const Opt *opts, const NetConfig *c);
// g = c with the model flags given applied (--model: its preset; the attention flags, --image-size,
// --channels, --classes, --learn-sigma); exits on a flag that does not apply. what: "--resume", "--init".
void model_opts_apply_given(const ModelOpts *mo, const Opt *opts, const NetConfig *c, NetConfig *g, const char *what);
// Exits with a one-line error for a shape that cannot learn (net_check_learnable).
void model_check_learnable(const NetConfig *c, const char *preset);

// Which weights of a training checkpoint a command takes (--weights, train's --init-weights): 0 for
// ema (the default), 1 for online, also spelt model (the name DiT's checkpoints give the online
// weights: {model, ema, opt, args}). Any other value exits with one line naming flag and value.
int weights_online(const char *flag, const char *value);

// mkdir -p: creates path and every missing parent; exits with a one-line error naming the part
// that cannot be created.
void make_dirs(const char *path);

// The bundled Fashion-MNIST model (assets/), relative to the executable's directory or the cwd.
const char *default_model_path(void);

#endif

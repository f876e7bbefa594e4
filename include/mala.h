/* mala.h: the public C API of mala-dit (libmala).

   ABOUT
   Class-conditional diffusion models (DiT with Magnitude-Aware Linear Attention, DiG, DiC) from a
   C program: load a model file, generate images (classifier-free guidance, class blends, DDPM /
   DDIM / DPM-Solver++), encode and decode with a VAE, compute FID statistics and FID. The same
   code that runs `mala sample` and `mala eval`: with the same parameters the images are the same
   bits. This header is the only one a program needs; libmala exports only mala_* symbols.

   BUILDING
   In the source tree: `make install PREFIX=$HOME/.local` installs this header, libmala.a,
   libmala.so and lib/pkgconfig/mala.pc. Then

       cc prog.c $(pkg-config --cflags --libs mala)      (PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig)

   links the shared library; the static one: -Wl,-Bstatic -lmala -Wl,-Bdynamic followed by
   `pkg-config --static --libs mala` (what libmala.a needs: BLAS, oneDNN, CUDA, MPI as built).

   USAGE
   - Every call returns MALA_OK (0) or MALA_ERROR (-1); the reason is the handle's last error:
     mala_model_error(model) for calls on a model, mala_context_error(ctx) for calls that create
     a handle (each a one-line message naming the file or parameter). Bad input or a bad file is
     an error, never an exit (running out of memory still ends the process).
   - Handles are opaque: a context (the device, precision and thread count; there is no state
     beyond it) and the models, VAEs and FID statistics made from it. Free each with its _free,
     the context last.
   - Threads: calls on separate handles may run at the same time from several threads; one handle
     is used by one thread at a time. Contexts share the process's CPU matrix-product precision:
     two live contexts with different precisions are refused.
   - Images are float NCHW in [-1, 1] (the model's output range), or RGB8 / gray8 HWC from
     mala_generate_u8.

   EXAMPLE (examples/generate.c is this, complete)

       mala_context *ctx = mala_context_new(NULL, NULL, 0);
       mala_model *m;
       if (mala_model_load(ctx, "mala-dit-fmnist.safetensors", NULL, &m)) {
           fprintf(stderr, "%s\n", mala_context_error(ctx)); return 1;
       }
       mala_gen_params p = mala_gen_params_default();
       p.class_id = mala_model_class_find(m, "Sneaker");
       p.sampler = "ddim"; p.steps = 50; p.count = 16;
       mala_model_info info; mala_model_get_info(m, &info);
       float *img = malloc(sizeof(float) * p.count * info.out_channels * info.out_size * info.out_size);
       if (mala_generate(m, &p, img) || mala_write_png_grid(ctx, "sneakers.png", img, p.count,
               info.out_channels, info.out_size, 8)) ...
       mala_model_free(m); mala_context_free(ctx);

   Training: mala_train_open(ctx, &options, &run), then mala_train_run (to the end, with the run
   directory `mala train` writes and a callback at every log line) or mala_train_step (one optimiser
   step at a time); mala_train_save writes a training checkpoint (examples/train.c).
*/
#ifndef MALA_H
#define MALA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MALA_BUILD_LIB) && defined(__GNUC__)
#define MALA_EXPORT __attribute__((visibility("default")))
#else
#define MALA_EXPORT
#endif

/* The API's version: raised when a declaration here changes incompatibly (it is the shared
   library's soname: libmala.so.MALA_API_VERSION). mala_api_version() is the library's. */
#define MALA_API_VERSION 1
MALA_EXPORT int mala_api_version(void);

#define MALA_OK 0
#define MALA_ERROR (-1)

typedef struct mala_context mala_context;
typedef struct mala_model mala_model;
typedef struct mala_vae mala_vae;
typedef struct mala_fid_stats mala_fid_stats;

/* ---- context ---- */
typedef struct {
    const char *device;    /* "cpu", "cuda" or NULL (CUDA when this build and machine have it, else the CPU) */
    const char *precision; /* NULL (the device's default: fp32 on the CPU, tf32 on CUDA), "fp32", "tf32", "bf16", "int8" (the CPU, sampling: the DiT blocks' large linears in int8) */
    int threads;           /* CPU threads of this context's calls; 0: every core */
} mala_context_options;
MALA_EXPORT mala_context_options mala_context_options_default(void);
/* opt NULL: the defaults. NULL on failure, with the reason in err (cap bytes; err may be NULL). */
MALA_EXPORT mala_context *mala_context_new(const mala_context_options *opt, char *err, size_t cap);
MALA_EXPORT void mala_context_free(mala_context *ctx);
/* The last error of a call that created a handle from ctx ("" if none). The text stays valid
   until the next such call from the calling thread (each thread has its own copy). */
MALA_EXPORT const char *mala_context_error(mala_context *ctx);
/* "cpu" or "cuda", and "fp32", "tf32", "bf16" or "int8": what the context runs on. */
MALA_EXPORT const char *mala_context_device(const mala_context *ctx);
MALA_EXPORT const char *mala_context_precision(const mala_context *ctx);

/* ---- models ---- */
/* Any model file mala reads (a model file or a training checkpoint, .safetensors; EMA weights when
   present). vae: a latent model's VAE (diffusers .safetensors), NULL for a pixel model or to use
   the one its training run recorded. */
MALA_EXPORT int mala_model_load(mala_context *ctx, const char *path, const char *vae, mala_model **out);
MALA_EXPORT void mala_model_free(mala_model *m);
MALA_EXPORT const char *mala_model_error(const mala_model *m);

typedef struct {
    const char *backbone;          /* "dit", "dig", "dic" */
    int num_classes;               /* 0: an unconditional model */
    int channels, image_size;      /* what the network samples (latents for a latent model) */
    int out_channels, out_size;    /* the images it makes (decoded through the VAE for a latent model) */
    int latent;                    /* 1 for a latent model */
} mala_model_info;
MALA_EXPORT int mala_model_get_info(const mala_model *m, mala_model_info *info);
/* Class k's name (NULL when out of range); the class given by name (case-insensitive) or number, or -1. */
MALA_EXPORT const char *mala_model_class_name(const mala_model *m, int k);
MALA_EXPORT int mala_model_class_find(const mala_model *m, const char *name);

/* ---- generation ---- */
/* Called after every sampling step of every batch: step 0..steps-1; preview is the predicted clean
   sample x0 of the batch's images first..first+n-1, float [n, channels, image_size, image_size] in
   the model's space (latents for a latent model), valid during the call. Return non-zero to cancel:
   mala_generate then fails with the error "cancelled". */
typedef int (*mala_step_fn)(void *user, int first, int n, int step, int steps, const float *preview);

typedef struct {
    const char *sampler;   /* "ddpm", "ddim", "dpm++2m" (DPM-Solver++(2M)) */
    int steps;             /* sampling steps, respaced from 1000 (1..1000) */
    float cfg_scale;       /* classifier-free guidance (1: none; an unconditional model takes only 1) */
    float eta;             /* DDIM noise (0: deterministic) */
    int clip;              /* clip the predicted x0 to [-1, 1] (latent models never clip) */
    int class_id;          /* every image's class; -1: the classes in equal blocks (as `mala sample`) */
    const int32_t *labels; /* one class per image, or NULL (then class_id) */
    int blend;             /* 1: every image's label embedding is (1 - blend_w) e_a + blend_w e_b */
    int blend_a, blend_b;
    float blend_w;
    uint64_t seed;         /* image i's noise depends only on (seed, i) */
    int count;             /* images */
    int batch;             /* images per forward pass (at most the count; 0: 16) */
    mala_step_fn on_step;  /* may be NULL */
    void *user;
} mala_gen_params;
/* `mala sample`'s defaults: DDPM, 250 steps, guidance 4, clip on, class -1, seed 0, 16 images, batch 16. */
MALA_EXPORT mala_gen_params mala_gen_params_default(void);
/* out: count x out_channels x out_size x out_size floats (NCHW in [-1, 1]). */
MALA_EXPORT int mala_generate(mala_model *m, const mala_gen_params *p, float *out);
/* out: count x out_size x out_size x out_channels bytes (HWC; RGB8 for a 3-channel model, gray8 for 1). */
MALA_EXPORT int mala_generate_u8(mala_model *m, const mala_gen_params *p, uint8_t *out);

/* What to draw as one line of text, into p: "" (the classes in equal blocks), a class by name or
   number ("Sneaker", "7"), or a blend of two ("Sneaker,Sandal,0.3" or "0.7 Sneaker + 0.3 Sandal").
   `mala sample --class / --blend` read the same text and give the same errors; the error goes to
   err (cap bytes). It only reads the model's class names: it may run while another thread
   generates with m. */
MALA_EXPORT int mala_model_prompt(const mala_model *m, const char *prompt, mala_gen_params *p, char *err, size_t cap);

/* Image-to-image (SDEdit) and inpainting (RePaint), as `mala sample --init-image / --mask`: the
   input is an image file's bytes (PNG, JPEG, BMP, PGM / PPM), brought to the model's size by ADM's
   center_crop_arr; every image of the run starts from it. */
typedef struct {
    const void *image;       /* the input image file's bytes */
    size_t image_len;
    const char *image_name;  /* its name in messages and in the PNG parameters; NULL: "init image" */
    float strength;          /* (0, 1]: the run takes the last round(strength x steps) steps */
    const void *mask;        /* inpainting: a mask image file's bytes (white, gray >= 128, is regenerated), or NULL */
    size_t mask_len;
    const char *mask_name;   /* NULL: "mask" */
    int mask_invert;         /* 1: dark pixels are regenerated instead */
    int resample;            /* inpainting: RePaint jumps per step (0..100; DDPM and DDIM) */
} mala_init_image;
/* mala_generate from an input image (init NULL: mala_generate). */
MALA_EXPORT int mala_generate_init(mala_model *m, const mala_gen_params *p, const mala_init_image *init, float *out);

/* Image i of a run of p (and init, or NULL) as PNG bytes, exactly the file `mala sample --out-dir`
   writes for it: image is its out_channels x out_size x out_size floats, and the PNG carries the
   tEXt "parameters" infotext. *png is malloc'd: free it with mala_free. */
MALA_EXPORT int mala_image_png(mala_model *m, const mala_gen_params *p, const mala_init_image *init, int i,
                               const float *image, uint8_t **png, size_t *len);
/* The first image of an on_step preview as out_size x out_size x out_channels bytes (HWC): the
   predicted x0 itself for a pixel model; for a latent model its linear latent-to-RGB projection,
   each latent cell upsampled to its block of pixels (no VAE pass: cheap enough for every step;
   the final images come decoded from the run). Call it only from within the model's on_step. */
MALA_EXPORT int mala_preview_u8(mala_model *m, const float *preview, uint8_t *out);
/* The "parameters" text of a PNG (A1111's infotext, as `mala info FILE.png` prints it): MALA_OK
   with *text malloc'd (free with mala_free), or with *text NULL when the PNG has none; MALA_ERROR
   with the reason in err (cap bytes) for bytes that are not a sound PNG. */
MALA_EXPORT int mala_png_parameters(const void *png, size_t len, char **text, char *err, size_t cap);
/* The file the model was loaded from, and the VAE it decodes with ("" for a pixel model). */
MALA_EXPORT const char *mala_model_path(const mala_model *m);
MALA_EXPORT const char *mala_model_vae_path(const mala_model *m);
MALA_EXPORT void mala_free(void *p);

/* n images [n, c, s, s] in [-1, 1] as one PNG grid of nrow images per row with 2 pixels of
   padding (torchvision's make_grid; `mala sample --out`'s pixels), written atomically. */
MALA_EXPORT int mala_write_png_grid(mala_context *ctx, const char *path, const float *images, int n, int c, int s,
                                    int nrow);

/* ---- VAE (diffusers AutoencoderKL .safetensors) ---- */
/* Planned for up to max_batch images of at most max_size x max_size pixels (multiples of the factor). */
MALA_EXPORT int mala_vae_load(mala_context *ctx, const char *path, int max_batch, int max_size, mala_vae **out);
MALA_EXPORT void mala_vae_free(mala_vae *v);
MALA_EXPORT const char *mala_vae_error(const mala_vae *v);
/* The image channels, latent channels and downsampling factor. */
MALA_EXPORT int mala_vae_dims(const mala_vae *v, int *channels, int *latent, int *factor);
/* images [n, channels, h, w] in [-1, 1] -> the posterior mean [n, latent, h/f, w/f] (unscaled) and
   logvar (either may be NULL). */
MALA_EXPORT int mala_vae_encode(mala_vae *v, const float *images, int n, int h, int w, float *mean, float *logvar);
/* scaled latents z [n, latent, h, w] (mean x 0.18215) -> images [n, channels, h f, w f]. */
MALA_EXPORT int mala_vae_decode(mala_vae *v, const float *z, int n, int h, int w, float *images);

/* ---- FID (pytorch-fid's Inception features and statistics) ---- */
/* inception: pytorch-fid's weights (pt_inception-2015-12-05-6726825d.pth, or .safetensors);
   images [n, c, h, w] float in [-1, 1], c = 1 or 3, n >= 2. */
MALA_EXPORT int mala_fid_stats_images(mala_context *ctx, const char *inception, const float *images, int n, int c,
                                      int h, int w, mala_fid_stats **out);
/* A .npz with mu and sigma (pytorch-fid's and the ADM reference batches' format). */
MALA_EXPORT int mala_fid_stats_load(mala_context *ctx, const char *path, mala_fid_stats **out);
MALA_EXPORT int mala_fid_stats_save(mala_context *ctx, const mala_fid_stats *s, const char *path);
MALA_EXPORT void mala_fid_stats_free(mala_fid_stats *s);
MALA_EXPORT int mala_fid(mala_context *ctx, const mala_fid_stats *a, const mala_fid_stats *b, double *fid);

/* ---- training (a fresh run, one process; `mala train` for resume, fine-tuning, MPI) ---- */
typedef struct mala_train mala_train;
typedef struct {
    const char *data;      /* "fashion-mnist", an image folder root/<class>/<image>, or a latent set (mala encode) */
    const char *model;     /* a preset, as `mala train --model`: "DiT-S/2", "DiT-T/4", "DiG-S/2", "DiC-S", ... */
    int image_size;        /* pixel data: the side images are brought to (32); a latent set's own when 0 */
    int limit;             /* use only this many images, spread over the data (0: all) */
    int batch;             /* images per optimiser step */
    float lr, ema_decay, label_drop, weight_decay, grad_clip;
    int warmup;            /* linear learning-rate warmup steps */
    uint64_t seed;         /* the weights' initialisation, the data order and the noise */
    uint64_t iters;        /* the step mala_train_run trains to */
    const char *out;       /* the run directory (made by mala_train_open as `mala train` makes it, one holding a
                              run refused; written by mala_train_run); NULL: none, nothing written */
    int ckpt_every, log_every, keep, tensorboard;  /* as `mala train`'s flags */
} mala_train_options;
/* `mala train`'s defaults: fashion-mnist, DiT-S/2, batch 256, lr 1e-4, EMA 0.9999, label dropout 0.1,
   400000 steps, a checkpoint every 5000 steps and the last 3 kept, a log line every 100, no event
   file, out NULL. */
MALA_EXPORT mala_train_options mala_train_options_default(void);
/* The run set up as `mala train` sets one up, with its checks and messages, quietly: the data opened,
   the model built and initialised, the memory plan checked (a run that does not fit is refused,
   naming what would), the data order set, and with out the run directory made and locked until
   mala_train_free. */
MALA_EXPORT int mala_train_open(mala_context *ctx, const mala_train_options *o, mala_train **out);
MALA_EXPORT void mala_train_free(mala_train *t);
MALA_EXPORT const char *mala_train_error(const mala_train *t);

typedef struct {
    uint64_t step;                  /* optimiser steps taken */
    double loss, mse, vb, grad_norm; /* the step's (mala_train_step), or the mean since the last log line */
    double images_per_s, lr;
    int skipped;                    /* mala_train_step: 1 when the step was not finite and was skipped */
} mala_train_stats;
/* One optimiser step on the next batch; writes no file. */
MALA_EXPORT int mala_train_step(mala_train *t, mala_train_stats *st);
/* Trains to options.iters in options.out as `mala train` does (checkpoints/, log.csv, loss.png, the
   same checkpoint bytes as `mala train` with the same settings, which `mala train --resume`
   continues). on_log (may be NULL) is called at every log line; non-zero stops the run after a
   checkpoint of the step. */
typedef int (*mala_train_log_fn)(void *user, const mala_train_stats *st);
MALA_EXPORT int mala_train_run(mala_train *t, mala_train_log_fn on_log, void *user);
/* A training checkpoint of the run as it stands (EMA and online weights, optimiser state), atomically. */
MALA_EXPORT int mala_train_save(mala_train *t, const char *path);

#ifdef __cplusplus
}
#endif
#endif

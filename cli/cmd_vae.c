// mala vae encode | decode: the AutoencoderKL on its own (model/vae.h), and mala bench vae.
//   decode --vae FILE --in Z.npy --out X.npy|grid.png   Z: float32 NCHW scaled latents;
//          X = decoder(post_quant_conv(Z / 0.18215)), float32 NCHW in the [-1, 1] scale, unclamped
//   encode --vae FILE --in X.npy|DIR --out M.npz        X: float32 NCHW in [-1, 1], or a folder of
//          images (walked as datasets are, folder_walk), center-cropped as ADM's center_crop_arr;
//          M holds `mean` and `logvar` (after quant_conv, unscaled, logvar clamped to [-30, 20])
#include <math.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/bench_stats.h"
#include "cli/commands.h"
#include "data/dataset.h"  // defines: folder_walk
#include "formats/image_io.h"
#include "formats/npy.h"
#include "cli/out_paths.h"
#include "core/rng.h"
#include "model/vae.h"
#include "cpu/cpu_threads.h"

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcasecmp(s + n - k, suffix);
}

// A float32 NCHW array from path with `channels` channels.
static float *load_nchw(const char *path, int channels, int64_t shape[4]) {
    NpyArray a;
    MalaErr err;
    float *x = NULL;
    if (npy_load(path, &a, &err)) FATAL("%s", err.msg);
    if (a.ndim != 4 || a.shape[1] != channels)
        FATAL("%s: expected an [N, %d, H, W] array, got %d dimensions%s", path, channels, a.ndim,
              a.ndim == 4 ? " with another channel count" : "");
    if (npy_to_f32(&a, &x, path, &err)) FATAL("%s", err.msg);
    memcpy(shape, a.shape, sizeof(int64_t) * 4);
    npy_free(&a);
    for (int64_t i = 0; i < shape[0] * shape[1] * shape[2] * shape[3]; i++)
        if (!isfinite(x[i])) FATAL("%s: value %lld is not finite", path, (long long)i);
    return x;
}

static int cmd_vae_decode(int argc, char **argv) {
    const char *vae = NULL, *in = NULL, *out = NULL, *device = NULL, *precision = NULL;
    int batch = 0, threads = 0, nrow = 8, force = 0;
    Opt opts[] = {
        {"--vae", OPT_STR, &vae, "FILE", "diffusers AutoencoderKL weights (diffusion_pytorch_model.safetensors)"},
        {"--in", OPT_STR, &in, "Z.npy", "scaled latents, float32 [N, 4, h, w]"},
        {"--out", OPT_STR, &out, "X.npy|X.png", "float32 NCHW images in [-1, 1] (not clamped), or a PNG grid"},
        {"--batch", OPT_INT, &batch, "N", "images per pass (default: the most up to 8 that fit 2 GiB)", ARG_MIN(0)},
        {"--nrow", OPT_INT, &nrow, "N", "images per row of a PNG grid", ARG_MIN(1)},
        OPT_FORCE(&force), OPT_THREADS(&threads), OPT_DEVICE(&device), OPT_PRECISION(&precision),
    };
    const int n = (int)(sizeof opts / sizeof opts[0]);
    args_parse("usage: mala vae decode --vae FILE --in Z.npy --out X.npy|grid.png [flags]\n\n"
               "Decodes scaled latents: X = decoder(post_quant_conv(Z / 0.18215)).",
               opts, n, argc, argv, 1);
    if (!vae || !in || !out) FATAL("mala vae decode: --vae, --in and --out are required");
    if (!ends_with(out, ".npy") && !ends_with(out, ".png")) FATAL("--out %s: expected a .npy or .png path", out);
    out_check_file("--out", out, force, NULL);
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    MalaErr err;
    VaeConfig c;
    vae_peek(vae, &c);
    int64_t zs[4];
    float *z = load_nchw(in, c.latent, zs);
    const int fct = vae_factor(&c), N = (int)zs[0], h = (int)zs[2], w = (int)zs[3], H = h * fct, W = w * fct;
    Vae *v = vae_open_for(vae, be, batch, N, H, W, &batch);
    float *x = xmalloc(sizeof(float) * (size_t)N * c.out_channels * H * W + 1);
    double t0 = now_seconds();
    if (vae_decode(v, z, N, h, w, x, &err)) FATAL("%s: %s", in, err.msg);
    const double dt = now_seconds() - t0;
    int rc;
    if (ends_with(out, ".npy")) {
        NpyArray a;
        npy_wrap(&a, "<f4", x, 4, (int64_t[]){N, c.out_channels, H, W});
        rc = npy_save(out, &a, &err);
    } else {
        rc = image_save_grid(out, x, N, c.out_channels, H, W, nrow, 2, &err);
    }
    if (rc) FATAL("%s", err.msg);
    fprintf(stderr, "decoded %d latents [%d, %d, %d] to %dx%d images in %.2f s (batch %d, %s) -> %s\n", N,
            c.latent, h, w, H, W, dt, batch, be->name, out);
    free(x);
    free(z);
    vae_free(v);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// encode

static int is_image(const char *name) {
    static const char *const ext[] = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif", ".ppm", ".pgm"};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (ends_with(name, ext[i])) return 1;
    return 0;
}

// The folder's images center-cropped to size x size, as float [-1, 1] NCHW.
static float *load_folder(const char *dir, int size, int channels, int *N) {
    char **all;
    size_t total, n = 0;
    MalaErr err;
    if (folder_walk(dir, &all, &total, &err)) FATAL("%s", err.msg);
    for (size_t i = 0; i < total; i++) {
        if (is_image(all[i])) all[n++] = all[i];
        else free(all[i]);
    }
    if (n == 0) FATAL("%s: no images in the folder or its sub-folders", dir);
    const size_t per = (size_t)channels * size * size;
    float *x = xmalloc(sizeof(float) * per * n);
    uint8_t *crop = xmalloc((size_t)size * size * channels);
    for (size_t i = 0; i < n; i++) {
        uint8_t *px;
        int w, h;
        if (image_load(all[i], channels, &px, &w, &h, &err)) FATAL("%s", err.msg);
        if (image_center_crop_arr(crop, size, px, w, h, channels)) FATAL("%s: cannot crop to %d", all[i], size);
        image_u8_to_float(x + per * i, crop, size, size, channels, 0);
        free(px);
        free(all[i]);
    }
    free(crop);
    free(all);
    *N = (int)n;
    return x;
}

static int cmd_vae_encode(int argc, char **argv) {
    const char *vae = NULL, *in = NULL, *out = NULL, *device = NULL, *precision = NULL;
    int batch = 0, threads = 0, size = 256, force = 0;
    Opt opts[] = {
        {"--vae", OPT_STR, &vae, "FILE", "diffusers AutoencoderKL weights (diffusion_pytorch_model.safetensors)"},
        {"--in", OPT_STR, &in, "X.npy|DIR", "float32 [N, 3, H, W] images in [-1, 1], or a folder of images"},
        {"--out", OPT_STR, &out, "M.npz", "posterior `mean` and `logvar` [N, 4, H/8, W/8], unscaled"},
        {"--image-size", OPT_INT, &size, "S", "center crop of a folder's images (ADM's center_crop_arr)", ARG_MIN(8)},
        {"--batch", OPT_INT, &batch, "N", "images per pass (default: the most up to 8 that fit 2 GiB)", ARG_MIN(0)},
        OPT_FORCE(&force), OPT_THREADS(&threads), OPT_DEVICE(&device), OPT_PRECISION(&precision),
    };
    const int n = (int)(sizeof opts / sizeof opts[0]);
    args_parse("usage: mala vae encode --vae FILE --in X.npy|DIR --out M.npz [flags]\n\n"
               "Encodes images to the posterior mean and log-variance (after quant_conv, logvar clamped to [-30, 20]).",
               opts, n, argc, argv, 1);
    if (!vae || !in || !out) FATAL("mala vae encode: --vae, --in and --out are required");
    if (!ends_with(out, ".npz")) FATAL("--out %s: expected a .npz path", out);
    out_check_file("--out", out, force, NULL);
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    MalaErr err;
    VaeConfig c;
    vae_peek(vae, &c);
    struct stat st;
    if (stat(in, &st)) FATAL("%s: no such file or folder", in);
    int64_t xs[4];
    float *x;
    if (S_ISDIR(st.st_mode)) {
        int N;
        x = load_folder(in, size, c.in_channels, &N);
        xs[0] = N, xs[1] = c.in_channels, xs[2] = xs[3] = size;
    } else {
        x = load_nchw(in, c.in_channels, xs);
    }
    const int fct = vae_factor(&c), N = (int)xs[0], H = (int)xs[2], W = (int)xs[3];
    if (H % fct || W % fct) FATAL("%s: images of %dx%d pixels; the VAE needs multiples of %d", in, H, W, fct);
    Vae *v = vae_open_for(vae, be, batch, N, H, W, &batch);
    const size_t nl = (size_t)N * c.latent * (H / fct) * (W / fct);
    float *mean = xmalloc(sizeof(float) * nl + 1), *logvar = xmalloc(sizeof(float) * nl + 1);
    double t0 = now_seconds();
    if (vae_encode(v, x, N, H, W, mean, logvar, &err)) FATAL("%s: %s", in, err.msg);
    const double dt = now_seconds() - t0;
    NpyArray a[2];
    const int64_t shape[4] = {N, c.latent, H / fct, W / fct};
    npy_wrap(&a[0], "<f4", mean, 4, shape);
    npy_wrap(&a[1], "<f4", logvar, 4, shape);
    if (npz_save(out, (const char *[]){"mean", "logvar"}, a, 2, &err)) FATAL("%s", err.msg);
    fprintf(stderr, "encoded %d images of %dx%d to [%d, %d, %d] in %.2f s (batch %d, %s) -> %s\n", N, H, W, c.latent,
            H / fct, W / fct, dt, batch, be->name, out);
    free(x); free(mean); free(logvar);
    vae_free(v);
    return 0;
}

int cmd_vae(int argc, char **argv) {
    const char *usage = "usage: mala vae encode|decode|preview-fit [flags]   (mala vae encode --help)\n"
                        "  encode       images (X.npy or a folder) -> posterior mean and logvar (M.npz)\n"
                        "  decode       scaled latents (Z.npy) -> images (X.npy or a PNG grid)\n"
                        "  preview-fit  the linear latent-to-RGB projection of step previews, fitted\n";
    if (argc >= 2 && !strcmp(argv[1], "encode")) return cmd_vae_encode(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "preview-fit")) return cmd_vae_preview_fit(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "decode")) return cmd_vae_decode(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) { printf("%s", usage); return 0; }
    fprintf(stderr, "error: mala vae: expected encode, decode or preview-fit%s%s%s (mala vae --help)\n", argc >= 2 ? ", got '" : "",
            argc >= 2 ? argv[1] : "", argc >= 2 ? "'" : "");
    return 2;
}

// ---------------------------------------------------------------------------------------------
// mala bench vae: encode and decode img/s at --image-size on --vae FILE or the sd-vae-ft-ema
// config with random weights.

int cmd_bench_vae(int argc, char **argv) {
    const char *vae = NULL, *device = NULL, *precision = NULL;
    int batch = 4, threads = 0, size = 256, reps = 2;
    Opt opts[] = {
        {"--vae", OPT_STR, &vae, "FILE", "weights to time (default: sd-vae-ft-ema's config, random weights)"},
        {"--image-size", OPT_INT, &size, "S", "image size", ARG_MIN(8)},
        {"--batch", OPT_INT, &batch, "N", "images per pass", ARG_MIN(1)},
        {"--reps", OPT_INT, &reps, "N", "timed passes of each direction (after one warm-up)", ARG_MIN(1)},
        OPT_THREADS(&threads), OPT_DEVICE(&device), OPT_PRECISION(&precision),
    };
    const int n = (int)(sizeof opts / sizeof opts[0]);
    args_parse("usage: mala bench vae [flags]\n\nTimes the AutoencoderKL's encode and decode on random inputs and\n"
               "prints one JSON line.",
               opts, n, argc, argv, 1);
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    MalaErr err;
    VaeConfig c;
    if (vae) vae_peek(vae, &c);
    else vae_config_sd(&c);
    const int fct = vae_factor(&c);
    if (size % fct) FATAL("--image-size %d: the VAE needs a multiple of %d", size, fct);
    args_check_memory("--batch", batch, (double)vae_activation_bytes(&c, be, batch, size, size) + vae_weight_bytes(&c),
                      "the VAE's weights and activations");
    Vae *v = vae ? vae_load(vae, be, batch, size, size, &err) : vae_random(&c, be, batch, size, size, 1, &err);
    if (!v) FATAL("%s", err.msg);
    const size_t nx = (size_t)batch * c.in_channels * size * size;
    const size_t nz = (size_t)batch * c.latent * (size / fct) * (size / fct);
    float *x = xmalloc(sizeof(float) * nx), *z = xmalloc(sizeof(float) * nz), *mean = xmalloc(sizeof(float) * nz);
    float *xo = xmalloc(sizeof(float) * (size_t)batch * c.out_channels * size * size);
    Rng r;
    rng_seed(&r, 7);
    for (size_t i = 0; i < nx; i++) x[i] = (float)(2.0 * rng_uniform(&r) - 1.0);
    rng_normal_fill(&r, z, nz);
    double t[2];
    Spread sp[2];
    double *times = xmalloc((size_t)reps * sizeof *times);
    for (int dir = 0; dir < 2; dir++) {
        for (int k = 0; k <= reps; k++) {  // k = 0: warm-up
            const double t0 = now_seconds();
            const int rc = dir == 0 ? vae_encode(v, x, batch, size, size, mean, NULL, &err)
                                    : vae_decode(v, z, batch, size / fct, size / fct, xo, &err);
            if (rc) FATAL("%s", err.msg);
            if (k) times[k - 1] = now_seconds() - t0;
        }
        sp[dir] = spread_of(times, reps);
        t[dir] = sp[dir].median;
    }
    free(times);
    const double ge = 2 * vae_encode_macs(&c, size, size) / 1e9, gd = 2 * vae_decode_macs(&c, size, size) / 1e9;
    printf("{\"bench\":\"vae\",\"vae\":\"%s\",\"device\":\"%s\",\"precision\":\"%s\",\"threads\":%d,\"batch\":%d,"
           "\"image_size\":%d,\"encode_img_per_s\":%.4f,\"decode_img_per_s\":%.4f,\"encode_gflop_per_img\":%.3f,"
           "\"decode_gflop_per_img\":%.3f,\"encode_gflops\":%.1f,\"decode_gflops\":%.1f,\"reps\":%d,"
           "\"encode_img_per_s_min\":%.4f,\"encode_img_per_s_max\":%.4f,\"decode_img_per_s_min\":%.4f,"
           "\"decode_img_per_s_max\":%.4f,\"peak_rss_mb\":%.0f}\n",
           vae ? vae : "random sd-vae-ft-ema config", be->name, be->precision(), num_threads(), batch, size,
           batch / t[0], batch / t[1], ge, gd, ge * batch / t[0], gd * batch / t[1], reps, batch / sp[0].max,
           batch / sp[0].min, batch / sp[1].max, batch / sp[1].min, peak_rss_bytes() / 1048576.0);
    free(x); free(z); free(mean); free(xo);
    vae_free(v);
    return 0;
}

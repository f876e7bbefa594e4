// mala encode: an ImageNet-layout folder (or Fashion-MNIST, for tests) encoded once through the
// VAE into a latent set (data/latents.h), the way fast-DiT's extract_features.py does, but
// keeping the posterior (mean and log-variance) so training draws a fresh z every step.
//
// Images are cropped with ADM's center_crop_arr (dataset_open), encoded in batches and written a
// shard at a time: a shard counts once it is fsync'ed and latents.json says so, so a stopped run
// loses at most the shard in flight and running the same command again continues there.
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "data/dataset.h"
#include "core/half.h"
#include "formats/image_io.h"
#include "data/latents.h"
#include "core/progress.h"
#include "cpu/cpu_threads.h"

// FNV-1a of the image list (label and path of each, or the IDX file and count) and the crop size.
static uint64_t list_hash(const Dataset *ds) {
    uint64_t h = 0xcbf29ce484222325ull;
#define MIX(p, n) for (size_t k_ = 0; k_ < (n); k_++) h = (h ^ ((const unsigned char *)(p))[k_]) * 0x100000001b3ull
    MIX(&ds->image_size, sizeof ds->image_size);
    MIX(ds->source, strlen(ds->source) + 1);
    for (int64_t i = 0; i < ds->n; i++) {
        int32_t y = dataset_label(ds, i);
        const char *p = dataset_path(ds, i);
        MIX(&y, sizeof y);
        if (p) MIX(p, strlen(p) + 1);
        else MIX(&i, sizeof i);
    }
#undef MIX
    return h;
}

// Images first .. first+n-1 with their views as float [n * views, C, S, S] (view 1 mirrored);
// gray images are replicated to the VAE's channels.
static void load_views(const Dataset *ds, int64_t first, int n, int views, int channels, float *x, uint8_t *u8) {
    const int S = ds->image_size, dc = ds->channels;
    const size_t px = (size_t)S * S, per = (size_t)channels * px;
    int failed = 0;
    MalaErr first_err = {{0}};
    #pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        uint8_t *u = u8 + (size_t)i * px * dc;
        MalaErr err;
        if (dataset_get_u8(ds, first + i, u, &err)) {
            #pragma omp critical
            if (!failed++) first_err = err;
            continue;
        }
        for (int v = 0; v < views; v++) {
            float *dst = x + ((size_t)i * views + v) * per;
            image_u8_to_float(dst, u, S, S, dc, v);
            for (int c = dc; c < channels; c++) memcpy(dst + c * px, dst, px * sizeof(float));
        }
    }
    if (failed)
        FATAL("%s (the shards before this one are kept: fix or remove the file and run the same command again)",
              first_err.msg);
}

int cmd_encode(int argc, char **argv) {
    const char *data = NULL, *vae = NULL, *out = NULL, *dtype = "f16", *device = NULL, *precision = NULL;
    int size = 256, hflip = 0, batch = 0, shard = 1024, threads = 0, limit = 0;
    Opt opts[] = {
        {"--data", OPT_STR, &data, "DIR", "image folder root/<class>/<image> (or fashion-mnist, with --image-size 32)",
         ARG_ALIAS("--data-path")},
        {"--vae", OPT_STR, &vae, "FILE", "diffusers AutoencoderKL weights (diffusion_pytorch_model.safetensors)"},
        {"--out", OPT_STR, &out, "LATENTS", "the latent set's directory (created; an unfinished one is continued)"},
        {"--image-size", OPT_INT, &size, "S", "center crop (ADM's center_crop_arr); latents are S/8 x S/8", ARG_MIN(8)},
        {"--hflip", OPT_FLAG, &hflip, NULL, "also encode every image mirrored (2 views; training picks one per step)"},
        {"--dtype", OPT_STR, &dtype, "f16|f32", "storage of mean and logvar"},
        {"--batch", OPT_INT, &batch, "N", "VAE passes of N images (default: the most up to 8 that fit 2 GiB)", ARG_MIN(0)},
        {"--shard", OPT_INT, &shard, "N", "images per committed shard (what a stop can lose)", ARG_MIN(1),
         ARG_MAX(1 << 24)},
        {"--limit", OPT_INT, &limit, "N", "encode only N images spread over the data (0 = all)", ARG_MIN(0)},
        OPT_THREADS(&threads), OPT_DEVICE(&device), OPT_PRECISION(&precision),
    };
    const int nopts = (int)(sizeof opts / sizeof opts[0]);
    args_parse("usage: mala encode --data DIR --vae FILE --out LATENTS [flags]\n\n"
               "Encodes an image folder once through the VAE: the posterior mean and log-variance of\n"
               "every image (and of its mirror with --hflip), for `mala train --data LATENTS`.\n"
               "Run the same command again to continue a stopped encode.",
               opts, nopts, argc, argv, 1);
    if (!data || !vae || !out) FATAL("mala encode: --data, --vae and --out are required");
    if (strcmp(dtype, "f16") && strcmp(dtype, "f32")) FATAL("--dtype %s: expected f16 or f32", dtype);
    set_threads(threads);
    const Backend *be = backend_select(device, precision);
    MalaErr err;
    VaeConfig c;
    vae_peek(vae, &c);
    const int fct = vae_factor(&c), views = hflip ? 2 : 1;
    if (size % fct) FATAL("--image-size %d: the VAE needs a multiple of %d", size, fct);
    const int fmnist = !strncmp(data, "fashion-mnist", 13);
    Dataset *ds = dataset_open(data, size, fmnist ? 0 : c.in_channels, &err);
    if (!ds) FATAL("%s", err.msg);
    if (ds->views) FATAL("--data %s is a latent set already; give the image folder it was encoded from", data);
    if (ds->channels != c.in_channels && ds->channels != 1)
        FATAL("%s: images of %d channels; the VAE takes %d", data, ds->channels, c.in_channels);
    if (limit > 0 && dataset_limit(ds, limit, &err)) FATAL("%s", err.msg);

    LatentManifest m = {0};
    m.count = ds->n;
    m.views = views;
    m.f16 = !strcmp(dtype, "f16");
    m.c = c.latent;
    m.h = m.w = size / fct;
    m.image_size = size;
    m.scale = c.scale;  // the VAE's scaling_factor (config.json), SD-VAE's 0.18215 by default
    m.num_classes = ds->num_classes;
    m.shard_images = shard;
    snprintf(m.crop, sizeof m.crop, "%s", fmnist ? "fashion_mnist_pad_32" : "adm_center_crop_arr");
    const char *base = strrchr(vae, '/');
    snprintf(m.vae_file, sizeof m.vae_file, "%s", base ? base + 1 : vae);
    snprintf(m.source, sizeof m.source, "%s", ds->source);
    if (latent_file_hash(vae, &m.vae_hash, &m.vae_bytes, &err)) FATAL("%s", err.msg);
    m.list_hash = list_hash(ds);
    int32_t *labels = xmalloc(sizeof(int32_t) * (size_t)ds->n);
    for (int64_t i = 0; i < ds->n; i++) labels[i] = dataset_label(ds, i);
    make_dirs(out);
    LatentWriter w;
    if (latent_writer_open(&w, out, &m, ds->class_names, labels, &err)) FATAL("%s", err.msg);
    free(labels);

    const size_t per_view = (size_t)m.c * m.h * m.w;
    const double bytes_per_image = 2.0 * views * per_view * (m.f16 ? 2 : 4) + 4;
    const int64_t nshards = (m.count + shard - 1) / shard;
    char hb[32], tb[32];
    human_bytes(hb, sizeof hb, bytes_per_image);
    human_bytes(tb, sizeof tb, bytes_per_image * m.count);
    fprintf(stderr, "encode: %lld images of %s (%d classes) at %dx%d%s -> %s: latents [%d, %d, %d] %s, %s per image, "
            "%s in all\n", (long long)m.count, data, m.num_classes, size, size, hflip ? " and mirrored" : "", out, m.c, m.h,
            m.w, m.f16 ? "float16" : "float32", hb, tb);
    if (w.m.complete) {
        fprintf(stderr, "%s is complete already (%lld images): nothing to do\n", out, (long long)m.count);
        latent_writer_close(&w);
        dataset_close(ds);
        return 0;
    }
    if (w.m.shards_done)
        fprintf(stderr, "continuing at shard %lld of %lld (image %lld)\n", (long long)w.m.shards_done + 1,
                (long long)nshards, (long long)(w.m.shards_done * shard));

    int vb;
    Vae *v = vae_open_for(vae, be, batch, (shard < m.count ? shard : (int)m.count) * views, size, size, &vb);
    const int pass = vb / views > 0 ? vb / views : 1;  // images per VAE call (views * pass latents)
    const size_t px = (size_t)size * size, per_in = (size_t)c.in_channels * px;
    float *x = xmalloc(sizeof(float) * per_in * pass * views);
    uint8_t *u8 = xmalloc(px * ds->channels * pass);
    float *mean = xmalloc(sizeof(float) * per_view * views * shard), *logvar = xmalloc(sizeof(float) * per_view * views * shard);
    double f16_err = 0, min_std = INFINITY, t0 = now_seconds();
    const int64_t start = w.m.shards_done * shard;
    Progress pg;
    progress_init(&pg, stderr);
    for (int64_t s = w.m.shards_done; s < nshards; s++) {
        const int64_t r0 = s * shard, r1 = r0 + shard < m.count ? r0 + shard : m.count;
        for (int64_t i = r0; i < r1; i += pass) {
            const int nb = (int)(r1 - i < pass ? r1 - i : pass);
            load_views(ds, i, nb, views, c.in_channels, x, u8);
            const size_t at = (size_t)(i - r0) * views * per_view;
            if (vae_encode(v, x, nb * views, size, size, mean + at, logvar + at, &err)) FATAL("%s", err.msg);
            const int64_t done = i + nb - start;
            const double dt = now_seconds() - t0, rate = done / dt;
            char eta[32];
            progress_format_eta(eta, sizeof eta, (m.count - i - nb) / rate);
            progress_update(&pg, i + nb == m.count, "encoding image %lld/%lld (shard %lld/%lld)  %.2f img/s  ETA %s",
                            (long long)(i + nb), (long long)m.count, (long long)s + 1, (long long)nshards, rate, eta);
        }
        const size_t nv = (size_t)(r1 - r0) * views * per_view;
        for (size_t k = 0; m.f16 && k < nv; k++) {  // how much float16 moves a mean, against the posterior std
            const double e = fabs((double)half_to_f32(f32_to_half(mean[k])) - mean[k]), sd = exp(0.5 * logvar[k]);
            if (e > f16_err) f16_err = e;
            if (sd < min_std) min_std = sd;
        }
        if (latent_writer_put(&w, r0, r1 - r0, mean, logvar, &err) || latent_writer_commit(&w, s + 1, &err))
            FATAL("%s", err.msg);
    }
    progress_break(&pg);
    const double dt = now_seconds() - t0;
    struct stat st;
    double on_disk = 0;
    const char *files[] = {"mean.npy", "logvar.npy", "labels.npy"};
    for (int k = 0; k < 3; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", out, files[k]);
        if (stat(p, &st) == 0) on_disk += (double)st.st_blocks * 512;
    }
    human_bytes(tb, sizeof tb, on_disk);
    fprintf(stderr, "done: %lld images in %.1f s (%.2f img/s); %s on disk, %.0f bytes per image\n",
            (long long)(m.count - start), dt, (m.count - start) / dt, tb, on_disk / m.count);
    if (m.f16 && isfinite(min_std))
        fprintf(stderr, "float16: the largest rounding of a mean is %.3g, %.3g of the smallest posterior std (%.3g)%s\n",
                f16_err, f16_err / min_std, min_std,
                f16_err > 0.1 * min_std ? "; that is not small: consider --dtype f32" : "");
    free(x); free(u8); free(mean); free(logvar);
    vae_free(v);
    latent_writer_close(&w);
    dataset_close(ds);
    return 0;
}

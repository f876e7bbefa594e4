// The AutoencoderKL (model/vae.h) against tools/ref/ref_vae.py's reference tensors on the tiny config
// (both attention namings), the full-size config's names lists (every tensor used, none missing,
// without allocating the weights), malformed files, and `mala vae encode|decode` through the CLI.
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "core/backend.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "model/vae.h"

#define FIX "tests/fixtures/"
#define TOL 1e-4

// A reference tensor of vae_tiny_ref.safetensors (caller frees).
static float *ref_tensor(const char *name, int64_t *shape) {
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, FIX "vae_tiny_ref.safetensors", &err) == 0, "%s", err.msg);
    const StTensor *t = st_find(&f, name);
    ck_assert_msg(t != NULL, "no %s in the reference file", name);
    float *x = malloc(sizeof(float) * (size_t)st_numel(t));
    ck_assert(st_read_f32(&f, t, x, &err) == 0);
    for (int i = 0; i < 4; i++) shape[i] = t->shape[i];
    st_close(&f);
    return x;
}

// Channels [c0, c1) of x [N, C, hw] as one array (for the per-channel comparisons).
static float *channels(const float *x, int N, int C, size_t hw, int c0, int c1) {
    float *o = malloc(sizeof(float) * (size_t)N * (c1 - c0) * hw);
    for (int n = 0; n < N; n++)
        memcpy(o + (size_t)n * (c1 - c0) * hw, x + ((size_t)n * C + c0) * hw, sizeof(float) * (c1 - c0) * hw);
    return o;
}

static void check_against_ref(const char *file, int max_batch) {
    MalaErr err;
    int64_t xs[4], zs[4], ms[4];
    float *x = ref_tensor("in.x", xs), *z = ref_tensor("in.z", zs);
    float *rmean = ref_tensor("out.mean", ms), *rlogvar = ref_tensor("out.logvar", ms), *rx = ref_tensor("out.x", xs);
    const int N = (int)xs[0], H = (int)xs[2], Wd = (int)xs[3];
    Vae *v = vae_load(file, backend_cpu(), max_batch, H, Wd, &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    const size_t hw = (size_t)ms[2] * ms[3], nlat = (size_t)N * 4 * hw, nx = (size_t)N * 3 * H * Wd;
    float *mean = malloc(sizeof(float) * nlat), *logvar = malloc(sizeof(float) * nlat), *dx = malloc(sizeof(float) * nx);
    ck_assert_msg(vae_encode(v, x, N, H, Wd, mean, logvar, &err) == 0, "%s", err.msg);
    const double e_mean = tu_nerr(mean, rmean, nlat, 1e-6);
    // logvar: channels 0, 1 unclamped (normalised); channels 2, 3 straddle the clamp (elementwise;
    // the reference's clamped values are matched within TOL and never passed).
    float *a = channels(logvar, N, 4, hw, 0, 2), *b = channels(rlogvar, N, 4, hw, 0, 2);
    const double e_lv01 = tu_nerr(a, b, (size_t)N * 2 * hw, 1e-6);
    free(a); free(b);
    int clamped = 0;
    for (int n = 0; n < N; n++)
        for (int c = 2; c < 4; c++)
            for (size_t p = 0; p < hw; p++) {
                const size_t i = ((size_t)n * 4 + c) * hw + p;
                const double r = rlogvar[i];
                if (r == VAE_LOGVAR_MIN || r == VAE_LOGVAR_MAX) {
                    // never past the bound; at it, or (a value that straddles it by rounding) within TOL
                    clamped++;
                    ck_assert_msg(logvar[i] >= VAE_LOGVAR_MIN && logvar[i] <= VAE_LOGVAR_MAX &&
                                      fabs(logvar[i] - r) <= TOL * fabs(r),
                                  "%s: logvar[%zu] %.9g, the clamp gives %g", file, i, logvar[i], r);
                } else {
                    ck_assert_msg(fabs(logvar[i] - r) <= TOL * fmax(1.0, fabs(r)), "%s: logvar[%zu] %g vs %g", file, i,
                                  logvar[i], r);
                }
            }
    ck_assert_msg(clamped > 0, "the reference exercises the clamp");
    ck_assert_msg(vae_decode(v, z, N, (int)zs[2], (int)zs[3], dx, &err) == 0, "%s", err.msg);
    const double e_x = tu_nerr(dx, rx, nx, 1e-6);
    fprintf(stderr, "%s (batch %d): mean %.2e, logvar[0:2] %.2e (%d clamped values), decode %.2e\n", file,
            max_batch, e_mean, e_lv01, clamped, e_x);
    ck_assert_msg(e_mean < TOL, "%s: mean error %g", file, e_mean);
    ck_assert_msg(e_lv01 < TOL, "%s: logvar error %g", file, e_lv01);
    ck_assert_msg(e_x < TOL, "%s: decode error %g", file, e_x);
    vae_free(v);
    free(x); free(z); free(rmean); free(rlogvar); free(rx); free(mean); free(logvar); free(dx);
}

START_TEST(test_tiny_new_names) { check_against_ref(FIX "vae_tiny.safetensors", 2); }
END_TEST
START_TEST(test_tiny_old_names) { check_against_ref(FIX "vae_tiny_old.safetensors", 2); }
END_TEST
// One image per chunk: the batch loop gives the same result.
START_TEST(test_tiny_batch_one) { check_against_ref(FIX "vae_tiny.safetensors", 1); }
END_TEST

START_TEST(test_tiny_config) {
    StFile f;
    MalaErr err;
    VaeConfig c;
    ck_assert_msg(st_open(&f, FIX "vae_tiny_old.safetensors", &err) == 0, "%s", err.msg);
    ck_assert_msg(vae_config_from_file(&c, &f, &err) == 0, "%s", err.msg);
    st_close(&f);
    ck_assert_int_eq(c.levels, 4);
    ck_assert_int_eq(c.ch[0], 4); ck_assert_int_eq(c.ch[1], 8); ck_assert_int_eq(c.ch[2], 16); ck_assert_int_eq(c.ch[3], 16);
    ck_assert_int_eq(c.layers, 2);
    ck_assert_int_eq(c.groups, 2);
    ck_assert_int_eq(c.latent, 4);
    ck_assert_int_eq(c.naming, VAE_NAMES_OLD);
    ck_assert_int_eq(c.attn_conv, 1);
    VaeTable t;
    ck_assert(vae_table_build(&t, &c, &err) == 0);
    ck_assert_int_eq(t.n, 248);
    ck_assert_uint_eq(t.floats, 85675);
    vae_table_free(&t);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// The real config's names lists: the config derived from the shapes alone, then the table equals
// the list (same names, same shapes, same order), and the parameter count is the real file's.

typedef struct { int n; char (*name)[96]; int ndim[300]; int64_t shape[300][4]; } NameList;

static void names_read(NameList *l, const char *path) {
    FILE *fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "missing %s", path);
    l->n = 0;
    l->name = malloc(sizeof *l->name * 300);
    char line[2048];
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        ck_assert(l->n < 300);
        char *tok = strtok(line, " \n");
        snprintf(l->name[l->n], sizeof l->name[0], "%s", tok);
        int d = 0;
        while ((tok = strtok(NULL, " \n")) && d < 4) l->shape[l->n][d++] = atoll(tok);
        l->ndim[l->n++] = d;
    }
    fclose(fp);
}

static int list_shape(void *ctx, const char *name, int64_t shape[4]) {
    const NameList *l = ctx;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->name[i], name)) {
            memcpy(shape, l->shape[i], sizeof(int64_t) * 4);
            return l->ndim[i];
        }
    return -1;
}

static void check_names(const char *path, VaeNaming naming, int conv) {
    NameList l;
    names_read(&l, path);
    MalaErr err;
    VaeConfig c, sd;
    ck_assert_msg(vae_config_derive(&c, list_shape, &l, path, VAE_DEFAULT_GROUPS, &err) == 0, "%s", err.msg);
    vae_config_sd(&sd);
    sd.naming = naming;
    sd.attn_conv = conv;
    ck_assert_msg(!memcmp(&c, &sd, sizeof c), "%s: the derived config is not sd-vae-ft-ema's", path);
    VaeTable t;
    ck_assert(vae_table_build(&t, &c, &err) == 0);
    ck_assert_int_eq(t.n, l.n);
    size_t params = 0;
    for (int i = 0; i < t.n; i++) {
        ck_assert_msg(!strcmp(t.p[i].name, l.name[i]), "%s: tensor %d is '%s', the table has '%s'", path, i, l.name[i],
                      t.p[i].name);
        ck_assert_int_eq(t.p[i].ndim, l.ndim[i]);
        for (int d = 0; d < l.ndim[i]; d++) ck_assert_int_eq(t.p[i].shape[d], l.shape[i][d]);
        params += t.p[i].numel;
    }
    ck_assert_uint_eq(params, 83653863);
    ck_assert_uint_eq(t.floats, 83653863);  // every float of the buffer belongs to one tensor
    // The weight layout covers each float once (the fused qkv included): sort-free check by marks.
    // (one assertion per tensor: Check's assertions are slow in an 84M-iteration loop)
    unsigned char *mark = calloc(t.floats, 1);
    for (int i = 0; i < t.n; i++) {
        int overlap = 0;
        for (size_t k = 0; k < t.p[i].numel; k++) overlap |= mark[t.p[i].offset + k]++;
        ck_assert_msg(!overlap, "%s: '%s' overlaps another tensor", path, t.p[i].name);
    }
    free(mark);
    vae_table_free(&t);
    free(l.name);
}

START_TEST(test_full_names_new) { check_names(FIX "vae_sd_names_new.txt", VAE_NAMES_NEW, 0); }
END_TEST
START_TEST(test_full_names_old) { check_names(FIX "vae_sd_names_old.txt", VAE_NAMES_OLD, 0); }
END_TEST
START_TEST(test_full_names_oldconv) { check_names(FIX "vae_sd_names_oldconv.txt", VAE_NAMES_OLD, 1); }
END_TEST

START_TEST(test_full_plan) {
    // The real config's cost and memory at 256x256 (docs/math/vae.md): MACs and the largest map.
    VaeConfig c;
    vae_config_sd(&c);
    const double enc = vae_encode_macs(&c, 256, 256), dec = vae_decode_macs(&c, 256, 256);
    ck_assert_msg(fabs(enc / 1e9 - 136.4) < 0.1, "encoder %.2f GMAC, docs/math/vae.md: 136.4", enc / 1e9);
    ck_assert_msg(fabs(dec / 1e9 - 311.1) < 0.1, "decoder %.2f GMAC, docs/math/vae.md: 311.1", dec / 1e9);
    const size_t one = vae_activation_bytes(&c, backend_cpu(), 1, 256, 256);
    // three maps of [256, 256, 256] (64 MiB each) plus scratch
    ck_assert_msg(one >= 3 * (64u << 20) && one < 3 * (64u << 20) + (64u << 20), "%zu bytes per image", one);
    ck_assert_int_eq(vae_batch_for(&c, backend_cpu(), 256, 256, 4 * one, 64), 4);
    ck_assert_uint_eq(vae_weight_bytes(&c), 4 * 83653863u);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// Malformed files: each refused with the file and the first bad tensor named.

static char tmp_file[512];

// Writes the tiny model with tensor `drop` left out, or `reshape` given a wrong shape.
static void write_variant(const char *drop, const char *reshape, const char *extra) {
    StFile f;
    MalaErr err;
    ck_assert(st_open(&f, FIX "vae_tiny.safetensors", &err) == 0);
    StWriter *w = st_writer_new();
    st_writer_meta(w, "norm_num_groups", "2");
    for (int i = 0; i < f.n; i++) {
        const StTensor *t = &f.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        float *x = malloc(sizeof(float) * (size_t)st_numel(t));
        ck_assert(st_read_f32(&f, t, x, &err) == 0);
        int64_t shape[ST_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        int ndim = t->ndim;
        if (reshape && !strcmp(t->name, reshape)) { shape[0] = 1; shape[1] = st_numel(t); ndim = 2; }
        st_writer_add_copy(w, t->name, ST_F32, shape, ndim, x);
        free(x);
    }
    if (extra) st_writer_add_copy(w, extra, ST_F32, (int64_t[]){1}, 1, (float[]){0});
    snprintf(tmp_file, sizeof tmp_file, "%s/bad.safetensors", tu_tmp);
    ck_assert_msg(st_writer_save(w, tmp_file, &err) == 0, "%s", err.msg);
    st_writer_free(w);
    st_close(&f);
}

static void expect_refused(const char *want1, const char *want2) {
    MalaErr err;
    Vae *v = vae_load(tmp_file, backend_cpu(), 1, 32, 24, &err);
    ck_assert_msg(v == NULL, "a malformed file was accepted");
    ck_assert_msg(strstr(err.msg, tmp_file) && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
                  "message: %s", err.msg);
}

START_TEST(test_malformed) {
    tu_make_tmpdir("vae");
    write_variant("decoder.up_blocks.1.resnets.2.conv1.bias", NULL, NULL);
    expect_refused("'decoder.up_blocks.1.resnets.2.conv1.bias'", "missing");
    write_variant(NULL, "decoder.mid_block.attentions.0.to_k.weight", NULL);
    expect_refused("'decoder.mid_block.attentions.0.to_k.weight'", "shape");
    write_variant(NULL, NULL, "encoder.extra.weight");
    expect_refused("'encoder.extra.weight'", "not part");
    write_variant("encoder.conv_in.weight", NULL, NULL);
    expect_refused("'encoder.conv_in.weight'", "missing");
    // truncated: the file cut short inside the data area
    size_t len;
    char *buf = tu_read_file(FIX "vae_tiny.safetensors", &len);
    FILE *fp = fopen(tmp_file, "wb");
    ck_assert(fwrite(buf, 1, len - 1000, fp) == len - 1000);
    fclose(fp);
    free(buf);
    expect_refused("tensor '", "past the end");
    // not a VAE at all
    write_variant(NULL, NULL, NULL);
    MalaErr err;
    ck_assert(vae_load(FIX "sample_model.safetensors", backend_cpu(), 1, 32, 32, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "sample_model.safetensors") && strstr(err.msg, "'encoder."), "message: %s", err.msg);
    // sizes outside the plan
    Vae *v = vae_load(tmp_file, backend_cpu(), 1, 32, 24, &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    float x[3 * 40 * 24] = {0}, m[4 * 5 * 3];
    ck_assert(vae_encode(v, x, 1, 40, 24, m, NULL, &err) != 0);
    ck_assert_msg(strstr(err.msg, "40x24"), "%s", err.msg);
    ck_assert(vae_encode(v, x, 1, 20, 24, m, NULL, &err) != 0);
    ck_assert_msg(strstr(err.msg, "multiple of 8"), "%s", err.msg);
    vae_free(v);
    tu_rm_tmpdir();
}
END_TEST

// ---------------------------------------------------------------------------------------------
// mala vae encode | decode through the CLI ($MALA_BIN, default ./mala).

static char g_err[1 << 14];

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...) {
    char args[3000], cmd[4000], ep[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(ep, sizeof ep, "%s/.stderr", tu_tmp);
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>%s </dev/null", getenv("MALA_BIN") ? getenv("MALA_BIN") : "./mala",
             args, ep);
    const int st = system(cmd);
    FILE *f = fopen(ep, "rb");
    const size_t n = f ? fread(g_err, 1, sizeof g_err - 1, f) : 0;
    if (f) fclose(f);
    g_err[n] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// One "error:" line holding the phrases, a non-zero exit.
static void expect_cli_error(int rc, const char *p1, const char *p2) {
    const char *nl = strchr(g_err, '\n');
    ck_assert_msg(rc == 1 || rc == 2, "exit %d (expected an error):\n%s", rc, g_err);
    ck_assert_msg(!strncmp(g_err, "error: ", 7) && nl && !nl[1], "expected one error line, got:\n%s", g_err);
    ck_assert_msg(strstr(g_err, p1) && (!p2 || strstr(g_err, p2)), "message: %s", g_err);
}

static void save_npy(const char *path, const float *x, const int64_t *shape) {
    NpyArray a;
    MalaErr err;
    ck_assert(npy_wrap(&a, "<f4", (void *)x, 4, shape) == 0);
    ck_assert_msg(npy_save(path, &a, &err) == 0, "%s", err.msg);
}

static float *load_f32(const char *path, const char *key, int64_t *shape) {
    NpyArray a;
    MalaErr err;
    ck_assert_msg((key ? npz_load(path, key, &a, &err) : npy_load(path, &a, &err)) == 0, "%s", err.msg);
    ck_assert_str_eq(a.dtype, "<f4");
    ck_assert_int_eq(a.ndim, 4);
    memcpy(shape, a.shape, sizeof(int64_t) * 4);
    float *x = malloc(a.nbytes);
    memcpy(x, a.data, a.nbytes);
    npy_free(&a);
    return x;
}

// The reference latents in.z times mul, decoded through the VAE `path` names (*n floats; caller frees).
static float *decode_z(const char *path, float mul, size_t *n) {
    int64_t zs[4];
    float *z = ref_tensor("in.z", zs);
    const int N = (int)zs[0], h = (int)zs[2], w = (int)zs[3];
    for (int64_t i = 0; i < zs[0] * zs[1] * zs[2] * zs[3]; i++) z[i] *= mul;
    MalaErr err;
    Vae *v = vae_load(path, backend_cpu(), N, 8 * h, 8 * w, &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    *n = (size_t)N * 3 * 64 * h * w;
    float *x = malloc(sizeof(float) * *n);
    ck_assert_msg(vae_decode(v, z, N, h, w, x, &err) == 0, "%s", err.msg);
    vae_free(v);
    free(z);
    return x;
}

static void put_file(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f && fwrite(buf, 1, n, f) == n, "%s", path);
    fclose(f);
}

// A diffusers folder in tu_tmp/dir: the fixture's config.json with `from` replaced by `to` (NULL:
// unchanged; to "": no config.json) and a copy of `weights` as diffusion_pytorch_model.safetensors.
static const char *make_folder(const char *dir, const char *weights, const char *from, const char *to) {
    static char root[512];
    snprintf(root, sizeof root, "%s/%s", tu_tmp, dir);
    mkdir(root, 0755);
    char path[700];
    size_t n;
    char *buf = tu_read_file(weights, &n);
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", root);
    put_file(path, buf, n);
    free(buf);
    if (to && !*to) return root;
    char *raw = tu_read_file(FIX "vae_tiny_bin/config.json", &n), cfg[4096], out[4096] = "";
    snprintf(cfg, sizeof cfg, "%.*s", (int)n, raw);  // the file's bytes, terminated
    free(raw);
    const char *at = from ? strstr(cfg, from) : NULL;
    if (at) snprintf(out, sizeof out, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
    else snprintf(out, sizeof out, "%s", cfg);
    snprintf(path, sizeof path, "%s/config.json", root);
    put_file(path, out, strlen(out));
    return root;
}

// diffusers' VAE as published: a folder with config.json and diffusion_pytorch_model.bin (torch.save,
// tools/ref/make_vae_folder_fixture.py) or .safetensors, or that file named alone (its config.json
// beside it), decodes as the same weights in our file, bit for bit; config.json gives
// norm_num_groups (the .bin has no metadata) and scaling_factor: 0.5 decodes z as the default
// decodes z * 0.18215 / 0.5. A folder without config.json, bad JSON, a field of the wrong type or
// one that contradicts the weights: one line naming config.json and the key.
START_TEST(test_vae_folder) {
    tu_make_tmpdir("vae");
    size_t na, nb;
    float *ref_old = decode_z(FIX "vae_tiny_old.safetensors", 1, &na);
    float *x = decode_z(FIX "vae_tiny_bin", 1, &nb);
    ck_assert_msg(na == nb && !memcmp(x, ref_old, na * sizeof(float)), "the .bin folder decodes otherwise");
    free(x);
    x = decode_z(FIX "vae_tiny_bin/diffusion_pytorch_model.bin", 1, &nb);
    ck_assert_msg(na == nb && !memcmp(x, ref_old, na * sizeof(float)), "the .bin named alone decodes otherwise");
    free(x);
    free(ref_old);
    VaeConfig c;
    MalaErr err;
    ck_assert_msg(vae_config_read(FIX "vae_tiny_bin", &c, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(c.groups, 2);
    ck_assert(c.scale == 0.18215f);
    float *ref = decode_z(FIX "vae_tiny.safetensors", 1, &na);
    x = decode_z(make_folder("st", FIX "vae_tiny.safetensors", NULL, NULL), 1, &nb);
    ck_assert_msg(na == nb && !memcmp(x, ref, na * sizeof(float)), "the .safetensors folder decodes otherwise");
    free(x);
    // another scaling factor: decode(z / 0.5)
    const char *half = make_folder("half", FIX "vae_tiny.safetensors", "\"scaling_factor\": 0.18215",
                                   "\"scaling_factor\": 0.5");
    ck_assert_msg(vae_config_read(half, &c, &err) == 0 && c.scale == 0.5f, "%s", err.msg);
    x = decode_z(half, 1, &nb);
    float *y = decode_z(FIX "vae_tiny.safetensors", 0.18215f / 0.5f, &na);
    ck_assert_msg(na == nb && tu_nerr(x, y, na, 1e-6) < 1e-5, "scaling_factor 0.5: nerr %g", tu_nerr(x, y, na, 1e-6));
    ck_assert_msg(tu_nerr(x, ref, na, 1e-6) > 1e-2, "scaling_factor 0.5 decodes as 0.18215");
    free(x); free(y); free(ref);
    // refused, one line each
    static const struct { const char *dir, *from, *to, *want; } bad[] = {
        {"nocfg", NULL, "", "a folder without config.json"},
        {"badjson", "{", "[", "config.json: not valid JSON"},
        {"strscale", "0.18215", "\"big\"", "config.json: \"scaling_factor\" must be a number"},
        {"zeroscale", "0.18215", "0", "config.json: \"scaling_factor\" must be a number in (0, 1000]"},
        {"latent", "\"latent_channels\": 4", "\"latent_channels\": 8", "config.json: \"latent_channels\" is 8, the "
                                                                         "weights' is 4"},
        {"unet", "AutoencoderKL", "UNet2DConditionModel", "config.json: \"_class_name\" is \"UNet2DConditionModel\""},
        {"groups", "\"norm_num_groups\": 2", "\"norm_num_groups\": \"2\"", "\"norm_num_groups\" must be an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *dir = make_folder(bad[i].dir, FIX "vae_tiny.safetensors", bad[i].from, bad[i].to);
        ck_assert_msg(vae_config_read(dir, &c, &err) != 0, "%s: accepted", bad[i].dir);
        ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, bad[i].want) && !strchr(err.msg, '\n'), "%s: %s",
                      bad[i].dir, err.msg);
        ck_assert_msg(vae_load(dir, backend_cpu(), 1, 32, 32, &err) == NULL, "%s: loaded", bad[i].dir);
    }
    tu_rm_tmpdir();
}
END_TEST

START_TEST(test_cli_decode_encode) {
    tu_make_tmpdir("vae_cli");
    int64_t xs[4], zs[4], ms[4], s[4];
    float *x = ref_tensor("in.x", xs), *z = ref_tensor("in.z", zs), *rx = ref_tensor("out.x", xs);
    float *rmean = ref_tensor("out.mean", ms), *rlogvar = ref_tensor("out.logvar", ms);
    char p[400], q[400];
    snprintf(p, sizeof p, "%s/z.npy", tu_tmp);
    save_npy(p, z, zs);
    snprintf(q, sizeof q, "%s/x.npy", tu_tmp);
    ck_assert_int_eq(run("vae decode --vae " FIX "vae_tiny_old.safetensors --in %s --out %s", p, q), 0);
    float *dx = load_f32(q, NULL, s);
    ck_assert(s[0] == xs[0] && s[1] == 3 && s[2] == xs[2] && s[3] == xs[3]);
    const double ed = tu_nerr(dx, rx, (size_t)xs[0] * 3 * xs[2] * xs[3], 1e-6);
    ck_assert_msg(ed < TOL, "decode through the CLI: %g", ed);
    // the PNG grid: two images side by side with make_grid's 2-pixel padding
    snprintf(q, sizeof q, "%s/grid.png", tu_tmp);
    ck_assert_int_eq(run("vae decode --vae " FIX "vae_tiny.safetensors --in %s --out %s --batch 1", p, q), 0);
    int gw, gh;
    MalaErr err;
    ck_assert_msg(image_check(q, &gw, &gh, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(gw, 2 + 2 * (24 + 2));
    ck_assert_int_eq(gh, 2 + 32 + 2);
    // encode from an array
    snprintf(p, sizeof p, "%s/in.npy", tu_tmp);
    save_npy(p, x, xs);
    snprintf(q, sizeof q, "%s/m.npz", tu_tmp);
    ck_assert_int_eq(run("vae encode --vae " FIX "vae_tiny.safetensors --in %s --out %s", p, q), 0);
    float *mean = load_f32(q, "mean", s), *logvar = load_f32(q, "logvar", s);
    ck_assert(s[0] == ms[0] && s[1] == 4 && s[2] == ms[2] && s[3] == ms[3]);
    const size_t nl = (size_t)ms[0] * 4 * ms[2] * ms[3];
    const double em = tu_nerr(mean, rmean, nl, 1e-6);
    ck_assert_msg(em < TOL, "encode through the CLI: mean %g", em);
    for (size_t i = 0; i < nl; i++)
        ck_assert_msg(fabs(logvar[i] - rlogvar[i]) <= TOL * fmax(1.0, fabs(rlogvar[i])), "logvar[%zu] %g vs %g", i,
                      logvar[i], rlogvar[i]);
    free(x); free(z); free(rx); free(rmean); free(rlogvar); free(dx); free(mean); free(logvar);
    tu_rm_tmpdir();
}
END_TEST

// A folder of images (one class folder and one loose image) is center-cropped as center_crop_arr
// and encoded in sorted order: the same numbers as cropping and encoding here.
START_TEST(test_cli_encode_folder) {
    tu_make_tmpdir("vae_dir");
    char dir[400], p[500], q[400];
    snprintf(dir, sizeof dir, "%s/imgs", tu_tmp);
    ck_assert(mkdir(dir, 0755) == 0);
    snprintf(p, sizeof p, "%s/b_class", dir);
    ck_assert(mkdir(p, 0755) == 0);
    const int sizes[3][2] = {{40, 36}, {32, 50}, {24, 24}};
    const char *names[3] = {"b_class/x.png", "b_class/y.png", "a.png"};  // sorted: a.png, b_class/x, b_class/y
    const int order[3] = {2, 0, 1};
    const int S = 16;
    float *want = malloc(sizeof(float) * 3 * 3 * S * S);
    for (int i = 0; i < 3; i++) {
        const int w = sizes[i][0], h = sizes[i][1];
        uint8_t *px = malloc((size_t)w * h * 3), *crop = malloc((size_t)S * S * 3);
        for (int k = 0; k < w * h * 3; k++) px[k] = (uint8_t)((k * 37 + i * 101) % 251);
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        MalaErr err;
        ck_assert_msg(image_write_png(p, px, w, h, 3, &err) == 0, "%s", err.msg);
        ck_assert(image_center_crop_arr(crop, S, px, w, h, 3) == 0);
        int slot = 0;
        while (order[slot] != i) slot++;
        image_u8_to_float(want + (size_t)slot * 3 * S * S, crop, S, S, 3, 0);
        free(px); free(crop);
    }
    MalaErr err;
    Vae *v = vae_load(FIX "vae_tiny.safetensors", backend_cpu(), 3, S, S, &err);
    ck_assert_msg(v != NULL, "%s", err.msg);
    float mean[3 * 4 * 2 * 2], logvar[3 * 4 * 2 * 2];
    ck_assert(vae_encode(v, want, 3, S, S, mean, logvar, &err) == 0);
    vae_free(v);
    snprintf(q, sizeof q, "%s/m.npz", tu_tmp);
    ck_assert_int_eq(run("vae encode --vae " FIX "vae_tiny.safetensors --in %s --image-size %d --out %s", dir, S, q), 0);
    int64_t s[4];
    float *got = load_f32(q, "mean", s), *glv = load_f32(q, "logvar", s);
    ck_assert(s[0] == 3 && s[1] == 4 && s[2] == 2 && s[3] == 2);
    // 1e-5, not bit-equality: mala may pick other OpenBLAS kernels than this process (blas_core.h)
    ck_assert_msg(tu_nerr(got, mean, 48, 1e-6) < 1e-5, "folder encode differs: %g", tu_nerr(got, mean, 48, 1e-6));
    ck_assert_msg(tu_nerr(glv, logvar, 48, 1e-6) < 1e-5, "folder encode logvar differs");
    free(got); free(glv); free(want);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(test_cli_errors) {
    tu_make_tmpdir("vae_err");
    char p[400], q[400];
    const float z[1 * 3 * 4 * 3] = {0};
    snprintf(p, sizeof p, "%s/z3.npy", tu_tmp);
    save_npy(p, z, (int64_t[]){1, 3, 4, 3});
    snprintf(q, sizeof q, "%s/x.npy", tu_tmp);
    expect_cli_error(run("vae decode --vae " FIX "vae_tiny.safetensors --in %s --out %s", p, q), "z3.npy", "[N, 4, H, W]");
    ck_assert_msg(access(q, F_OK) != 0, "no output after an error");
    expect_cli_error(run("vae decode --vae " FIX "sample_model.safetensors --in %s --out %s", p, q),
                     "sample_model.safetensors", "'encoder.");
    expect_cli_error(run("vae decode --in %s --out %s", p, q), "--vae", NULL);
    expect_cli_error(run("vae decode --vae " FIX "vae_tiny.safetensors --in %s --out %s/x.txt", p, tu_tmp), "x.txt",
                     ".npy or .png");
    expect_cli_error(run("vae encode --vae " FIX "vae_tiny.safetensors --in %s/none --out %s/m.npz", tu_tmp, tu_tmp),
                     "none", NULL);
    expect_cli_error(run("vae frobnicate"), "encode, decode or preview-fit", NULL);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("vae");
    TCase *tc = tcase_create("vae");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tiny_new_names);
    tcase_add_test(tc, test_tiny_old_names);
    tcase_add_test(tc, test_tiny_batch_one);
    tcase_add_test(tc, test_tiny_config);
    tcase_add_test(tc, test_full_names_new);
    tcase_add_test(tc, test_full_names_old);
    tcase_add_test(tc, test_full_names_oldconv);
    tcase_add_test(tc, test_full_plan);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_vae_folder);
    tcase_add_test(tc, test_cli_decode_encode);
    tcase_add_test(tc, test_cli_encode_folder);
    tcase_add_test(tc, test_cli_errors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

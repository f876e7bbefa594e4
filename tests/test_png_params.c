// Generation parameters in our PNGs: formats/png_text.c's tEXt chunks (added before
// IEND with every other byte kept, found in untrusted bytes, corrupt ones refused), core/sha256.c
// against FIPS 180-4's examples and coreutils' sha256sum, and `mala sample --out` / `--out-dir`
// written, `mala info FILE.png` read: the chunk round-trips, a PNG without it says so, a corrupt
// one is an error, and the pixels equal those of a PNG without the chunk.
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "pipeline/gen_params.h"
#include "model/checkpoint.h"
#include "formats/image_io.h"
#include "formats/npy.h"
#include "formats/png_text.h"
#include "core/sha256.h"
#include "core/version.h"
#include "testutil.h"
#include "testcli.h"  // defines: run, g_out, g_err, mala_bin

#define MODEL "tests/fixtures/sample_model.safetensors"  // 8x8x1, 3 classes (circle, square, ring)
#define SAMPLE "sample --ckpt " MODEL " --steps 2 --threads 2 --seed 42 --sampler ddim --cfg-scale 1.5"
static uint8_t *file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n + 1);
    ck_assert_uint_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void put_file(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert(f && fwrite(b, 1, n, f) == n);
    fclose(f);
}

static void hex(const uint8_t *h, int n, char *out) {
    for (int i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", h[i]);
}

START_TEST(sha256_vectors) {
    static const struct { const char *in, *hex; } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        Sha256 s;
        uint8_t h[32];
        char x[65];
        sha256_init(&s);
        for (const char *c = v[i].in; *c; c++) sha256_update(&s, c, 1);  // byte by byte: the buffering
        sha256_final(&s, h);
        hex(h, 32, x);
        ck_assert_str_eq(x, v[i].hex);
    }
    // a file of several 64 KiB reads against coreutils
    char x[65], want[80] = "";
    MalaErr err;
    ck_assert_int_eq(sha256_file(MODEL, x, &err), 0);
    FILE *p = popen("sha256sum " MODEL, "r");
    ck_assert(p && fgets(want, sizeof want, p));
    pclose(p);
    ck_assert_msg(!strncmp(x, want, 64), "ours %s, sha256sum %s", x, want);
    char short_hash[11];
    ck_assert_int_eq(gen_params_file_hash(MODEL, short_hash, &err), 0);
    ck_assert_int_eq(strncmp(short_hash, want, 10), 0);
    ck_assert_int_ne(sha256_file("/no/such/file", x, &err), 0);
}
END_TEST

// A 3x2 RGB PNG as stb writes it, without and with the chunk.
static uint8_t *small_png(size_t *n) {
    tu_make_tmpdir("pngtext");
    const uint8_t px[18] = {0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170};
    MalaErr err;
    ck_assert_int_eq(image_write_png(tp("plain.png"), px, 3, 2, 3, &err), 0);
    ck_assert_int_eq(image_write_png_text(tp("text.png"), px, 3, 2, 3, "parameters", "a\nb: c", &err), 0);
    return file_bytes(tp("plain.png"), n);
}

START_TEST(text_chunk_round_trip) {
    size_t n, tn;
    uint8_t *plain = small_png(&n), *with = file_bytes(tp("text.png"), &tn);
    // the same bytes, plus one chunk of 12 + "parameters\0a\nb: c" before IEND
    ck_assert_uint_eq(tn, n + 12 + 11 + 6);
    ck_assert(!memcmp(with, plain, n - 12) && !memcmp(with + tn - 12, plain + n - 12, 12));
    ck_assert(!memcmp(with + n - 12 + 4, "tEXtparameters\0a\nb: c", 21));
    MalaErr err;
    char *text;
    ck_assert_int_eq(png_text_find(with, tn, "t.png", "parameters", &text, &err), 1);
    ck_assert_str_eq(text, "a\nb: c");
    free(text);
    ck_assert_int_eq(png_text_find(with, tn, "t.png", "Comment", &text, &err), 0);
    ck_assert_ptr_null(text);
    ck_assert_int_eq(png_text_find(plain, n, "p.png", "parameters", &text, &err), 0);
    // the pixels are the same
    uint8_t *a, *b;
    int w, h, w2, h2;
    ck_assert_int_eq(image_load(tp("plain.png"), 3, &a, &w, &h, &err), 0);
    ck_assert_int_eq(image_load(tp("text.png"), 3, &b, &w2, &h2, &err), 0);
    ck_assert(w == w2 && h == h2 && !memcmp(a, b, (size_t)w * h * 3));
    // refused: a keyword PNG does not allow, a cut PNG, bytes after IEND
    uint8_t *o;
    size_t on;
    ck_assert_int_ne(png_text_add(plain, n, "x.png", " lead", "t", &o, &on, &err), 0);
    ck_assert_msg(strstr(err.msg, "not a PNG tEXt keyword"), "%s", err.msg);
    ck_assert_int_ne(png_text_add(plain, n - 1, "x.png", "parameters", "t", &o, &on, &err), 0);
    ck_assert_msg(strstr(err.msg, "x.png: truncated"), "%s", err.msg);
    uint8_t *longer = malloc(n + 3);
    memcpy(longer, plain, n);
    memcpy(longer + n, "abc", 3);
    ck_assert_int_ne(png_text_add(longer, n + 3, "x.png", "parameters", "t", &o, &on, &err), 0);
    ck_assert_msg(strstr(err.msg, "x.png: not a PNG ending in IEND (3 bytes after it)"), "%s", err.msg);
    free(longer);
    free(a);
    free(b);
    free(plain);
    free(with);
    tu_rm_tmpdir();
}
END_TEST

// png_text_find on damaged copies of a PNG with the chunk: each an error naming what is wrong.
START_TEST(text_chunk_corrupt) {
    size_t n, tn;
    uint8_t *plain = small_png(&n), *with = file_bytes(tp("text.png"), &tn);
    uint8_t *bad = malloc(tn);
    size_t at = n - 12;  // the tEXt chunk's offset
    struct { size_t pos; uint8_t xor_; size_t len; const char *msg; } cases[] = {
        {at + 20, 1, tn, "corrupt tEXt chunk at byte"},            // its text: the CRC no longer matches
        {at + 3, 0x40, tn, "truncated or corrupt PNG"},            // its length runs past the end
        {0, 1, tn, "not a PNG"},                                   // the signature
        {0, 0, tn - 12, "no IEND chunk"},                          // cut before IEND
        {0, 0, tn - 5, "a cut chunk"},                             // cut inside IEND
        {12, 1, tn, "CRC mismatch"},                               // IHDR's type
    };
    MalaErr err;
    char *text;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(bad, with, tn);
        bad[cases[i].pos] ^= cases[i].xor_;
        ck_assert_int_eq(png_text_find(bad, cases[i].len, "b.png", "parameters", &text, &err), -1);
        ck_assert_msg(strstr(err.msg, "b.png: ") == err.msg && strstr(err.msg, cases[i].msg), "case %zu: %s", i, err.msg);
    }
    // a NUL inside the text, and a keyword without its NUL, with correct CRCs
    uint8_t *o;
    size_t on;
    ck_assert_int_eq(png_text_add(plain, n, "x.png", "parameters", "abcdef", &o, &on, &err), 0);
    o[at + 8 + 11 + 2] = 0;
    uLong c = crc32(crc32(0, Z_NULL, 0), o + at + 4, 4 + 17);
    for (int k = 0; k < 4; k++) o[at + 8 + 17 + k] = (uint8_t)(c >> (24 - 8 * k));
    ck_assert_int_eq(png_text_find(o, on, "o.png", "parameters", &text, &err), -1);
    ck_assert_msg(strstr(err.msg, "a NUL in its text"), "%s", err.msg);
    free(o);
    free(bad);
    free(plain);
    free(with);
    tu_rm_tmpdir();
}
END_TEST

// The lines `mala info FILE.png` printed under "parameters:", unindented.
static void info_params(const char *png, char *out, size_t cap) {
    RUN_OK("info %s", png);
    const char *p = strstr(g_out, "  parameters:\n");
    ck_assert_msg(p, "%s", g_out);
    size_t o = 0;
    for (p += 14; *p && o + 1 < cap; p++) {
        if (p[0] == ' ' && p[-1] == '\n' && !strncmp(p, "    ", 4)) p += 3;
        else out[o++] = *p;
    }
    out[o] = 0;
}

START_TEST(sample_writes_info_reads) {
    tu_make_tmpdir("pngparams");
    char hash[11], want[1024], got[1024];
    MalaErr err;
    ck_assert_int_eq(gen_params_file_hash(MODEL, hash, &err), 0);
    RUN_OK(SAMPLE " --n 4 --out %s", tp("grid.png"));
    info_params(tp("grid.png"), got, sizeof got);
    snprintf(want, sizeof want,
             "circle, square, ring\nSteps: 2, Sampler: ddim, CFG scale: 1.5, Seed: 42, Size: 8x8, Model hash: %s, "
             "Model: sample_model, Labels: \"0,0,1,2\", Images: 4, Eta: 0, Clip x0: on, Channels: 1, Version: mala-dit %s\n",
             hash, mala_version());
    ck_assert_str_eq(got, want);
    // --out-dir: one class, each image's index in the seed's noise
    RUN_OK(SAMPLE " --n 3 --class square --out-dir %s", tp("dir"));
    info_params(tp("dir/000002_square.png"), got, sizeof got);
    ck_assert_msg(!strncmp(got, "square\nSteps: 2, ", 17) && strstr(got, ", Class: 1, Seed index: 2, Eta: 0, "), "%s",
                  got);
    // the bytes are those of the same grid written without the chunk (from --save-npy's floats), plus the chunk
    RUN_OK(SAMPLE " --n 4 --save-npy %s", tp("x.npy"));
    uint8_t *a;
    int w, h;
    ck_assert_int_eq(image_load(tp("grid.png"), 3, &a, &w, &h, &err), 0);
    NpyArray x;
    ck_assert_int_eq(npy_load(tp("x.npy"), &x, &err), 0);
    ck_assert_int_eq(image_save_grid(tp("plain.png"), x.data, 4, 1, 8, 8, 8, 2, &err), 0);
    size_t pn, gn;
    uint8_t *plain = file_bytes(tp("plain.png"), &pn), *grid = file_bytes(tp("grid.png"), &gn);
    ck_assert(gn > pn && !memcmp(plain, grid, pn - 12) && !memcmp(plain + pn - 12, grid + gn - 12, 12));
    free(a);
    free(plain);
    free(grid);
    npy_free(&x);
    // a PNG without the chunk says so (exit 0); a corrupt chunk is an error
    RUN_OK("info %s", tp("plain.png"));
    ck_assert_msg(strstr(g_out, "PNG 42x12") && strstr(g_out, "no generation parameters"), "%s", g_out);
    uint8_t *b = file_bytes(tp("grid.png"), &gn);
    b[pn - 12 + 30] ^= 1;
    put_file(tp("bad.png"), b, gn);
    free(b);
    expect_error(run("info %s", tp("bad.png")), "corrupt chunk", "bad.png: corrupt tEXt chunk at byte", "CRC mismatch");
    expect_error(run("info %s", tp("none.png")), "no file", "none.png", NULL);
    tu_rm_tmpdir();
}

// gen_params_text read back by gen_params_parse (the viewer's PNG drop): every setting it writes,
// quoted values and the keys that look alike ("Seed" and "Seed index"), and bad values dropped.
START_TEST(parameters_parse_back) {
    tu_make_tmpdir("png_params");
    FILE *f = fopen(tp("model.safetensors"), "wb");
    fputs("not really a model", f);
    fclose(f);
    ClassNames cn = {0};
    char *names[3] = {"circle", "a, b: c", "ring"};
    cn.n = 3;
    cn.names = names;
    int32_t labels[1] = {1};
    GenOpts o = gen_opts_default();
    o.kind = SAMPLER_DDIM;
    o.steps = 37;
    o.cfg_scale = 2.5f;
    o.eta = 0.3f;
    o.blend = 1;
    o.blend_a = 2;
    o.blend_b = 0;
    o.blend_w = 0.25f;
    GenParams gp = {.model_path = tp("model.safetensors"), .classes = &cn, .labels = labels, .n = 1, .seed = 123456789012ull,
                    .first = 7, .opts = &o, .channels = 1, .width = 8, .height = 8, .strength = 0.4f,
                    .init_path = "in, put.png", .mask_path = "m.png", .resample = 3};
    MalaErr err;
    char *text = gen_params_text(&gp, &err);
    ck_assert_msg(text != NULL, "%s", err.msg);
    GenParsed p;
    ck_assert_int_eq(gen_params_parse(text, &p), 8);  // a blend records no single class
    ck_assert_msg(p.steps == 37 && !strcmp(p.sampler, "ddim") && p.cfg_scale == 2.5f && p.eta == 0.3f &&
                  p.seed == 123456789012ull && !(p.have & GP_CLASS) && p.strength == 0.4f && p.resample == 3 &&
                  p.blend_a == 2 && p.blend_b == 0 && p.blend_w == 0.25f, "%s", text);
    free(text);
    ck_assert_int_eq(gen_params_parse("x\nSteps: 0, Seed index: 4, CFG scale: abc, Denoising strength: 0, "
                                      "Blend: \"1,2\", Class: -1, Eta: 0.5", &p), 1);
    ck_assert(p.have == GP_ETA && p.eta == 0.5f);
    ck_assert_int_eq(gen_params_parse("", &p), 0);
    tu_rm_tmpdir();
}
END_TEST

END_TEST

// A tiny DiT: K classes (0: unconditional), pixels 8x8x1 or latents 4x4x4 of the tiny VAE (run.vae).
static void make_model(const char *path, int K, int latent) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    c.dit.depth = 1; c.dit.hidden = 32; c.dit.heads = 2; c.dit.patch = 2;
    c.image_size = latent ? 4 : 8; c.in_channels = latent ? 4 : 1; c.num_classes = K;
    c.latent_scale = latent ? 0.18215f : 0.0f;
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    net_init_weights(m, 1);
    ClassNames cn;
    class_names_default(&cn, K);
    const char *kv[] = {"run.vae", "tests/fixtures/vae_tiny.safetensors"};
    MalaErr err;
    ck_assert_msg(ckpt_save_weights_meta(m, &cn, m->w, ST_F32, kv, latent, path, &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    net_free(m);
}

// What a PNG says is what ran: a latent model's x0 is never clipped (so "Clip x0: off", and
// --clip true refused), an unconditional model claims no class, a blend is its prompt line.
START_TEST(params_say_what_ran) {
    tu_make_tmpdir("pngparams_ran");
    char got[1024];
    make_model(tp("lat.safetensors"), 2, 1);
    RUN_OK("sample --ckpt %s --n 1 --steps 2 --threads 2 --out %s", tp("lat.safetensors"), tp("lat.png"));
    info_params(tp("lat.png"), got, sizeof got);
    ck_assert_msg(strstr(got, "Clip x0: off") && !strstr(got, "Clip x0: on"), "%s", got);
    expect_error(run("sample --ckpt %s --n 1 --steps 2 --clip true --out %s", tp("lat.safetensors"), tp("x.png")),
                 "--clip on a latent model", "--clip true", "latent model");
    ck_assert(access(tp("x.png"), F_OK) != 0);
    RUN_OK("sample --ckpt %s --n 1 --steps 2 --threads 2 --clip false --out %s", tp("lat.safetensors"), tp("lat2.png"));
    make_model(tp("unc.safetensors"), 0, 0);
    RUN_OK("sample --ckpt %s --n 2 --steps 2 --threads 2 --out %s", tp("unc.safetensors"), tp("unc.png"));
    info_params(tp("unc.png"), got, sizeof got);
    ck_assert_msg(!strncmp(got, "(unconditional)\nSteps: ", 23) && !strstr(got, "Class:") && !strstr(got, "Labels:"),
                  "%s", got);
    RUN_OK(SAMPLE " --n 1 --blend square,ring,0.25 --out %s", tp("bl.png"));
    info_params(tp("bl.png"), got, sizeof got);
    ck_assert_msg(!strncmp(got, "square,ring,0.25\nSteps: ", 24) && strstr(got, "Blend: \"1,2,0.25\"") &&
                  !strstr(got, "Class:"), "%s", got);
    tu_rm_tmpdir();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("png_params");
    TCase *tc = tcase_create("png_params");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, text_chunk_round_trip);
    tcase_add_test(tc, text_chunk_corrupt);
    tcase_add_test(tc, sample_writes_info_reads);
    tcase_add_test(tc, parameters_parse_back);
    tcase_add_test(tc, params_say_what_ran);
    suite_add_tcase(s, tc);
    return s;
}


int main(void) { return tu_run(suite()); }

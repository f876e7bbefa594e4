// PyTorch's zip checkpoint format (formats/torch_legacy.h, torch_file_*): files torch.save wrote
// (tools/ref/make_torch_zip_fixtures.py) read bit for bit against numpy's copy of the same tensors,
// training checkpoints (ema / model / args), Half / BFloat16 / Double storages, strided views, and
// hostile files refused with one line: a pickle calling os.system, a huge declared storage,
// deflated members, every truncation.
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "testcli.h"
#include "core/half.h"
#include "formats/npy.h"
#include "formats/torch_legacy.h"
#include "model/torch_config.h"
#include "model/torch_load.h"
#include "core/backend.h"
#include "pipeline/generate.h"

#define FIX "tests/fixtures/"
#define REF FIX "torchzip_ref.npz"

static TorchLegacy *open_ok(const char *path, const char *weights) {
    MalaErr err = {{0}};
    TorchLegacy *t = torch_file_open(path, weights, &err);
    ck_assert_msg(t != NULL, "%s: %s", path, err.msg);
    ck_assert(torch_file_is_zip(t));
    return t;
}

static float *read_f32(TorchLegacy *t, const TorchTensor *x) {
    MalaErr err = {{0}};
    float *out = xmalloc((size_t)torch_tensor_numel(x) * sizeof(float) + 1);
    ck_assert_msg(torch_legacy_read_f32(t, x, out, &err) == 0, "%s", err.msg);
    return out;
}

static float *ref_f32(const char *key, int64_t numel) {
    MalaErr err = {{0}};
    NpyArray a;
    ck_assert_msg(npz_load(REF, key, &a, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(npy_numel(&a), numel);
    float *f;
    ck_assert(npy_to_f32(&a, &f, key, &err) == 0);
    npy_free(&a);
    return f;
}

// Every tensor of `path` equals the reference after `map` (bit for bit); returns the count.
static int check_all(const char *path, const char *weights, float (*map)(float)) {
    TorchLegacy *t = open_ok(path, weights);
    int n = torch_legacy_count(t);
    for (int i = 0; i < n; i++) {
        const TorchTensor *x = torch_legacy_tensor(t, i);
        int64_t numel = torch_tensor_numel(x);
        float *got = read_f32(t, x), *want = ref_f32(x->name, numel);
        for (int64_t k = 0; k < numel; k++) {
            float w = map ? map(want[k]) : want[k];
            ck_assert_msg(memcmp(&got[k], &w, 4) == 0, "%s %s[%lld]: %g != %g", path, x->name, (long long)k,
                          got[k], w);
        }
        free(got);
        free(want);
    }
    torch_legacy_close(t);
    return n;
}

static float plus_one(float x) { return x + 1.0f; }
static float to_half(float x) { return half_to_f32(f32_to_half(x)); }

START_TEST(bare_state_dict) {
    int n = check_all(FIX "torchzip_sd.pt", NULL, NULL);
    ck_assert_int_gt(n, 10);
    TorchLegacy *t = open_ok(FIX "torchzip_sd.pt", NULL);
    ck_assert_ptr_null(torch_file_weights(t));
    const TorchTensor *y = torch_legacy_find(t, "y_embedder.embedding_table.weight");
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->ndim, 2);
    ck_assert_int_eq(y->shape[0], 5);   // 4 classes and the null row
    ck_assert_int_eq(y->shape[1], 16);
    ck_assert_str_eq(y->storage_type, "FloatStorage");
    torch_legacy_close(t);
}
END_TEST

START_TEST(training_checkpoint) {
    int n = check_all(FIX "torchzip_sd.pt", NULL, NULL);
    // ema by default, as DiT's find_model; the optimizer's tensors are not among them
    ck_assert_int_eq(check_all(FIX "torchzip_ckpt.pt", NULL, plus_one), n);
    ck_assert_int_eq(check_all(FIX "torchzip_ckpt.pt", "ema", plus_one), n);
    ck_assert_int_eq(check_all(FIX "torchzip_ckpt.pt", "model", NULL), n);
    TorchLegacy *t = open_ok(FIX "torchzip_ckpt.pt", NULL);
    ck_assert_str_eq(torch_file_weights(t), "ema");
    ck_assert_str_eq(torch_file_arg(t, "model"), "DiT-T/2");
    ck_assert_str_eq(torch_file_arg(t, "results_dir"), "results");
    ck_assert_ptr_null(torch_file_arg(t, "image_size"));  // an int, not a string
    ck_assert_ptr_null(torch_file_arg(t, "nope"));
    torch_legacy_close(t);
    MalaErr err = {{0}};
    ck_assert_ptr_null(torch_file_open(FIX "torchzip_ckpt.pt", "opt_ema", &err));
    ck_assert_str_eq(err.msg, FIX "torchzip_ckpt.pt: no 'opt_ema' weights in this checkpoint");
}
END_TEST

START_TEST(half_storages) {
    ck_assert_int_gt(check_all(FIX "torchzip_f16.pt", NULL, to_half), 10);
    TorchLegacy *t = open_ok(FIX "torchzip_f16.pt", NULL);
    ck_assert_str_eq(torch_legacy_tensor(t, 0)->storage_type, "HalfStorage");
    torch_legacy_close(t);
}
END_TEST

START_TEST(views_and_dtypes) {
    TorchLegacy *t = open_ok(FIX "torchzip_views.pt", NULL);
    const char *keys[] = {"t", "s", "e", "b", "d"};
    for (int i = 0; i < 5; i++) {
        const TorchTensor *x = torch_legacy_find(t, keys[i]);
        ck_assert_ptr_nonnull(x);
        char rk[16];
        snprintf(rk, sizeof rk, "view.%s", keys[i]);
        int64_t numel = torch_tensor_numel(x);
        float *got = read_f32(t, x), *want = ref_f32(rk, numel);
        ck_assert_msg(memcmp(got, want, (size_t)numel * 4) == 0, "view %s", keys[i]);
        free(got);
        free(want);
    }
    ck_assert_int_eq(torch_legacy_find(t, "s")->offset, 8);
    ck_assert_int_eq(torch_legacy_find(t, "t")->stride[1], 6);
    ck_assert_str_eq(torch_legacy_find(t, "b")->storage_type, "BFloat16Storage");
    ck_assert_str_eq(torch_legacy_find(t, "d")->storage_type, "DoubleStorage");
    torch_legacy_close(t);
}
END_TEST

static void refused(const char *path, const char *what) {
    MalaErr err = {{0}};
    ck_assert_ptr_null(torch_file_open(path, NULL, &err));
    ck_assert_msg(strstr(err.msg, path) == err.msg && strstr(err.msg, what) && !strchr(err.msg, '\n'), "%s", err.msg);
}

START_TEST(hostile_files) {
    unlink("/tmp/mala_torchzip_pwned");
    refused(FIX "torchzip_os_system.pt", "refuses to call posix.system");
    ck_assert_int_ne(access("/tmp/mala_torchzip_pwned", F_OK), 0);
    refused(FIX "torchzip_huge.pt", "claims 1099511627776 elements");
    refused(FIX "torchzip_deflate.pt", "compressed");
}
END_TEST

// Every prefix of a real file (and one flipped byte per step) is refused or read, never a crash.
START_TEST(truncated_files) {
    FILE *f = fopen(FIX "torchzip_sd.pt", "rb");
    ck_assert_ptr_nonnull(f);
    struct stat st;
    fstat(fileno(f), &st);
    size_t len = (size_t)st.st_size;
    unsigned char *buf = xmalloc(len);
    ck_assert_uint_eq(fread(buf, 1, len, f), len);
    fclose(f);
    for (size_t n = 0; n < len; n += 61) {
        MalaErr err = {{0}};
        TorchLegacy *t = torch_file_open_mem(buf, n, "cut.pt", NULL, &err);
        ck_assert_msg(t == NULL, "prefix %zu accepted", n);
        ck_assert_msg(strncmp(err.msg, "cut.pt: ", 8) == 0 && !strchr(err.msg, '\n'), "%s", err.msg);
    }
    MalaErr err = {{0}};
    TorchLegacy *t = torch_file_open_mem(buf, len, "whole.pt", NULL, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    torch_legacy_close(t);
    free(buf);
}
END_TEST

START_TEST(infer_tiny_config) {
    TorchLegacy *t = open_ok(FIX "torchzip_sd.pt", NULL);
    NetConfig c;
    MalaErr err = {{0}};
    ck_assert_int_ne(torch_infer_config(t, 0, &c, &err), 0);  // hidden 16: no DiT preset
    ck_assert_msg(strstr(err.msg, "hidden size 16 is none of DiT's presets") && strstr(err.msg, "--heads"), "%s", err.msg);
    ck_assert_msg(torch_infer_config(t, 2, &c, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(c.backbone, BACKBONE_DIT);
    ck_assert_int_eq(c.dit.depth, 1);
    ck_assert_int_eq(c.dit.hidden, 16);
    ck_assert_int_eq(c.dit.heads, 2);
    ck_assert_int_eq(c.dit.patch, 2);
    ck_assert_int_eq(c.dit.attn, ATTN_SOFTMAX);
    ck_assert_int_eq(c.in_channels, 4);
    ck_assert_int_eq(c.num_classes, 4);
    ck_assert_int_eq(c.image_size, 8);
    ck_assert_int_eq(c.learn_sigma, 1);
    torch_legacy_close(t);
}
END_TEST

// A state dict with DiT-XL/2's names and shapes at 256x256 (32x32x4 latents), each tensor a
// stride-0 view of a one-element storage, so the file is a few kilobytes.
START_TEST(infer_xl2_config) {
    enum { H = 1152, D = 28, MAXT = 8 + 10 * D };
    static int64_t shapes[MAXT][4], zero[4];
    static char names[MAXT][64], keys[MAXT][8];
    TorchSaveTensor ts[MAXT];
    float one = 0.5f;
    int n = 0;
#define ADD(nm, nd, a, b, c_, d)                                                                   \
    do {                                                                                            \
        snprintf(names[n], 64, "%s", nm);                                                           \
        int64_t s_[4] = {a, b, c_, d};                                                              \
        memcpy(shapes[n], s_, sizeof s_);                                                           \
        snprintf(keys[n], 8, "%d", n);                                                              \
        ts[n] = (TorchSaveTensor){names[n], nd, shapes[n], zero, keys[n], 1, &one};                 \
        n++;                                                                                        \
    } while (0)
    ADD("pos_embed", 3, 1, 256, H, 0);
    ADD("x_embedder.proj.weight", 4, H, 4, 2, 2);
    ADD("x_embedder.proj.bias", 1, H, 0, 0, 0);
    ADD("t_embedder.mlp.0.weight", 2, H, 256, 0, 0);
    ADD("y_embedder.embedding_table.weight", 2, 1001, H, 0, 0);
    for (int b = 0; b < D; b++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blocks.%d.attn.qkv.weight", b);
        ADD(nm, 2, 3 * H, H, 0, 0);
        snprintf(nm, sizeof nm, "blocks.%d.mlp.fc1.weight", b);
        ADD(nm, 2, 4 * H, H, 0, 0);
    }
    ADD("final_layer.linear.weight", 2, 2 * 2 * 8, H, 0, 0);
#undef ADD
    unsigned char *buf;
    size_t len;
    MalaErr err = {{0}};
    ck_assert_msg(torch_legacy_serialize(ts, n, &buf, &len, &err) == 0, "%s", err.msg);
    ck_assert_uint_lt(len, 1 << 16);
    TorchLegacy *t = torch_file_open_mem(buf, len, "DiT-XL-2-256x256.pt", NULL, &err);
    ck_assert_msg(t != NULL, "%s", err.msg);
    NetConfig c;
    ck_assert_msg(torch_infer_config(t, 0, &c, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(c.dit.depth, 28);
    ck_assert_int_eq(c.dit.hidden, 1152);
    ck_assert_int_eq(c.dit.heads, 16);
    ck_assert_int_eq(c.dit.patch, 2);
    ck_assert_int_eq(c.num_classes, 1000);
    ck_assert_int_eq(c.image_size * 8, 256);  // 32x32 latents, the SD-VAE's 8x
    ck_assert_int_eq(c.in_channels, 4);
    ck_assert_int_eq(c.learn_sigma, 1);
    ck_assert(c.latent_scale == 0.18215f);
    ck_assert_msg(torch_infer_config(t, 12, &c, &err) == 0 && c.dit.heads == 12, "--heads wins");
    torch_legacy_close(t);
    // a state dict of no backbone: the line names its first tensor that is none of theirs
    ts[0].name = "encoder.conv_in.weight";
    ts[1].name = "encoder.conv_in.bias";
    free(buf);
    ck_assert(torch_legacy_serialize(ts, 2, &buf, &len, &err) == 0);
    t = torch_file_open_mem(buf, len, "vae.pt", NULL, &err);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_ne(torch_infer_config(t, 0, &c, &err), 0);
    ck_assert_str_eq(err.msg, "vae.pt: fits no backbone: tensor 'encoder.conv_in.weight' is none of DiT's, DiG's or "
                              "DiC's");
    torch_legacy_close(t);
    free(buf);
}
END_TEST

// The network built from a training checkpoint holds exactly numpy's copy of the chosen weights.
static void check_net(const char *weights, float add) {
    ClassNames cn = {0};
    MalaErr err = {{0}};
    Net *m = torch_load_model(FIX "torchzip_ckpt.pt", weights, 2, backend_cpu(), 1, NET_INFER, &cn, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_int_eq(cn.n, 4);
    float *host = xmalloc(m->n_floats * sizeof(float));
    m->be->to_host(host, m->w, m->n_floats * sizeof(float));
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        float *want = ref_f32(p->name, (int64_t)p->numel);
        for (size_t k = 0; k < p->numel; k++) {
            float w = want[k] + add;
            ck_assert_msg(memcmp(&host[p->offset + k], &w, 4) == 0, "%s[%zu]", p->name, k);
        }
        free(want);
    }
    free(host);
    class_names_free(&cn);
    net_free(m);
}

START_TEST(network_from_checkpoint) {
    check_net(NULL, 1.0f);     // ema
    check_net("model", 0.0f);
    ck_assert(torch_file_sniff(FIX "torchzip_sd.pt"));
    ck_assert(!torch_file_sniff(FIX "dit_softmax.safetensors"));
    ck_assert(torch_file_sniff(FIX "incep_small.pth"));  // the legacy format
    // the model loader every command uses: the inferred heads fail on a hidden size of no preset
    ClassNames cn = {0};
    MalaErr err = {{0}};
    ck_assert_ptr_null(ckpt_load_model(FIX "torchzip_sd.pt", backend_cpu(), 1, &cn, &err));
    ck_assert_msg(strstr(err.msg, "hidden size 16 is none of DiT's presets"), "%s", err.msg);
}
END_TEST

// The PyTorch reference's DDIM run on the .pt (tools/ref/ref_sample_torchzip.py: DiT's network
// loaded with torch.load, 10 DDIM steps, guidance 4, no clipping): mala's samples from the same
// file and noise match it within 2e-3 (float32 against float32; the reference's own float32 gap
// to float64 is 1.4e-4).
START_TEST(ddim_against_pytorch) {
    ckpt_torch_options(0, 2);
    Generator g;
    MalaErr err;
    ck_assert_msg(generator_open(&g, FIX "torchzip_sd.pt", backend_cpu(), 4, &err) == 0, "%s", err.msg);
    NpyArray noise, ref;
    ck_assert_msg(npy_load(FIX "torchzip_ddim_noise.npy", &noise, &err) == 0, "%s", err.msg);
    ck_assert_msg(npy_load(FIX "torchzip_ddim_out.npy", &ref, &err) == 0, "%s", err.msg);
    const size_t n = 4 * 4 * 8 * 8;
    ck_assert(noise.ndim == 4 && noise.shape[0] == 4 && noise.shape[1] == 4 && generator_image_floats(&g) * 4 == n);
    float *x = xmalloc(n * sizeof(float));
    memcpy(x, noise.data, n * sizeof(float));
    GenOpts o = gen_opts_default();
    o.kind = SAMPLER_DDIM;
    o.steps = 10;
    o.cfg_scale = 4.0f;
    o.clip = 0;
    const int32_t y[4] = {0, 3, 1, 2};
    ck_assert_msg(generator_run(&g, &o, x, y, 4, 0, 0, NULL, NULL, &err) == 0, "%s", err.msg);
    double d = tu_max_abs_diff(x, ref.data, n);
    printf("DDIM-10 from torchzip_sd.pt against the PyTorch reference: max |diff| %.3g\n", d);
    ck_assert_msg(d < 2e-3, "max |diff| %g", d);
    free(x);
    npy_free(&noise);
    npy_free(&ref);
    generator_close(&g);
    ckpt_torch_options(0, 0);
}
END_TEST

static float *net_host(const Net *m) {
    float *h = xmalloc(m->n_floats * sizeof(float));
    m->be->to_host(h, m->w, m->n_floats * sizeof(float));
    return h;
}

// mala import: the model file holds the checkpoint's ema weights bit for bit; an existing --out
// is kept; hostile and unfit files are one error line.
START_TEST(import_command) {
    tu_make_tmpdir("torchzip");
    char out[512];
    snprintf(out, sizeof out, "%s/m.safetensors", tu_tmp);
    int rc = run("import " FIX "torchzip_ckpt.pt --out %s --heads 2", out);
    ck_assert_msg(rc == 0, "%s", g_err);
    ClassNames cn = {0}, cn2 = {0};
    MalaErr err = {{0}};
    Net *a = ckpt_load_model(out, backend_cpu(), 1, &cn, &err);
    ck_assert_msg(a != NULL, "%s", err.msg);
    Net *b = torch_load_model(FIX "torchzip_ckpt.pt", NULL, 2, backend_cpu(), 1, NET_INFER, &cn2, &err);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(a->n_floats, b->n_floats);
    float *ha = net_host(a), *hb = net_host(b);
    ck_assert(memcmp(ha, hb, a->n_floats * sizeof(float)) == 0);
    free(ha);
    free(hb);
    net_free(a);
    net_free(b);
    class_names_free(&cn);
    class_names_free(&cn2);
    expect_error(run("import " FIX "torchzip_ckpt.pt --out %s --heads 2", out), "existing --out", "exists", "--force");
    snprintf(out, sizeof out, "%s/h.safetensors", tu_tmp);
    expect_error(run("import " FIX "torchzip_os_system.pt --out %s", out), "os.system", "refuses to call posix.system",
                 NULL);
    expect_error(run("import " FIX "torchzip_sd.pt --out %s", out), "no preset", "give --heads", NULL);
    ck_assert_int_ne(access(out, F_OK), 0);
    tu_rm_tmpdir();
}
END_TEST

START_TEST(imagenet_names) {
    ClassNames cn = {0};
    torch_class_names(&cn, 1000);
    ck_assert_int_eq(cn.n, 1000);
    ck_assert_str_eq(cn.names[0], "tench");
    ck_assert_str_eq(cn.names[207], "golden retriever");
    ck_assert_str_eq(cn.names[999], "toilet tissue");
    ck_assert_int_eq(class_names_find(&cn, "Golden Retriever"), 207);
    class_names_free(&cn);
    torch_class_names(&cn, 4);
    ck_assert_str_eq(cn.names[3], "3");
    class_names_free(&cn);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("torch_zip");
    TCase *tc = tcase_create("torch_zip");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, bare_state_dict);
    tcase_add_test(tc, training_checkpoint);
    tcase_add_test(tc, half_storages);
    tcase_add_test(tc, views_and_dtypes);
    tcase_add_test(tc, hostile_files);
    tcase_add_test(tc, truncated_files);
    tcase_add_test(tc, infer_tiny_config);
    tcase_add_test(tc, infer_xl2_config);
    tcase_add_test(tc, network_from_checkpoint);
    tcase_add_test(tc, ddim_against_pytorch);
    tcase_add_test(tc, import_command);
    tcase_add_test(tc, imagenet_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }

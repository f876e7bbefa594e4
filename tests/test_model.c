// Every backbone against PyTorch (tools/ref/ref_dit.py and tools/ref/ref_dig.py write
// tests/fixtures/{dit,dig}_*.safetensors): forward output and every parameter gradient of
// loss = sum(out * dout), for each DiT attention kind and flag combination and for DiG's scan
// directions; DiG-S/2's table against the official state_dict; initialisation and model-file
// round trips.
#include <unistd.h>

#include "model/checkpoint.h"
#include "model/net.h"
#include "formats/safetensors.h"
#include "testutil.h"

typedef struct {
    Net *m;
    float *grad;
    StFile f;
    int B;
    float *x, *t, *dout, *out_ref, *out;
    int32_t *y;
} Fixture;

static float *read_tensor(const StFile *f, const char *name, size_t *n) {
    const StTensor *t = st_find(f, name);
    ck_assert_msg(t != NULL, "%s: fixture tensor %s missing", f->path, name);
    float *buf = malloc(sizeof(float) * (size_t)st_numel(t));
    MalaErr err;
    ck_assert_msg(st_read_f32(f, t, buf, &err) == 0, "%s", err.msg);
    if (n) *n = (size_t)st_numel(t);
    return buf;
}

static void fixture_open(Fixture *fx, const char *path) {
    MalaErr err;
    ck_assert_msg(st_open(&fx->f, path, &err) == 0, "%s", err.msg);
    NetConfig c;
    ClassNames cn;
    ck_assert_msg(ckpt_read_config(&fx->f, &c, &cn, &err) == 0, "%s", err.msg);
    class_names_free(&cn);
    fx->B = (int)st_find(&fx->f, "in.x")->shape[0];
    fx->m = net_create(&c, backend_cpu(), fx->B, NET_TRAIN);
    fx->grad = calloc(fx->m->n_floats, sizeof(float));
    for (int i = 0; i < fx->m->nparams; i++) {
        const ParamInfo *p = &fx->m->params[i];
        ck_assert_msg(st_load_f32(&fx->f, p->name, p->shape, p->ndim, fx->m->w + p->offset, &err) == 0, "%s", err.msg);
    }
    size_t n;
    fx->x = read_tensor(&fx->f, "in.x", NULL);
    fx->t = read_tensor(&fx->f, "in.t", NULL);
    float *yf = read_tensor(&fx->f, "in.y", NULL);
    fx->y = malloc(sizeof(int32_t) * fx->B);
    for (int b = 0; b < fx->B; b++) fx->y[b] = (int32_t)yf[b];
    free(yf);
    fx->dout = read_tensor(&fx->f, "in.dout", NULL);
    fx->out_ref = read_tensor(&fx->f, "out", &n);
    fx->out = calloc(n, sizeof(float));
}

static void fixture_close(Fixture *fx) {
    free(fx->x); free(fx->t); free(fx->y); free(fx->dout); free(fx->out_ref); free(fx->out);
    net_free(fx->m);
    free(fx->grad);
    st_close(&fx->f);
}

static const char *FIXTURES[] = {
    "tests/fixtures/dit_mala_full.safetensors", "tests/fixtures/dit_mala_plain.safetensors",
    "tests/fixtures/dit_softmax.safetensors",   "tests/fixtures/dit_linear.safetensors",
    "tests/fixtures/dit_mala_rect.safetensors", "tests/fixtures/dig_t2.safetensors",
    "tests/fixtures/dig_t4.safetensors",        "tests/fixtures/dig_init.safetensors",
    "tests/fixtures/dic_t1.safetensors",        "tests/fixtures/dic_t2.safetensors",
    "tests/fixtures/dic_t3.safetensors",        "tests/fixtures/dic_init.safetensors",
    "tests/fixtures/dit_mala_authors.safetensors",
};
#define NFIX ((int)(sizeof FIXTURES / sizeof FIXTURES[0]))

// Forward within 1e-4 of the output scale; every gradient within 1e-3 normalised error (float32
// accumulation orders differ between OpenBLAS and PyTorch's kernels).
START_TEST(test_forward_backward_vs_pytorch) {
    Fixture fx;
    fixture_open(&fx, FIXTURES[_i]);
    Net *m = fx.m;
    size_t nout = (size_t)fx.B * m->out_channels * m->cfg.image_size * m->cfg.image_size;
    net_forward(m, fx.out, fx.x, fx.t, fx.y, fx.B);
    double e = tu_nerr(fx.out, fx.out_ref, nout, 1e-3);
    ck_assert_msg(e < 1e-4, "%s: output normalised error %.3g", FIXTURES[_i], e);
    memset(fx.grad, 0, m->n_floats * sizeof(float));
    net_backward(m, fx.grad, fx.dout, fx.B);
    for (int i = 0; i < m->nparams; i++) {
        const ParamInfo *p = &m->params[i];
        if (!strcmp(p->name, "pos_embed")) continue;
        char name[128];
        snprintf(name, sizeof name, "grad.%s", p->name);
        size_t n;
        float *g = read_tensor(&fx.f, name, &n);
        ck_assert_uint_eq(n, p->numel);
        double ge = tu_nerr(fx.grad + p->offset, g, n, 1e-6);
        ck_assert_msg(ge < 1e-3, "%s: gradient of %s normalised error %.3g", FIXTURES[_i], p->name, ge);
        free(g);
    }
    fixture_close(&fx);
}
END_TEST

// Running the same batch twice gives identical results (no state leaks between steps), and a
// batch smaller than the capacity matches the corresponding rows.
START_TEST(test_forward_repeatable) {
    Fixture fx;
    fixture_open(&fx, FIXTURES[0]);
    Net *m = fx.m;
    size_t per = (size_t)m->out_channels * m->cfg.image_size * m->cfg.image_size;
    float *again = calloc(per * fx.B, sizeof(float));
    net_forward(m, fx.out, fx.x, fx.t, fx.y, fx.B);
    net_forward(m, again, fx.x, fx.t, fx.y, fx.B);
    ck_assert_int_eq(memcmp(again, fx.out, per * fx.B * sizeof(float)), 0);
    net_forward(m, again, fx.x, fx.t, fx.y, 1);
    ck_assert(tu_nerr(again, fx.out, per, 1e-3) < 1e-6);
    free(again);
    fixture_close(&fx);
}
END_TEST

// DiT's initialisation: adaLN-Zero and a zero final layer make the initial output exactly 0;
// the table has PyTorch's names and shapes.
START_TEST(test_init_and_table) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    ck_assert_int_eq(net_config_preset(&c, "DiT-T/4", &err), 0);
    Net *m = net_create(&c, backend_cpu(), 2, NET_INFER);
    net_init_weights(m, 1);
    const ParamInfo *q = net_find_param(m, "blocks.3.attn.qkv.weight");
    ck_assert(q != NULL);
    ck_assert_int_eq(q->shape[0], 3 * 128);
    ck_assert(net_find_param(m, "blocks.0.attn.lepe.weight") != NULL);
    ck_assert(net_find_param(m, "blocks.0.attn.gate.weight") == NULL);
    // Xavier bound for qkv: sqrt(6 / (128 + 384))
    double bound = sqrt(6.0 / 512), mx = 0;
    for (size_t i = 0; i < q->numel; i++) mx = fmax(mx, fabs(m->w[q->offset + i]));
    ck_assert(mx <= bound && mx > 0.9 * bound);
    float x[2 * 32 * 32], t[2] = {10, 900}, out[2 * 2 * 32 * 32];
    int32_t y[2] = {3, 10};
    tu_fill(x, 2 * 32 * 32, -1, 1, 5);
    net_forward(m, out, x, t, y, 2);
    for (int i = 0; i < 2 * 2 * 32 * 32; i++) ck_assert(out[i] == 0.0f);
    ck_assert_int_ne(net_config_preset(&c, "DiT-Q/2", &err), 0);
    ck_assert(strstr(err.msg, "unknown preset") != NULL);
    ck_assert_int_ne(net_config_preset(&c, "DiT-S/3", &err), 0);
    net_free(m);
}
END_TEST

// --attn mala-authors: every part of the MALA authors' block, with their names, shapes and init
// (N(0, 0.02) convs, zero bias); the parts survive a save/load; an even kernel is refused; the
// adaLN-Zero output stays exactly 0 at init.
START_TEST(test_mala_authors_block) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    ck_assert_int_eq(net_config_preset(&c, "DiT-T/4", &err), 0);
    double base_flops = net_flops_per_image(&c);
    ck_assert_int_eq(dit_config_attn_setting(&c.dit, "mala-authors"), 0);
    ck_assert(c.dit.attn == ATTN_MALA && c.dit.rope && c.dit.lepe == 5 && c.dit.gate && c.dit.cpe == 3 &&
              c.dit.ffn_dwconv == 3);
    ck_assert_int_ne(dit_config_attn_setting(&c.dit, "mala-author"), 0);
    ck_assert_int_eq(net_config_validate(&c, &err), 0);
    // FLOPs: + gate T H^2, + CPE T H 9, + FFN dwconv T 4H 9 per block (T 64, H 128, depth 4), x2
    double extra = 2.0 * 4 * 64 * (128.0 * 128 + 128 * 9 + 512 * 9);
    ck_assert_msg(fabs(net_flops_per_image(&c) - base_flops - extra) < 1, "%.0f", net_flops_per_image(&c) - base_flops);
    Net *m = net_create(&c, backend_cpu(), 2, NET_INFER);
    net_init_weights(m, 1);
    const ParamInfo *pos = net_find_param(m, "blocks.2.pos.weight"), *dw = net_find_param(m, "blocks.2.mlp.dwconv.weight");
    ck_assert(pos && dw && net_find_param(m, "blocks.2.pos.bias") && net_find_param(m, "blocks.2.mlp.dwconv.bias"));
    ck_assert(pos->ndim == 4 && pos->shape[0] == 128 && pos->shape[1] == 1 && pos->shape[2] == 3 && pos->shape[3] == 3);
    ck_assert(dw->shape[0] == 512 && dw->shape[2] == 3);
    // PyTorch's registration order: ... mlp.fc2, mlp.dwconv, adaLN_modulation, pos
    ck_assert(net_find_param(m, "blocks.2.mlp.fc2.bias") + 1 == net_find_param(m, "blocks.2.mlp.dwconv.weight"));
    ck_assert(net_find_param(m, "blocks.2.mlp.dwconv.bias") + 1 == net_find_param(m, "blocks.2.adaLN_modulation.1.weight"));
    ck_assert(net_find_param(m, "blocks.2.adaLN_modulation.1.bias") + 1 == pos);
    double s2 = 0;
    for (size_t i = 0; i < dw->numel; i++) s2 += (double)m->w[dw->offset + i] * m->w[dw->offset + i];
    double sd = sqrt(s2 / (double)dw->numel);
    ck_assert_msg(sd > 0.018 && sd < 0.022, "dwconv init std %.4f (want 0.02)", sd);
    const ParamInfo *pb = net_find_param(m, "blocks.2.pos.bias");
    for (size_t i = 0; i < pb->numel; i++) ck_assert(m->w[pb->offset + i] == 0.0f);
    float x[2 * 32 * 32], t[2] = {10, 900}, out[2 * 2 * 32 * 32];
    int32_t y[2] = {3, 10};
    tu_fill(x, 2 * 32 * 32, -1, 1, 5);
    net_forward(m, out, x, t, y, 2);
    for (int i = 0; i < 2 * 2 * 32 * 32; i++) ck_assert(out[i] == 0.0f);

    char dir[] = "/tmp/mala_authors_XXXXXX", path[256];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ClassNames cn, cn2;
    class_names_default(&cn, 10);
    ck_assert_msg(ckpt_save_weights(m, &cn, m->w, ST_F32, path, &err) == 0, "%s", err.msg);
    Net *m2 = ckpt_load_model(path, backend_cpu(), 1, &cn2, &err);
    ck_assert_msg(m2 != NULL, "%s", err.msg);
    ck_assert(m2->cfg.dit.cpe == 3 && m2->cfg.dit.ffn_dwconv == 3 && m2->cfg.dit.gate == 1);
    ck_assert_int_eq(memcmp(m2->w, m->w, m->n_floats * sizeof(float)), 0);
    char desc[256];
    net_config_describe(&m2->cfg, desc, sizeof desc);
    ck_assert_msg(strstr(desc, "+gate") && strstr(desc, "cpe 3") && strstr(desc, "ffn dwconv 3"), "%s", desc);
    net_free(m2);
    class_names_free(&cn2);
    class_names_free(&cn);
    unlink(path);
    rmdir(dir);
    net_free(m);

    c.dit.cpe = 4;
    ck_assert_int_ne(net_config_validate(&c, &err), 0);
    ck_assert_msg(strstr(err.msg, "CPE kernel 4"), "%s", err.msg);
    c.dit.cpe = 3;
    c.dit.ffn_dwconv = 2;
    ck_assert_int_ne(net_config_validate(&c, &err), 0);
    ck_assert_msg(strstr(err.msg, "FFN depthwise kernel 2"), "%s", err.msg);
}
END_TEST

// Save -> load round trip in F32 (exact) and F16; foreign and mismatched files are refused with
// a message naming the offending tensor or key.
START_TEST(test_model_file_round_trip) {
    char dir[] = "/tmp/mala_model_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char path[256], bad[256];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    net_config_preset(&c, "DiT-T/4", &err);
    c.dit.gate = 1;
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    net_init_weights(m, 7);
    tu_fill(m->w, m->n_trainable, -0.5f, 0.5f, 3);
    ClassNames cn;
    class_names_default(&cn, 10);
    free(cn.names[7]);
    cn.names[7] = strdup("Sneaker \"quoted\"");
    ck_assert_msg(ckpt_save_weights(m, &cn, m->w, ST_F32, path, &err) == 0, "%s", err.msg);
    ClassNames cn2;
    Net *m2 = ckpt_load_model(path, backend_cpu(), 1, &cn2, &err);
    ck_assert_msg(m2 != NULL, "%s", err.msg);
    ck_assert_int_eq(memcmp(m2->w, m->w, m->n_floats * sizeof(float)), 0);
    ck_assert_str_eq(cn2.names[7], "Sneaker \"quoted\"");
    ck_assert_int_eq(class_names_find(&cn2, "sneaker \"QUOTED\""), 7);
    ck_assert_int_eq(class_names_find(&cn2, "3"), 3);
    ck_assert_int_eq(class_names_find(&cn2, "Boot"), -1);
    ck_assert(m2->cfg.dit.gate == 1 && m2->cfg.dit.lepe == 5 && m2->cfg.dit.attn == ATTN_MALA);
    class_names_free(&cn2);
    net_free(m2);

    // a tensor with the wrong shape
    StWriter *w = st_writer_new();
    ckpt_write_config(w, &c, &cn);
    ckpt_add_tensors(w, m, "", m->w, ST_F16);
    int64_t shp[2] = {3, 3};
    float junk[9] = {0};
    st_writer_add(w, "blocks.0.attn.extra", ST_F32, shp, 2, junk);
    ck_assert_int_eq(st_writer_save(w, bad, &err), 0);
    st_writer_free(w);
    ck_assert(ckpt_load_model(bad, backend_cpu(), 1, &cn2, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "blocks.0.attn.extra") && strstr(err.msg, bad), "%s", err.msg);

    // the configuration says no gate: the gate tensors are foreign
    c.dit.gate = 0;
    w = st_writer_new();
    ckpt_write_config(w, &c, &cn);
    ckpt_add_tensors(w, m, "", m->w, ST_F16);
    ck_assert_int_eq(st_writer_save(w, bad, &err), 0);
    st_writer_free(w);
    ck_assert(ckpt_load_model(bad, backend_cpu(), 1, &cn2, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "attn.gate"), "%s", err.msg);

    // hidden disagrees with the tensors
    c.dit.gate = 1;
    c.dit.hidden = 64;
    w = st_writer_new();
    ckpt_write_config(w, &c, &cn);
    ckpt_add_tensors(w, m, "", m->w, ST_F16);
    ck_assert_int_eq(st_writer_save(w, bad, &err), 0);
    st_writer_free(w);
    ck_assert(ckpt_load_model(bad, backend_cpu(), 1, &cn2, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "x_embedder.proj.weight") && strstr(err.msg, "expects"), "%s", err.msg);

    // metadata missing a key (the data keys present, DiT's 'hidden' absent)
    w = st_writer_new();
    st_writer_meta(w, "depth", "4");
    st_writer_meta(w, "image_size", "32");
    st_writer_meta(w, "in_channels", "1");
    st_writer_meta(w, "num_classes", "10");
    ckpt_add_tensors(w, m, "", m->w, ST_F16);
    ck_assert_int_eq(st_writer_save(w, bad, &err), 0);
    st_writer_free(w);
    ck_assert(ckpt_load_model(bad, backend_cpu(), 1, &cn2, &err) == NULL);
    ck_assert_msg(strstr(err.msg, "'hidden' is missing"), "%s", err.msg);

    class_names_free(&cn);
    net_free(m);
    unlink(path);
    unlink(bad);
    rmdir(dir);
}
END_TEST

// DiG-S/2 and DiC-S (32x32x4 latents, 1000 classes, learned sigma) have exactly the official
// state_dicts: every name and shape of tests/fixtures/{dig_s2,dic_s}_names.txt (written from
// hustvl/DiG's and YuchuanTian/DiC's classes by tools/ref/ref_dig.py, ref_dic.py) and the same
// parameter counts.
static const char *OFFICIAL[][2] = {{"DiG-S/2", "tests/fixtures/dig_s2_names.txt"},
                                    {"DiC-S", "tests/fixtures/dic_s_names.txt"}};
START_TEST(test_names_vs_official) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    ck_assert_msg(net_config_preset(&c, OFFICIAL[_i][0], &err) == 0, "%s", err.msg);
    c.in_channels = 4;
    c.num_classes = 1000;
    Net *m = net_create(&c, backend_cpu(), 1, NET_INFER);
    FILE *f = fopen(OFFICIAL[_i][1], "r");
    ck_assert(f != NULL);
    char line[512];
    ck_assert(fgets(line, sizeof line, f) && line[0] == '#');
    const char *cnt = strstr(line, "tensors, ");
    ck_assert(cnt != NULL);
    size_t want_params = strtoull(cnt + 9, NULL, 10), total = 0;
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128];
        int off;
        if (sscanf(line, "%127s%n", name, &off) != 1) continue;
        const ParamInfo *p = net_find_param(m, name);
        ck_assert_msg(p != NULL, "official tensor %s is missing", name);
        int64_t d[4];
        int nd = sscanf(line + off, "%ld %ld %ld %ld", &d[0], &d[1], &d[2], &d[3]);
        ck_assert_msg(nd == p->ndim, "%s: %d dims, official %d", name, p->ndim, nd);
        for (int i = 0; i < nd; i++) ck_assert_msg(d[i] == p->shape[i], "%s: dim %d is %ld, official %ld", name, i,
                                                   (long)p->shape[i], (long)d[i]);
        total += p->numel;
        rows++;
    }
    fclose(f);
    ck_assert_int_eq(rows, m->nparams);
    ck_assert_uint_eq(total, want_params);
    ck_assert_uint_eq(m->n_floats, want_params);
    printf("%s: %d tensors, %zu parameters (official: %zu)\n", OFFICIAL[_i][0], rows, m->n_floats, want_params);
    net_free(m);
}
END_TEST

// DiG's official initialisation: every block is the identity map and the output exactly 0; the
// GLA gain, the RMSNorm weight and the identity conv are in place.
START_TEST(test_dig_init) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIG);
    MalaErr err;
    ck_assert_int_eq(net_config_preset(&c, "DiG-T/4", &err), 0);
    Net *m = net_create(&c, backend_cpu(), 2, NET_INFER);
    net_init_weights(m, 3);
    const ParamInfo *q = net_find_param(m, "blocks.1.attn.q_proj.weight");
    const ParamInfo *conv = net_find_param(m, "blocks.3.dw_conv.weight");
    const ParamInfo *nw = net_find_param(m, "blocks.2.attn.g_norm_swish_gate.weight");
    ck_assert(q && conv && nw);
    double bound = pow(2.0, -2.5) * sqrt(6.0 / (128 + 64)), mx = 0;  // xavier, gain 2^-2.5
    for (size_t i = 0; i < q->numel; i++) mx = fmax(mx, fabs(m->w[q->offset + i]));
    ck_assert_msg(mx <= bound && mx > 0.9 * bound, "q_proj max %g, bound %g", mx, bound);
    for (size_t i = 0; i < conv->numel; i++) ck_assert(m->w[conv->offset + i] == (i % 9 == 4 ? 1.0f : 0.0f));
    for (size_t i = 0; i < nw->numel; i++) ck_assert(m->w[nw->offset + i] == 1.0f);
    float x[2 * 32 * 32], t[2] = {3, 700}, out[2 * 2 * 32 * 32];
    int32_t y[2] = {1, 10};
    tu_fill(x, 2 * 32 * 32, -1, 1, 6);
    net_forward(m, out, x, t, y, 2);
    for (int i = 0; i < 2 * 2 * 32 * 32; i++) ck_assert(out[i] == 0.0f);
    ck_assert_int_ne(net_config_preset(&c, "DiG-Q/2", &err), 0);
    ck_assert(strstr(err.msg, "unknown preset") && strstr(err.msg, "DiG-"));
    c.dig.heads = 3;  // key width 64 is not divisible by 3
    ck_assert_int_ne(net_config_validate(&c, &err), 0);
    net_free(m);
}
END_TEST

// DiC's official initialisation: the output is exactly 0 (out_proj is zero) though the blocks are
// not the identity (their modulation Linears are not zeroed); GroupNorm weights 1.
START_TEST(test_dic_init) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    ck_assert_int_eq(net_config_preset(&c, "DiC-T", &err), 0);
    ck_assert_int_eq(c.backbone, BACKBONE_DIC);
    Net *m = net_create(&c, backend_cpu(), 2, NET_INFER);
    net_init_weights(m, 5);
    const ParamInfo *aff = net_find_param(m, "enc_blocks.1.0.conv.affine.1.weight");
    const ParamInfo *gn = net_find_param(m, "dec_blocks.0.0.conv.norm0.weight");
    const ParamInfo *conv = net_find_param(m, "lat_blocks.0.1.conv.conv1.weight");
    ck_assert(aff && gn && conv && net_find_param(m, "dec_blocks.0.0.conv.skip.weight"));
    double bound = sqrt(6.0 / (9.0 * 128 + 9.0 * 128)), mx = 0;  // conv fans I k^2, O k^2 (128 -> 128)
    for (size_t i = 0; i < conv->numel; i++) mx = fmax(mx, fabs(m->w[conv->offset + i]));
    ck_assert_msg(mx <= bound && mx > 0.9 * bound, "conv1 max %g, bound %g", mx, bound);
    double amax = 0;
    for (size_t i = 0; i < aff->numel; i++) amax = fmax(amax, fabs(m->w[aff->offset + i]));
    ck_assert(amax > 0);
    for (size_t i = 0; i < gn->numel; i++) ck_assert(m->w[gn->offset + i] == 1.0f);
    float x[2 * 32 * 32], t[2] = {3, 700}, out[2 * 2 * 32 * 32];
    int32_t y[2] = {1, 10};
    tu_fill(x, 2 * 32 * 32, -1, 1, 6);
    net_forward(m, out, x, t, y, 2);
    for (int i = 0; i < 2 * 2 * 32 * 32; i++) ck_assert(out[i] == 0.0f);
    ck_assert_int_ne(net_config_preset(&c, "DiC-S/2", &err), 0);
    c.image_size = 30;  // not a multiple of 4 (two down steps)
    ck_assert_int_ne(net_config_validate(&c, &err), 0);
    net_free(m);
}
END_TEST

// Attention rows of the last forward (NET_INFER_ATTN): MALA without RoPE sums to 1 in every block
// and head; a batch's image 1 has the row of that image run alone; blocks differ; plain NET_INFER
// keeps nothing (smaller arena) and refuses, as does a backbone without rows.
START_TEST(test_attn_rows) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    ck_assert_int_eq(net_config_preset(&c, "DiT-T/4", &err), 0);
    c.dit.rope = 0;
    const Backend *be = backend_cpu();
    ck_assert(net_arena_bytes(&c, be, 2, NET_INFER_ATTN) > net_arena_bytes(&c, be, 2, NET_INFER));
    Net *m = net_create(&c, be, 2, NET_INFER_ATTN), *plain = net_create(&c, be, 2, NET_INFER);
    tu_fill(m->w, m->n_floats, -0.2f, 0.2f, 11);  // every weight non-zero: adaLN and blocks do something
    AttnRowInfo in;
    ck_assert_int_eq(net_attn_info(m, &in, &err), 0);
    ck_assert_int_eq(in.blocks, c.dit.depth);
    ck_assert_int_eq(in.heads, c.dit.heads);
    const int L = in.gh * in.gw, S = c.image_size, per = c.in_channels * S * S;
    ck_assert_int_eq(L, (S / c.dit.patch) * (S / c.dit.patch));
    float row[256], row0[256], *x = calloc(2 * per, sizeof(float)), *out = calloc(4 * per, sizeof(float));
    float t[2] = {500, 40};
    int32_t y[2] = {2, 7};
    ck_assert_int_ne(net_attn_row(m, row, 0, 0, 0, 0, 1.0f, &err), 0);  // no forward yet
    tu_fill(x, 2 * per, -1, 1, 12);
    net_forward(m, out, x, t, y, 2);
    double first = 0;
    for (int blk = 0; blk < in.blocks; blk++)
        for (int h = -1; h < in.heads; h++)
            for (int q = 0; q < L; q += 5) {
                ck_assert_int_eq(net_attn_row(m, row, blk, h, 1, q, 1.0f, &err), 0);
                double sum = 0;
                for (int j = 0; j < L; j++) sum += row[j];
                ck_assert_msg(fabs(sum - 1.0) < 1e-4, "block %d head %d query %d sums to %.7f", blk, h, q, sum);
                if (blk == 0 && h == 0 && q == 0) first = row[0];
                if (blk == in.blocks - 1 && h == 0 && q == 0)
                    ck_assert_msg(row[0] != first, "the last block's row equals the first block's");
            }
    ck_assert_int_eq(net_attn_row(m, row, 2, 1, 1, 9, 2.0f, &err), 0);
    // image 1 alone, as image 0 of a batch of one
    net_forward(m, out, x + per, t + 1, y + 1, 1);
    ck_assert_int_eq(net_attn_row(m, row0, 2, 1, 0, 9, 2.0f, &err), 0);
    for (int j = 0; j < L; j++) ck_assert_msg(fabs(row0[j] - row[j]) < 1e-6, "token %d: %g vs %g", j, row0[j], row[j]);
    ck_assert_int_ne(net_attn_row(m, row, 0, 0, 1, 0, 1.0f, &err), 0);  // image 1 is not in the last batch
    ck_assert(strstr(err.msg, "image 1") != NULL);
    ck_assert_int_ne(net_attn_row(m, row, in.blocks, 0, 0, 0, 1.0f, &err), 0);
    ck_assert_int_ne(net_attn_row(m, row, 0, in.heads, 0, 0, 1.0f, &err), 0);
    ck_assert_int_ne(net_attn_row(m, row, 0, 0, 0, L, 1.0f, &err), 0);
    net_forward(plain, out, x, t, y, 2);
    ck_assert_int_ne(net_attn_row(plain, row, 0, 0, 0, 0, 1.0f, &err), 0);
    ck_assert(strstr(err.msg, "NET_INFER_ATTN") != NULL);
    net_free(m);
    net_free(plain);
    NetConfig g;
    net_config_default(&g, BACKBONE_DIG);
    ck_assert_int_eq(net_config_preset(&g, "DiG-T/4", &err), 0);
    Net *dg = net_create(&g, be, 1, NET_INFER_ATTN);
    ck_assert_int_ne(net_attn_info(dg, &in, &err), 0);
    ck_assert(strstr(err.msg, "no attention rows") != NULL);
    net_free(dg);
    free(x);
    free(out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_forward_backward_vs_pytorch, 0, NFIX);
    tcase_add_test(tc, test_forward_repeatable);
    tcase_add_test(tc, test_init_and_table);
    tcase_add_test(tc, test_model_file_round_trip);
    tcase_add_test(tc, test_mala_authors_block);
    tcase_add_loop_test(tc, test_names_vs_official, 0, 2);
    tcase_add_test(tc, test_dig_init);
    tcase_add_test(tc, test_dic_init);
    tcase_add_test(tc, test_attn_rows);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

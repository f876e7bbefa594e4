// Training: AdamW and EMA against PyTorch, the non-finite guard, the loss going down on a
// Fashion-MNIST subset, and `mala train --resume` being bit-exact (also past a truncated
// checkpoint), the range checks of the trainer's metadata, and the run's set-up returning its
// refusals instead of exiting.
#include <sys/stat.h>
#include <unistd.h>

#include "core/backend.h"
#include "model/checkpoint.h"
#include "train/loader.h"
#include "formats/safetensors.h"
#include "testutil.h"
#include "testcli.h"
#include "train/train_meta.h"
#include "train/train_setup.h"
#include "train/trainer.h"

static float *fixture(const StFile *f, const char *name) {
    const StTensor *t = st_find(f, name);
    ck_assert_msg(t != NULL, "adamw fixture: %s missing", name);
    float *x = malloc(sizeof(float) * (size_t)st_numel(t));
    MalaErr err;
    ck_assert_msg(st_read_f32(f, t, x, &err) == 0, "%s", err.msg);
    return x;
}

// torch.optim.AdamW (lr 1e-3, wd 0.05) and DiT's EMA over five steps (tools/ref/ref_adamw.py).
START_TEST(test_adamw_ema_vs_pytorch) {
    StFile f;
    MalaErr err;
    ck_assert_msg(st_open(&f, "tests/fixtures/adamw.safetensors", &err) == 0, "%s", err.msg);
    const Backend *be = backend_cpu();
    size_t n = (size_t)st_numel(st_find(&f, "p0"));
    float *p = fixture(&f, "p0"), *e = fixture(&f, "p0");
    float *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    for (int k = 1; k <= 5; k++) {
        char name[16];
        snprintf(name, sizeof name, "g.%d", k);
        float *g = fixture(&f, name);
        be->adamw(p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f, k);
        be->ema(e, p, n, 0.9f);
        snprintf(name, sizeof name, "p.%d", k);
        float *pr = fixture(&f, name);
        snprintf(name, sizeof name, "e.%d", k);
        float *er = fixture(&f, name);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(fabsf(p[i] - pr[i]) <= 1e-6f * fmaxf(1.0f, fabsf(pr[i])), "AdamW step %d [%zu]: %.9g vs %.9g",
                          k, i, p[i], pr[i]);
            ck_assert_msg(fabsf(e[i] - er[i]) <= 1e-6f * fmaxf(1.0f, fabsf(er[i])), "EMA step %d [%zu]", k, i);
        }
        free(g); free(pr); free(er);
    }
    free(p); free(e); free(m); free(v);
    st_close(&f);
}
END_TEST

// DiT-T/4 or DiG-T/4 made smaller: hidden 64, 2 heads (DiT depth 2; DiG depth 4, so its four scan
// directions end in the original token order); DiC-T at half its width with one block per stage.
static Trainer *tiny_backbone_trainer(float lr, int batch, BackboneKind bk) {
    NetConfig c;
    net_config_default(&c, bk);
    MalaErr err;
    ck_assert(net_config_preset(&c, bk == BACKBONE_DIG ? "DiG-T/4" : bk == BACKBONE_DIC ? "DiC-T" : "DiT-T/4", &err) == 0);
    if (bk == BACKBONE_DIC) {
        c.dic.hidden = 16;
        for (int s = 0; s < c.dic.n; s++) c.dic.depths[s] = 1;
    } else if (bk == BACKBONE_DIG) {
        c.dig.depth = 4;
        c.dig.hidden = 64;
        c.dig.heads = 2;
    } else {
        c.dit.depth = 2;
        c.dit.hidden = 64;
        c.dit.heads = 2;
    }
    ClassNames cn;
    class_names_default(&cn, 10);
    TrainOpts o;
    train_opts_default(&o);
    o.lr = lr;
    o.seed = 3;
    o.ema_decay = 0.99f;
    Trainer *tr = trainer_new(&c, &cn, &o, backend_cpu(), batch);
    trainer_init_weights(tr);
    class_names_free(&cn);
    return tr;
}

static Trainer *tiny_trainer(float lr, int batch) { return tiny_backbone_trainer(lr, batch, BACKBONE_DIT); }

// A batch with a NaN is skipped: weights, EMA and moments are untouched and the step is counted.
START_TEST(test_nonfinite_step_skipped) {
    Trainer *tr = tiny_trainer(1e-3f, 2);
    size_t img = 2 * 32 * 32, bytes = tr->net->n_floats * sizeof(float);
    float *x = calloc(img, sizeof(float));
    int32_t y[2] = {1, 2};
    trainer_step(tr, x, y);
    float *before = malloc(4 * bytes);
    memcpy(before, tr->net->w, bytes); memcpy((char *)before + bytes, tr->ema, bytes);
    memcpy((char *)before + 2 * bytes, tr->m, bytes); memcpy((char *)before + 3 * bytes, tr->v, bytes);
    x[5] = NAN;
    StepStats st = trainer_step(tr, x, y);
    ck_assert(st.skipped);
    ck_assert_int_eq(tr->bad_in_a_row, 1);
    ck_assert_int_eq(tr->skipped_total, 1);
    ck_assert_int_eq(tr->step, 1);
    ck_assert(!memcmp(before, tr->net->w, bytes) && !memcmp((char *)before + bytes, tr->ema, bytes));
    ck_assert(!memcmp((char *)before + 2 * bytes, tr->m, bytes) && !memcmp((char *)before + 3 * bytes, tr->v, bytes));
    x[5] = 0;
    st = trainer_step(tr, x, y);
    ck_assert(!st.skipped && tr->bad_in_a_row == 0 && tr->step == 2);
    free(before); free(x);
    trainer_free(tr);
}
END_TEST

// 200 steps on 512 Fashion-MNIST images halve the loss, for every backbone.
static const BackboneKind LOSS_BACKBONES[] = {BACKBONE_DIT, BACKBONE_DIG, BACKBONE_DIC};
START_TEST(test_loss_goes_down) {
    MalaErr err;
    Dataset *ds = dataset_open("fashion-mnist", 32, 1, &err);
    ck_assert_msg(ds != NULL, "%s", err.msg);
    ck_assert(dataset_limit(ds, 512, &err) == 0);
    int B = 8;
    Loader *ld = loader_new(ds, B, 1, 0, &err);
    ck_assert_msg(ld != NULL, "%s", err.msg);
    Trainer *tr = tiny_backbone_trainer(1e-3f, B, LOSS_BACKBONES[_i]);
    float *x = malloc(sizeof(float) * B * 32 * 32);
    int32_t y[16];
    double first = 0, last = 0;
    for (int s = 0; s < 200; s++) {
        loader_next(ld, x, y);
        StepStats st = trainer_step(tr, x, y);
        ck_assert(!st.skipped);
        if (s < 30) first += st.loss / 30;
        if (s >= 170) last += st.loss / 30;
    }
    printf("%s: loss %.4f -> %.4f over 200 steps\n", backbone_name(LOSS_BACKBONES[_i]), first, last);
    ck_assert_msg(last < 0.5 * first, "%s: loss %.4f -> %.4f did not halve", backbone_name(LOSS_BACKBONES[_i]),
                  first, last);
    free(x);
    trainer_free(tr);
    loader_free(ld);
    dataset_close(ds);
}
END_TEST

static void same_file(const char *a, const char *b) {
    size_t na, nb;
    void *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
    ck_assert_msg(na == nb && !memcmp(x, y, na), "%s and %s differ", a, b);
    free(x); free(y);
}

static const char *RESUME_MODELS[] = {"DiT-T/4", "DiG-T/4", "DiC-T"};
static const char *RESUME_PARAM[] = {"blocks.1.mlp.fc1.weight", "blocks.1.mlp.gate_proj.weight",
                                     "dec_blocks.0.0.conv.conv0.weight"};

// `decay`: with a learning-rate decay from step 2 to step 6 (given on the first invocation only:
// --resume takes it from the checkpoint).
static int train_cli_decay(const char *model, const char *out, const char *iters, int resume, int decay) {
    char *argv[32] = {"train", "--model", (char *)model, "--batch", "4", "--limit", "64", "--iters", (char *)iters,
                      "--ckpt-every", "4", "--log-every", "2", "--sample-every", "0", "--keep", "5", "--lr", "1e-3",
                      "--out", (char *)out, "--threads", "2"};
    int argc = 23;
    if (resume) argv[argc++] = "--resume";
    if (decay && !resume) {
        char *d[] = {"--decay-start", "2", "--decay-end", "6", "--lr-end", "1e-4"};
        for (int i = 0; i < 6; i++) argv[argc++] = d[i];
    }
    argv[argc] = NULL;
    return run_argv((const char *const *)argv, NULL, 0, NULL, 0);
}

static int train_cli(const char *model, const char *out, const char *iters, int resume) {
    return train_cli_decay(model, out, iters, resume, 0);
}

// The schedule: warmup (lr * step / warmup), the constant rate, the linear decay, its end rate.
START_TEST(test_lr_schedule) {
    TrainOpts o;
    train_opts_default(&o);
    o.lr = 1e-3f;
    o.warmup = 4;
    ck_assert(train_lr(&o, 1) == 1e-3f * (1.0f / 4));
    ck_assert(train_lr(&o, 4) == 1e-3f);
    ck_assert(train_lr(&o, 1000000) == 1e-3f);  // no decay by default
    o.decay_start = 10;
    o.decay_end = 20;
    o.lr_end = 1e-4f;
    ck_assert(train_lr(&o, 10) == 1e-3f);
    ck_assert(fabsf(train_lr(&o, 15) - 5.5e-4f) < 1e-9f);
    ck_assert(train_lr(&o, 20) == 1e-4f);
    ck_assert(train_lr(&o, 21) == 1e-4f);
    o.decay_end = 10;  // end not after start: no decay
    ck_assert(train_lr(&o, 30) == 1e-3f);
}
END_TEST

// The lr column of log.csv at its data rows.
static void log_lrs(const char *dir, double *lr, int n) {
    char path[300];
    snprintf(path, sizeof path, "%s/log.csv", dir);
    FILE *f = fopen(path, "r");
    ck_assert(f != NULL);
    char line[512];
    ck_assert(fgets(line, sizeof line, f) != NULL);  // header
    for (int i = 0; i < n; i++) {
        ck_assert(fgets(line, sizeof line, f) != NULL);
        const char *c = line;
        for (int k = 0; k < 6; k++) c = strchr(c, ',') + 1;  // step,loss,mse,vb,grad_norm,img_per_s,lr
        lr[i] = atof(c);
    }
    fclose(f);
}

// A decaying run resumed mid-decay, without the flags given again, is the straight run byte for
// byte; the logged rate follows the schedule; the decay changes the weights.
START_TEST(test_resume_decay_bit_exact) {
    char dir[] = "/tmp/mala_decay_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char a[256], b[256], c[256], fa[300], fb[300], fc[300];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    snprintf(c, sizeof c, "%s/c", dir);
    ck_assert_int_eq(train_cli_decay("DiT-T/4", a, "8", 0, 1), 0);
    ck_assert_int_eq(train_cli_decay("DiT-T/4", b, "4", 0, 1), 0);
    ck_assert_int_eq(train_cli_decay("DiT-T/4", b, "8", 1, 1), 0);
    ck_assert_int_eq(train_cli_decay("DiT-T/4", c, "8", 0, 0), 0);
    snprintf(fa, sizeof fa, "%s/checkpoints/0000008.safetensors", a);
    snprintf(fb, sizeof fb, "%s/checkpoints/0000008.safetensors", b);
    snprintf(fc, sizeof fc, "%s/checkpoints/0000008.safetensors", c);
    same_file(fa, fb);
    size_t na, nc;
    char *da = tu_read_file(fa, &na), *dc = tu_read_file(fc, &nc);
    ck_assert(na != nc || memcmp(da, dc, na) != 0);
    free(da);
    free(dc);
    double lr[4];
    log_lrs(b, lr, 4);  // steps 2, 4, 6, 8
    ck_assert(fabs(lr[0] - 1e-3) < 1e-9 && fabs(lr[1] - 5.5e-4) < 1e-9 && fabs(lr[2] - 1e-4) < 1e-9 &&
              fabs(lr[3] - 1e-4) < 1e-9);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert(system(cmd) == 0);
}
END_TEST

// 8 steps straight == 4 steps, stop, --resume, 4 more: identical checkpoint files byte for byte
// (weights, EMA, AdamW moments, RNG state and counters), for every backbone. A checkpoint cut
// short on disk is passed over by --resume, which continues from the previous one and arrives at
// the same bytes.
START_TEST(test_resume_bit_exact) {
    char dir[] = "/tmp/mala_resume_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char a[256], b[256], fa[300], fb[300];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    const char *model = RESUME_MODELS[_i];
    ck_assert_int_eq(train_cli(model, a, "8", 0), 0);
    ck_assert_int_eq(train_cli(model, b, "4", 0), 0);
    ck_assert_int_eq(train_cli(model, b, "8", 1), 0);
    snprintf(fa, sizeof fa, "%s/checkpoints/0000008.safetensors", a);
    snprintf(fb, sizeof fb, "%s/checkpoints/0000008.safetensors", b);
    same_file(fa, fb);
    // cut the newest checkpoint in half: resume must fall back to step 4
    struct stat stt;
    ck_assert(stat(fb, &stt) == 0);
    ck_assert(truncate(fb, stt.st_size / 2) == 0);
    ck_assert_int_eq(train_cli(model, b, "8", 1), 0);
    same_file(fa, fb);
    char log[300];
    snprintf(log, sizeof log, "%s/log.csv", b);
    size_t n;
    char *csv = tu_read_file(log, &n);
    int rows = 0;
    for (size_t i = 0; i < n; i++) rows += csv[i] == '\n';
    ck_assert_int_eq(rows, 1 + 4);  // header + steps 2, 4, 6, 8 (rows after step 4 were replaced)
    free(csv);
    // mala export: the EMA weights in F16, loadable for sampling
    char exported[300];
    snprintf(exported, sizeof exported, "%s/model.safetensors", dir);
    char *xargv[] = {"export", "--ckpt", fa, "--out", exported, NULL};
    ck_assert_int_eq(run_argv((const char *const *)xargv, NULL, 0, NULL, 0), 0);
    ClassNames cn;
    MalaErr err;
    Net *m = ckpt_load_model(exported, backend_cpu(), 1, &cn, &err);
    ck_assert_msg(m != NULL, "%s", err.msg);
    ck_assert_str_eq(cn.names[7], "Sneaker");
    StFile f;
    ck_assert(st_open(&f, fa, &err) == 0);
    const ParamInfo *p = net_find_param(m, RESUME_PARAM[_i]);
    ck_assert(p != NULL);
    float *ema = malloc(p->numel * sizeof(float));
    char ema_name[128];
    snprintf(ema_name, sizeof ema_name, "ema.%s", RESUME_PARAM[_i]);
    ck_assert(st_load_f32(&f, ema_name, p->shape, p->ndim, ema, &err) == 0);
    for (size_t i = 0; i < p->numel; i++)
        ck_assert(fabsf(m->w[p->offset + i] - ema[i]) <= 1e-3f * fabsf(ema[i]) + 1e-7f);
    free(ema);
    st_close(&f);
    class_names_free(&cn);
    net_free(m);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert(system(cmd) == 0);
}
END_TEST

// The trainer's settings round-trip through a checkpoint's metadata, and --resume refuses a value
// its flag would refuse, naming the file and the key (a damaged batch once wrapped to an int).
START_TEST(test_train_meta_ranges) {
    tu_make_tmpdir("meta");
    char path[300];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", tu_tmp);
    TrainOpts o;
    train_opts_default(&o);
    o.seed = 12345678901234ull;
    o.lr = 5e-4f;
    o.warmup = 500;
    o.decay_start = 30000;
    o.decay_end = 36000;
    o.lr_end = 2.5e-5f;
    o.ema_decay = 0.999f;
    static const struct { const char *key, *value, *msg; } BAD[] = {
        {NULL, NULL, NULL},
        {"batch", "0", "metadata 'batch' = 0 is out of range (1 to 2147483647)"},
        {"batch", "4294967304", "metadata 'batch' = 4294967304 is out of range (1 to 2147483647)"},
        {"batch", "-8", "metadata 'batch' = '-8' is not an integer"},
        {"warmup", "3000000000", "metadata 'warmup' = 3000000000 is out of range (0 to 2147483647)"},
        {"lr", "2", "metadata 'lr' = 2 is out of range (0 to 1)"},
        {"lr", "nan", "metadata 'lr' = 'nan' is not a finite number"},
        {"ema_decay", "-0.5", "metadata 'ema_decay' = -0.5 is out of range (0 to 1)"},
        {"label_drop", "1.5", "metadata 'label_drop' = 1.5 is out of range (0 to 1)"},
        {"weight_decay", "11", "metadata 'weight_decay' = 11 is out of range (0 to 10)"},
        {"grad_clip", "-1", "metadata 'grad_clip' = -1 is out of range (at least 0)"},
        {"lr_end", "3", "metadata 'lr_end' = 3 is out of range (0 to 1)"},
        {"decay_end", "30000", "metadata 'decay_end' = 30000 is not after 'decay_start' = 30000"},
        {"seed", "x", "metadata 'seed' = 'x' is not an integer"},
    };
    float x = 1.0f;
    int64_t one = 1;
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        StWriter *w = st_writer_new();
        train_meta_write(w, &o, 64);
        if (BAD[k].key) st_writer_meta(w, BAD[k].key, BAD[k].value);
        st_writer_add(w, "x", ST_F32, &one, 1, &x);
        MalaErr err;
        ck_assert_msg(st_writer_save(w, path, &err) == 0, "%s", err.msg);
        st_writer_free(w);
        StFile f;
        ck_assert_msg(st_open(&f, path, &err) == 0, "%s", err.msg);
        TrainOpts r;
        train_opts_default(&r);
        int batch = 0, rc = train_meta_read(&f, &r, &batch, &err);
        st_close(&f);
        if (!BAD[k].key) {
            ck_assert_msg(rc == 0, "%s", err.msg);
            ck_assert_int_eq(batch, 64);
            ck_assert(r.seed == o.seed && r.lr == o.lr && r.warmup == o.warmup && r.decay_start == o.decay_start &&
                      r.decay_end == o.decay_end && r.lr_end == o.lr_end && r.ema_decay == o.ema_decay &&
                      r.label_drop == o.label_drop && r.weight_decay == o.weight_decay && r.grad_clip == o.grad_clip);
            continue;
        }
        ck_assert_msg(rc != 0, "%s = %s accepted", BAD[k].key, BAD[k].value);
        char want[512];
        snprintf(want, sizeof want, "%s: %s", path, BAD[k].msg);
        ck_assert_str_eq(err.msg, want);
    }
    tu_rm_tmpdir();
}
END_TEST


// ---- gradient accumulation ----

// The tiny DiT above with `accum` micro-batches of `batch` per step and `classes` classes (seed 3, lr 1e-3).
static Trainer *tiny_classes_trainer(int batch, int accum, int classes) {
    NetConfig c;
    net_config_default(&c, BACKBONE_DIT);
    MalaErr err;
    ck_assert(net_config_preset(&c, "DiT-T/4", &err) == 0);
    c.dit.depth = 2;
    c.dit.hidden = 64;
    c.dit.heads = 2;
    ClassNames cn;
    c.num_classes = classes;
    class_names_default(&cn, classes);
    TrainOpts o;
    train_opts_default(&o);
    o.lr = 1e-3f;
    o.seed = 3;
    o.ema_decay = 0.99f;
    o.label_drop = 0.5f;  // dropouts in every step: their draws must line up too
    o.accum = accum;
    Trainer *tr = trainer_new(&c, &cn, &o, backend_cpu(), batch);
    trainer_init_weights(tr);
    class_names_free(&cn);
    return tr;
}

static Trainer *tiny_accum_trainer(int batch, int accum) { return tiny_classes_trainer(batch, accum, 10); }

// Largest |a - b| over n floats relative to the largest |b|.
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

// --accum 2 of batch 2 takes the steps one batch of 4 takes: the same images, timesteps, dropouts and
// noise (the draws are per image of the step), the gradient the mean over the 4. Only the order of
// the gradient's sums differs (the halving is exact), so the gradient agrees to 1e-5 of its largest
// element and the weights after AdamW to 1e-6 (measured: see the printed figures), the loss
// terms to 1e-6 relative. A NaN in the second micro-batch skips the step and still consumes both.
START_TEST(test_accum_equals_big_batch) {
    const int B = 2, K = 2, steps = 3;
    Trainer *a = tiny_accum_trainer(B, K), *b = tiny_accum_trainer(B * K, 1);
    ck_assert_int_eq(trainer_step_images(a), trainer_step_images(b));
    const size_t per = 32 * 32, nf = a->net->n_floats, nt = a->net->n_trainable;
    float *x = malloc(sizeof(float) * B * K * per);
    int32_t y[4];
    uint64_t r = 42;
    for (int s = 0; s < steps; s++) {
        for (size_t i = 0; i < B * K * per; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((r >> 40) / (double)(1 << 24)) * 2 - 1;
        }
        for (int i = 0; i < B * K; i++) y[i] = (s * 4 + i) % 10;
        StepStats sa = trainer_step(a, x, y), sb = trainer_step(b, x, y);
        ck_assert(!sa.skipped && !sb.skipped);
        double dg = rel_diff(a->grad, b->grad, nt), dw = tu_max_abs_diff(a->net->w, b->net->w, nf);
        double de = tu_max_abs_diff(a->ema, b->ema, nf);
        printf("accum 2 x 2 vs batch 4, step %d: loss %.6f vs %.6f, grad rel %.3g, weights %.3g, EMA %.3g\n", s + 1,
               sa.loss, sb.loss, dg, dw, de);
        ck_assert_msg(fabs(sa.mse - sb.mse) <= 1e-6 * sb.mse && fabs(sa.vb - sb.vb) <= 1e-6 * sb.vb + 1e-9,
                      "loss %.9g %.9g vs %.9g %.9g", sa.mse, sa.vb, sb.mse, sb.vb);
        ck_assert_msg(fabs(sa.grad_norm - sb.grad_norm) <= 1e-5 * sb.grad_norm, "grad norm %g vs %g", sa.grad_norm,
                      sb.grad_norm);
        ck_assert_msg(dg <= 1e-5, "gradient differs by %g of its largest element", dg);
        ck_assert_msg(dw <= 1e-6 && de <= 1e-6, "weights differ by %g, EMA by %g", dw, de);
    }
    ck_assert_int_eq(a->step, steps);
    ck_assert_int_eq(a->batches, (uint64_t)steps * K);
    ck_assert_int_eq(b->batches, steps);
    // a NaN in the second micro-batch: the step is skipped, both micro-batches consumed
    x[B * per + 3] = NAN;
    StepStats st = trainer_step(a, x, y);
    ck_assert(st.skipped && a->step == (uint64_t)steps && a->batches == (uint64_t)(steps + 1) * K);
    free(x);
    trainer_free(a);
    trainer_free(b);
}
END_TEST

// --classes 0: a label table of one row [1, hidden], which every image gets: the
// labels given change nothing, bit for bit.
START_TEST(test_unconditional_ignores_labels) {
    Trainer *a = tiny_classes_trainer(2, 1, 0), *b = tiny_classes_trainer(2, 1, 0);
    const ParamInfo *p = net_find_param(a->net, "y_embedder.embedding_table.weight");
    ck_assert(p != NULL && p->ndim == 2 && p->shape[0] == 1 && p->shape[1] == 64);
    float *x = calloc(2 * 32 * 32, sizeof(float));
    for (int i = 0; i < 2 * 32 * 32; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    int32_t ya[2] = {3, 7}, yb[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        StepStats sa = trainer_step(a, x, ya), sb = trainer_step(b, x, yb);
        ck_assert(!sa.skipped && sa.loss == sb.loss);
    }
    size_t bytes = a->net->n_floats * sizeof(float);
    ck_assert(!memcmp(a->net->w, b->net->w, bytes) && !memcmp(a->ema, b->ema, bytes));
    free(x);
    trainer_free(a);
    trainer_free(b);
}
END_TEST

// The set-up's refusals come back as errors (the process goes on), with the lines `mala train`
// prints after "error: ".
START_TEST(test_setup_returns_errors) {
    tu_make_tmpdir("setup");
    TrainSetup *t = calloc(1, sizeof *t);
    MalaErr err;
    t->out = tu_tmp, t->device = "cpu", t->precision = "int8";
    ck_assert_int_eq(train_setup_open(t, &err), -1);
    ck_assert_str_eq(err.msg, "--precision int8: int8 is for sampling only (it has no backward); train in fp32 or bf16");
    // a directory whose log.csv has a row and no checkpoint: refused, its lock given back by free
    FILE *f = fopen(tp("log.csv"), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time\n1,0.5,0.4,0.1,1,10,1e-4,0,1,0\n");
    fclose(f);
    t->precision = NULL;
    ck_assert_int_eq(train_setup_open(t, &err), -1);
    ck_assert_msg(strstr(err.msg, "already holds a run (log.csv with 1 row) but no checkpoint"), "%s", err.msg);
    ck_assert_int_ge(t->lock.fd, 0);
    train_setup_free(t);
    ck_assert_int_eq(t->lock.fd, -1);
    // --resume of a directory with nothing to resume
    memset(t, 0, sizeof *t);
    t->out = tp("none"), t->device = "cpu", t->resume = 1;
    ck_assert_int_eq(train_setup_open(t, &err), -1);
    ck_assert_msg(strstr(err.msg, "--resume: nothing to resume in ") && strstr(err.msg, "drop --resume"), "%s", err.msg);
    // the settings: an evaluation reference that is not there
    memset(t, 0, sizeof *t);
    eval_every_default(&t->rs.eval);
    t->out = tp("run"), t->rs.data = "fashion-mnist", t->eval_every = "2s", t->eval_ref = "no/such.npz";
    ck_assert_int_eq(train_setup_settings(t, &err), -1);
    ck_assert_str_eq(err.msg, "--eval-ref no/such.npz: No such file or directory");
    free(t);
    tu_rm_tmpdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_adamw_ema_vs_pytorch);
    tcase_add_test(tc, test_nonfinite_step_skipped);
    tcase_add_loop_test(tc, test_loss_goes_down, 0, 3);
    tcase_add_loop_test(tc, test_resume_bit_exact, 0, 3);
    tcase_add_test(tc, test_lr_schedule);
    tcase_add_test(tc, test_resume_decay_bit_exact);
    tcase_add_test(tc, test_train_meta_ranges);
    tcase_add_test(tc, test_setup_returns_errors);
    suite_add_tcase(s, tc);
    TCase *ta = tcase_create("issue37");  // --accum, --classes 0, --init
    tcase_set_timeout(ta, 300);
    tcase_add_test(ta, test_accum_equals_big_batch);
    tcase_add_test(ta, test_unconditional_ignores_labels);
    suite_add_tcase(s, ta);
    return tu_run(s);
}

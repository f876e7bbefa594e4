// defines: fmnist_labels_match, fmnist_net_load, fmnist_net_free, fmnist_net_test_accuracy, fmnist_net_forward,
//          fmnist_net_forward_u01
// The Fashion-MNIST feature classifier on the op table (eval/fmnist_features.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/fmnist_features.h"
#include "model/net.h"   // defines: Arena, arena_take

static const int kWidths[FMNIST_FEAT_BLOCKS] = {32, 64, 96, 128};
static const int kStrides[FMNIST_FEAT_BLOCKS] = {1, 2, 2, 2};
#define LAST_SIDE 4   // 32 / (1 * 2 * 2 * 2)

struct FmnistNet {
    const Backend *be;
    int max_batch;
    double test_accuracy;
    FmnistParam p[FMNIST_FEAT_NPARAMS];
    float *w;               // device: the weights, then the 1/16 mean vector
    float *mean_vec;        // [LAST_SIDE^2]
    void *act;              // device: one block for everything below
    float *x, *a, *b;       // input [B, 1, 32, 32]; two maps of the largest activation
    float *work;            // conv workspace
    size_t work_floats;
    float *gmean, *grstd;   // groupnorm statistics [B * G]
    float *feats, *logits;  // [B, 128], [B, 10]
    float *host;            // [B, 32, 32]: fmnist_net_forward_u01's converted input
};

static ConvShape conv_shape(int b, int B) {
    int side = FMNIST_FEAT_SIZE;
    for (int i = 0; i < b; i++) side /= kStrides[i];
    ConvShape s = {.B = B, .Cin = b ? kWidths[b - 1] : 1, .H = side, .W = side, .Cout = kWidths[b], .kh = 3, .kw = 3,
                   .stride = kStrides[b], .pt = 1, .pb = 1, .pl = 1, .pr = 1};
    return s;
}

static size_t map_floats(int b, int B) {  // the output of block b
    ConvShape s = conv_shape(b, B);
    int side = (s.H + 2 - 3) / s.stride + 1;
    return (size_t)B * s.Cout * side * side;
}

// The activation block laid out on arena a (a->base NULL: sizes only).
static void layout(FmnistNet *m, Arena *a) {
    const int B = m->max_batch;
    size_t big = 0;
    m->work_floats = 0;
    for (int b = 0; b < FMNIST_FEAT_BLOCKS; b++) {
        if (map_floats(b, B) > big) big = map_floats(b, B);
        size_t w = m->be->conv2d_workspace_floats(conv_shape(b, B));
        if (w > m->work_floats) m->work_floats = w;
    }
    m->x = arena_take(a, (size_t)B * FMNIST_FEAT_SIZE * FMNIST_FEAT_SIZE);
    m->a = arena_take(a, big);
    m->b = arena_take(a, big);
    m->work = arena_take(a, m->work_floats ? m->work_floats : 1);
    m->gmean = arena_take(a, (size_t)B * FMNIST_FEAT_GROUPS);
    m->grstd = arena_take(a, (size_t)B * FMNIST_FEAT_GROUPS);
    m->feats = arena_take(a, (size_t)B * FMNIST_FEAT_DIM);
    m->logits = arena_take(a, (size_t)B * FMNIST_FEAT_CLASSES);
}

FmnistNet *fmnist_net_load(const char *path, const Backend *be, int max_batch, MalaErr *err) {
    if (max_batch < 1) {
        mala_errf(err, "%s: batch %d", path, max_batch);
        return NULL;
    }
    StFile f;
    if (st_open(&f, path, err)) return NULL;
    FmnistNet *m = xcalloc(1, sizeof *m);
    m->be = be ? be : backend_host();
    m->max_batch = max_batch;
    size_t nw = fmnist_params(m->p);
    float *host = xmalloc((nw + LAST_SIDE * LAST_SIDE) * sizeof(float));
    if (fmnist_weights_read(&f, host, err)) {
        free(host);
        free(m);
        st_close(&f);
        return NULL;
    }
    const char *acc = st_meta(&f, "test_accuracy");
    m->test_accuracy = acc ? strtod(acc, NULL) : NAN;
    st_close(&f);
    for (int i = 0; i < LAST_SIDE * LAST_SIDE; i++) host[nw + i] = 1.0f / (LAST_SIDE * LAST_SIDE);
    m->w = m->be->alloc((nw + LAST_SIDE * LAST_SIDE) * sizeof(float));
    m->be->to_device(m->w, host, (nw + LAST_SIDE * LAST_SIDE) * sizeof(float));
    m->mean_vec = m->w + nw;
    free(host);
    Arena a = {NULL, 0};
    layout(m, &a);
    m->act = m->be->alloc(a.used);
    a = (Arena){m->act, 0};
    layout(m, &a);
    m->host = xmalloc((size_t)max_batch * FMNIST_FEAT_SIZE * FMNIST_FEAT_SIZE * sizeof(float));
    return m;
}

void fmnist_net_free(FmnistNet *m) {
    if (!m) return;
    m->be->release(m->w);
    m->be->release(m->act);
    free(m->host);
    free(m);
}

double fmnist_net_test_accuracy(const FmnistNet *m) { return m->test_accuracy; }

// The classes the classifier was trained on (tools/ref/train_fmnist_classifier.py: torchvision's order).
static const char *const FMNIST_NAMES[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                             "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

int fmnist_labels_match(char *const *names, int k, int size, int channels, char *why, size_t cap) {
    int named = names != NULL && k > 0;
    for (int i = 0; named && i < k; i++) {  // class_names_default's "0", "1", ...: no names
        char d[16];
        snprintf(d, sizeof d, "%d", i);
        named = strcmp(names[i], d) != 0;
    }
    if (k >= 0 && k != 10) {
        snprintf(why, cap, "the images have %d classes, not the classifier's 10 Fashion-MNIST classes", k);
        return 0;
    }
    if (named) {
        for (int i = 0; i < 10; i++)
            if (strcmp(names[i], FMNIST_NAMES[i])) {
                snprintf(why, cap, "class %d is '%s', not the classifier's Fashion-MNIST class '%s'", i, names[i],
                         FMNIST_NAMES[i]);
                return 0;
            }
        return 1;
    }
    if ((size != 28 && size != 32) || channels != 1) {
        snprintf(why, cap, "the classes are unnamed and the images %dx%dx%d, not Fashion-MNIST's 28 or 32 px gray",
                 size, size, channels);
        return 0;
    }
    return 1;
}

static const float *weight(const FmnistNet *m, int i) { return m->w + m->p[i].offset; }

// One chunk of B <= max_batch images already in m->x; results left in m->feats, m->logits.
static void forward_chunk(FmnistNet *m, int B) {
    const Backend *be = m->be;
    // conv into a, GroupNorm from a into b, GELU in place on b; b is the next block's input.
    const float *in = m->x;
    for (int b = 0; b < FMNIST_FEAT_BLOCKS; b++) {
        ConvShape s = conv_shape(b, B);
        int side = (s.H + 2 - 3) / s.stride + 1, C = kWidths[b];
        be->conv2d_fwd(m->a, in, weight(m, 4 * b), weight(m, 4 * b + 1), s, m->work, m->work_floats);
        be->groupnorm_fwd(m->b, m->gmean, m->grstd, m->a, weight(m, 4 * b + 2), weight(m, 4 * b + 3), B, C,
                          side * side, FMNIST_FEAT_GROUPS, FMNIST_FEAT_EPS);
        be->gelu_erf_fwd(m->b, m->b, (size_t)B * C * side * side);
        in = m->b;
    }
    // Global mean over the 4 x 4 map: the [B*128, 16] rows times the 1/16 vector.
    be->linear_fwd(m->feats, in, m->mean_vec, NULL, B * FMNIST_FEAT_DIM, LAST_SIDE * LAST_SIDE, 1);
    be->linear_fwd(m->logits, m->feats, weight(m, 4 * FMNIST_FEAT_BLOCKS), weight(m, 4 * FMNIST_FEAT_BLOCKS + 1), B,
                   FMNIST_FEAT_DIM, FMNIST_FEAT_CLASSES);
}

void fmnist_net_forward(FmnistNet *m, const float *x, int N, float *feats, float *logits) {
    const size_t per = (size_t)FMNIST_FEAT_SIZE * FMNIST_FEAT_SIZE;
    // The CPU's bf16 (--precision bf16) does not reach the features: scores stay comparable across
    // precisions. (CUDA's TF32 default is kept as it was.)
    const int bf16 = !strcmp(m->be->precision(), "bf16");
    if (bf16) m->be->set_precision(1);
    for (int i = 0; i < N; i += m->max_batch) {
        int B = N - i < m->max_batch ? N - i : m->max_batch;
        m->be->to_device(m->x, x + (size_t)i * per, (size_t)B * per * sizeof(float));
        forward_chunk(m, B);
        if (feats) m->be->to_host(feats + (size_t)i * FMNIST_FEAT_DIM, m->feats, (size_t)B * FMNIST_FEAT_DIM * sizeof(float));
        if (logits)
            m->be->to_host(logits + (size_t)i * FMNIST_FEAT_CLASSES, m->logits,
                           (size_t)B * FMNIST_FEAT_CLASSES * sizeof(float));
    }
    if (bf16) m->be->set_precision(0);
}

int fmnist_net_forward_u01(FmnistNet *m, const float *imgs, int N, int C, int H, int W, float *feats, float *logits,
                           MalaErr *err) {
    if ((C != 1 && C != 3) || H != W || (H != FMNIST_FEAT_SIZE && H != 28))
        return mala_errf(err, "the Fashion-MNIST classifier takes 1 x 32 x 32 or 1 x 28 x 28 images (RGB is "
                              "averaged), not %d x %d x %d", C, H, W);
    const int S = FMNIST_FEAT_SIZE, pad = (S - H) / 2;
    for (int i = 0; i < N; i += m->max_batch) {
        int B = N - i < m->max_batch ? N - i : m->max_batch;
        for (int n = 0; n < B; n++) {
            const float *src = imgs + (size_t)(i + n) * C * H * W;
            float *dst = m->host + (size_t)n * S * S;
            for (int k = 0; k < S * S; k++) dst[k] = -1.0f;  // black border
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    double v = 0;
                    for (int c = 0; c < C; c++) v += src[((size_t)c * H + y) * W + x];
                    dst[(y + pad) * S + x + pad] = (float)(2.0 * v / C - 1.0);
                }
        }
        fmnist_net_forward(m, m->host, B, feats ? feats + (size_t)i * FMNIST_FEAT_DIM : NULL,
                           logits ? logits + (size_t)i * FMNIST_FEAT_CLASSES : NULL);
    }
    return 0;
}

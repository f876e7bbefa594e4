// defines: worker_start, worker_model, worker_submit, worker_submit_init, worker_cancel, worker_poll, worker_set_attn,
//          worker_poll_attn, worker_stop
// The viewer's generation thread. It alone calls generator_*: it opens the model, then runs one
// request at a time, handing every step's predicted x0 to the UI thread under the mutex. The UI
// never waits for a step: it copies whatever frame is newest when it polls. The network keeps each
// block's attention inputs (NET_INFER_ATTN), so the worker also answers attention-map requests
// from the last forward: after every step of a run and, when idle, as soon as one comes.
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cli/args.h"
#include "viewer/viewer.h"
#include "cpu/cpu_threads.h"

struct Worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int cancel;        // read by on_step without the lock
    // set before the thread starts, then read only by it
    char *path;
    const Backend *be;
    int threads;
    WakeFn wake;
    void *wake_ctx;
    // under mu
    int quit, has_request, loaded;
    ViewRequest req;
    ModelInfo model;
    WorkerStatus st;
    Frame frame;              // the newest frame, x has VIEW_MAX_IMAGES images
    double t0;                // start of the current run
    AttnSel sel;              // the attention map asked for
    int attn_dirty;           // sel changed since the last map
    AttnMap map;              // the newest map (row: gh*gw floats)
    uint64_t attn_seq;        // bumps with every new map
    float *in_img, *in_mask;  // the request's input image [C, S, S] and mask [S, S] (output images' size)
    // the worker thread's own
    Generator *g;
    float *row;               // scratch row [gh*gw]
    float *dec;               // latent models: decoded images [VIEW_MAX_IMAGES, out C, out S, out S]
    const char *vae;          // latent models: the VAE attached (--vae, else vae_buf: the recorded one)
    char vae_buf[4200];
};

static size_t image_floats(const ModelInfo *mi) { return (size_t)mi->C * mi->S * mi->S; }

// ---- latent models: step frames projected, the final one decoded through the VAE ----
static const char *g_vae_path;  // set before any worker starts (worker_set_vae)

void worker_set_vae(const char *vae_path) { g_vae_path = vae_path; }

int worker_check_vae(const char *model, const char *vae_path, int pixel_ok, MalaErr *err) {
    NetConfig c;
    ClassNames cn;
    if (ckpt_file_config(model, &c, &cn, err)) return -1;  // safetensors or a PyTorch .pt
    class_names_free(&cn);
    if (c.num_classes == 0)  // the viewer's panes, prompts and captions are per class
        return mala_errf(err, "%s is an unconditional model (num_classes 0): the viewer shows class-conditional models; "
                         "sample it with mala sample", model);
    char rec[4200];
    int recorded = c.latent_scale > 0 && !vae_path ? gen_model_recorded_vae(model, rec, sizeof rec, err) : 0;
    if (recorded < 0) return -1;
    if (c.latent_scale > 0 && !vae_path && !recorded)
        return mala_errf(err, "%s is a latent model whose run recorded no VAE: give --vae FILE, the VAE that decodes its "
                         "samples", model);
    if (recorded) fprintf(stderr, "using the VAE recorded in %s: %s\n", model, rec);
    if (!(c.latent_scale > 0) && vae_path && !pixel_ok)
        return mala_errf(err, "--vae %s: %s is a pixel-space model (its samples are images already)", vae_path, model);
    return 0;
}

// x (model space, n images) as the frame's images: w->dec for a latent model, else x itself. A
// step's frame (final 0) is the latent-to-RGB projection (generator_preview, no VAE pass), the
// final one the VAE's decode.
static const float *frame_images(Worker *w, const float *x, int n, int final) {
    if (!w->g->vae) return x;
    MalaErr err;
    if (final ? generator_decode(w->g, x, n, w->dec, &err) : generator_preview(w->g, x, n, w->dec, &err)) {
        fprintf(stderr, "warning: viewer: %s\n", err.msg);
        return NULL;
    }
    return w->dec;
}

static void describe(ModelInfo *mi, const NetConfig *c) {
    net_backbone(c->backbone)->describe(c, mi->arch, sizeof mi->arch);
    snprintf(mi->data, sizeof mi->data, "%s, %dx%dx%d, %d classes", backbone_name(c->backbone), c->image_size,
             c->image_size, c->in_channels, c->num_classes);
}

// Publishes the loaded model (or the failure) to the UI thread.
static void publish_open(Worker *w, const Generator *g, int rc, const MalaErr *err) {
    pthread_mutex_lock(&w->mu);
    if (rc) {
        w->st.phase = WORKER_FAILED;
        snprintf(w->st.msg, sizeof w->st.msg, "%s", err->msg);
    } else {
        w->model.C = generator_out_channels(g);  // a latent model's decoded images
        w->model.S = generator_out_size(g);
        if (g->vae) w->dec = xmalloc(VIEW_MAX_IMAGES * generator_out_floats(g) * sizeof(float));
        describe(&w->model, &g->net->cfg);
        class_names_copy(&w->model.classes, &g->classes);
        MalaErr why;
        w->model.has_attn = net_attn_info(g->net, &w->model.attn, &why) == 0;
        if (w->model.has_attn) {
            size_t L = (size_t)w->model.attn.gh * w->model.attn.gw;
            w->map.row = xcalloc(L, sizeof(float));
            w->row = xcalloc(L, sizeof(float));
        } else {
            snprintf(w->model.attn_why, sizeof w->model.attn_why, "%s", why.msg);
        }
        w->frame.x = xcalloc(VIEW_MAX_IMAGES * image_floats(&w->model), sizeof(float));
        w->in_img = xcalloc(image_floats(&w->model), sizeof(float));
        w->in_mask = xcalloc((size_t)w->model.S * w->model.S, sizeof(float));
        w->loaded = 1;
        w->st.phase = WORKER_IDLE;
    }
    pthread_mutex_unlock(&w->mu);
    w->wake(w->wake_ctx);
}

// Stores frame x (n images) as the newest one; call with the lock held.
static void store_frame(Worker *w, const float *x, int n, int final) {
    memcpy(w->frame.x, x, n * image_floats(&w->model) * sizeof(float));
    w->frame.n = n;
    w->frame.final = final;
    w->frame.req = w->req;
    w->st.seq++;
}

// Computes the map asked for from the network's last forward and publishes it (worker thread).
static void update_attn(Worker *w) {
    pthread_mutex_lock(&w->mu);
    AttnSel sel = w->sel;
    int step = w->st.step;
    uint64_t seq = w->st.seq;
    w->attn_dirty = 0;
    pthread_mutex_unlock(&w->mu);
    if (!sel.on || !w->model.has_attn) return;
    MalaErr err = {{0}};
    int rc = net_attn_row(w->g->net, w->row, sel.block, sel.head, sel.image, sel.query, sel.a, &err);
    pthread_mutex_lock(&w->mu);
    w->map.ok = rc == 0;
    if (rc == 0) memcpy(w->map.row, w->row, (size_t)w->model.attn.gh * w->model.attn.gw * sizeof(float));
    snprintf(w->map.msg, sizeof w->map.msg, "%s", rc ? err.msg : "");
    w->map.sel = sel;
    w->map.step = step;
    w->map.frame_seq = seq;
    w->attn_seq++;
    pthread_mutex_unlock(&w->mu);
    w->wake(w->wake_ctx);
}

static int on_step(void *ctx, int i, int nsteps, const float *x0) {
    Worker *w = ctx;
    const float *img = frame_images(w, x0, w->req.n, 0);  // a latent model: the projection, every step
    pthread_mutex_lock(&w->mu);
    if (img) store_frame(w, img, w->req.n, 0);
    w->st.step = i + 1;
    w->st.nsteps = nsteps;
    w->st.seconds = now_seconds() - w->t0;
    w->st.steps_per_s = w->st.seconds > 0 ? (i + 1) / w->st.seconds : 0;
    int attn = w->sel.on;
    pthread_mutex_unlock(&w->mu);
    w->wake(w->wake_ctx);
    if (attn) update_attn(w);  // this step's forward
    return atomic_load(&w->cancel) ? 1 : 0;
}

// Waits for the next request; 0 when it is time to quit.
static int next_request(Worker *w, ViewRequest *r) {
    pthread_mutex_lock(&w->mu);
    for (;;) {  // answers attention-map requests while waiting
        while (!w->has_request && !w->quit && !w->attn_dirty) pthread_cond_wait(&w->cv, &w->mu);
        if (w->has_request || w->quit) break;
        pthread_mutex_unlock(&w->mu);
        update_attn(w);
        pthread_mutex_lock(&w->mu);
    }
    int go = !w->quit;
    if (go) {
        *r = w->req;
        w->has_request = 0;
        w->t0 = now_seconds();
    }
    pthread_mutex_unlock(&w->mu);
    return go;
}

static void finish_run(Worker *w, int rc, const float *x, const MalaErr *err) {
    const float *img = rc == 0 ? frame_images(w, x, w->req.n, 1) : NULL;
    pthread_mutex_lock(&w->mu);
    w->st.seconds = now_seconds() - w->t0;
    if (rc == 0 && img) {
        store_frame(w, img, w->req.n, 1);
        w->st.outcome = RUN_DONE;
    } else if (rc == SAMPLER_CANCELLED) {
        w->st.outcome = RUN_CANCELLED;
    } else {
        w->st.outcome = RUN_FAILED;
        snprintf(w->st.msg, sizeof w->st.msg, "%s", err->msg);
    }
    w->st.phase = WORKER_IDLE;
    w->attn_dirty = w->sel.on;  // the map again, now tied to the final frame
    pthread_mutex_unlock(&w->mu);
    w->wake(w->wake_ctx);
}

// The request's input in the model's space for n images: the image encoded (a latent model's
// through its VAE), the mask on the model's grid (GenInit, pipeline/generate.h).
typedef struct { float *pix, *z, *grid; } InitBufs;

static int prepare_init(Worker *w, Generator *g, const ViewRequest *r, InitBufs *b, GenInit *gi, MalaErr *err) {
    const size_t oper = image_floats(&w->model), per = generator_image_floats(g);
    const size_t cells = (size_t)g->net->cfg.image_size * g->net->cfg.image_size;
    pthread_mutex_lock(&w->mu);  // the input of this request (a later submit may replace it)
    for (int i = 0; i < r->n; i++) memcpy(b->pix + oper * i, w->in_img, oper * sizeof(float));
    if (r->mask) generator_mask_to_grid(g, w->in_mask, 1, b->grid);
    pthread_mutex_unlock(&w->mu);
    if (generator_encode(g, b->pix, r->n, b->z, err)) return -1;
    for (int i = 1; r->mask && i < r->n; i++) memcpy(b->grid + cells * i, b->grid, cells * sizeof(float));
    *gi = (GenInit){.image = b->z, .strength = r->strength, .mask = r->mask ? b->grid : NULL, .resample = r->resample};
    (void)per;
    return 0;
}

static void run_requests(Worker *w, Generator *g) {
    size_t per = generator_image_floats(g);
    float *x = xmalloc(VIEW_MAX_IMAGES * per * sizeof(float));
    InitBufs b = {xmalloc(VIEW_MAX_IMAGES * image_floats(&w->model) * sizeof(float)),
                  xmalloc(VIEW_MAX_IMAGES * per * sizeof(float)),
                  xmalloc(VIEW_MAX_IMAGES * (size_t)g->net->cfg.image_size * g->net->cfg.image_size * sizeof(float))};
    int32_t y[VIEW_MAX_IMAGES];
    ViewRequest r;
    while (next_request(w, &r)) {
        for (int i = 0; i < r.n; i++) y[i] = r.cls;
        generator_noise(g, x, r.seed, 0, r.n);
        MalaErr err = {{0}};
        GenInit gi;
        int rc = r.init ? prepare_init(w, g, &r, &b, &gi, &err) : 0;
        if (rc == 0) rc = generator_run_init(g, &r.opts, r.init ? &gi : NULL, x, y, r.n, r.seed, 0, on_step, w, &err);
        finish_run(w, rc, x, &err);
    }
    free(x);
    free(b.pix);
    free(b.z);
    free(b.grid);
}

static void *worker_main(void *arg) {
    Worker *w = arg;
    set_threads(w->threads);  // OpenMP's thread count is per calling thread: set it here
    Generator g;
    MalaErr err = {{0}};
    int rc = generator_open_mode(&g, w->path, w->be, VIEW_MAX_IMAGES, NET_INFER_ATTN, &err);
    const char *vae = g_vae_path;  // else the one the model's run recorded, as mala sample takes it
    if (rc == 0 && generator_recorded_vae(&g, w->path, &vae, w->vae_buf, sizeof w->vae_buf, &err) < 0) {
        generator_close(&g);
        rc = -1;
    }
    if (rc == 0) w->vae = vae;
    if (rc == 0 && generator_attach_vae(&g, g.net->cfg.latent_scale > 0 ? vae : NULL, w->path, &err)) {
        generator_close(&g);
        rc = -1;
    }
    w->g = &g;
    publish_open(w, &g, rc, &err);
    if (rc == 0) run_requests(w, &g);
    generator_close(&g);
    return NULL;
}

Worker *worker_start(const char *path, const Backend *be, int threads, WakeFn wake, void *wake_ctx) {
    Worker *w = xcalloc(1, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    atomic_init(&w->cancel, 0);
    w->path = xstrdup(path);
    w->be = be;
    w->threads = threads;
    w->wake = wake;
    w->wake_ctx = wake_ctx;
    w->st.phase = WORKER_LOADING;
    int e = pthread_create(&w->thread, NULL, worker_main, w);
    if (e) FATAL("cannot start the generation thread: %s", strerror(e));
    return w;
}

int worker_model(Worker *w, ModelInfo *out) {
    pthread_mutex_lock(&w->mu);
    int ok = w->loaded;
    if (ok) {
        *out = w->model;
        class_names_copy(&out->classes, &w->model.classes);
    }
    pthread_mutex_unlock(&w->mu);
    return ok ? 0 : -1;
}

const char *worker_vae_path(Worker *w) {
    pthread_mutex_lock(&w->mu);
    const char *v = w->loaded && w->g && w->g->vae ? w->vae : NULL;
    pthread_mutex_unlock(&w->mu);
    return v;
}

int worker_submit(Worker *w, const ViewRequest *r) { return worker_submit_init(w, r, NULL, NULL); }

int worker_submit_init(Worker *w, const ViewRequest *r, const float *image, const float *mask) {
    pthread_mutex_lock(&w->mu);
    int ok = w->st.phase == WORKER_IDLE && !w->has_request && (!r->init || (image && w->loaded));
    if (ok) {
        w->req = *r;
        if (r->init && image) memcpy(w->in_img, image, image_floats(&w->model) * sizeof(float));
        if (r->init && r->mask && mask) memcpy(w->in_mask, mask, (size_t)w->model.S * w->model.S * sizeof(float));
        w->has_request = 1;
        w->st.phase = WORKER_RUNNING;
        w->st.outcome = RUN_NONE;
        w->st.step = 0;
        w->st.nsteps = r->opts.steps;
        w->st.steps_per_s = w->st.seconds = 0;
        w->st.msg[0] = 0;
        atomic_store(&w->cancel, 0);
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return ok ? 0 : -1;
}

void worker_cancel(Worker *w) { atomic_store(&w->cancel, 1); }

int worker_poll(Worker *w, WorkerStatus *st, Frame *f, uint64_t *seen) {
    pthread_mutex_lock(&w->mu);
    *st = w->st;
    int fresh = w->loaded && w->st.seq != *seen && w->frame.n > 0;
    if (fresh) {
        memcpy(f->x, w->frame.x, w->frame.n * image_floats(&w->model) * sizeof(float));
        f->n = w->frame.n;
        f->final = w->frame.final;
        f->req = w->frame.req;
        *seen = w->st.seq;
    }
    pthread_mutex_unlock(&w->mu);
    return fresh;
}

void worker_set_attn(Worker *w, const AttnSel *sel) {
    pthread_mutex_lock(&w->mu);
    w->sel = *sel;
    w->attn_dirty = sel->on;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int worker_poll_attn(Worker *w, AttnMap *m, uint64_t *seen) {
    pthread_mutex_lock(&w->mu);
    int fresh = w->loaded && w->model.has_attn && w->attn_seq != *seen;
    if (fresh) {
        float *row = m->row;
        *m = w->map;
        m->row = row;
        memcpy(row, w->map.row, (size_t)w->model.attn.gh * w->model.attn.gw * sizeof(float));
        *seen = w->attn_seq;
    }
    pthread_mutex_unlock(&w->mu);
    return fresh;
}

void worker_stop(Worker *w) {
    if (!w) return;
    atomic_store(&w->cancel, 1);
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    class_names_free(&w->model.classes);
    free(w->frame.x);
    free(w->map.row);
    free(w->row);
    free(w->dec);
    free(w->in_img);
    free(w->in_mask);
    free(w->path);
    free(w);
}

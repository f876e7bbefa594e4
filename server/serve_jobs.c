// defines: jobs_start, jobs_submit, jobs_find, jobs_release, jobs_wait, jobs_cancel, jobs_interrupt,
//          jobs_stop, jobs_free, jobs_queued, job_state_name, serve_random
#include "server/serve_jobs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "formats/image_io.h"

#define KEEP_FINISHED 256  // finished jobs kept at most, whatever their age (memory stays bounded)

const char *job_state_name(JobState s) {
    static const char *const n[] = {"queued", "running", "done", "failed", "cancelled"};
    return n[s];
}

static void job_free(Job *j) {
    serve_request_free(&j->req);
    for (int i = 0; j->png && i < j->req.count; i++) free(j->png[i]);
    free(j->png);
    free(j->png_len);
    free(j->preview);
    free(j);
}

// Under the lock: drops the table's reference of finished jobs past their time, and of the
// oldest finished ones past KEEP_FINISHED.
static void expire(JobQueue *q) {
    double t = now_seconds();
    int finished = 0;
    for (Job *j = q->table; j; j = j->next) finished += j->state >= JOB_DONE;
    for (Job **pp = &q->table; *pp;) {
        Job *j = *pp;
        int old = j->state >= JOB_DONE && (t - j->t_end > q->ttl || finished > KEEP_FINISHED);
        if (!old) {
            pp = &j->next;
            continue;
        }
        finished--;
        *pp = j->next;
        if (--j->refs == 0) job_free(j);
    }
}

int serve_random(void *buf, size_t n) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, buf, n) : -1;
    if (fd >= 0) close(fd);
    return got == (ssize_t)n ? 0 : -1;
}

static void random_id(char *id) {
    uint8_t b[16];
    if (serve_random(b, sizeof b)) {  // no /dev/urandom: the clock and a counter (ids need only be unique)
        static uint64_t n;
        uint64_t v[2] = {(uint64_t)(now_seconds() * 1e9), ++n};
        memcpy(b, v, sizeof b);
    }
    for (int i = 0; i < 16; i++) sprintf(id + 2 * i, "%02x", b[i]);
}

// ---- the worker ----

typedef struct {
    JobQueue *q;
    Job *j;
    mala_model *m;
    int oc, os, batch;
    double last_preview;
    uint8_t *u8;
} StepCtx;

static int on_step(void *user, int first, int n, int step, int steps, const float *preview) {
    StepCtx *s = user;
    Job *j = s->j;
    pthread_mutex_lock(&s->q->lock);
    j->step = step + 1;
    j->steps = steps;
    j->batch = first / s->batch;
    int cancel = j->cancel;
    pthread_mutex_unlock(&s->q->lock);
    if (cancel) return 1;
    // a preview at most 4 times a second (a latent model's: the latent-to-RGB projection, no VAE pass)
    double t = now_seconds();
    if (t - s->last_preview < 0.25 && step + 1 < steps) return 0;
    s->last_preview = t;
    if (mala_preview_u8(s->m, preview, s->u8)) return 0;  // a preview that cannot be made is only skipped
    uint8_t *png;
    size_t len;
    MalaErr err;
    if (s->oc == 1) {  // gray previews as RGB, like the results
        for (int k = s->os * s->os - 1; k >= 0; k--) s->u8[3 * k] = s->u8[3 * k + 1] = s->u8[3 * k + 2] = s->u8[k];
    }
    if (image_encode_png_text(s->u8, s->os, s->os, 3, NULL, NULL, "preview", &png, &len, &err)) return 0;
    pthread_mutex_lock(&s->q->lock);
    free(j->preview);
    j->preview = png;
    j->preview_len = len;
    j->preview_seq++;
    pthread_mutex_unlock(&s->q->lock);
    (void)n;
    return 0;
}

// DIR/<job id>-<i>.png, created new (O_EXCL through atomic_file's rename would replace: checked first).
static void save_result(const char *dir, const Job *j, int i, const uint8_t *png, size_t len) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s-%02d.png", dir, j->id, i);
    struct stat st;
    MalaErr err;
    if (!lstat(path, &st)) fprintf(stderr, "serve: %s exists; not replaced\n", path);
    else if (atomic_write_file(path, png, len, &err)) fprintf(stderr, "serve: %s\n", err.msg);
}

static void run_job(JobQueue *q, Job *j) {
    mala_model *m = q->models[j->model];
    mala_model_info info;
    mala_model_get_info(m, &info);
    const size_t oper = (size_t)info.out_channels * info.out_size * info.out_size;
    StepCtx sc = {q, j, m, info.out_channels, info.out_size, j->p.batch, 0, NULL};
    sc.u8 = malloc((size_t)3 * info.out_size * info.out_size);
    float *out = malloc(sizeof(float) * oper * j->req.count);
    mala_init_image init = {j->req.init, j->req.init_len, "init_images[0]", j->req.strength, j->req.mask, j->req.mask_len,
                            "mask", j->req.mask_invert, j->req.resample};
    mala_gen_params p = j->p;
    p.on_step = on_step;
    p.user = &sc;
    double t0 = now_seconds();
    int rc = !out || !sc.u8 ? -2 : mala_generate_init(m, &p, j->req.has_init ? &init : NULL, out);
    uint8_t **png = NULL;
    size_t *len = NULL;
    char error[512] = "";
    int status = 0;
    if (rc == -2) {
        status = 500, snprintf(error, sizeof error, "out of memory for %d images", j->req.count);
    } else if (rc) {
        pthread_mutex_lock(&q->lock);
        int cancelled = j->cancel;
        pthread_mutex_unlock(&q->lock);
        status = cancelled ? 409 : 400;
        snprintf(error, sizeof error, "%s", cancelled ? "cancelled" : mala_model_error(m));
    } else {
        png = calloc(j->req.count, sizeof *png);
        len = calloc(j->req.count, sizeof *len);
        for (int i = 0; i < j->req.count && !status; i++)
            if (mala_image_png(m, &p, j->req.has_init ? &init : NULL, i, out + oper * i, &png[i], &len[i]))
                status = 500, snprintf(error, sizeof error, "%s", mala_model_error(m));
        char *text = NULL;
        if (!status && !mala_png_parameters(png[0], len[0], &text, NULL, 0) && text)
            snprintf(j->infotext0, sizeof j->infotext0, "%s", text);
        mala_free(text);
        for (int i = 0; !status && q->out_dir && i < j->req.count; i++) save_result(q->out_dir, j, i, png[i], len[i]);
    }
    free(out);
    free(sc.u8);
    pthread_mutex_lock(&q->lock);
    j->t_end = now_seconds();
    if (status) {
        for (int i = 0; png && i < j->req.count; i++) free(png[i]);
        free(png);
        free(len);
        j->state = status == 409 ? JOB_CANCELLED : JOB_FAILED;
        j->status = status;
        snprintf(j->error, sizeof j->error, "%s", error);
        q->jobs_failed += status != 409;
    } else {
        j->png = png;
        j->png_len = len;
        j->state = JOB_DONE;
        q->images_total += j->req.count;
        q->image_seconds += j->t_end - t0;
    }
    q->jobs_total++;
    pthread_mutex_unlock(&q->lock);
}

static void *worker(void *arg) {
    JobQueue *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->stopping && !q->qlen) pthread_cond_wait(&q->changed, &q->lock);
        if (q->stopping) break;
        Job *j = q->queue[q->qhead];
        q->qhead = (q->qhead + 1) % q->qcap;
        q->qlen--;
        if (j->cancel) {  // cancelled while it waited
            j->state = JOB_CANCELLED, j->status = 409, j->t_end = now_seconds();
            snprintf(j->error, sizeof j->error, "cancelled");
            q->jobs_total++;
            pthread_cond_broadcast(&q->changed);
            continue;
        }
        j->state = JOB_RUNNING;
        j->t_start = now_seconds();
        q->running = j;
        pthread_mutex_unlock(&q->lock);
        run_job(q, j);
        pthread_mutex_lock(&q->lock);
        q->running = NULL;
        pthread_cond_broadcast(&q->changed);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

// ---- the handlers' side ----

int jobs_start(JobQueue *q) {
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->changed, NULL);
    q->queue = calloc(q->qcap, sizeof *q->queue);
    if (!q->queue || pthread_create(&q->worker, NULL, worker, q)) return -1;
    q->started = 1;
    return 0;
}

int jobs_submit(JobQueue *q, ServeRequest *req, int m, const mala_gen_params *p, Job **out) {
    *out = NULL;
    Job *j = calloc(1, sizeof *j);
    if (!j) return 503;
    random_id(j->id);
    j->req = *req;
    memset(req, 0, sizeof *req);  // moved: the job frees its images
    j->model = m;
    j->p = *p;
    j->p.sampler = j->req.sampler;  // p's sampler name is the request's text, which the job now holds
    j->batches = (j->req.count + j->p.batch - 1) / j->p.batch;
    j->steps = j->p.steps;
    j->t_submit = now_seconds();
    pthread_mutex_lock(&q->lock);
    expire(q);
    int status = q->stopping ? 503 : q->qlen >= q->qcap ? 429 : 0;
    if (status) {
        pthread_mutex_unlock(&q->lock);
        *req = j->req;  // back to the caller, who frees it
        free(j);
        return status;
    }
    j->refs = 2;  // the table's and the caller's
    j->next = q->table;
    q->table = j;
    q->queue[(q->qhead + q->qlen++) % q->qcap] = j;
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
    *out = j;
    return 0;
}

Job *jobs_find(JobQueue *q, const char *id) {
    pthread_mutex_lock(&q->lock);
    expire(q);
    Job *j = q->table;
    while (j && strcmp(j->id, id)) j = j->next;
    if (j) j->refs++;
    pthread_mutex_unlock(&q->lock);
    return j;
}

void jobs_release(JobQueue *q, Job *j) {
    if (!j) return;
    pthread_mutex_lock(&q->lock);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&q->lock);
    if (last) job_free(j);
}

void jobs_wait(JobQueue *q, Job *j) {
    pthread_mutex_lock(&q->lock);
    while (j->state < JOB_DONE) pthread_cond_wait(&q->changed, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

int jobs_cancel(JobQueue *q, const char *id) {
    pthread_mutex_lock(&q->lock);
    Job *j = q->table;
    while (j && strcmp(j->id, id)) j = j->next;
    int status = !j ? 404 : j->state >= JOB_DONE ? 409 : 0;
    if (!status) j->cancel = 1;
    pthread_mutex_unlock(&q->lock);
    return status;
}

int jobs_interrupt(JobQueue *q) {
    pthread_mutex_lock(&q->lock);
    int had = q->running != NULL;
    if (had) q->running->cancel = 1;
    pthread_mutex_unlock(&q->lock);
    return had;
}

int jobs_queued(JobQueue *q) {
    pthread_mutex_lock(&q->lock);
    int n = q->qlen;
    pthread_mutex_unlock(&q->lock);
    return n;
}

void jobs_stop(JobQueue *q) {
    if (!q->started) return;
    pthread_mutex_lock(&q->lock);
    q->stopping = 1;
    if (q->running) q->running->cancel = 1;
    for (; q->qlen; q->qlen--, q->qhead = (q->qhead + 1) % q->qcap) {
        Job *j = q->queue[q->qhead];
        j->state = JOB_FAILED, j->status = 503, j->t_end = now_seconds();
        snprintf(j->error, sizeof j->error, "the server is shutting down");
    }
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->worker, NULL);
    pthread_mutex_lock(&q->lock);
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
    q->started = 0;
}

void jobs_free(JobQueue *q) {
    for (Job *j = q->table, *next; j; j = next) {
        next = j->next;
        if (--j->refs == 0) job_free(j);
    }
    q->table = NULL;
    free(q->queue);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->changed);
}

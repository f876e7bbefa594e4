// `mala serve`'s endpoints (docs/serve.md): A1111's /sdapi/v1/*, OpenAI's /v1/*, our async
// /mala/v1/jobs, /health, /metrics and the web page. Every reply is JSON (errors as
// {error: {code, message}}) except the page's files and the metrics.
// defines: serve_route, reply_json, reply_error
#include "server/serve_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/base64.h"

void reply_json(Reply *r, int status, JsonBuf *b) {
    r->status = status;
    if (!b->buf) json_buf_puts(b, "{}");
    r->body = b->buf;
    r->len = b->len;
    r->type = "application/json";
}

void reply_error(Reply *r, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    JsonBuf b = {0};
    json_buf_printf(&b, "{\"error\":{\"code\":%d,\"message\":", status);
    json_buf_string(&b, msg, strlen(msg));
    json_buf_puts(&b, "}}");
    reply_json(r, status, &b);
}

static void put_key(JsonBuf *b, const char *key) {
    json_buf_string(b, key, strlen(key));
    json_buf_puts(b, ":");
}

static void put_str(JsonBuf *b, const char *s) { json_buf_string(b, s, strlen(s)); }

static void put_b64(JsonBuf *b, const uint8_t *bytes, size_t n) {
    char *t = base64_encode(bytes, n);
    if (!t) {
        json_buf_puts(b, "null");
        return;
    }
    json_buf_printf(b, "\"%s\"", t);
    free(t);
}

// ---- models ----

static int find_model(Server *s, const char *name) {
    if (!name[0]) return 0;
    for (int i = 0; i < s->o->nmodels; i++) {
        const ServeModel *m = &s->models[i];
        char title[300];
        snprintf(title, sizeof title, "%s [%s]", m->stem, m->hash);  // A1111's checkpoint title
        if (!strcmp(name, m->stem) || !strcmp(name, m->file) || !strcmp(name, title)) return i;
    }
    return -1;
}

static void put_classes(JsonBuf *b, Server *s, int i) {
    json_buf_puts(b, "[");
    for (int k = 0; k < s->models[i].info.num_classes; k++) {
        if (k) json_buf_puts(b, ",");
        const char *n = mala_model_class_name(s->q.models[i], k);
        put_str(b, n ? n : "");
    }
    json_buf_puts(b, "]");
}

static void route_sd_models(Server *s, Reply *r) {
    JsonBuf b = {0};
    json_buf_puts(&b, "[");
    for (int i = 0; i < s->o->nmodels; i++) {
        const ServeModel *m = &s->models[i];
        char title[300];
        snprintf(title, sizeof title, "%s [%s]", m->stem, m->hash);
        json_buf_puts(&b, i ? ",{" : "{");
        put_key(&b, "title"), put_str(&b, title);
        json_buf_puts(&b, ","), put_key(&b, "model_name"), put_str(&b, m->stem);
        json_buf_puts(&b, ","), put_key(&b, "hash"), put_str(&b, m->hash);
        json_buf_puts(&b, ","), put_key(&b, "filename"), put_str(&b, m->file);
        json_buf_puts(&b, ","), put_key(&b, "backbone"), put_str(&b, m->info.backbone);
        json_buf_printf(&b, ",\"width\":%d,\"height\":%d,\"channels\":%d,\"latent\":%s,\"classes\":", m->info.out_size,
                        m->info.out_size, m->info.out_channels, m->info.latent ? "true" : "false");
        put_classes(&b, s, i);
        json_buf_puts(&b, "}");
    }
    json_buf_puts(&b, "]");
    reply_json(r, 200, &b);
}

static void route_openai_models(Server *s, Reply *r) {
    JsonBuf b = {0};
    json_buf_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (int i = 0; i < s->o->nmodels; i++) {
        json_buf_puts(&b, i ? ",{\"id\":" : "{\"id\":");
        put_str(&b, s->models[i].stem);
        json_buf_puts(&b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"mala\"}");
    }
    json_buf_puts(&b, "]}");
    reply_json(r, 200, &b);
}

static void route_samplers(Reply *r) {
    static const char *const ours[] = {"ddim", "dpm++2m", "ddpm"};
    JsonBuf b = {0};
    json_buf_puts(&b, "[");
    for (int i = 0; i < 3; i++)
        json_buf_printf(&b, "%s{\"name\":\"%s\",\"aliases\":[\"%s\"],\"options\":{}}", i ? "," : "",
                        serve_sampler_a1111(ours[i]), ours[i]);
    json_buf_puts(&b, "]");
    reply_json(r, 200, &b);
}

// ---- generation ----

static uint64_t random_seed(void) {  // A1111's -1: a seed drawn for the request, reported back
    uint32_t v;
    if (serve_random(&v, sizeof v)) v = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    return v & 0x7fffffff;
}

// The request read and checked against the model, then queued. 0 with *job held, or the reply set.
static int submit(Server *s, const Request *q, ReqKind kind, Reply *r, Job **job, int *model) {
    ServeLimits lim = {s->o->max_image_bytes, s->o->max_images, s->o->max_steps};
    ServeRequest req;
    ServeError e;
    if (serve_request_parse(q->body, q->len, kind, &lim, &req, &e)) {
        reply_error(r, e.status, "%s", e.msg);
        return -1;
    }
    int m = find_model(s, req.model);
    if (m < 0) {
        reply_error(r, 404, "model %s: not loaded here (GET /sdapi/v1/sd-models or /v1/models lists them)", req.model);
        serve_request_free(&req);
        return -1;
    }
    const mala_model_info *info = &s->models[m].info;
    if ((req.width && req.width != info->out_size) || (req.height && req.height != info->out_size)) {
        reply_error(r, 400, "size %dx%d: the model %s makes %dx%d images", req.width ? req.width : info->out_size,
                    req.height ? req.height : info->out_size, s->models[m].stem, info->out_size, info->out_size);
        serve_request_free(&req);
        return -1;
    }
    mala_gen_params p = mala_gen_params_default();
    char err[512];
    if (mala_model_prompt(s->q.models[m], req.prompt, &p, err, sizeof err)) {
        reply_error(r, 400, "%s", err);
        serve_request_free(&req);
        return -1;
    }
    p.sampler = req.sampler;  // (jobs_submit points it at the job's copy)
    p.steps = req.steps;
    p.cfg_scale = req.cfg_scale;
    p.eta = req.eta;
    p.count = req.count;
    p.batch = req.batch_size < req.count ? req.batch_size : req.count;
    if (req.seed < 0) req.seed = (int64_t)random_seed();
    p.seed = (uint64_t)req.seed;
    int status = jobs_submit(&s->q, &req, m, &p, job);
    if (status) {
        serve_request_free(&req);
        if (status == 429) reply_error(r, 429, "the queue is full (%d jobs wait): try again later", s->o->queue);
        else reply_error(r, status, "the server is shutting down");
        return -1;
    }
    *model = m;
    return 0;
}

static void put_params(JsonBuf *b, Server *s, const Job *j) {
    const ServeRequest *q = &j->req;
    json_buf_puts(b, "{\"prompt\":");
    put_str(b, q->prompt);
    json_buf_puts(b, ",\"model\":");
    put_str(b, s->models[j->model].stem);
    json_buf_printf(b, ",\"seed\":%lld,\"steps\":%d,\"sampler_name\":\"%s\",\"cfg_scale\":%.9g,\"eta\":%.9g,"
                    "\"batch_size\":%d,\"n_iter\":%d,\"width\":%d,\"height\":%d",
                    (long long)q->seed, q->steps, serve_sampler_a1111(q->sampler), (double)q->cfg_scale, (double)q->eta,
                    q->batch_size, q->n_iter, s->models[j->model].info.out_size, s->models[j->model].info.out_size);
    if (q->has_init)
        json_buf_printf(b, ",\"denoising_strength\":%.9g,\"mask\":%s,\"inpainting_mask_invert\":%d", (double)q->strength,
                        q->mask ? "true" : "false", q->mask_invert);
    json_buf_puts(b, "}");
}

// A1111's info: a JSON text (a string inside the reply) with the seeds and every image's infotext.
static void put_info(JsonBuf *b, Server *s, const Job *j) {
    JsonBuf t = {0};
    json_buf_puts(&t, "{\"prompt\":");
    put_str(&t, j->req.prompt);
    json_buf_printf(&t, ",\"seed\":%lld,\"all_seeds\":[", (long long)j->req.seed);
    for (int i = 0; i < j->req.count; i++) json_buf_printf(&t, "%s%lld", i ? "," : "", (long long)j->req.seed);
    json_buf_printf(&t, "],\"steps\":%d,\"sampler_name\":\"%s\",\"cfg_scale\":%.9g,\"width\":%d,\"height\":%d,"
                    "\"sd_model_name\":", j->req.steps, serve_sampler_a1111(j->req.sampler), (double)j->req.cfg_scale,
                    s->models[j->model].info.out_size, s->models[j->model].info.out_size);
    put_str(&t, s->models[j->model].stem);
    json_buf_puts(&t, ",\"job\":");
    put_str(&t, j->id);
    json_buf_puts(&t, ",\"infotexts\":[");
    for (int i = 0; i < j->req.count; i++) {
        char *text = NULL;
        if (i) json_buf_puts(&t, ",");
        if (!mala_png_parameters(j->png[i], j->png_len[i], &text, NULL, 0) && text) put_str(&t, text);
        else json_buf_puts(&t, "\"\"");
        mala_free(text);
    }
    json_buf_puts(&t, "]}");
    json_buf_string(b, t.buf, t.len);
    json_buf_free(&t);
}

static void reply_failed(Reply *r, const Job *j) { reply_error(r, j->status, "%s", j->error); }

static void route_generate(Server *s, const Request *q, ReqKind kind, Reply *r) {
    Job *j;
    int m;
    if (submit(s, q, kind, r, &j, &m)) return;
    jobs_wait(&s->q, j);
    if (j->state != JOB_DONE) {
        reply_failed(r, j);
        jobs_release(&s->q, j);
        return;
    }
    JsonBuf b = {0};
    if (kind == REQ_OPENAI) {
        json_buf_printf(&b, "{\"created\":%lld,\"data\":[", (long long)time(NULL));
        for (int i = 0; i < j->req.count; i++) {
            json_buf_puts(&b, i ? ",{\"b64_json\":" : "{\"b64_json\":");
            put_b64(&b, j->png[i], j->png_len[i]);
            json_buf_puts(&b, ",\"revised_prompt\":");
            put_str(&b, j->req.prompt);
            json_buf_puts(&b, "}");
        }
        json_buf_puts(&b, "]}");
    } else {
        json_buf_puts(&b, "{\"images\":[");
        for (int i = 0; i < j->req.count; i++) {
            if (i) json_buf_puts(&b, ",");
            put_b64(&b, j->png[i], j->png_len[i]);
        }
        json_buf_puts(&b, "],\"parameters\":");
        put_params(&b, s, j);
        json_buf_puts(&b, ",\"info\":");
        put_info(&b, s, j);
        json_buf_puts(&b, "}");
    }
    jobs_release(&s->q, j);
    reply_json(r, 200, &b);
}

// ---- progress, jobs ----

static double job_progress(const Job *j) {
    if (j->state >= JOB_DONE) return j->state == JOB_DONE ? 1.0 : 0.0;
    if (j->state == JOB_QUEUED || j->steps <= 0 || j->batches <= 0) return 0.0;
    return ((double)j->batch * j->steps + j->step) / ((double)j->batches * j->steps);
}

static void route_progress(Server *s, Reply *r) {
    JsonBuf b = {0};
    pthread_mutex_lock(&s->q.lock);
    const Job *j = s->q.running;
    double p = j ? job_progress(j) : 0, el = j ? now_seconds() - j->t_start : 0;
    json_buf_printf(&b, "{\"progress\":%.6f,\"eta_relative\":%.3f,\"state\":{\"skipped\":false,\"interrupted\":%s,"
                    "\"job\":", p, p > 0 ? el / p - el : 0.0, j && j->cancel ? "true" : "false");
    put_str(&b, j ? j->id : "");
    json_buf_printf(&b, ",\"job_count\":%d,\"sampling_step\":%d,\"sampling_steps\":%d},\"current_image\":",
                    s->q.qlen + (j != NULL), j ? j->step : 0, j ? j->steps : 0);
    if (j && j->preview) put_b64(&b, j->preview, j->preview_len);
    else json_buf_puts(&b, "null");
    json_buf_puts(&b, ",\"textinfo\":null}");
    pthread_mutex_unlock(&s->q.lock);
    reply_json(r, 200, &b);
}

static void put_job(JsonBuf *b, Server *s, Job *j, int images) {
    pthread_mutex_lock(&s->q.lock);
    json_buf_puts(b, "{\"id\":");
    put_str(b, j->id);
    json_buf_printf(b, ",\"state\":\"%s\",\"model\":", job_state_name(j->state));
    put_str(b, s->models[j->model].stem);
    json_buf_printf(b, ",\"step\":%d,\"steps\":%d,\"batch\":%d,\"batches\":%d,\"progress\":%.6f,\"images_count\":%d,"
                    "\"preview\":", j->step, j->steps, j->batch, j->batches, job_progress(j), j->req.count);
    if (j->preview && j->state < JOB_DONE) put_b64(b, j->preview, j->preview_len);
    else json_buf_puts(b, "null");
    JobState st = j->state;
    pthread_mutex_unlock(&s->q.lock);
    json_buf_puts(b, ",\"parameters\":");
    put_params(b, s, j);
    if (st == JOB_DONE && images) {  // finished: png and the rest no longer change
        json_buf_puts(b, ",\"images\":[");
        for (int i = 0; i < j->req.count; i++) {
            if (i) json_buf_puts(b, ",");
            put_b64(b, j->png[i], j->png_len[i]);
        }
        json_buf_puts(b, "],\"info\":");
        put_info(b, s, j);
    } else if (st >= JOB_DONE && st != JOB_DONE) {
        json_buf_printf(b, ",\"error\":{\"code\":%d,\"message\":", j->status);
        put_str(b, j->error);
        json_buf_puts(b, "}");
    }
    json_buf_puts(b, "}");
}

static void route_job_post(Server *s, const Request *q, Reply *r) {
    Job *j;
    int m;
    if (submit(s, q, REQ_JOB, r, &j, &m)) return;
    JsonBuf b = {0};
    put_job(&b, s, j, 0);
    jobs_release(&s->q, j);
    reply_json(r, 202, &b);
}

static int valid_id(const char *id, size_t n) {
    if (n != 32) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return 0;
    return 1;
}

static void route_job(Server *s, const Request *q, const char *rest, Reply *r) {
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    char id[33] = "";
    if (valid_id(rest, n)) memcpy(id, rest, 32);
    if (slash && !strcmp(slash, "/cancel")) {
        if (strcmp(q->method, "POST")) return reply_error(r, 405, "%s: use POST", q->url);
        int st = id[0] ? jobs_cancel(&s->q, id) : 404;
        if (st == 404) return reply_error(r, 404, "job %.*s: no such job (unknown, or expired)", (int)n, rest);
        if (st == 409) return reply_error(r, 409, "job %s: already finished", id);
        JsonBuf b = {0};
        json_buf_printf(&b, "{\"id\":\"%s\",\"cancel\":true}", id);
        return reply_json(r, 200, &b);
    }
    if (slash) return reply_error(r, 404, "%s: no such endpoint", q->url);
    if (strcmp(q->method, "GET")) return reply_error(r, 405, "%s: use GET", q->url);
    Job *j = id[0] ? jobs_find(&s->q, id) : NULL;
    if (!j) return reply_error(r, 404, "job %.*s: no such job (unknown, or expired)", (int)n, rest);
    JsonBuf b = {0};
    put_job(&b, s, j, 1);
    jobs_release(&s->q, j);
    reply_json(r, 200, &b);
}

static void route_png_info(Server *s, const Request *q, Reply *r) {
    MalaErr err;
    JsonValue *o = json_parse(q->body, q->len, &err);
    const JsonValue *img = o && o->type == JSON_OBJECT ? json_get(o, "image") : NULL;
    if (!img || img->type != JSON_STRING) {
        json_free(o);
        return reply_error(r, 400, "png-info: expected {\"image\": a base64 PNG}%s%s", o ? "" : ": ", o ? "" : err.msg);
    }
    uint8_t *png;
    size_t len;
    if (base64_decode(img->str, img->len, s->o->max_image_bytes, &png, &len)) {
        json_free(o);
        return reply_error(r, 400, "image: not base64 (RFC 4648, optionally as a data: URL), or more than %zu bytes",
                           s->o->max_image_bytes);
    }
    json_free(o);
    char *text = NULL, e[512];
    int rc = mala_png_parameters(png, len, &text, e, sizeof e);
    free(png);
    if (rc) return reply_error(r, 400, "%s", e);
    JsonBuf b = {0};
    json_buf_puts(&b, "{\"info\":");
    put_str(&b, text ? text : "");
    json_buf_puts(&b, ",\"items\":{");
    if (text) put_key(&b, "parameters"), put_str(&b, text);
    json_buf_puts(&b, "}}");
    mala_free(text);
    reply_json(r, 200, &b);
}

static void route_metrics(Server *s, Reply *r) {
    JsonBuf b = {0};
    pthread_mutex_lock(&s->mlock);
    uint64_t req = s->requests, errs = s->errors;
    pthread_mutex_unlock(&s->mlock);
    pthread_mutex_lock(&s->q.lock);
    json_buf_printf(&b,
                    "# HELP mala_requests_total HTTP requests answered.\n# TYPE mala_requests_total counter\n"
                    "mala_requests_total %llu\n"
                    "# HELP mala_request_errors_total Requests answered with a status of 400 or more.\n"
                    "# TYPE mala_request_errors_total counter\nmala_request_errors_total %llu\n"
                    "# HELP mala_images_total Images generated.\n# TYPE mala_images_total counter\nmala_images_total %llu\n"
                    "# HELP mala_jobs_total Jobs finished (done, failed or cancelled).\n# TYPE mala_jobs_total counter\n"
                    "mala_jobs_total %llu\n"
                    "# HELP mala_jobs_failed_total Jobs that failed.\n# TYPE mala_jobs_failed_total counter\n"
                    "mala_jobs_failed_total %llu\n"
                    "# HELP mala_seconds_per_image Generation seconds per image, over every finished job.\n"
                    "# TYPE mala_seconds_per_image gauge\nmala_seconds_per_image %.6f\n"
                    "# HELP mala_queue_length Jobs waiting.\n# TYPE mala_queue_length gauge\nmala_queue_length %d\n"
                    "# HELP mala_jobs_running Jobs generating now.\n# TYPE mala_jobs_running gauge\nmala_jobs_running %d\n",
                    (unsigned long long)req, (unsigned long long)errs, (unsigned long long)s->q.images_total,
                    (unsigned long long)s->q.jobs_total, (unsigned long long)s->q.jobs_failed,
                    s->q.images_total ? s->q.image_seconds / (double)s->q.images_total : 0.0, s->q.qlen,
                    s->q.running != NULL);
    pthread_mutex_unlock(&s->q.lock);
    reply_json(r, 200, &b);
    r->type = "text/plain; version=0.0.4";
}

// ---- the table ----

void serve_route(Server *s, const Request *q, Reply *r) {
    const char *u = q->url;
    const int get = !strcmp(q->method, "GET") || !strcmp(q->method, "HEAD"), post = !strcmp(q->method, "POST");
    if (__atomic_load_n(&s->stopping, __ATOMIC_SEQ_CST) && strcmp(u, "/health"))
        return reply_error(r, 503, "the server is shutting down");
    struct { const char *path; int post; } posts[] = {
        {"/sdapi/v1/txt2img", 1}, {"/sdapi/v1/img2img", 1}, {"/v1/images/generations", 1}, {"/sdapi/v1/interrupt", 1},
        {"/sdapi/v1/png-info", 1}, {"/mala/v1/jobs", 1}, {"/health", 0}, {"/metrics", 0}, {"/sdapi/v1/sd-models", 0},
        {"/v1/models", 0}, {"/sdapi/v1/samplers", 0}, {"/sdapi/v1/progress", 0},
    };
    for (size_t i = 0; i < sizeof posts / sizeof *posts; i++)
        if (!strcmp(u, posts[i].path) && (posts[i].post ? !post : !get))
            return reply_error(r, 405, "%s: use %s", u, posts[i].post ? "POST" : "GET");
    if (post && !strcmp(u, "/sdapi/v1/txt2img")) return route_generate(s, q, REQ_TXT2IMG, r);
    if (post && !strcmp(u, "/sdapi/v1/img2img")) return route_generate(s, q, REQ_IMG2IMG, r);
    if (post && !strcmp(u, "/v1/images/generations")) return route_generate(s, q, REQ_OPENAI, r);
    if (post && !strcmp(u, "/mala/v1/jobs")) return route_job_post(s, q, r);
    if (!strncmp(u, "/mala/v1/jobs/", 14)) return route_job(s, q, u + 14, r);
    if (post && !strcmp(u, "/sdapi/v1/interrupt")) {
        JsonBuf b = {0};
        json_buf_printf(&b, "{\"interrupted\":%s}", jobs_interrupt(&s->q) ? "true" : "false");
        return reply_json(r, 200, &b);
    }
    if (post && !strcmp(u, "/sdapi/v1/png-info")) return route_png_info(s, q, r);
    if (get && !strcmp(u, "/health")) {
        JsonBuf b = {0};
        json_buf_printf(&b, "{\"status\":\"ok\",\"models\":%d,\"queue\":%d}", s->o->nmodels, jobs_queued(&s->q));
        return reply_json(r, 200, &b);
    }
    if (get && !strcmp(u, "/metrics")) return route_metrics(s, r);
    if (get && !strcmp(u, "/sdapi/v1/sd-models")) return route_sd_models(s, r);
    if (get && !strcmp(u, "/v1/models")) return route_openai_models(s, r);
    if (get && !strcmp(u, "/sdapi/v1/samplers")) return route_samplers(r);
    if (get && !strcmp(u, "/sdapi/v1/progress")) return route_progress(s, r);
    size_t len;
    const char *type;
    const uint8_t *file = get ? serve_web_file(!strcmp(u, "/") ? "/index.html" : u, &len, &type) : NULL;
    if (file) {
        r->status = 200;
        r->body = malloc(len ? len : 1);
        memcpy(r->body, file, len);
        r->len = len;
        r->type = type;
        return;
    }
    reply_error(r, 404, "%s %s: no such endpoint (docs/serve.md lists them)", q->method, u);
}

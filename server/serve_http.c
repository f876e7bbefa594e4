// `mala serve`'s process: the models loaded once, the job worker, libmicrohttpd's daemon (one
// thread per connection, bounded), request bodies gathered within their limit, the API key, and
// the shutdown on SIGINT / SIGTERM.
// defines: serve_main
#include "server/serve_internal.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/sha256.h"

typedef struct {
    char *body;
    size_t len, cap;
    int too_big;
} Upload;

// Constant time in the key's length: a wrong key takes as long whatever its first wrong byte.
static int key_equal(const char *given, const char *key) {
    size_t n = strlen(key), g = strlen(given);
    unsigned diff = (unsigned)(n ^ g);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < g ? given[i] : 0);
    return diff == 0;
}

static int needs_key(const char *url) {
    // the page and its files, and the health check, are public; every API call needs the key
    return !strncmp(url, "/sdapi/", 7) || !strncmp(url, "/v1/", 4) || !strncmp(url, "/mala/", 6) || !strcmp(url, "/metrics");
}

static enum MHD_Result send_reply(struct MHD_Connection *c, Reply *r) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->type ? r->type : "application/json");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->extra_header) MHD_add_response_header(resp, r->extra_header, r->extra_value);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls) {
    Server *s = cls;
    Upload *u = *con_cls;
    if (!u) {  // the headers: a body longer than the limit is refused before it is read
        u = calloc(1, sizeof *u);
        if (!u) return MHD_NO;
        *con_cls = u;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->o->max_body) u->too_big = 1;
        return MHD_YES;
    }
    if (*data_size) {
        if (!u->too_big && u->len + *data_size > s->o->max_body) u->too_big = 1;
        if (!u->too_big) {
            if (u->len + *data_size + 1 > u->cap) {
                size_t cap = (u->len + *data_size + 1) * 2;
                if (cap > s->o->max_body + 1) cap = s->o->max_body + 1;
                char *b = realloc(u->body, cap);
                if (!b) return MHD_NO;
                u->body = b;
                u->cap = cap;
            }
            memcpy(u->body + u->len, data, *data_size);
            u->len += *data_size;
        }
        *data_size = 0;
        return MHD_YES;
    }
    Reply r = {0};
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (u->too_big) {
        reply_error(&r, 413, "the request body is larger than the %zu bytes allowed (--max-body)", s->o->max_body);
    } else if (s->o->api_key && needs_key(url) &&
               !(auth && !strncasecmp(auth, "Bearer ", 7) && key_equal(auth + 7, s->o->api_key))) {
        reply_error(&r, 401, "%s: this server needs an API key (Authorization: Bearer KEY)", url);
        r.extra_header = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
        r.extra_value = "Bearer";
    } else {
        Request q = {method, url, u->body ? u->body : "", u->len, c};
        serve_route(s, &q, &r);
    }
    pthread_mutex_lock(&s->mlock);
    s->requests++;
    s->errors += r.status >= 400;
    pthread_mutex_unlock(&s->mlock);
    (void)version;
    return send_reply(c, &r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    Upload *u = *con_cls;
    if (u) free(u->body);
    free(u);
    *con_cls = NULL;
    (void)cls, (void)c, (void)toe;
}

static void stem_of(const char *path, char *stem, size_t cap, char *file, size_t fcap) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(file, fcap, "%s", base);
    const char *dot = strrchr(base, '.');
    snprintf(stem, cap, "%.*s", (int)(dot && dot != base ? dot - base : (long)strlen(base)), base);
}

static int load_models(Server *s) {
    const ServeOptions *o = s->o;
    s->models = calloc(o->nmodels, sizeof *s->models);
    s->q.models = calloc(o->nmodels, sizeof *s->q.models);
    for (int i = 0; i < o->nmodels; i++) {
        ServeModel *sm = &s->models[i];
        stem_of(o->models[i], sm->stem, sizeof sm->stem, sm->file, sizeof sm->file);
        for (int k = 0; k < i; k++)
            if (!strcmp(s->models[k].stem, sm->stem)) {
                fprintf(stderr, "error: --model %s: another model has the name %s (requests name models by file stem)\n",
                        o->models[i], sm->stem);
                return -1;
            }
        mala_model *m = NULL;
        // --vae is for latent models: a pixel model refuses it, and is loaded without
        int rc = mala_model_load(s->ctx, o->models[i], o->vae, &m);
        char first[1024];
        snprintf(first, sizeof first, "%s", mala_context_error(s->ctx));
        if (rc && o->vae && !mala_model_load(s->ctx, o->models[i], NULL, &m)) {
            mala_model_get_info(m, &sm->info);
            if (sm->info.latent) {  // a latent model that refused this VAE: that is the error
                mala_model_free(m);
                m = NULL;
            }
        }
        if (!m) {
            fprintf(stderr, "error: %s\n", first);
            return -1;
        }
        mala_model_get_info(m, &sm->info);
        s->q.models[i] = m;
        s->q.nmodels = i + 1;
        char hex[65];
        MalaErr err;
        if (sha256_file(o->models[i], hex, &err)) {
            fprintf(stderr, "error: %s\n", err.msg);
            return -1;
        }
        snprintf(sm->hash, sizeof sm->hash, "%.10s", hex);
        fprintf(stderr, "serve: model %s: %s, %d classes, %dx%d%s\n", sm->stem, sm->info.backbone, sm->info.num_classes,
                sm->info.out_size, sm->info.out_size, sm->info.latent ? " (latent)" : "");
    }
    return 0;
}

int serve_main(const ServeOptions *o) {
    Server s = {.o = o};
    pthread_mutex_init(&s.mlock, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) {
        fprintf(stderr, "error: --host %s: expected an IPv4 address such as 127.0.0.1 or 0.0.0.0\n", o->host);
        return 1;
    }
    if (o->out_dir) {
        struct stat st;
        if (stat(o->out_dir, &st) || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "error: --out-dir %s: no such folder\n", o->out_dir);
            return 1;
        }
    }
    // the signals go to the thread that waits for them, not to the workers it starts
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    mala_context_options co = mala_context_options_default();
    co.device = o->device;
    co.precision = o->precision;
    co.threads = o->threads;
    char err[1024];
    s.ctx = mala_context_new(&co, err, sizeof err);
    if (!s.ctx) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    int status = 1;
    struct MHD_Daemon *d = NULL;
    s.q.qcap = o->queue;
    s.q.ttl = o->job_ttl;
    s.q.out_dir = o->out_dir;
    if (load_models(&s) || jobs_start(&s.q)) goto done;
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG,
                         (uint16_t)o->port, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s, MHD_OPTION_CONNECTION_TIMEOUT,
                         (unsigned)o->timeout, MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "error: --host %s --port %d: cannot listen there (in use, or not an address of this machine)\n",
                o->host, o->port);
        goto done;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = di ? di->port : o->port;
    if (strcmp(o->host, "127.0.0.1"))
        fprintf(stderr, "warning: --host %s: the server is reachable from other machines%s\n", o->host,
                o->api_key ? "" : ", and without an API key (--api-key) anyone who reaches it can use it");
    fprintf(stderr, "serve: listening on http://%s:%d/ (%d model%s; Ctrl-C stops)\n", o->host, port, o->nmodels,
            o->nmodels > 1 ? "s" : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "serve: %s: stopping (the running job is cancelled, waiting ones answered 503)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    __atomic_store_n(&s.stopping, 1, __ATOMIC_SEQ_CST);
    jobs_stop(&s.q);
    MHD_stop_daemon(d);  // waits for the connections' threads, which the stopped jobs have released
    status = 0;
done:
    jobs_stop(&s.q);
    jobs_free(&s.q);
    for (int i = 0; i < s.q.nmodels; i++) mala_model_free(s.q.models[i]);
    free(s.q.models);
    free(s.models);
    mala_context_free(s.ctx);
    pthread_mutex_destroy(&s.mlock);
    return status;
}

// What server/*.c share: the running server, a request and its reply.
#ifndef MALA_SERVE_INTERNAL_H
#define MALA_SERVE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "formats/json.h"
#include "server/serve.h"
#include "server/serve_jobs.h"

typedef struct {
    char stem[128], file[256];  // the name requests use, and the file's name without folders
    char hash[11];              // A1111's short hash: the first 10 hex digits of the file's SHA-256
    mala_model_info info;
} ServeModel;

typedef struct {
    const ServeOptions *o;
    mala_context *ctx;
    ServeModel *models;
    JobQueue q;
    int stopping;
    pthread_mutex_t mlock;  // the counters
    uint64_t requests, errors;
} Server;

typedef struct {
    const char *method, *url;
    const char *body;
    size_t len;
    void *conn;  // struct MHD_Connection
} Request;

typedef struct {
    int status;
    char *body;  // malloc'd
    size_t len;
    const char *type;
    const char *extra_header, *extra_value;  // one more header, or NULL
} Reply;

// The reply for request q (server/serve_routes.c).
void serve_route(Server *s, const Request *q, Reply *r);
// JSON replies: the buffer's text, and {error: {code, message}}.
void reply_json(Reply *r, int status, JsonBuf *b);
void reply_error(Reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// A static file of the web page (server/web/), or NULL: its bytes, length and type.
const uint8_t *serve_web_file(const char *path, size_t *len, const char **type);

#endif

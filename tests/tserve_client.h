// A minimal HTTP/1.1 client and a `mala serve` launcher for the server's tests (127.0.0.1 only):
// one request per connection (Connection: close), the reply read to the end.
#ifndef MALA_TSERVE_CLIENT_H
#define MALA_TSERVE_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int status;
    char *body;  // malloc'd, NUL-terminated
    size_t len;
    char head[2048];
} HttpReply;

// -1 status when the connection fails or the reply is not HTTP.
static HttpReply http_req(int port, const char *method, const char *path, const char *headers, const char *body,
                          size_t blen) __attribute__((unused));
static HttpReply http_req(int port, const char *method, const char *path, const char *headers, const char *body,
                          size_t blen) {
    HttpReply r = {-1, NULL, 0, ""};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = {120, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return r;
    }
    char head[1024];
    int hn = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s"
                      "Content-Length: %zu\r\n\r\n", method, path, headers ? headers : "",
                      body ? "Content-Type: application/json\r\n" : "", body ? blen : 0);
    ssize_t w = write(fd, head, (size_t)hn);
    for (size_t off = 0; w >= 0 && body && off < blen; off += (size_t)w) w = write(fd, body + off, blen - off);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (ssize_t got; (got = read(fd, buf + n, cap - n - 1)) > 0;) {
        n += (size_t)got;
        if (cap - n < 4096) buf = realloc(buf, cap *= 2);
    }
    close(fd);
    buf[n] = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    if (!sep || sscanf(buf, "HTTP/1.%*d %d", &r.status) != 1) {
        free(buf);
        r.status = -1;
        return r;
    }
    snprintf(r.head, sizeof r.head, "%.*s", (int)(sep - buf), buf);
    r.len = n - (size_t)(sep + 4 - buf);
    r.body = malloc(r.len + 1);
    memcpy(r.body, sep + 4, r.len + 1);
    free(buf);
    return r;
}

static HttpReply http_get(int port, const char *path) __attribute__((unused));
static HttpReply http_get(int port, const char *path) { return http_req(port, "GET", path, NULL, NULL, 0); }
static HttpReply http_post(int port, const char *path, const char *json) __attribute__((unused));
static HttpReply http_post(int port, const char *path, const char *json) {
    return http_req(port, "POST", path, NULL, json, strlen(json));
}

typedef struct {
    pid_t pid;
    int port;
    char log[512];
} Served;

// Starts `MALA_BIN serve --port 0 ARGS` (args: a shell-free list, NULL-terminated) with its
// stderr in log, and waits for its "listening on" line (30 s at most). port 0 when it did not start.
static Served serve_start(const char *mala, const char *log, const char *const *args) __attribute__((unused));
static Served serve_start(const char *mala, const char *log, const char *const *args) {
    Served s = {0};
    snprintf(s.log, sizeof s.log, "%s", log);
    const char *argv[64] = {mala, "serve", "--port", "0", "--threads", "2"};
    int k = 6;
    for (int i = 0; args[i] && k < 62; i++) argv[k++] = args[i];
    argv[k] = NULL;
    fflush(stdout);
    fflush(stderr);
    s.pid = fork();
    if (s.pid == 0) {
        FILE *f = freopen(log, "w", stderr);
        (void)f;
        execv(mala, (char *const *)argv);
        _exit(127);
    }
    for (int t = 0; t < 300; t++) {
        usleep(100000);
        FILE *f = fopen(log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://127.0.0.1:");
            if (p) s.port = atoi(p + strlen("listening on http://127.0.0.1:"));
        }
        if (f) fclose(f);
        if (s.port) return s;
        int st;
        if (waitpid(s.pid, &st, WNOHANG) == s.pid) break;
    }
    return s;
}

// SIGTERM, then its exit status (128 + signal when a signal ended it).
static int serve_stop(Served *s) __attribute__((unused));
static int serve_stop(Served *s) {
    kill(s->pid, SIGTERM);
    int st = 0;
    waitpid(s->pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif

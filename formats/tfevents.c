// TensorBoard event files: TFRecord framing and the Event / Summary protocol buffers (formats/tfevents.h).
#include "formats/tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// ---- CRC-32C, one table (reflected, polynomial 0x82f63b78) ----

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t tfev_crc32c(const void *data, size_t n) {
    if (!crc_table[1]) crc_init();  // (idempotent: two threads write the same table)
    const uint8_t *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

// ---- protocol-buffer encoding into a growing buffer ----

typedef struct { uint8_t *b; size_t n, cap; } Pb;

static void pb_put(Pb *p, const void *src, size_t n) {
    if (!n) return;
    if (p->n + n > p->cap) {
        while (p->n + n > p->cap) p->cap = p->cap ? 2 * p->cap : 256;
        p->b = realloc(p->b, p->cap);
        if (!p->b) FATAL("out of memory (%zu bytes for an event record)", p->cap);
    }
    memcpy(p->b + p->n, src, n);
    p->n += n;
}

static void pb_varint(Pb *p, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) b[n] |= 0x80;
        n++;
    } while (v);
    pb_put(p, b, n);
}

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_BYTES = 2, WT_FIXED32 = 5 };

static void pb_key(Pb *p, int field, int wire) { pb_varint(p, (uint64_t)field << 3 | wire); }

static void pb_le(Pb *p, uint64_t v, int bytes) {
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> 8 * i);
    pb_put(p, b, bytes);
}

static void pb_double(Pb *p, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    pb_key(p, field, WT_FIXED64);
    pb_le(p, u, 8);
}

static void pb_float(Pb *p, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    pb_key(p, field, WT_FIXED32);
    pb_le(p, u, 4);
}

static void pb_int(Pb *p, int field, int64_t v) {  // int32 / int64 / enum: negative values as 10-byte varints
    pb_key(p, field, WT_VARINT);
    pb_varint(p, (uint64_t)v);
}

static void pb_bytes(Pb *p, int field, const void *b, size_t n) {
    pb_key(p, field, WT_BYTES);
    pb_varint(p, n);
    pb_put(p, b, n);
}

static void pb_str(Pb *p, int field, const char *s) { pb_bytes(p, field, s, strlen(s)); }

// A nested message: its bytes as a length-delimited field, then sub is emptied.
static void pb_sub(Pb *p, int field, Pb *sub) {
    pb_bytes(p, field, sub->b, sub->n);
    sub->n = 0;
}

static void pb_free(Pb *p) { free(p->b); }

// ---- records ----

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Event header fields: wall_time = 1, step = 2.
static void event_begin(Pb *ev, int64_t step) {
    pb_double(ev, 1, wall_time());
    if (step) pb_int(ev, 2, step);
}

static int write_record(TfEvents *w, const Pb *ev, MalaErr *err) {
    uint8_t head[12];
    uint64_t len = ev->n;
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)(len >> 8 * i);
    uint32_t hc = tfev_mask_crc(tfev_crc32c(head, 8)), dc = tfev_mask_crc(tfev_crc32c(ev->b, ev->n));
    for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(hc >> 8 * i);
    uint8_t tail[4];
    for (int i = 0; i < 4; i++) tail[i] = (uint8_t)(dc >> 8 * i);
    errno = 0;
    if (fwrite(head, 1, 12, w->f) != 12 || fwrite(ev->b, 1, ev->n, w->f) != ev->n || fwrite(tail, 1, 4, w->f) != 4 ||
        fflush(w->f))
        return mala_errf(err, "%s: cannot write: %s", w->path, errno ? strerror(errno) : "write error");
    return 0;
}

static int write_event(TfEvents *w, Pb *ev, MalaErr *err) {
    int rc = write_record(w, ev, err);
    pb_free(ev);
    return rc;
}

int tfev_attach(TfEvents *w, FILE *f, const char *path, MalaErr *err) {
    w->f = f;
    snprintf(w->path, sizeof w->path, "%s", path);
    Pb ev = {0};
    event_begin(&ev, 0);
    pb_str(&ev, 3, "brain.Event:2");
    return write_event(w, &ev, err);
}

int tfev_open_dir(TfEvents *w, const char *dir, MalaErr *err) {
    char host[256] = "localhost", path[4200];
    if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
    long long t = (long long)time(NULL);
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(path, sizeof path, "%s/events.out.tfevents.%lld.%s", dir, t, host);
        if (i) snprintf(path + n, sizeof path - n, ".%d", i);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) continue;
        FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (!f) {
            int e = errno;
            if (fd >= 0) close(fd);
            return mala_errf(err, "%s: cannot create: %s", path, strerror(e));
        }
        return tfev_attach(w, f, path, err);
    }
    return mala_errf(err, "%s: every numbered name is taken", path);
}

int tfev_scalars(TfEvents *w, int64_t step, const char *const *tags, const float *vals, int n, MalaErr *err) {
    Pb ev = {0}, sum = {0}, val = {0};
    event_begin(&ev, step);
    for (int i = 0; i < n; i++) {
        pb_str(&val, 1, tags[i]);
        pb_float(&val, 2, vals[i]);
        pb_sub(&sum, 1, &val);
    }
    pb_sub(&ev, 5, &sum);
    pb_free(&sum);
    pb_free(&val);
    return write_event(w, &ev, err);
}

int tfev_image(TfEvents *w, int64_t step, const char *tag, int height, int width, int colorspace, const void *png,
               size_t len, MalaErr *err) {
    Pb ev = {0}, sum = {0}, val = {0}, img = {0};
    event_begin(&ev, step);
    pb_int(&img, 1, height);
    pb_int(&img, 2, width);
    pb_int(&img, 3, colorspace);
    pb_bytes(&img, 4, png, len);
    pb_str(&val, 1, tag);
    pb_sub(&val, 4, &img);
    pb_sub(&sum, 1, &val);
    pb_sub(&ev, 5, &sum);
    pb_free(&img);
    pb_free(&val);
    pb_free(&sum);
    return write_event(w, &ev, err);
}

int tfev_session_start(TfEvents *w, int64_t step, MalaErr *err) {
    Pb ev = {0}, log = {0};
    event_begin(&ev, step);
    pb_int(&log, 1, 1);  // SessionLog.status = START
    pb_sub(&ev, 7, &log);
    pb_free(&log);
    return write_event(w, &ev, err);
}

int tfev_close(TfEvents *w, MalaErr *err) {
    if (!w->f) return 0;
    int rc = fclose(w->f);
    w->f = NULL;
    return rc ? mala_errf(err, "%s: cannot write: %s", w->path, strerror(errno)) : 0;
}

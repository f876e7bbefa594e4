// defines: progress_init, progress_update, progress_break, progress_format_eta
#include "core/progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "core/common.h"

void progress_init(Progress *p, FILE *f) {
    p->f = f;
    p->tty = f && isatty(fileno(f));
    p->interval = PROGRESS_INTERVAL_S;
    p->clock = now_seconds;
    p->last = -1;
    p->open = 0;
    p->width = 0;
    p->prev[0] = 0;
}

void progress_update(Progress *p, int final, const char *fmt, ...) {
    if (!p->f) return;  // a quiet run
    double now = p->clock();
    if (!final && p->last >= 0 && now - p->last < (p->tty ? 0.1 : p->interval)) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    if (p->tty) {
        fprintf(p->f, "\r%s%*s", line, p->width > n ? p->width - n : 0, "");
        p->width = n;
        p->open = 1;
        if (final) progress_break(p);
    } else {
        if (!final && !strcmp(line, p->prev)) return;  // nothing new: a log gets no copies
        fprintf(p->f, "%s\n", line);
        memcpy(p->prev, line, (size_t)n + 1);
    }
    fflush(p->f);
    p->last = now;
}

void progress_break(Progress *p) {
    if (!p->open) return;
    fputc('\n', p->f);
    fflush(p->f);
    p->open = 0;
    p->width = 0;
}

void progress_format_eta(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

// One status line for long work (sampling, evaluation, training), fit for a terminal and for a
// log file alike: on a terminal the line is redrawn in place (\r) at most 10 times a second; when
// the stream is not a terminal (a pipe, a file, a cluster's log) each update is a line of its
// own: the first, then at most one every PROGRESS_INTERVAL_S seconds, and the final one.
#ifndef MALA_PROGRESS_H
#define MALA_PROGRESS_H

#include <stdio.h>

#define PROGRESS_INTERVAL_S 5.0

typedef struct {
    FILE *f;
    int tty;
    double interval;        // seconds between lines when not a terminal
    double (*clock)(void);  // now_seconds; tests put a fake clock here
    double last;            // when the last line was shown (< 0: never)
    int open;               // a terminal line is showing (needs a newline before other output)
    int width;              // its length, to blank what a shorter line leaves behind
    char prev[512];         // the last line written when not a terminal (an unchanged one is not repeated)
} Progress;

// Status lines on f (usually stderr); tty from isatty(fileno(f)).
void progress_init(Progress *p, FILE *f);  // f NULL: updates print nothing
// Shows the status (printf format). final = the last update of this piece of work: shown in any case.
void progress_update(Progress *p, int final, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Seconds as "4m05s" or "2h13m" ("?" when not finite or negative), for ETAs.
void progress_format_eta(char *buf, size_t n, double seconds);
// Ends a terminal line that is showing, so that other output (a warning, a summary) starts on a
// fresh line; a no-op otherwise.
void progress_break(Progress *p);

#endif

// defines: refuse_existing_run, move_earlier_start, no_checkpoint_to_resume
#include "train/run_guard.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "train/run_dir.h"

// Files in dir (0 when it does not exist).
static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

int refuse_existing_run(const char *out, const char *csv, int say, MalaErr *err) {
    uint64_t *steps;
    int n = run_list_checkpoints(out, &steps), rows = run_log_rows(csv);
    char samples[4200];
    snprintf(samples, sizeof samples, "%s/samples", out);
    int grids = count_files(samples);
    if (n || rows > 0 || grids) {
        char what[200] = "";
        if (rows >= 0) snprintf(what, sizeof what, "log.csv with %d row%s", rows, rows == 1 ? "" : "s");
        if (n) snprintf(what + strlen(what), sizeof what - strlen(what), "%s%d checkpoint%s up to step %llu",
                        what[0] ? ", " : "", n, n > 1 ? "s" : "", (unsigned long long)steps[n - 1]);
        if (grids) snprintf(what + strlen(what), sizeof what - strlen(what), "%s%d file%s in samples/",
                            what[0] ? ", " : "", grids, grids > 1 ? "s" : "");
        free(steps);
        if (!n)
            return mala_errf(err, "%s already holds a run (%s) but no checkpoint to continue it from with --resume: "
                             "train into a fresh --out directory", out, what);
        return mala_errf(err, "%s already holds a run (%s): continue it with --resume, or train into a fresh --out "
                         "directory", out, what);
    }
    if (rows == 0 && say)
        fprintf(stderr, "note: %s holds a start that trained no logged step (log.csv without rows, no checkpoint): "
                "training there anew\n", out);
    free(steps);
    return 0;
}

int move_earlier_start(const char *out, const char *csv, const char *how, MalaErr *err) {
    int rows = run_log_rows(csv);
    char aside[4200], from[4300], to[4400];
    for (int k = 1;; k++) {
        snprintf(aside, sizeof aside, "%s/restart-%d", out, k);
        if (!mkdir(aside, 0755)) break;
        if (errno != EEXIST) return mala_errf(err, "--resume: cannot create %s: %s", aside, strerror(errno));
    }
    static const char *const EARLIER[] = {"log.csv", "loss.png", "samples", "evals.csv", "fd.png", "best.json",
                                          "best.safetensors"};
    for (size_t i = 0; i < sizeof EARLIER / sizeof *EARLIER; i++) {
        snprintf(from, sizeof from, "%s/%s", out, EARLIER[i]);
        snprintf(to, sizeof to, "%s/%s", aside, EARLIER[i]);
        if (rename(from, to) && errno != ENOENT)
            return mala_errf(err, "--resume: cannot move %s to %s: %s", from, to, strerror(errno));
    }
    fprintf(stderr, "note: --resume: %s has no checkpoint (log.csv had %d row%s): starting the run over from step 0 "
            "with %s; the earlier start's files are in %s\n", out, rows > 0 ? rows : 0, rows == 1 ? "" : "s", how,
            aside);
    return 0;
}

int no_checkpoint_to_resume(const char *out, const char *dir, const char *csv, int files, MalaErr *err) {
    int rows = run_log_rows(csv);
    char samples[4200];
    snprintf(samples, sizeof samples, "%s/samples", out);
    if (files) return mala_errf(err, "--resume: no complete checkpoint in %s", dir);
    if (rows <= 0 && !count_files(samples))
        return mala_errf(err, "--resume: nothing to resume in %s (no checkpoint%s): drop --resume to start the run", out,
                         rows == 0 ? ", and log.csv has no rows" : "");
    return move_earlier_start(out, csv, "the flags given (it has no stored command line, DIR/train.args)", err);
}

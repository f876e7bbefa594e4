// The files of a training run directory (docs/formats.md): checkpoints/NNNNNNN.safetensors and
// log.csv, as `mala train` writes them and `mala train --resume` and `mala compare` read them.
// defines: run_ckpt_path, run_list_checkpoints, run_newest_checkpoint, run_prune_checkpoints,
//          RunLog, run_log_read, run_log_add, run_log_free, run_log_rows
#ifndef MALA_RUN_DIR_H
#define MALA_RUN_DIR_H

#include <stddef.h>
#include <stdint.h>

// run/checkpoints/NNNNNNN.safetensors (the step, at least 7 digits).
void run_ckpt_path(char *buf, size_t n, const char *run, uint64_t step);
// The steps of run's checkpoints, ascending (only files named exactly as run_ckpt_path names
// them); *steps is malloc'ed (free it). Returns how many.
int run_list_checkpoints(const char *run, uint64_t **steps);
// The newest checkpoint's step, -1 when there is none.
int64_t run_newest_checkpoint(const char *run);
// Keeps the newest `keep` checkpoints up to step `upto` (the one just written). Checkpoints of
// later steps are not this run's to delete (a file --resume passed over, say), so they stay.
void run_prune_checkpoints(const char *run, int keep, uint64_t upto);

// log.csv's columns: step,loss,mse,vb,grad_norm,img_per_s,lr,skipped,elapsed_s,time. Rows of
// older runs may stop after the loss: img_s and elapsed are NAN there.
typedef struct {
    uint64_t *step;
    double *loss, *img_s, *elapsed;
    int n, cap;
} RunLog;

// Appends the rows of the file csv with step <= upto (it stops at the first later one) to l.
// Returns the bytes of the file up to that point (what a resume keeps), -1 when there is no file.
long run_log_read(const char *csv, uint64_t upto, RunLog *l);
void run_log_add(RunLog *l, uint64_t step, double loss, double img_s, double elapsed);
void run_log_free(RunLog *l);
// The data rows of a log.csv (lines after the header); -1 when there is no such file.
int run_log_rows(const char *csv);

#endif

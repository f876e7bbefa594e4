// `mala compare`'s state shared by its files: the runs (one per arm and seed), their evaluation
// rows (DIR/runs/NAME/evals.csv, append-only) and training logs (train's log.csv).
//
// Output directory DIR:
//   config.ini                     the latest invocation's config: a later one may change only what
//                                  no run used so far (compare_config_drift); DIR's mark as a comparison's
//   ref-<features>.npz             reference statistics, computed once
//   runs/<arm>-s<seed>/            train's run directory (checkpoints/, log.csv, loss.png) plus
//       evals.csv                  one row per evaluation point (never rewritten)
//       train.log, eval.log        the children's stderr, appended
//       grid-<step>.npy/.png       the sample grid of the newest checkpoint
//       model.csv                  parameters, GFLOP/img and classes (from its first checkpoint, so
//                                  that a copy of DIR without checkpoints/ still reports them)
//   results.md, results.csv, results.json, loss.png, fd_vs_images.png, fd_vs_tflop.png,
//   fd_vs_time.png, class_acc_vs_images.png, class_acc_vs_tflop.png, class_acc_vs_time.png,
//   compare.png
#ifndef MALA_COMPARE_H
#define MALA_COMPARE_H

#include <stdio.h>

#include "compare/compare_config.h"

typedef struct {
    int64_t images, step;
    double train_s;                    // training seconds of the run at this point
    double fd, class_acc, fid, is_mean, is_std, sample_img_s;  // NAN where not measured
    int capped;                        // the wall-time cap ended the run here
} EvalRow;

typedef struct {
    int n;
    double *step, *loss, *img_s, *elapsed;
} TrainLog;

typedef struct {
    const CompareArm *arm;
    int arm_index;
    uint64_t seed;
    char name[96];         // <arm>-s<seed>
    char dir[4200];
    int nev;
    EvalRow ev[1000];
    int done;              // budget reached, or capped
    int selected;          // trained and evaluated by this invocation (--runs)
    double params, gflop;  // from model.csv or the newest checkpoint (0 before one exists)
    int classes;
    char grid[4300];       // the newest grid .npy ("" = none)
    // the run's schedule (compare_run_schedule): its arm's, from the arm's GFLOP/img with budget_tflop
    int64_t budget;        // images seen at its end
    int npoints;
    int64_t point[1000];   // the evaluation points in images seen
    double point_tflop[1000];  // budget_tflop: the nominal TFLOP of each (the arms' shared points); else 0
} CompareRun;

// Reads DIR/runs/NAME/evals.csv into r (rows it cannot parse are reported and skipped).
void compare_read_evals(CompareRun *r);
// Appends one row to evals.csv (a header first when the file is new).
void compare_append_eval(CompareRun *r, const EvalRow *e);
// train's log.csv of a run; fills l (0 rows when there is none).
void compare_read_log(const char *run_dir, TrainLog *l);
void compare_log_free(TrainLog *l);
// A run's training rate from its log.csv, 0 when unknown: the median img/s of its last 20 rows, the
// machine's rate now (a whole log can hold an earlier session's contention, or a pause that an older
// build counted as training). *images_done and *train_s: the last row's.
double compare_run_rate(const char *run_dir, int batch, int64_t *images_done, double *train_s);
// Newest checkpoint step in run_dir/checkpoints (-1 when none).
int64_t compare_newest_ckpt(const char *run_dir);
// r->params, gflop and classes: from the run's model.csv, else from its newest checkpoint (then
// written to model.csv). 0, or -1 when neither exists (yet).
int compare_run_size(CompareRun *r);

// Sets r's budget and evaluation points (compare_arm_points) for an arm of gflop GFLOP/img.
void compare_run_schedule(const CompareConfig *c, CompareRun *r, double gflop);
// Where an evaluation row stands on the schedule every arm shares: its images seen (budget_images),
// or the nominal TFLOP of the run's point it is at (budget_tflop); 0 for a row at no point of the
// current schedule (a changed config's, or a wall-time cap's: its images only).
double compare_row_point(const CompareConfig *c, const CompareRun *r, const EvalRow *e);
// The evaluation of run r at the shared point pt (compare_row_point; NULL when it has none).
const EvalRow *compare_eval_at_point(const CompareConfig *c, const CompareRun *r, double pt);

// Mean and sample standard deviation over the finite values of v (n: how many were finite; sd NAN
// below two).
typedef struct { double mean, sd; int n; } CompareStat;
CompareStat compare_stat(const double *v, int n);

// The axes on which results.md compares arms.
enum { COMPARE_AX_IMAGES, COMPARE_AX_TFLOP, COMPARE_AX_TIME, COMPARE_AX_N };
// Run r's FD (*fd) and class accuracy (*acc) at x on an axis, from its two evaluations on either
// side (the one evaluation at x itself): log FD linear in x, accuracy linear. NAN when x is outside
// its evaluations. On the budget's own axis (images with budget_images, TFLOP with budget_tflop) an
// evaluation stands at its schedule point (compare_row_point).
void compare_read_off(const CompareConfig *c, const CompareRun *r, int axis, double x, double *fd, double *acc);
// The largest value on an axis at which run r has an FD (NAN when none).
double compare_run_reach(const CompareConfig *c, const CompareRun *r, int axis);

// results.md / .csv / .json and the plots in out (every run's state as it is now).
void compare_write_report(const CompareConfig *c, CompareRun *runs, int nruns, const char *out);
// results.md's rankings of the arms by FD (compare_ranking.c).
void compare_write_ranking(FILE *f, const CompareConfig *c, const CompareRun *runs, int nruns);
// results.md's gap table, for the config's gap = BASE, TARGET (compare_gap.c; nothing without it).
void compare_write_gap(FILE *f, const CompareConfig *c, const CompareRun *runs, int nruns);
// compare.png: the runs' grids one under the other, each named on the left (runs without a grid are left out).
void compare_write_grid(CompareRun *runs, int nruns, int classes, const char *out);

#endif

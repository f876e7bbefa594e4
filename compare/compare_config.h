// The configuration of `mala compare`: an INI-like text file.
//
//   # comment (also ';'); a ' #' after a value starts a comment too
//   [compare]                  the shared settings (data, recipe, seeds, budget, evaluation)
//   budget_images = 640000
//   [arm mala]                 one arm per section; NAME: letters, digits, '.', '_', '-'
//   backbone = dit             dit | dig | dic
//   attention = mala           mala | softmax | linear (dit only)
//   preset = DiT-T/4
//   flags = --rope 1           extra `mala train` flags, split on blanks
//
// Every key, its meaning and its default is in the table of compare_config.c (and docs/compare.md).
// Errors name the file and line: "FILE:LINE: unknown key 'lr_x' in [compare]; did you mean lr?".
// Only core/common.c is used, so the fuzz harness links this file alone.
#ifndef MALA_COMPARE_CONFIG_H
#define MALA_COMPARE_CONFIG_H

#include <stdint.h>

#include "core/common.h"

#define COMPARE_MAX_ARMS 16
#define COMPARE_MAX_SEEDS 8
#define COMPARE_MAX_FLAGS 32
#define COMPARE_STR 512

typedef struct {
    char name[64];
    char backbone[16];   // dit | dig | dic
    char attention[16];  // dit: mala | softmax | linear; "" for the others
    char preset[32];
    char flags[COMPARE_STR];  // extra train flags as written
    int nflags;
    char *flag[COMPARE_MAX_FLAGS];  // into flag_buf
    char flag_buf[COMPARE_STR];
    double lr;           // 0: the shared lr
    int line;            // of the [arm NAME] header, for messages
} CompareArm;

typedef struct {
    char path[1024];                 // the file, for messages
    char data[COMPARE_STR];          // train --data
    char features[16];               // fmnist | inception: eval's --features for FD and class accuracy
    char ref[COMPARE_STR];           // reference images (or a statistics .npz) for FD
    int ref_images;                  // 0 = all of ref
    char inception[COMPARE_STR];     // FID Inception weights: also FID and IS ("" = none)
    double lr;
    int batch;
    int nseeds;
    uint64_t seeds[COMPARE_MAX_SEEDS];
    int64_t budget_images;           // images seen per arm and seed (0: budget_tflop instead)
    double budget_tflop;             // training forward TFLOP per arm and seed (0: budget_images instead)
    double wall_time_s;              // training seconds per arm and seed (0 = no cap)
    int64_t eval_every_images;
    double eval_every_tflop;         // with budget_tflop
    char sampler[8];                 // ddim | ddpm
    int eval_steps, eval_images;
    double cfg_scale;
    char cfg_channels[8];            // eval --cfg-channels: all | N
    uint64_t eval_seed;
    int grid_per_class;              // sample grid rows per arm in compare.png
    int log_every;                   // train --log-every (steps)
    int ckpt_every;                  // train --ckpt-every (steps; 0 = every eval point)
    int threads;                     // 0 = all
    char device[8];                  // auto | cpu | cuda: --device of every child
    char precision[8];               // auto (the device's default) | fp32 | bf16 | tf32: --precision of every child
    char train_flags[COMPARE_STR];   // extra train flags for every arm
    int ntrain_flags;
    char *train_flag[COMPARE_MAX_FLAGS];
    char train_flag_buf[COMPARE_STR];
    char gap[COMPARE_STR];           // "BASE, TARGET": results.md's gap table ("" = none)
    int gap_base, gap_target;        // their arm indices (-1 without gap)
    int narms;
    CompareArm arms[COMPARE_MAX_ARMS];
} CompareConfig;

// Parses text[0..len) (name: the file name for messages). 0, or -1 with "NAME:LINE: ..." in err.
int compare_config_parse(const char *text, size_t len, const char *name, CompareConfig *c, MalaErr *err);
// Reads and parses a file (at most 1 MiB).
int compare_config_load(const char *path, CompareConfig *c, MalaErr *err);

// Whether `now` may continue the comparison whose runs used `old` (stored: its file, for messages):
// state(RUN, ctx) says how far a run of old got (0 not started, 1 trained, 2 evaluated). Refused,
// with a one-line error naming the key (and run): a run that trained missing from now; a change of
// what a trained run used (data, batch, its lr, train_flags, its arm's keys); of the evaluation
// once a run was evaluated, or of the reference keys once ref_stats (that file, or NULL) exists; a
// smaller budget_images, budget_tflop or wall_time_s, or a switch between budget_images and
// budget_tflop, once a run trained. Everything else may change.
int compare_config_drift(const CompareConfig *old, const CompareConfig *now, const char *stored,
                         int (*state)(const char *run, void *ctx), void *ctx, const char *ref_stats, MalaErr *err);

// Training steps for `images` images at batch b (rounded up).
int64_t compare_steps(const CompareConfig *c, int64_t images);
// The evaluation points in images seen: eval_every, 2 eval_every, ..., and the budget. Returns
// their number; *out is malloc'd. (A budget_images comparison: every arm's.)
int compare_eval_points(const CompareConfig *c, int64_t **out);

// ---- budgets in compute (budget_tflop): each arm's own images, from its forward GFLOP/img ----
// Training TFLOP of `images` images of a model of gflop GFLOP/img: images x gflop / 1000.
double compare_tflop(int64_t images, double gflop);
// The whole training steps nearest to `tflop` TFLOP at gflop GFLOP/img and batch b (at least 1):
// round(tflop x 1000 / (gflop x b)), so an arm stops within half a step's compute of it.
int64_t compare_tflop_steps(const CompareConfig *c, double tflop, double gflop);
// An arm's evaluation points in images seen (*images) and, with budget_tflop, the nominal TFLOP of
// each (*tflop: eval_every_tflop, 2 eval_every_tflop, ..., budget_tflop; NULL for budget_images),
// both malloc'd. With budget_tflop each point is its whole steps (compare_tflop_steps) x batch; two
// points that round to the same step keep the later one. Returns their number.
int compare_arm_points(const CompareConfig *c, double gflop, int64_t **images, double **tflop);
// An arm's budget in images seen: budget_images, or its last point of budget_tflop.
int64_t compare_arm_budget(const CompareConfig *c, double gflop);

#endif

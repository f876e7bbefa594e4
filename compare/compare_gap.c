// defines: compare_write_gap
// results.md's gap table, for the config's `gap = BASE, TARGET`: how much of the distance from
// BASE's FD down to TARGET's each arm covers,
//   closed = (FD_BASE - FD_arm) / (FD_BASE - FD_TARGET)
// (100% = as good as TARGET, 0 = as BASE, negative = worse than BASE), per seed (the three arms'
// runs of that seed) and by the means over the seeds all three have. Twice: at equal training
// compute and at equal images seen, each time at the largest value that the arm's, BASE's and
// TARGET's runs have all reached (so at equal images an arm that spends more FLOPs per image is
// compared at its own images, BASE and TARGET read off there), every run read off its own
// evaluations (compare_read_off).
#include <math.h>
#include <stdio.h>

#include "compare/compare.h"

// The largest value on an axis that every run of the arms in arm[0..3) has reached (NAN if one has none).
static double shared_reach(const CompareConfig *c, const CompareRun *runs, int nruns, const int *arm, int axis) {
    double x = INFINITY;
    for (int i = 0; i < nruns; i++)
        if (runs[i].arm_index == arm[0] || runs[i].arm_index == arm[1] || runs[i].arm_index == arm[2]) {
            const double last = compare_run_reach(c, &runs[i], axis);
            if (!isfinite(last)) return NAN;
            if (last < x) x = last;
        }
    return isfinite(x) ? x : NAN;
}

// FDs at x of the arm (k = 0), BASE (1) and TARGET (2): per seed (fd[k][s], NAN where missing) and
// their means over the seeds all three have (mean[k]).
static void fds_at(const CompareConfig *c, const CompareRun *runs, int nruns, const int *arm, int axis, double x,
                   double fd[3][COMPARE_MAX_SEEDS], double mean[3]) {
    for (int k = 0; k < 3; k++)
        for (int s = 0; s < c->nseeds; s++) {
            fd[k][s] = NAN;
            for (int i = 0; i < nruns; i++)
                if (runs[i].arm_index == arm[k] && runs[i].seed == c->seeds[s] && isfinite(x)) {
                    double acc;
                    compare_read_off(c, &runs[i], axis, x, &fd[k][s], &acc);
                }
        }
    int n = 0;
    mean[0] = mean[1] = mean[2] = 0;
    for (int s = 0; s < c->nseeds; s++)
        if (isfinite(fd[0][s]) && isfinite(fd[1][s]) && isfinite(fd[2][s])) {
            for (int k = 0; k < 3; k++) mean[k] += fd[k][s];
            n++;
        }
    for (int k = 0; k < 3; k++) mean[k] = n ? mean[k] / n : NAN;
}

static double closed(const double *v) { return (v[1] - v[0]) / (v[1] - v[2]); }

// "a / b (mean)" cells: the per-seed values and the mean's, each by fmt (or "-").
static void per_seed(FILE *f, const CompareConfig *c, const double *seed, double mean, const char *fmt) {
    for (int s = 0; s < c->nseeds; s++) {
        if (s) fputs(" /", f);
        if (isfinite(seed[s])) { fputc(' ', f); fprintf(f, fmt, seed[s]); }
        else fputs(" -", f);
    }
    if (c->nseeds > 1) {
        fputs(" (", f);
        if (isfinite(mean)) fprintf(f, fmt, mean);
        else fputc('-', f);
        fputc(')', f);
    }
    fputs(" |", f);
}

static void share_cells(FILE *f, const CompareConfig *c, double fd[3][COMPARE_MAX_SEEDS], const double *mean) {
    double share[COMPARE_MAX_SEEDS];
    for (int s = 0; s < c->nseeds; s++) {
        const double v[3] = {fd[0][s], fd[1][s], fd[2][s]};
        share[s] = 100 * closed(v);
    }
    per_seed(f, c, share, 100 * closed(mean), "%+.0f%%");
}

void compare_write_gap(FILE *f, const CompareConfig *c, const CompareRun *runs, int nruns) {
    if (c->gap_base < 0) return;
    const char *base = c->arms[c->gap_base].name, *target = c->arms[c->gap_target].name;
    fprintf(f, "\nThe gap from %s down to %s (the config's gap): each arm closes (FD_%s - FD_arm) / (FD_%s - FD_%s) "
               "of it, negative where it widens it; per seed", base, target, base, base, target);
    if (c->nseeds > 1) {
        fputs(" (", f);
        for (int s = 0; s < c->nseeds; s++) fprintf(f, "%s%llu", s ? " / " : "", (unsigned long long)c->seeds[s]);
        fputs(") and by the means over seeds (in parentheses)", f);
    }
    fprintf(f, ". Equal compute and equal images: at the largest value on that axis that the arm's, %s's and %s's "
               "runs have all reached, each run read off its own evaluations (log FD linear between the two on "
               "either side).\n\n| arm | training TFLOP | FD there | closed at equal compute | images seen | FD there: "
               "arm / %s / %s (means) | closed at equal images |\n|---|---:|---|---|---:|---|---|\n",
            base, target, base, target);
    for (int a = 0; a < c->narms; a++) {
        const int arm[3] = {a, c->gap_base, c->gap_target};
        double fd[3][COMPARE_MAX_SEEDS], mean[3];
        fprintf(f, "| %s |", c->arms[a].name);
        const double t = shared_reach(c, runs, nruns, arm, COMPARE_AX_TFLOP);
        if (isfinite(t)) {
            fprintf(f, " %.4g |", t);
            fds_at(c, runs, nruns, arm, COMPARE_AX_TFLOP, t, fd, mean);
            per_seed(f, c, fd[0], mean[0], "%.3f");
            share_cells(f, c, fd, mean);
        } else {
            fputs(" - | - | - |", f);
        }
        const double im = shared_reach(c, runs, nruns, arm, COMPARE_AX_IMAGES);
        if (isfinite(im)) {
            fprintf(f, " %.0f |", im);
            fds_at(c, runs, nruns, arm, COMPARE_AX_IMAGES, im, fd, mean);
            for (int k = 0; k < 3; k++) {
                if (isfinite(mean[k])) fprintf(f, "%s%.3f", k ? " / " : " ", mean[k]);
                else fprintf(f, "%s-", k ? " / " : " ");
            }
            fputs(" |", f);
            share_cells(f, c, fd, mean);
        } else {
            fputs(" - | - | - |", f);
        }
        fputc('\n', f);
    }
}

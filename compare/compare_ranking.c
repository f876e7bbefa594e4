// defines: compare_write_ranking, compare_read_off, compare_run_reach
// The arms ranked by FD in results.md, twice:
//   - at the last point of the schedule every run with results has reached (the budget's axis:
//     images seen, or training TFLOP with budget_tflop), from the evaluations made there;
//   - on each of the three axes (images seen, training compute, training time) at the largest
//     value every run has reached, each run's FD and class accuracy read off its own evaluations.
// The second is how arms that spend their budget differently compare: an arm trained to equal
// compute sees fewer images if each costs more, and runs at its own speed.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compare/compare.h"

// Orders arms by value (ascending; NAN last) into idx.
static void order(const double *v, int n, int *idx) {
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            double a = v[idx[j - 1]], b = v[idx[j]];
            if (!(isnan(a) && !isnan(b)) && !(a > b)) break;
            int t = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = t;
        }
}

// FD as results.md prints it (4 significant digits): arms equal at that precision are a tie.
static double printed_fd(double v) {
    char buf[64];
    snprintf(buf, sizeof buf, "%#.4g", v);
    return strtod(buf, NULL);
}

// Prints the arms with a result in order (v: printed_fd values; '=' between a tie).
static void print_order(FILE *f, const CompareConfig *c, const double *v, const int *idx) {
    int n = 0, tie = 0;
    for (int i = 0; i < c->narms; i++)
        if (isfinite(v[idx[i]])) {
            const int eq = n && v[idx[i]] == v[idx[i - 1]];
            tie |= eq;
            fprintf(f, "%s %s", !n++ ? "" : eq ? " =" : " <", c->arms[idx[i]].name);
        }
    fprintf(f, "%s%s.\n", n < c->narms ? (n ? " (the other arms have no result yet)" : " no results yet") : "",
            tie ? " (=: a tie, the same FD to 4 digits)" : "");
}

static int sign(double a, double b) { return (a > b) - (a < b); }

// Ranks the arms by run_fd (one value per run, NAN for none): the mean over seeds after `head`,
// then each seed's order, then whether the seeds agree on the arms every seed has (a tie is an
// order of its own) — the check that the budget is large enough for the ranking to be stable.
static void rank_runs(FILE *f, const CompareConfig *c, const CompareRun *runs, int nruns, const double *run_fd,
                      const char *head) {
    double v[COMPARE_MAX_SEEDS + 1][COMPARE_MAX_ARMS];  // [0]: the mean; [1 + s]: seed s
    int idx[COMPARE_MAX_ARMS];
    for (int s = -1; s < c->nseeds; s++) {  // -1: the mean over seeds
        double *vs = v[s + 1];
        for (int a = 0; a < c->narms; a++) {
            double sum = 0;
            int n = 0;
            for (int i = 0; i < nruns; i++)
                if (runs[i].arm_index == a && isfinite(run_fd[i]) && (s < 0 || runs[i].seed == c->seeds[s]))
                    sum += run_fd[i], n++;
            vs[a] = n ? printed_fd(sum / n) : NAN;
        }
        order(vs, c->narms, idx);
        if (s < 0) fputs(head, f);
        else fprintf(f, "Seed %llu:", (unsigned long long)c->seeds[s]);
        print_order(f, c, vs, idx);
        if (c->nseeds < 2) return;
    }
    int common[COMPARE_MAX_ARMS], nc = 0, agree = 1;  // the arms every seed has
    for (int a = 0; a < c->narms; a++) {
        int all = 1;
        for (int s = 0; s < c->nseeds; s++) all &= isfinite(v[1 + s][a]);
        if (all) common[nc++] = a;
    }
    for (int i = 0; i < nc; i++)
        for (int j = i + 1; j < nc; j++)
            for (int s = 1; s < c->nseeds; s++)
                agree &= sign(v[1][common[i]], v[1][common[j]]) == sign(v[1 + s][common[i]], v[1 + s][common[j]]);
    if (nc < 2) {
        fprintf(f, "Whether the seeds agree: not known yet (fewer than two arms have every seed).\n");
        return;
    }
    fprintf(f, "The seeds %s on the order", agree ? "agree" : "DISAGREE");
    if (nc < c->narms) {
        fprintf(f, " of the arms every seed has (");
        for (int i = 0; i < nc; i++) fprintf(f, "%s%s", i ? ", " : "", c->arms[common[i]].name);
        fprintf(f, ")");
    }
    fprintf(f, ".\n");
}

// The largest shared point (images seen, or TFLOP with budget_tflop) at which every run with
// results has an evaluation (0 if none): the one budget at which the arms compare, whatever order
// the runs were trained in (--runs). *with: how many runs have results.
static double shared_point(const CompareConfig *c, const CompareRun *runs, int nruns, int *with) {
    double best = 0;
    const CompareRun *r0 = NULL;
    *with = 0;
    for (int i = 0; i < nruns; i++)
        if (runs[i].nev) { (*with)++; if (!r0) r0 = &runs[i]; }
    for (int e = 0; r0 && e < r0->nev; e++) {
        const double pt = compare_row_point(c, r0, &r0->ev[e]);
        int all = pt > 0;
        for (int j = 0; j < nruns && all; j++) all = !runs[j].nev || compare_eval_at_point(c, &runs[j], pt);
        if (all && pt > best) best = pt;
    }
    return best;
}

// On the budget's own axis an evaluation lies at the schedule's shared point (compare_row_point),
// so that a read-off there is exactly what the ranking at the shared point reads; off the
// schedule it is unknown.
static double row_x(const CompareConfig *c, const CompareRun *r, const EvalRow *e, int axis) {
    if ((axis == COMPARE_AX_IMAGES && c->budget_images) || (axis == COMPARE_AX_TFLOP && !c->budget_images)) {
        const double pt = compare_row_point(c, r, e);
        return pt > 0 ? pt : NAN;
    }
    if (axis == COMPARE_AX_IMAGES) return (double)e->images;
    if (axis == COMPARE_AX_TFLOP) return r->gflop > 0 ? compare_tflop(e->images, r->gflop) : NAN;
    return e->train_s > 0 ? e->train_s : NAN;
}

// Log FD is read linearly in x because FD falls by orders of magnitude between early points, so a
// straight line through FD would overstate it.
void compare_read_off(const CompareConfig *c, const CompareRun *r, int axis, double x, double *fd, double *acc) {
    const EvalRow *lo = NULL, *hi = NULL;
    double xlo = -INFINITY, xhi = INFINITY;
    *fd = *acc = NAN;
    for (int e = 0; e < r->nev; e++) {
        const double xe = row_x(c, r, &r->ev[e], axis);
        if (!isfinite(xe) || !(r->ev[e].fd > 0)) continue;
        if (xe <= x && xe > xlo) xlo = xe, lo = &r->ev[e];
        if (xe >= x && xe < xhi) xhi = xe, hi = &r->ev[e];
    }
    if (!lo || !hi) return;
    if (lo == hi || xhi == xlo) { *fd = lo->fd; *acc = lo->class_acc; return; }
    const double t = (x - xlo) / (xhi - xlo);
    *fd = exp(log(lo->fd) + t * (log(hi->fd) - log(lo->fd)));
    *acc = lo->class_acc + t * (hi->class_acc - lo->class_acc);
}

double compare_run_reach(const CompareConfig *c, const CompareRun *r, int axis) {
    double last = NAN;
    for (int e = 0; e < r->nev; e++) {
        const double xe = row_x(c, r, &r->ev[e], axis);
        if (isfinite(xe) && r->ev[e].fd > 0 && !(xe <= last)) last = xe;
    }
    return last;
}

// The largest value of an axis that every run with results has reached: the smallest of the runs'
// last values (0 when no run has one).
static double axis_reach(const CompareConfig *c, const CompareRun *runs, int nruns, int axis) {
    double reach = INFINITY;
    for (int i = 0; i < nruns; i++) {
        const double last = compare_run_reach(c, &runs[i], axis);
        if (isfinite(last) && last < reach) reach = last;
    }
    return isfinite(reach) ? reach : 0;
}

// An axis's value as a table header ("at 640000 images seen") and in a ranking's head ("640000").
static void axis_words(int axis, double x, char *head, char *brief, size_t cap) {
    static const char *fmt[COMPARE_AX_N][2] = {{"at %.0f images seen", "%.0f"},
                                               {"at %.4g training TFLOP", "%.4g TFLOP"},
                                               {"at %.0f s of training", "%.0f s"}};
    snprintf(head, cap, fmt[axis][0], x);
    snprintf(brief, cap, fmt[axis][1], x);
}

static void write_axes(FILE *f, const CompareConfig *c, const CompareRun *runs, int nruns) {
    static const char *equal[COMPARE_AX_N] = {"equal images seen", "equal training compute", "equal training time"};
    double x[COMPARE_AX_N], fd[COMPARE_AX_N][COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS], acc[COMPARE_AX_N][COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS];
    char words[COMPARE_AX_N][64], brief[COMPARE_AX_N][64];
    int any = 0;
    for (int ax = 0; ax < COMPARE_AX_N; ax++) {
        x[ax] = axis_reach(c, runs, nruns, ax);
        axis_words(ax, x[ax], words[ax], brief[ax], sizeof words[ax]);
        for (int i = 0; i < nruns; i++) {
            fd[ax][i] = acc[ax][i] = NAN;
            if (x[ax] > 0) compare_read_off(c, &runs[i], ax, x[ax], &fd[ax][i], &acc[ax][i]);
            any |= isfinite(fd[ax][i]);
        }
    }
    if (!any) return;
    fprintf(f, "\nFD / class accuracy on each axis at the largest value every run with results has reached, each "
               "run read off its own evaluations (log FD and accuracy linear between the two on either side; the "
               "mean over seeds%s). Training time is the runs' own (train_s in results.csv): comparable only "
               "between runs trained on the same machine and build.\n\n| arm |",
            c->nseeds > 1 ? ", FD ± the sample standard deviation" : "");
    for (int ax = 0; ax < COMPARE_AX_N; ax++) fprintf(f, " %s |", x[ax] > 0 ? words[ax] : "-");
    fprintf(f, "\n|---|---:|---:|---:|\n");
    for (int a = 0; a < c->narms; a++) {
        fprintf(f, "| %s |", c->arms[a].name);
        for (int ax = 0; ax < COMPARE_AX_N; ax++) {
            double vf[COMPARE_MAX_SEEDS], va[COMPARE_MAX_SEEDS];
            int n = 0;
            for (int i = 0; i < nruns; i++)
                if (runs[i].arm_index == a && isfinite(fd[ax][i])) vf[n] = fd[ax][i], va[n++] = acc[ax][i];
            if (!n) { fputs(" - |", f); continue; }
            const CompareStat sf = compare_stat(vf, n);
            fprintf(f, " %#.4g", sf.mean);
            if (n > 1) fprintf(f, " ± %#.4g", sf.sd);
            fprintf(f, " / %.3f |", compare_stat(va, n).mean);
        }
        fputc('\n', f);
    }
    for (int ax = 0; ax < COMPARE_AX_N; ax++) {
        if (!(x[ax] > 0)) {
            fprintf(f, "\nAt %s: not every run with results has a value on this axis yet.\n", equal[ax]);
            continue;
        }
        char head[256];
        snprintf(head, sizeof head, "\nAt %s (%s), by FD, mean over seeds:", equal[ax], brief[ax]);
        rank_runs(f, c, runs, nruns, fd[ax], head);
    }
}

void compare_write_ranking(FILE *f, const CompareConfig *c, const CompareRun *runs, int nruns) {
    int with;
    const double pt = shared_point(c, runs, nruns, &with);
    if (!pt) {
        fprintf(f, "\nRanking by FD: no point that every run with results has reached yet.\n");
        return;
    }
    double run_fd[COMPARE_MAX_ARMS * COMPARE_MAX_SEEDS];
    for (int i = 0; i < nruns; i++) run_fd[i] = runs[i].nev ? compare_eval_at_point(c, &runs[i], pt)->fd : NAN;
    char words[64], head[256];
    if (c->budget_images) snprintf(words, sizeof words, "%lld images seen", (long long)pt);
    else snprintf(words, sizeof words, "%g training TFLOP", pt);
    snprintf(head, sizeof head,
             "\nRanking by FD (lower is better) at %s, the last point every run with results has reached (%d of %d "
             "runs), mean over seeds:", words, with, nruns);
    rank_runs(f, c, runs, nruns, run_fd, head);
    write_axes(f, c, runs, nruns);
}

// defines: train_run_loop, train_check_replicas
#include "train/train_run.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dist.h"
#include "core/progress.h"
#include "eval/line_plot.h"
#include "train/run_dir.h"
#include "train/train_tensorboard.h"

// Every rank's weights and EMA must be rank 0's: a replica that drifted (a non-deterministic
// reduction, a bad node) stops the job with an error instead of averaging unrelated models.
int train_check_replicas(const Trainer *tr, MalaErr *err) {
    if (tr->world == 1) return 0;
    uint64_t h = trainer_weights_hash(tr), h0 = h;
    dist_bcast(&h0, sizeof h0, 0);
    if (!dist_any(h != h0)) return 0;
    err->msg[0] = 0;
    if (h != h0)
        mala_errf(err, "rank %d: weights differ from rank 0's at step %llu (hash %016llx, rank 0 %016llx): the replicas "
                  "diverged; stopping (resume from the last checkpoint)", tr->rank, (unsigned long long)tr->step,
                  (unsigned long long)h, (unsigned long long)h0);
    return -1;
}

// Test hook for the check above: MALA_TEST_DIVERGE=RANK:STEP nudges one weight of that rank
// after that step by one ulp, as a replica that drifted would.
static void maybe_diverge(const Trainer *tr) {
    const char *e = getenv("MALA_TEST_DIVERGE");
    int rank;
    unsigned long long step;
    if (!e || sscanf(e, "%d:%llu", &rank, &step) != 2 || rank != tr->rank || step != tr->step) return;
    float w;
    tr->be->to_host(&w, tr->net->w, sizeof w);
    w = nextafterf(w, INFINITY);
    tr->be->to_device(tr->net->w, &w, sizeof w);
}

// The run's clock: wall seconds less the time the process was stopped (SIGSTOP, Ctrl-Z), so that
// elapsed_s, img/s and the ETA measure training, not a pause. A stop cannot be timed (nothing runs
// during it); a SIGCONT since the last reading says the interval held one, and the interval then
// counts as the mean of the steps timed so far (in full before the first).
typedef struct {
    const volatile sig_atomic_t *continued;  // NULL: the wall clock
    sig_atomic_t seen;
    double last, stopped;                    // the last reading (wall seconds); the seconds left out
    double step_sum;                         // the steps timed without a stop in them
    long step_n;
} RunClock;

// step_s: the step that ended at this reading (wall seconds), or -1 for a reading between steps
static double run_clock(RunClock *c, double step_s) {
    double now = now_seconds(), dt = now - c->last;
    c->last = now;
    if (c->continued && *c->continued != c->seen) {
        c->seen = *c->continued;
        double mean = c->step_n ? c->step_sum / c->step_n : dt;
        if (dt > mean) c->stopped += dt - mean;
    } else if (step_s >= 0) {
        c->step_sum += step_s;
        c->step_n++;
    }
    return now - c->stopped;
}

int train_run_loop(TrainRun *r) {
    Trainer *tr = r->tr;
    Loader *ld = r->ld;
    RunSettings *rs = r->rs;
    const TrainOpts to = *r->to;
    const uint64_t iters = rs->iters;
    const int batch = r->batch, accum = r->accum, lead = r->lead, grid_every = r->grid_every;
    const int say = lead && !r->quiet;  // the console's lines (the files are lead's either way)
    const char *out = r->out;
    const NetConfig *c = &tr->net->cfg;
    const size_t per = (size_t)c->in_channels * c->image_size * c->image_size;
    char dir[4096], path[4200], csv[4200], plot[4200];
    snprintf(dir, sizeof dir, "%s/checkpoints", out);
    snprintf(csv, sizeof csv, "%s/log.csv", out);
    snprintf(plot, sizeof plot, "%s/loss.png", out);
    MalaErr err;
    float *x = xmalloc((size_t)batch * accum * per * sizeof(float));  // a step's --accum batches
    int32_t *y = xmalloc((size_t)batch * accum * sizeof(int32_t));
    RunClock clk = {r->continued, r->continued ? *r->continued : 0, now_seconds(), 0, 0, 0};
    double acc_loss = 0, acc_mse = 0, acc_vb = 0, acc_gn = 0, t_log = run_clock(&clk, -1), t_start = t_log;
    int acc_n = 0, rc = 0, asked = 0, diverged = 0;  // asked: on_log asked to stop
    uint64_t start_step = tr->step, last_saved = tr->step;
    Progress pg;
    progress_init(&pg, say ? stderr : NULL);
    // a point whose evaluation a stop cut short (its checkpoint is this step's) is evaluated first
    if (r->tev && tr->step > 0 && !dist_any(*r->stop) && train_eval_due(r->tev, tr->step, iters)) {
        train_eval_run(r->tev, tr, rs->elapsed, r->tb, r->stop);
        t_log = run_clock(&clk, -1);  // left out of img/s
    }
    while (tr->step < iters && !asked && !dist_any(*r->stop)) {
        const double t_step = now_seconds();
        for (int k = 0; k < accum; k++) loader_next(ld, x + (size_t)k * tr->batch * per, y + (size_t)k * tr->batch);
        StepStats st = trainer_step(tr, x, y);
        maybe_diverge(tr);
        if (st.skipped) {
            progress_break(&pg);
            if (say) fprintf(stderr, "warning: step %llu: non-finite loss or gradient, skipped (%d in a row)\n",
                    (unsigned long long)tr->step + 1, tr->bad_in_a_row);
            if (tr->bad_in_a_row >= to.max_bad_steps) {
                mala_errf(&r->err, "%d non-finite steps in a row; stopping. The last good checkpoint is %s",
                          tr->bad_in_a_row, last_saved ? (run_ckpt_path(path, sizeof path, out, last_saved), path) : "(none)");
                if (say) fprintf(stderr, "error: %s\n", r->err.msg);
                rc = 1;
                break;
            }
            continue;
        }
        acc_loss += st.loss; acc_mse += st.mse; acc_vb += st.vb; acc_gn += st.grad_norm; acc_n++;
        double now = run_clock(&clk, now_seconds() - t_step);
        const int log_now = tr->step % rs->log_every == 0 || tr->step == iters;  // the last step too
        if (log_now && train_check_replicas(tr, &r->err)) {  // every rank stops here, without a checkpoint
            progress_break(&pg);
            if (!r->quiet && r->err.msg[0]) fprintf(stderr, "error: %s\n", r->err.msg);
            rc = diverged = 1;
            break;
        }
        if (lead && log_now) {
            double rate = acc_n * (double)batch * accum / (now - t_log);  // images, not batches
            double eta = (iters - tr->step) * (now - t_start) / (double)(tr->step - start_step);
            char etas[32], stamp[32];
            progress_format_eta(etas, sizeof etas, eta);
            progress_update(&pg, tr->step == iters, "step %llu/%llu  loss %.4f (mse %.4f vb %.4f)  grad %.3f  %.1f img/s  ETA %s",
                            (unsigned long long)tr->step, (unsigned long long)iters, acc_loss / acc_n, acc_mse / acc_n,
                            acc_vb / acc_n, acc_gn / acc_n, rate, etas);
            time_t wall = time(NULL);
            strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&wall));
            FILE *f = fopen(csv, "a");
            if (!f || fprintf(f, "%llu,%.6g,%.6g,%.6g,%.6g,%.2f,%g,%llu,%.3f,%s\n", (unsigned long long)tr->step,
                              acc_loss / acc_n, acc_mse / acc_n, acc_vb / acc_n, acc_gn / acc_n, rate,
                              train_lr(&to, tr->step),
                              (unsigned long long)tr->skipped_total, rs->elapsed + (now - t_start), stamp) < 0 ||
                fclose(f)) {
                mala_errf(&r->err, "%s: cannot append: %s", csv, strerror(errno));
                rc = TRAIN_RUN_IO_ERROR;
                break;
            }
            TbRow row = {acc_loss / acc_n, acc_mse / acc_n, acc_vb / acc_n, acc_gn / acc_n, rate,
                         train_lr(&to, tr->step), tr->skipped_total};
            if (r->tb->f && tb_log_row(r->tb, tr->step, &row, &r->err)) {
                rc = TRAIN_RUN_IO_ERROR;
                break;
            }
            if (r->on_log && r->on_log(r->user, tr->step, &row)) asked = 1;
            run_log_add(r->hist, tr->step, acc_loss / acc_n, NAN, NAN);
            if (loss_plot_png(plot, r->hist->step, r->hist->loss, r->hist->n, &err)) {
                progress_break(&pg);
                if (say) fprintf(stderr, "warning: %s\n", err.msg);
            }
            acc_loss = acc_mse = acc_vb = acc_gn = 0;
            acc_n = 0;
            t_log = now;
        }
        if ((lead || tr->zero) && (tr->step % rs->ckpt_every == 0 || tr->step == iters)) {  // ZeRO: all gather
            run_ckpt_path(path, sizeof path, out, tr->step);
            run_meta_fill(r->meta, rs);
            if (trainer_save(tr, path, &r->err)) {
                rc = TRAIN_RUN_IO_ERROR;
                break;
            }
            last_saved = tr->step;
            if (lead) run_prune_checkpoints(out, rs->keep, tr->step);
        }
        if (grid_every > 0 && (tr->step % grid_every == 0 || tr->step == iters)) {
            snprintf(path, sizeof path, "%s/samples/%07llu.png", out, (unsigned long long)tr->step);
            double t0 = run_clock(&clk, -1);
            progress_break(&pg);
            if (!train_grid_write(r->grid, tr, path) && r->tb->f &&  // also the final grid, at the run's last step
                tb_log_grid(r->tb, tr->step, path, &r->err)) {
                rc = TRAIN_RUN_IO_ERROR;
                break;
            }
            t_log += run_clock(&clk, -1) - t0;   // img/s counts training only
        }
        if (r->tev && train_eval_due(r->tev, tr->step, iters)) {
            progress_break(&pg);
            double t0 = run_clock(&clk, -1);
            train_eval_run(r->tev, tr, rs->elapsed + (t0 - t_start), r->tb, r->stop);
            t_log += run_clock(&clk, -1) - t0;
        }
    }
    progress_break(&pg);
    if (rc == TRAIN_RUN_IO_ERROR || diverged) {
        free(x);
        free(y);
        return rc;
    }
    int stopped = dist_any(*r->stop);  // the vote that ended the loop (a signal on any rank)
    if (asked && !stopped && tr->step != last_saved && lead) {  // on_log's stop: the step is kept
        run_ckpt_path(path, sizeof path, out, tr->step);
        run_meta_fill(r->meta, rs);
        if (trainer_save(tr, path, &r->err)) rc = TRAIN_RUN_IO_ERROR;
        else run_prune_checkpoints(out, rs->keep, tr->step);
    }
    if (stopped) {  // also when it came during start-up or while a checkpoint was written
        int wrote = tr->step != last_saved;
        if (wrote && (lead || tr->zero)) {
            run_ckpt_path(path, sizeof path, out, tr->step);
            run_meta_fill(r->meta, rs);
            if (trainer_save(tr, path, &r->err)) {
                free(x);
                free(y);
                return TRAIN_RUN_IO_ERROR;
            }
            if (lead) run_prune_checkpoints(out, rs->keep, tr->step);
        }
        if (wrote) last_saved = tr->step;
        char why[48] = "a signal to another process";
        if (*r->stop) snprintf(why, sizeof why, "signal %d", (int)*r->stop);
        if (last_saved) run_ckpt_path(path, sizeof path, out, last_saved);
        if (say)
            fprintf(stderr, "stopped by %s at step %llu; %s %s%s\n", why, (unsigned long long)tr->step,
                    !last_saved ? "no checkpoint" : wrote ? "wrote" : "the last checkpoint is",
                    last_saved ? path : "written", last_saved ? " (continue with --resume)" : "");
        // as a shell reports a command a signal ended: 128 + the signal (every rank: SIGINT's if any rank had one)
        int sigint = dist_any(*r->stop == SIGINT);
        if (rc == 0) rc = 128 + (sigint ? SIGINT : SIGTERM);
    } else if (say && rc == 0) {
        fprintf(stderr, "done: step %llu, %.0f s; checkpoints in %s\n", (unsigned long long)tr->step,
                run_clock(&clk, -1) - t_start, dir);
    }
    free(x);
    free(y);
    return rc;
}

// What a run directory may already hold when a run starts in it (docs/train.md): a fresh run
// refuses a directory with a run in it, a --resume without a checkpoint starts over with the
// earlier start's files moved aside, and a run directory may not lie inside its data. Each returns
// 0, or -1 with err (one line naming --out or --resume and the problem).
// defines: refuse_existing_run, move_earlier_start, no_checkpoint_to_resume, refuse_out_in_data
#ifndef MALA_RUN_GUARD_H
#define MALA_RUN_GUARD_H

#include "core/common.h"

// A fresh run refuses a directory that already holds one: nothing of it may be lost or mixed in.
// A start that failed or stopped before its first logged step (no checkpoint, a log.csv of the
// header alone, no sample grid) left no run: the directory is used again (a note says so when say).
// csv: out's log.csv.
int refuse_existing_run(const char *out, const char *csv, int say, MalaErr *err);
// A run started over from step 0: the earlier start's files move to out/restart-N/, so that
// nothing of it is lost or mixed into the new start's; how says with what settings it starts.
int move_earlier_start(const char *out, const char *csv, const char *how, MalaErr *err);
// --resume with no complete checkpoint and no stored command line (a run an older mala started):
// a run that logged steps or wrote grids starts over from step 0 with the settings given (its
// earlier files moved aside); otherwise there is nothing to resume. files: the checkpoint files in
// dir (out/checkpoints), none of them complete.
int no_checkpoint_to_resume(const char *out, const char *dir, const char *csv, int files, MalaErr *err);
// A run directory equal to or inside the data would become part of it (its checkpoints/ a class of
// the next run): refused. spec: --data (fashion-mnist[-test][:DIR], a folder or a latent set).
int refuse_out_in_data(const char *out, const char *spec, MalaErr *err);

#endif

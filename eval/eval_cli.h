// `mala eval ...` and `mala bench inception` (wired into app/main.c by the lead).
#ifndef MALA_EVAL_CLI_H
#define MALA_EVAL_CLI_H

// mala eval stats --data FILE.npz|DIR --out stats.npz
// mala eval fid   --samples FILE.npz|DIR --ref stats.npz|FILE.npz|DIR
// mala eval is    --samples FILE.npz|DIR
// argv[0] is "eval". One JSON line on stdout, a readable summary and progress on stderr.
int cmd_eval(int argc, char **argv);
// FID Inception forward throughput: one JSON line with img/s. argv[0] is the command name.
int cmd_bench_inception(int argc, char **argv);

#endif

// Output paths, checked before any work: a command that would sample for minutes and then find it
// cannot write (or would replace a user's file) stops at once with a one-line error instead.
//
// The rule for every --out / --save-* / --out-dir: missing parent directories are created; a file
// that exists is not replaced unless --force is given (or the command says it is its own kind
// of file to replace, as export does for an earlier exported model); the directory must accept a
// new file. Written files then go through atomic_file.h, so a failure never leaves half a file.
#ifndef MALA_OUT_PATHS_H
#define MALA_OUT_PATHS_H

#define OPT_FORCE(var) {"--force", OPT_FLAG, (var), NULL, "replace output files that already exist"}

// Exits with "FLAG PATH: ..." when PATH cannot be written as a file: it names a directory, a
// parent cannot be created or written, or it exists while neither force nor replaceable(PATH)
// (may be NULL) allows replacing it.
void out_check_file(const char *flag, const char *path, int force, int (*replaceable)(const char *path));

// Exits with "FLAG DIR: ..." when DIR (created with its parents when missing) is not a writable
// directory, or already holds files while force is 0. With force, the files this command would
// write there (names matching is_ours, may be NULL) from an earlier run are removed first, so the
// folder holds one run's output; every other file is left alone. Returns how many were removed.
int out_check_dir(const char *flag, const char *dir, int force, int (*is_ours)(const char *name));

#endif

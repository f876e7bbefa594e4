// defines: make_dirs
#include "cli/commands.h"
#include "formats/atomic_file.h"

void make_dirs(const char *path) {
    MalaErr err;
    if (dirs_make(path, &err)) FATAL("%s", err.msg);
}

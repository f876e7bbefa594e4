// defines: make_dirs
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"

void make_dirs(const char *path) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) FATAL("%s: path too long", path);
    for (char *s = p + 1; ; s++) {  // every prefix ending at a '/', then the whole path
        if (*s && *s != '/') continue;
        char c = *s;
        *s = 0;
        struct stat st;
        if (mkdir(p, 0755) && errno != EEXIST) FATAL("%s: cannot create directory: %s", p, strerror(errno));
        if (stat(p, &st) || !S_ISDIR(st.st_mode)) FATAL("%s: exists and is not a directory", p);
        *s = c;
        if (!c) break;
    }
}

// The viewer's remembered settings: a small key=value file ($XDG_CONFIG_HOME/mala/viewer.ini or
// ~/.config/mala/viewer.ini), read when `mala view` starts and written atomically when it ends.
// Plain C without SDL, so tests/fuzz/fuzz_view_settings.c can feed the parser any bytes.
//
//   # comment
//   class=Sneaker        (a class name; the model resolves it)
//   cfg=4 steps=50 sampler=ddim eta=0 seed=3 seed_mode=fixed|random images=16
//   attn=on|off block=2 head=mean|N scale=1
//
// One key per line; every key is optional; an unknown key, a bad value or a line that is not
// key=value makes the whole file corrupt (the viewer then ignores it with a one-line warning).
#ifndef MALA_VIEW_SETTINGS_H
#define MALA_VIEW_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

enum {
    VS_CLASS = 1 << 0, VS_CFG = 1 << 1, VS_STEPS = 1 << 2, VS_SAMPLER = 1 << 3, VS_ETA = 1 << 4,
    VS_SEED = 1 << 5, VS_SEED_MODE = 1 << 6, VS_IMAGES = 1 << 7, VS_ATTN = 1 << 8, VS_BLOCK = 1 << 9,
    VS_HEAD = 1 << 10, VS_SCALE = 1 << 11
};

#define VS_NAME_LEN 64

typedef struct {
    unsigned have;             // VS_* bits of the keys present
    char cls[VS_NAME_LEN];     // class name (no control characters, no '=' needed)
    char sampler[16];          // a sampler name, lower case letters, digits and '+' only
    float cfg, eta, scale;     // cfg 0..100, eta 0..1, scale 0.25..8
    int steps, images;         // 1..1000, 1..16
    uint64_t seed;
    int seed_random, attn, block, head;  // block 0..1000, head -1 (mean) .. 1000
} ViewSettings;

// Parses n bytes (not NUL-terminated); 0, or -1 with "PATH: line N: ..." in err.
int view_settings_parse(const char *text, size_t n, const char *path, ViewSettings *s, MalaErr *err);
// Writes the keys in s->have as the file's text into buf; returns the length (>= n: too small).
size_t view_settings_format(const ViewSettings *s, char *buf, size_t n);
// 1 when there is no file, 0 when loaded, -1 with err when unreadable or corrupt.
int view_settings_load(const char *path, ViewSettings *s, MalaErr *err);
// Creates the folder when missing and replaces the file atomically (formats/atomic_file.h).
int view_settings_save(const char *path, const ViewSettings *s, MalaErr *err);
// The default path: $XDG_CONFIG_HOME/mala/viewer.ini, else $HOME/.config/mala/viewer.ini; -1 when
// neither variable is set (or the path is too long).
int view_settings_default_path(char *buf, size_t n);

#endif

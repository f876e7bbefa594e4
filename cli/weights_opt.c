// defines: weights_online
#include <string.h>

#include "cli/commands.h"

int weights_online(const char *flag, const char *value) {
    if (!strcmp(value, "ema")) return 0;
    if (!strcmp(value, "online") || !strcmp(value, "model")) return 1;
    FATAL("%s %s: expected ema or online (model: DiT's name for online)", flag, value);
}

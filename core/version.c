// defines: mala_version
#include "core/version.h"

#ifndef MALA_VERSION
#define MALA_VERSION "unknown"
#endif

const char *mala_version(void) { return MALA_VERSION; }

// defines: mala_version
#include "version.h"

#ifndef MALA_VERSION
#define MALA_VERSION "unknown"
#endif

const char *mala_version(void) { return MALA_VERSION; }

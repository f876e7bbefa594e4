// The program's version: `git describe --always --dirty` when it was built ("unknown" outside a
// git checkout, or when built by a makefile other than the top one).
#ifndef MALA_VERSION_H
#define MALA_VERSION_H

const char *mala_version(void);

#endif

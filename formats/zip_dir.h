// The directory of a zip archive (end record, zip64 records, central directory, local headers),
// read from a file or from memory. Shared by the .npz reader (formats/npy.c) and PyTorch's zip
// checkpoint reader (formats/torch_legacy.c). Multi-disk archives, a central directory over
// 256 MiB and entries that overrun the file are refused with one line naming the file; entry
// data is not read here (its offset is: zip_entry_data).
#ifndef MALA_ZIP_DIR_H
#define MALA_ZIP_DIR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/common.h"  // defines: MalaErr

typedef struct {
    char *name;
    int method, flags;         // 0 stored, 8 deflate; flags bit 0: encrypted
    uint32_t crc;
    uint64_t csize, usize, lho;  // compressed / uncompressed size, local header offset
} ZipEntry;

typedef struct {
    FILE *f;                   // file source (zip_open), or
    const unsigned char *mem;  // memory source (zip_open_mem; not owned)
    uint64_t size;
    ZipEntry *e;
    int n;
} Zip;

int zip_open(const char *path, Zip *z, MalaErr *err);
int zip_open_mem(const void *buf, size_t len, const char *name, Zip *z, MalaErr *err);
void zip_close(Zip *z);
// Reads n bytes at off; -1 when they are not all inside the archive.
int zip_read_at(const Zip *z, uint64_t off, void *buf, size_t n);
// The offset of e's data after its local header, checked to lie inside the archive.
int zip_entry_data(const Zip *z, const ZipEntry *e, uint64_t *data_off, const char *name, MalaErr *err);

#endif

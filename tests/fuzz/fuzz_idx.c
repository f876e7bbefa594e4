// libFuzzer harness: an IDX file (Fashion-MNIST's format), gzip-compressed or plain, read as
// images (3 dimensions) and as labels (1).
#include "fuzz_util.h"
#include "formats/idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MalaErr err;
    uint32_t dims[IDX_MAX_DIMS];
    uint8_t *d;
    if (idx_parse(data, size, "fuzz-idx3.gz", 3, dims, &d, &err) == 0) free(d);
    if (idx_parse(data, size, "fuzz-idx1.gz", 1, dims, &d, &err) == 0) free(d);
    return 0;
}

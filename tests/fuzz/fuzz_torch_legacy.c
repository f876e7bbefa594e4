// libFuzzer harness: a legacy (pre-1.6, non-zip) torch file, the format of the FID Inception
// weights: the pickle machine, the storage table and every tensor read as float32.
#include "fuzz_util.h"
#include "formats/torch_legacy.h"

// inception_load checks each tensor's shape against the network before reading it; a shape with
// zero strides may name far more elements than the file holds, so big tensors are skipped here.
#define MAX_READ (1 << 22)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MalaErr err;
    TorchLegacy *t = torch_legacy_open_mem(data, size, "fuzz.pth", &err);
    if (!t) return 0;
    for (int i = 0; i < torch_legacy_count(t); i++) {
        const TorchTensor *x = torch_legacy_tensor(t, i);
        if (torch_legacy_find(t, x->name) == NULL) abort();
        int64_t n = torch_tensor_numel(x);
        if (n < 0 || n > MAX_READ) continue;
        float *out = malloc((size_t)n * sizeof(float) + 1);
        torch_legacy_read_f32(t, x, out, &err);
        free(out);
    }
    torch_legacy_close(t);
    return 0;
}

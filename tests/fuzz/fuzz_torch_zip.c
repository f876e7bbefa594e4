// libFuzzer harness: PyTorch's zip checkpoint format (torch.save since 1.6): the zip directory,
// the restricted unpickler, the choice of a training checkpoint's weights, its args record and
// every tensor read as float32.
#include "fuzz_util.h"
#include <string.h>

#include "formats/torch_legacy.h"

// Model loaders check each tensor's shape before reading it; a shape with zero strides may name
// far more elements than the file holds, so big tensors are skipped here.
#define MAX_READ (1 << 22)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *weights[] = {NULL, "model", "ema"};
    MalaErr err;
    for (int w = 0; w < 3; w++) {
        TorchLegacy *t = torch_file_open_mem(data, size, "fuzz.pt", weights[w], &err);
        if (!t) continue;
        const char *m = torch_file_arg(t, "model");
        if (m && strlen(m) > size) abort();
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
    }
    return 0;
}

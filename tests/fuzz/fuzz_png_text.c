// libFuzzer harness: a PNG as `mala info FILE.png` meets it: png_text_find walks its chunks
// (signature, bounds, CRCs, tEXt keyword and text) for the generation parameters. When the bytes
// pass, a chunk added by png_text_add must be found again with the same text, and the first
// "parameters" chunk found before must still be the one found.
#include <string.h>

#include "fuzz_util.h"
#include "png_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MalaErr err;
    char *text = NULL;
    int rc = png_text_find(data, size, "fuzz", "parameters", &text, &err);
    if (rc < 0) return 0;
    uint8_t *out;
    size_t n;
    const char *mine = "Steps: 2, Sampler: ddim";
    if (!png_text_add(data, size, "fuzz", "parameters", mine, &out, &n, &err)) {
        char *again = NULL;
        if (png_text_find(out, n, "fuzz", "parameters", &again, &err) != 1) __builtin_trap();
        if (strcmp(again, text ? text : mine)) __builtin_trap();
        free(again);
        free(out);
    }
    free(text);
    return 0;
}

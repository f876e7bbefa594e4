// libFuzzer harness: a PNG as `mala info FILE.png` meets it: png_text_find walks its chunks
// (signature, bounds, CRCs, tEXt keyword and text) for the generation parameters. Each input is
// read twice: as it is, and with every chunk's CRC made right (so that mutations get past the CRC
// check into the chunk stream and the tEXt parser). When the bytes pass, a chunk added by
// png_text_add must be found again: the first "parameters" chunk found before, else the new one.
#include <string.h>
#include <zlib.h>

#include "fuzz_util.h"
#include "formats/png_text.h"

static void check(const uint8_t *data, size_t size) {
    MalaErr err;
    char *text = NULL;
    int rc = png_text_find(data, size, "fuzz", "parameters", &text, &err);
    if (rc < 0) return;
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
}

// A copy with the CRC of every chunk that fits rewritten.
static uint8_t *fix_crcs(const uint8_t *data, size_t size) {
    uint8_t *b = malloc(size ? size : 1);
    memcpy(b, data, size);
    for (size_t off = 8; off + 12 <= size;) {
        uint32_t n = (uint32_t)b[off] << 24 | (uint32_t)b[off + 1] << 16 | (uint32_t)b[off + 2] << 8 | b[off + 3];
        if (n > size - off - 12) break;
        uint32_t c = (uint32_t)crc32(crc32(0, Z_NULL, 0), b + off + 4, 4 + n);
        for (int k = 0; k < 4; k++) b[off + 8 + n + k] = (uint8_t)(c >> (24 - 8 * k));
        off += 12 + (size_t)n;
    }
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check(data, size);
    uint8_t *fixed = fix_crcs(data, size);
    check(fixed, size);
    free(fixed);
    return 0;
}

// libFuzzer harness: an image file as a dataset folder or `eval --samples DIR` meets it: the
// open-time check (image_check, header and end marker), the decoder (format whitelist, limits,
// stb_image for PNG / JPEG / BMP, our PGM / PPM reader) and ADM's centre crop on the pixels.
//
// The decoder runs with smaller limits than the program's (4096 per side, 2^20 pixels), so that
// one input decodes well inside the timeout under ASan; the default limits are unit-tested.
#include "fuzz_util.h"
#include "formats/image_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MalaErr err;
    int w, h;
    image_check(fuzz_file(data, size), &w, &h, &err);
    ImageLimits lim = {4096, 1 << 20, 1 << 24};
    image_probe(data, size, "fuzz", &lim, &w, &h, &err);
    int channels = size & 1 ? 1 : 3;
    uint8_t *px;
    if (image_decode(data, size, "fuzz", channels, &lim, &px, &w, &h, &err)) return 0;
    uint8_t crop[16 * 16 * 3];
    image_center_crop_arr(crop, 16, px, w, h, channels);
    free(px);
    return 0;
}

// libFuzzer harness: a PNG's generation parameters text read back (pipeline/gen_params_parse.c), as
// the viewer does with a dropped PNG: any bytes (cut at the first NUL) parse without a fault, and
// every value taken is in its documented range.
#include <math.h>
#include <string.h>

#include "fuzz_util.h"
#include "pipeline/gen_params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    GenParsed p;
    int n = gen_params_parse(text, &p);
    int bits = 0;
    for (unsigned h = p.have; h; h &= h - 1) bits++;
    if (n != bits) abort();
    if ((p.have & GP_STEPS) && (p.steps < 1 || p.steps > 1000)) abort();
    if ((p.have & GP_CFG) && !(p.cfg_scale >= 0 && p.cfg_scale <= 100)) abort();
    if ((p.have & GP_STRENGTH) && !(p.strength > 0 && p.strength <= 1)) abort();
    if ((p.have & GP_BLEND) && !(p.blend_w >= 0 && p.blend_w <= 1 && p.blend_a >= 0 && p.blend_b >= 0)) abort();
    if ((p.have & GP_SAMPLER) && strlen(p.sampler) >= sizeof p.sampler) abort();
    free(text);
    return 0;
}

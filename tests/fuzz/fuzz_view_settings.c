// libFuzzer harness: the viewer's settings file (formats/view_settings.c), parsed, and when it parses,
// formatted and parsed again to the same settings.
#include <string.h>

#include "fuzz_util.h"
#include "formats/view_settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MalaErr err;
    ViewSettings a, b;
    if (view_settings_parse((const char *)data, size, "fuzz.ini", &a, &err)) return 0;
    char buf[4096];
    size_t n = view_settings_format(&a, buf, sizeof buf);
    if (n >= sizeof buf) abort();
    if (view_settings_parse(buf, n, "fuzz.ini", &b, &err)) abort();
    char again[4096];
    if (view_settings_format(&b, again, sizeof again) != n || memcmp(buf, again, n)) abort();
    return 0;
}

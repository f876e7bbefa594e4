// libFuzzer harness: a .npz archive (zip end records, zip64, central directory, local headers,
// stored and deflated entries, CRCs) as the sample-batch and statistics readers open it: the
// key list, every entry as an array, and a key that is not there.
#include "fuzz_util.h"
#include "formats/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    MalaErr err;
    char **keys;
    int n;
    if (npz_keys(path, &keys, &n, &err) == 0) {
        for (int i = 0; i < n; i++) {
            NpyArray a;
            if (npz_load(path, keys[i], &a, &err) == 0) {
                float *f;
                if (npy_to_f32(&a, &f, keys[i], &err) == 0) free(f);
                npy_free(&a);
            }
        }
        npz_keys_free(keys, n);
    }
    NpyArray a;
    if (npz_load(path, "arr_0", &a, &err) == 0) npy_free(&a);
    return 0;
}

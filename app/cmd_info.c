// mala info FILE: the configuration, class names and tensor table of a model or training file.
#include <string.h>

#include "commands.h"
#include "checkpoint.h"

int cmd_info(int argc, char **argv) {
    int tensors = 0;
    Opt opts[] = {{"--tensors", OPT_FLAG, &tensors, NULL, "also list every tensor"}};
    const char *path = argc >= 2 && argv[1][0] != '-' ? argv[1] : NULL;
    args_parse("usage: mala info FILE.safetensors [--tensors]", opts, 1, argc, argv, path ? 2 : 1);
    if (!path) FATAL("mala info: give a model file (mala info FILE.safetensors)");
    MalaErr err;
    StFile f;
    if (st_open(&f, path, &err)) FATAL("%s", err.msg);
    NetConfig c;
    ClassNames cn;
    if (ckpt_read_config(&f, &c, &cn, &err)) FATAL("%s", err.msg);
    char desc[256];
    net_config_describe(&c, desc, sizeof desc);
    printf("%s\n  %s\n  classes:", path, desc);
    for (int i = 0; i < cn.n; i++) printf(" %s%s", cn.names[i], i + 1 < cn.n ? "," : "\n");
    const char *step = st_meta(&f, "step");
    printf("  %s, %d tensors%s%s\n", st_find(&f, "ema.pos_embed") ? "training checkpoint (EMA present)" : "weights",
           f.n, step ? ", step " : "", step ? step : "");
    for (int i = 0; tensors && i < f.n; i++) {
        const StTensor *t = &f.tensors[i];
        printf("  %-48s %-4s [", t->name, st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) printf("%s%lld", d ? "," : "", (long long)t->shape[d]);
        printf("]\n");
    }
    class_names_free(&cn);
    st_close(&f);
    return 0;
}

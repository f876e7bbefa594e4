// libFuzzer harness: a model file or training checkpoint as `mala info`, `mala sample` and
// `mala train --resume` read it: st_open, the network configuration and class names out of the
// metadata (every backbone's keys, validation), the trainer's settings with their ranges; then,
// for a configuration small enough to build here, the parameter table and arena sizes, the network
// itself on the CPU backend and the strict tensor load (every tensor named and shaped as the table),
// into an fp32 network and into one that holds int8 weights; and the run.* settings as --resume
// reads them (each within its flag's range, or an error).
#include <string.h>

#include "core/backend.h"
#include "model/checkpoint.h"
#include "fuzz_util.h"
#include "train/run_settings.h"
#include "train/train_meta.h"

static int blocks(const NetConfig *c) {
    if (c->backbone == BACKBONE_DIT) return c->dit.depth;
    if (c->backbone == BACKBONE_DIG) return c->dig.depth;
    int n = 0;
    for (int s = 0; s < c->dic.n; s++) n += c->dic.depths[s];
    return n;
}

static const char *int8_name(void) { return "int8"; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    StFile f;
    MalaErr err;
    const char *path = fuzz_file(data, size);
    if (st_open(&f, path, &err)) return 0;
    NetConfig c;
    ClassNames cn;
    if (ckpt_read_config(&f, &c, &cn, &err) == 0) {
        if (cn.n != c.num_classes) abort();
        char desc[256];
        net_config_describe(&c, desc, sizeof desc);
        (void)net_flops_per_image(&c);
        (void)net_mixer_name(&c);
        if (cn.n > 0) (void)class_names_find(&cn, cn.names[cn.n - 1]);  // num_classes 0: no names
        // the table's host memory grows with the block count, the arena with every size: a real
        // model of this project is far above a fuzz input's reach, so only small ones are built
        if (blocks(&c) <= 32 && (size_t)c.image_size * c.image_size * c.in_channels <= ((size_t)1 << 16)) {
            const Backend *be = backend_cpu();
            size_t infer = net_arena_bytes(&c, be, 1, NET_INFER);
            size_t train = net_arena_bytes(&c, be, 1, NET_TRAIN);
            if (train < infer) abort();
            if (infer <= ((size_t)64 << 20)) {
                Net *m = net_create(&c, be, 1, NET_INFER);
                (void)ckpt_load_tensors(m, &f, ckpt_has_ema(m, &f) ? "ema." : "", m->w, &err);
                net_free(m);
                // as --precision int8 samples: the blocks' large linears held in int8 only, filled
                // from the file's I8 rows or quantised from its floats (through a device's staging
                // copy: this backend is not the host's)
                Backend int8_be = *be;
                int8_be.precision = int8_name;
                m = net_create(&c, &int8_be, 1, NET_INFER);
                (void)ckpt_load_tensors(m, &f, ckpt_has_ema(m, &f) ? "ema." : "", m->w, &err);
                net_free(m);
            }
        }
        class_names_free(&cn);
    }
    TrainOpts o;
    int batch;
    if (train_meta_read(&f, &o, &batch, &err) == 0 && (batch < 1 || o.warmup < 0 || !(o.lr >= 0 && o.lr <= 1)))
        abort();
    st_close(&f);
    RunSettings r = {0};
    r.log_every = r.ckpt_every = r.keep = r.sample_steps = 1;
    eval_every_default(&r.eval);
    char data_buf[4200], vae_buf[4200];
    int iters_found;
    if (run_meta_read(path, &r, data_buf, sizeof data_buf, vae_buf, sizeof vae_buf, &iters_found, &err) >= 0 &&
        (r.log_every < 1 || r.ckpt_every < 1 || r.keep < 1 || r.limit < 0 || r.sample_every < 0 || r.hflip < -1 ||
         r.hflip > 1 || r.sample_steps < 1 || r.sample_steps > 1000 || r.sample_images < 0 || r.sample_images > 256 ||
         (iters_found && r.iters < 1)))
        abort();
    return 0;
}

build-cpu/app/cmd_bench.o: app/cmd_bench.c \
 /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h \
 app/commands.h app/args.h model/dit.h core/backend.h core/common.h \
 model/denoiser.h model/dit.h core/rng.h sampler/sampler.h \
 sampler/diffusion.h train/trainer.h model/checkpoint.h \
 core/safetensors.h core/common.h sampler/diffusion.h
/usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h:
app/commands.h:
app/args.h:
model/dit.h:
core/backend.h:
core/common.h:
model/denoiser.h:
model/dit.h:
core/rng.h:
sampler/sampler.h:
sampler/diffusion.h:
train/trainer.h:
model/checkpoint.h:
core/safetensors.h:
core/common.h:
sampler/diffusion.h:

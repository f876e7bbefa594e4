build-cpu/app/cmd_sample.o: app/cmd_sample.c app/commands.h app/args.h \
 model/dit.h core/backend.h core/common.h model/generate.h \
 model/checkpoint.h model/dit.h core/safetensors.h core/common.h \
 model/denoiser.h sampler/sampler.h sampler/diffusion.h core/rng.h \
 core/image_io.h core/npy.h
app/commands.h:
app/args.h:
model/dit.h:
core/backend.h:
core/common.h:
model/generate.h:
model/checkpoint.h:
model/dit.h:
core/safetensors.h:
core/common.h:
model/denoiser.h:
sampler/sampler.h:
sampler/diffusion.h:
core/rng.h:
core/image_io.h:
core/npy.h:

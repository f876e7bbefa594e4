build-cpu/model/generate.o: model/generate.c model/generate.h \
 model/checkpoint.h model/dit.h core/backend.h core/common.h \
 core/safetensors.h core/common.h model/denoiser.h sampler/sampler.h \
 sampler/diffusion.h core/rng.h
model/generate.h:
model/checkpoint.h:
model/dit.h:
core/backend.h:
core/common.h:
core/safetensors.h:
core/common.h:
model/denoiser.h:
sampler/sampler.h:
sampler/diffusion.h:
core/rng.h:

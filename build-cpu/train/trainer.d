build-cpu/train/trainer.o: train/trainer.c train/trainer.h \
 model/checkpoint.h model/dit.h core/backend.h core/common.h \
 core/safetensors.h core/common.h sampler/diffusion.h core/rng.h \
 model/dit.h
train/trainer.h:
model/checkpoint.h:
model/dit.h:
core/backend.h:
core/common.h:
core/safetensors.h:
core/common.h:
sampler/diffusion.h:
core/rng.h:
model/dit.h:

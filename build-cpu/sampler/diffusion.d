build-cpu/sampler/diffusion.o: sampler/diffusion.c sampler/diffusion.h \
 core/common.h core/rng.h
sampler/diffusion.h:
core/common.h:
core/rng.h:

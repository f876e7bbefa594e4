build-cpu/sampler/sampler.o: sampler/sampler.c sampler/sampler.h \
 core/common.h sampler/diffusion.h core/rng.h
sampler/sampler.h:
core/common.h:
sampler/diffusion.h:
core/rng.h:

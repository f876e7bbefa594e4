build-cpu/model/denoiser.o: model/denoiser.c model/denoiser.h model/dit.h \
 core/backend.h core/common.h
model/denoiser.h:
model/dit.h:
core/backend.h:
core/common.h:

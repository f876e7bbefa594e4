build-cpu/model/dit_init.o: model/dit_init.c model/dit.h core/backend.h \
 core/common.h core/rng.h
model/dit.h:
core/backend.h:
core/common.h:
core/rng.h:

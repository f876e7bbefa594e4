build-cpu/model/dit_config.o: model/dit_config.c model/dit.h \
 core/backend.h core/common.h
model/dit.h:
core/backend.h:
core/common.h:

build-cpu/model/dit.o: model/dit.c model/dit.h core/backend.h \
 core/common.h
model/dit.h:
core/backend.h:
core/common.h:

build-cpu/model/checkpoint.o: model/checkpoint.c model/checkpoint.h \
 model/dit.h core/backend.h core/common.h core/safetensors.h \
 core/common.h core/json.h
model/checkpoint.h:
model/dit.h:
core/backend.h:
core/common.h:
core/safetensors.h:
core/common.h:
core/json.h:

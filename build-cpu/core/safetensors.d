build-cpu/core/safetensors.o: core/safetensors.c core/safetensors.h \
 core/common.h core/json.h
core/safetensors.h:
core/common.h:
core/json.h:

build-cpu/tests/test_model: tests/test_model.c model/checkpoint.h \
 model/dit.h core/backend.h core/common.h core/safetensors.h \
 core/common.h model/dit.h tests/testutil.h
model/checkpoint.h:
model/dit.h:
core/backend.h:
core/common.h:
core/safetensors.h:
core/common.h:
model/dit.h:
tests/testutil.h:

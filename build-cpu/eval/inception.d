build-cpu/eval/inception.o: eval/inception.c eval/inception.h \
 core/common.h eval/inception_ops.h core/safetensors.h core/common.h \
 eval/torch_legacy.h
eval/inception.h:
core/common.h:
eval/inception_ops.h:
core/safetensors.h:
core/common.h:
eval/torch_legacy.h:

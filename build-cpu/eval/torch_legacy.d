build-cpu/eval/torch_legacy.o: eval/torch_legacy.c eval/torch_legacy.h \
 core/common.h
eval/torch_legacy.h:
core/common.h:

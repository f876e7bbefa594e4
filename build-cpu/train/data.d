build-cpu/train/data.o: train/data.c train/data.h core/common.h \
 core/image_io.h core/common.h
train/data.h:
core/common.h:
core/image_io.h:
core/common.h:

build-cpu/train/loss_plot.o: train/loss_plot.c train/loss_plot.h \
 core/common.h core/image_io.h core/common.h
train/loss_plot.h:
core/common.h:
core/image_io.h:
core/common.h:

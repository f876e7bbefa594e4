build-cpu/core/npy.o: core/npy.c core/npy.h core/common.h
core/npy.h:
core/common.h:

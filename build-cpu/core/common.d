build-cpu/core/common.o: core/common.c core/common.h
core/common.h:

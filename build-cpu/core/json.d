build-cpu/core/json.o: core/json.c core/json.h core/common.h
core/json.h:
core/common.h:

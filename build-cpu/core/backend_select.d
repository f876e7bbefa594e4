build-cpu/core/backend_select.o: core/backend_select.c core/backend.h \
 core/common.h
core/backend.h:
core/common.h:

build-cpu/core/backend_cpu.o: core/backend_cpu.c core/backend.h \
 core/common.h core/ops_cpu.h core/ops_cpu_dense.h
core/backend.h:
core/common.h:
core/ops_cpu.h:
core/ops_cpu_dense.h:

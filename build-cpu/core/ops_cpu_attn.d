build-cpu/core/ops_cpu_attn.o: core/ops_cpu_attn.c core/ops_cpu.h \
 core/backend.h /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h \
 core/common.h core/ops_math.h
core/ops_cpu.h:
core/backend.h:
/usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h:
core/common.h:
core/ops_math.h:

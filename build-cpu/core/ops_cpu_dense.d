build-cpu/core/ops_cpu_dense.o: core/ops_cpu_dense.c core/ops_cpu_dense.h \
 /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h \
 core/ops_math.h
core/ops_cpu_dense.h:
/usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h:
core/ops_math.h:

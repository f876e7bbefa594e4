build-cpu/eval/fid.o: eval/fid.c eval/fid.h core/common.h \
 /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h \
 /usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h \
 core/npy.h core/common.h
eval/fid.h:
core/common.h:
/usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h:
/usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h:
core/npy.h:
core/common.h:

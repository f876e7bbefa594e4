build-cpu/tests/test_ops_dense: tests/test_ops_dense.c core/backend.h \
 model/dit.h core/common.h core/ops_math.h tests/testutil.h
core/backend.h:
model/dit.h:
core/common.h:
core/ops_math.h:
tests/testutil.h:

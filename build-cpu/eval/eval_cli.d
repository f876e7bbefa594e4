build-cpu/eval/eval_cli.o: eval/eval_cli.c eval/eval_cli.h app/args.h \
 eval/fid.h core/common.h core/image_io.h core/common.h eval/inception.h \
 eval/inception_ops.h core/json.h core/npy.h
eval/eval_cli.h:
app/args.h:
eval/fid.h:
core/common.h:
core/image_io.h:
core/common.h:
eval/inception.h:
eval/inception_ops.h:
core/json.h:
core/npy.h:

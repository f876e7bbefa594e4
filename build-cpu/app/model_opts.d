build-cpu/app/model_opts.o: app/model_opts.c app/commands.h app/args.h \
 model/dit.h core/backend.h core/common.h
app/commands.h:
app/args.h:
model/dit.h:
core/backend.h:
core/common.h:

build-cpu/app/cmd_info.o: app/cmd_info.c app/commands.h app/args.h \
 model/dit.h core/backend.h core/common.h model/checkpoint.h model/dit.h \
 core/safetensors.h core/common.h
app/commands.h:
app/args.h:
model/dit.h:
core/backend.h:
core/common.h:
model/checkpoint.h:
model/dit.h:
core/safetensors.h:
core/common.h:

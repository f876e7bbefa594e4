build-cpu/app/main.o: app/main.c app/commands.h app/args.h model/dit.h \
 core/backend.h core/common.h
app/commands.h:
app/args.h:
model/dit.h:
core/backend.h:
core/common.h:

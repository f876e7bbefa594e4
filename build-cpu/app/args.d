build-cpu/app/args.o: app/args.c app/args.h
app/args.h:

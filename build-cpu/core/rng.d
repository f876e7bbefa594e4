build-cpu/core/rng.o: core/rng.c core/rng.h
core/rng.h:

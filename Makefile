# mala-dit build. `make` builds ./mala; `make test` runs the Check suites; `make sanitize` runs
# them under ASan+UBSan; `make fuzz` / `make fuzz-regress` build and run the libFuzzer harnesses
# (tests/fuzz/fuzz.mk). CUDA sources compile when nvcc is found (CUDA=0 turns that off).
CC       ?= cc
OPT      ?= -O3 -march=x86-64-v3 -ffp-contract=off -fno-math-errno -fno-trapping-math
# -fno-math-errno / -fno-trapping-math let loops with sqrtf and clamps vectorise; no IEEE
# semantics change (no fast-math). Flag tables (cli/args.h) leave optional row fields to their
# zero defaults, hence -Wno-missing-field-initializers.
CFLAGS   += $(OPT) -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -fopenmp -MMD -MP \
            -I. -I$(BLAS_DIR:/usr/lib/%=/usr/include/%) -I/usr/include/stb
# OpenBLAS's OpenMP build shares our OpenMP thread pool: the pthread build's threads and
# libgomp's spinning workers fight over the cores (6x slower steps measured on 2 cores).
# BLAS=blis links Debian's BLIS (libblis-openmp-dev) instead: slower than OpenBLAS on this
# project's machines (docs/performance.md, "BLIS against OpenBLAS"), kept for CPUs where it may not be.
BLAS ?= openblas
ifeq ($(BLAS),blis)
  BLAS_DIR ?= /usr/lib/x86_64-linux-gnu/blis-openmp
  BLAS_LIB  = -lblis
  CFLAGS   += -DMALA_BLIS -Wno-unused-function  # (static functions in BLIS's cblas.h)
else
  BLAS_DIR ?= /usr/lib/x86_64-linux-gnu/openblas-openmp
  BLAS_LIB  = -lopenblas
endif
LDLIBS   += -L$(BLAS_DIR) -Wl,--disable-new-dtags,-rpath,$(BLAS_DIR) $(BLAS_LIB) -llapacke -ljpeg -lz -lm -lpthread -fopenmp
BUILD    ?= build
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)
SDL_CFLAGS = $(shell pkg-config --cflags sdl2 2>/dev/null)
SDL_LIBS   = $(shell pkg-config --libs sdl2 2>/dev/null)

# ---- CUDA detection (printed, never silent) ----
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA ?= $(if $(NVCC),1,0)
ifeq ($(CUDA),1)
  CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
  CUDA_ARCH  ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
  CU_SRC      = $(wildcard cuda/*.cu)
  CU_OBJ      = $(CU_SRC:%.cu=$(BUILD)/%.o)
  CFLAGS     += -DMALA_CUDA
  LDLIBS     += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas -lcurand -lstdc++
  $(info mala: CUDA backend ON (nvcc: $(NVCC)); CUDA=0 builds CPU only)
else
  $(info mala: CUDA backend OFF ($(if $(NVCC),CUDA=0 given,nvcc not found)))
endif

# ---- MPI detection (docs/design.md §9; printed like CUDA's): Open MPI's pkg-config file or mpicc ----
MPI_CFLAGS ?= $(shell pkg-config --cflags ompi-c 2>/dev/null || mpicc --showme:compile 2>/dev/null)
MPI_LIBS   ?= $(shell pkg-config --libs ompi-c 2>/dev/null || mpicc --showme:link 2>/dev/null)
MPI ?= $(if $(strip $(MPI_LIBS)),1,0)
ifeq ($(MPI),1)
  $(BUILD)/core/dist.o: CFLAGS += -DMALA_MPI $(MPI_CFLAGS)
  LDLIBS += $(MPI_LIBS)
  $(info mala: MPI ON ($(strip $(MPI_LIBS))); MPI=0 builds single-process)
else
  $(info mala: MPI OFF ($(if $(strip $(MPI_LIBS)),MPI=0 given,no ompi-c pkg-config / mpicc: single-process only)))
endif

# ---- oneDNN: the CPU backend's matrix products and convolutions, OpenBLAS otherwise ----
# Debian's libdnnl-dev (OpenMP runtime, so it shares our thread pool). DNNL=0 builds without it;
# at run time MALA_GEMM=openblas picks OpenBLAS in a oneDNN build (cpu/cpu_gemm.h).
DNNL_H ?= $(firstword $(wildcard /usr/include/dnnl.h /usr/include/oneapi/dnnl/dnnl.h))
DNNL_SO ?= $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libdnnl.so /usr/lib/libdnnl.so /usr/local/lib/libdnnl.so))
DNNL ?= $(if $(and $(DNNL_H),$(DNNL_SO)),1,0)
ifeq ($(DNNL),1)
  CFLAGS += -DMALA_DNNL
  LDLIBS += -ldnnl
  $(info mala: oneDNN ON ($(DNNL_SO)); DNNL=0 builds with OpenBLAS products only)
else
  $(info mala: oneDNN OFF ($(if $(and $(DNNL_H),$(DNNL_SO)),DNNL=0 given,dnnl.h / libdnnl.so not found)))
endif

# ---- NCCL (the GPU all-reduce): with CUDA and MPI, where nccl.h is; linked into mala only ----
NCCL_H ?= $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))
ifeq ($(CUDA)$(MPI),11)
  NCCL ?= $(if $(NCCL_H),1,0)
else
  NCCL = 0
endif
ifeq ($(NCCL),1)
  NCCL_OBJ   = $(BUILD)/cuda/nccl/dist_nccl.o
  MALA_LIBS += -lnccl
  $(BUILD)/cuda/nccl/dist_nccl.o: CFLAGS += -I$(dir $(NCCL_H)) -I$(CUDA_HOME)/include
  $(BUILD)/cli/main.o: CFLAGS += -DMALA_NCCL  # registers the NCCL collectives (core/dist.h)
  $(info mala: NCCL ON ($(NCCL_H)); NCCL=0 sums GPU gradients through the host)
else
  $(info mala: NCCL OFF ($(if $(NCCL_H),needs CUDA=1 and MPI=1,nccl.h not found)))
endif

# ---- libmicrohttpd: `mala serve` (server/, docs/serve.md); without it the command says so ----
MHD_CFLAGS ?= $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS   ?= $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
SERVE ?= $(if $(strip $(MHD_LIBS)),1,0)
ifeq ($(SERVE),1)
  SERVE_SRC = $(wildcard server/*.c)
  SERVE_OBJ = $(SERVE_SRC:%.c=$(BUILD)/%.o) $(BUILD)/server/web_assets.o
  $(BUILD)/cli/cmd_serve.o: CFLAGS += -DMALA_SERVE
  $(info mala: serve ON ($(strip $(MHD_LIBS))))
else
  MHD_LIBS =
  $(info mala: serve OFF (no libmicrohttpd pkg-config: install libmicrohttpd-dev for `mala serve`))
endif

# Folders by role, lowest layer first (docs/design.md §0). libmala.a holds the library layers; the
# command line (cli/) and the viewer (viewer/) are linked into mala only, and tests reach them
# through the binary.
LIB_DIRS = core formats cpu data model sampler pipeline train eval compare api
LIB_SRC  = $(wildcard $(LIB_DIRS:%=%/*.c))
CLI_SRC  = $(wildcard cli/*.c)
CLI_OBJ  = $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
VIEW_SRC = $(wildcard viewer/*.c)
VIEW_OBJ = $(VIEW_SRC:%.c=$(BUILD)/%.o)
TEST_SRC = $(wildcard tests/test_*.c)
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test sanitize clean gpu-check gpu-bundle fixtures demo lib install uninstall
MALA_BIN ?= mala
all: $(MALA_BIN)

$(MALA_BIN): $(CLI_OBJ) $(VIEW_OBJ) $(SERVE_OBJ) $(NCCL_OBJ) $(BUILD)/libmala.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) $(MALA_LIBS) $(SDL_LIBS) $(MHD_LIBS)

# The web page of `mala serve`, compiled in (tools/embed_web.sh).
$(BUILD)/server/web_assets.c: $(wildcard server/web/*) tools/embed_web.sh
	@mkdir -p $(dir $@)
	tools/embed_web.sh server/web > $@.tmp && mv $@.tmp $@
$(BUILD)/server/%.o: server/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MHD_CFLAGS) -c $< -o $@
$(BUILD)/server/web_assets.o: $(BUILD)/server/web_assets.c
	$(CC) $(CFLAGS) -c $< -o $@
# The server's tests reach its parsers directly, and the server itself through the binary.
$(BUILD)/tests/test_serve: tests/test_serve.c $(BUILD)/server/base64.o $(BUILD)/server/serve_request.o $(BUILD)/libmala.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(filter 1,$(SERVE)),-DMALA_SERVE) -o $@ $< $(BUILD)/server/base64.o $(BUILD)/server/serve_request.o \
	  $(BUILD)/libmala.a $(LDLIBS) $(CHECK_LIBS) -lpthread

$(BUILD)/libmala.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ---- the shared library (include/mala.h; docs/library.md) ----
# Its own position-independent objects under $(BUILD)/pic/, so mala and libmala.a keep their code
# as it was; hidden visibility, and api/exports.map keeps the dynamic symbols to mala_* (the CUDA
# objects, already -fPIC, come through the map too). The soname carries MALA_API_VERSION.
MALA_API := $(shell sed -n 's/^\#define MALA_API_VERSION \([0-9]*\).*/\1/p' include/mala.h)
PIC_OBJ   = $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
SO_NAME   = libmala.so.$(MALA_API)
lib: $(BUILD)/libmala.a $(BUILD)/$(SO_NAME)

$(BUILD)/$(SO_NAME): $(PIC_OBJ) $(CU_OBJ) api/exports.map
	$(CC) -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script=api/exports.map -Wl,--no-undefined \
	  -o $@ $(PIC_OBJ) $(CU_OBJ) $(LDLIBS)

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -fvisibility=hidden -c $< -o $@

$(BUILD)/pic/core/version.o: $(BUILD)/version.txt
$(BUILD)/pic/core/version.o: CFLAGS += -DMALA_VERSION='"$(MALA_VERSION)"'
$(BUILD)/pic/formats/image_io.o: CFLAGS += -fno-sanitize=shift
ifeq ($(MPI),1)
  $(BUILD)/pic/core/dist.o: CFLAGS += -DMALA_MPI $(MPI_CFLAGS)
endif

# make install PREFIX=DIR (default /usr/local; DESTDIR for packagers): bin/mala, include/mala.h,
# lib/libmala.a, lib/libmala.so.N (+ libmala.so), lib/pkgconfig/mala.pc, and the bundled model in
# share/mala/ (where an installed mala finds it). make uninstall removes them.
PREFIX ?= /usr/local
INST = $(DESTDIR)$(PREFIX)
install: $(MALA_BIN) lib
	install -d $(INST)/bin $(INST)/include $(INST)/lib/pkgconfig $(INST)/share/mala
	install -m 755 $(MALA_BIN) $(INST)/bin/mala
	install -m 644 assets/mala-dit-fmnist.safetensors $(INST)/share/mala/mala-dit-fmnist.safetensors
	install -m 644 include/mala.h $(INST)/include/mala.h
	install -m 644 $(BUILD)/libmala.a $(INST)/lib/libmala.a
	install -m 755 $(BUILD)/$(SO_NAME) $(INST)/lib/$(SO_NAME)
	ln -sf $(SO_NAME) $(INST)/lib/libmala.so
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$${prefix}/include' 'libdir=$${prefix}/lib' '' \
	  'Name: mala' 'Description: mala-dit: class-conditional diffusion models (DiT with MALA attention) in C' \
	  'Version: $(MALA_API).0' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -Wl,-rpath,$${libdir} -lmala' \
	  'Libs.private: $(strip $(LDLIBS))' > $(INST)/lib/pkgconfig/mala.pc

uninstall:
	rm -f $(INST)/bin/mala $(INST)/include/mala.h $(INST)/lib/libmala.a $(INST)/lib/$(SO_NAME) \
	  $(INST)/lib/libmala.so $(INST)/lib/pkgconfig/mala.pc $(INST)/share/mala/mala-dit-fmnist.safetensors
	-rmdir $(INST)/share/mala 2>/dev/null

$(BUILD)/viewer/%.o: viewer/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SDL_CFLAGS) -c $< -o $@

# The program's version in result manifests (`git describe` at build time, core/version.h):
# $(BUILD)/version.txt changes only when the description does, and only core/version.c recompiles.
MALA_VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/version.txt: FORCE
	@mkdir -p $(BUILD); echo '$(MALA_VERSION)' | cmp -s - $@ || echo '$(MALA_VERSION)' > $@
$(BUILD)/core/version.o: $(BUILD)/version.txt
$(BUILD)/core/version.o: CFLAGS += -DMALA_VERSION='"$(MALA_VERSION)"'
.PHONY: FORCE
FORCE:

# stb_image_write's JPEG bit writer shifts signed ints (third-party code, harmless here).
$(BUILD)/formats/image_io.o: CFLAGS += -fno-sanitize=shift

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) -I. -Xcompiler -fPIC -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libmala.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libmala.a $(LDLIBS) $(CHECK_LIBS)

include tests/cuda_emu/emu.mk
include tests/fuzz/fuzz.mk

# OpenBLAS against oneDNN, products and convolutions, in one process (docs/performance.md, "oneDNN").
$(BUILD)/bench_gemm: tools/bench/bench_gemm.c $(BUILD)/libmala.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libmala.a $(LDLIBS)

# fp32 against bf16 training and sampling, interleaved in one process (docs/performance.md, "bf16").
$(BUILD)/bench_precision: tools/bench/bench_precision.c $(BUILD)/libmala.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libmala.a $(LDLIBS)

# A preset's shape as an F32 model file with DiT's initialisation (docs/performance.md, "int8 sampling").
$(BUILD)/random_model: tools/bench/random_model.c $(BUILD)/libmala.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libmala.a $(LDLIBS)

# Whether products and convolutions give the same bits at 1 and 2 threads (docs/performance.md, "Determinism").
$(BUILD)/dnnl_threads: tools/bench/dnnl_threads.c $(BUILD)/libmala.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libmala.a $(LDLIBS)

$(BUILD)/blas_core: tools/blas_core_main.c cpu/blas_core.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^

# Each suite runs from the repository root so fixture paths are stable. The suites call OpenBLAS
# directly, so they get the kernel family mala picks for itself (cpu/blas_core.h). GPU_DRY_RUN=0
# leaves out tools/gpu/gpu_check.sh's dry run on the emulator (make sanitize does: it checks the
# script, not memory). LIB_TEST=0 leaves out tests/test_library.sh (make sanitize does: a program
# without ASan cannot load a sanitized libmala.so).
GPU_DRY_RUN ?= 1
LIB_TEST ?= 1
test: $(MALA_BIN) $(if $(filter 1,$(LIB_TEST)),lib) $(TEST_BIN) $(EMU_TEST) $(EMU_MALA) $(EMU_CLI_TEST) $(BUILD)/blas_core
	@set -e; core=$$(./$(BUILD)/blas_core); [ -z "$$OPENBLAS_CORETYPE" ] && [ -n "$$core" ] && export OPENBLAS_CORETYPE=$$core; \
	echo "OpenBLAS kernels: $${OPENBLAS_CORETYPE:-OpenBLAS's own choice}"; \
	echo "== tools/check_layers.sh (no include climbs a layer, docs/design.md §0)"; tools/check_layers.sh; tests/check_layers_test.sh; \
	for t in $(TEST_BIN); do echo "== $$t"; OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive MALA_BIN=./$(MALA_BIN) ./$$t; done; \
	echo "== $(EMU_TEST) (CUDA kernels on the host emulator)"; CK_FORK=no OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive ./$(EMU_TEST); \
	echo "== $(EMU_CLI_TEST) (the mala CLI on the host emulator)"; OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive \
	  MALA_BIN=./$(MALA_BIN) MALA_EMU_BIN=./$(EMU_MALA) ./$(EMU_CLI_TEST); \
	if [ "$(GPU_DRY_RUN)" = 1 ]; then echo "== tests/gpu_check_dry.sh (tools/gpu/gpu_check.sh on the emulator)"; \
	  OMP_NUM_THREADS=2 GPU_CHECK_MALA=./$(EMU_MALA) GPU_CHECK_PARITY=./$(EMU_TEST) tests/gpu_check_dry.sh; fi; \
	if [ "$(LIB_TEST)" = 1 ]; then echo "== tests/test_library.sh (make install, examples/, python/)"; \
	  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive MALA_BIN=./$(MALA_BIN) tests/test_library.sh; fi; \
	echo "== tests/serve_clients.sh (the OpenAI SDK for Node and headless Chromium against mala serve)"; \
	  tests/serve_clients.sh ./$(MALA_BIN); \
	echo "== tests/readme_test.sh (the README's commands in a fresh copy of the tree)"; tests/readme_test.sh ./$(MALA_BIN); \
	echo "all suites passed"

sanitize:
	$(MAKE) BUILD=build-san MALA_BIN=build-san/mala OPT="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" CUDA=0 GPU_DRY_RUN=0 LIB_TEST=0 test

# The README's first command: the viewer on the bundled model when a display is present,
# otherwise a grid of samples (8 per class) in samples.png, or samples-2.png, samples-3.png, ...
# when that exists (an earlier file is never replaced). DEMO_FLAGS are appended to the sample
# command (tests/readme_test.sh shortens it).
demo: $(MALA_BIN)
	@if [ -n "$$DISPLAY" ] || [ -n "$$WAYLAND_DISPLAY" ]; then ./mala view; \
	else out=samples.png; k=1; while [ -e "$$out" ]; do k=$$((k + 1)); out=samples-$$k.png; done; \
	  ./mala sample --sampler ddim --steps 50 --out "$$out" $(DEMO_FLAGS) && echo "no display: wrote $$out"; fi

# On a machine with an NVIDIA GPU: parity suite, DDIM CPU vs GPU, training smoke test, benchmarks
# against PyTorch (< 8 min; docs/gpu.md says how to run it on a bare CUDA machine).
gpu-check:
	tools/gpu/gpu_check.sh

# Here (Debian, network, nvcc): gpu-bundle/, the .debs and prebuilt binaries that let gpu-check
# build and run on a machine that has none of our dependencies (tools/gpu/gpu_bundle.sh).
gpu-bundle:
	tools/gpu/gpu_bundle.sh

# Regenerates the PyTorch-written fixtures (needs Debian's python3-torch; CI does not).
fixtures:
	/usr/bin/python3 tools/ref/ref_dit.py
	/usr/bin/python3 tools/ref/ref_dig.py
	/usr/bin/python3 tools/ref/ref_dic.py
	/usr/bin/python3 tools/ref/ref_diffusion.py
	/usr/bin/python3 tools/ref/ref_adamw.py
	/usr/bin/python3 tools/ref/ref_sample.py
	/usr/bin/python3 tools/ref/ref_dpm.py
	/usr/bin/python3 tools/ref/ref_cfg_channels.py
	/usr/bin/python3 tools/ref/ref_vae.py
	/usr/bin/python3 tools/ref/make_inception_fixtures.py --out tests/fixtures
	/usr/bin/python3 tools/ref/make_safetensors_fixtures.py
	/usr/bin/python3 tools/ref/make_npy_fixtures.py
	/usr/bin/python3 tools/ref/make_image_fixtures.py
	/usr/bin/python3 tools/ref/make_fmnist_fixtures.py
	/usr/bin/python3 tools/ref/ref_metrics.py
	/usr/bin/python3 tools/ref/make_sfid_fixture.py
	/usr/bin/python3 tools/ref/make_torch_zip_fixtures.py
	/usr/bin/python3 tools/ref/ref_sample_torchzip.py
	/usr/bin/python3 tools/ref/make_torch_1000class_fixture.py
	/usr/bin/python3 tools/ref/make_torch_digdic_fixtures.py
	/usr/bin/python3 tools/ref/make_vae_folder_fixture.py
	/usr/bin/python3 tools/ref/make_imagenet_classes.py

clean:
	rm -rf build build-san build-gpu build-fuzz mala

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

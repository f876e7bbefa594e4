# The CPU-vs-CUDA parity suite with the CUDA kernels run on the host emulator of tests/cuda_emu, so
# that `make test` checks cuda/*.cu without a GPU (and `make sanitize` under ASan+UBSan). Every
# cuda/*.cu goes through launch_rewrite (kernel<<<...>>>(...) -> emu_launch) and g++ with the fake
# CUDA headers of tests/cuda_emu force-included; the library's C objects in $(BUILD) are reused,
# except those of sources that mention MALA_CUDA, which are rebuilt with it (so backend_cuda()
# comes from the emulated cuda/backend_cuda.cu even when CUDA=0). Neither the CUDA runtime nor
# cuBLAS nor cuRAND is linked. The same objects also make $(EMU_MALA), the mala program on the
# emulator, which $(EMU_CLI_TEST) runs against the CPU build's mala. Included by the Makefile,
# which runs $(EMU_TEST) and $(EMU_CLI_TEST) in `make test`.
EMU_DIR      = tests/cuda_emu
EMU_OUT      = $(BUILD)/cuda_emu
EMU_TEST     = $(BUILD)/tests/test_backend_parity_emu
EMU_MALA     = $(EMU_OUT)/mala
EMU_CLI_TEST = $(BUILD)/tests/test_cli_emu
EMU_REWRITE  = $(EMU_OUT)/launch_rewrite
EMU_CXXFLAGS = $(OPT) -g -std=c++17 -Wall -Wextra -Wno-unused-parameter -MMD -MP -I$(EMU_DIR) -I.
EMU_GEN      = $(patsubst cuda/%.cu,$(EMU_OUT)/cuda/%.cpp,$(wildcard cuda/*.cu))
EMU_C_SRC    = $(shell grep -l MALA_CUDA $(LIB_SRC))
EMU_OBJ      = $(EMU_GEN:.cpp=.o) $(patsubst $(EMU_DIR)/%.cpp,$(EMU_OUT)/%.o,$(wildcard $(EMU_DIR)/*.cpp)) \
               $(filter-out $(EMU_C_SRC:%.c=$(BUILD)/%.o),$(LIB_SRC:%.c=$(BUILD)/%.o)) \
               $(EMU_C_SRC:%.c=$(EMU_OUT)/%.o) $(EMU_OUT)/tests/test_backend_parity.o
emu_comma   := ,
EMU_LDLIBS   = $(filter-out -lcudart -lcublas -lcurand -L$(CUDA_HOME)/lib64 -Wl$(emu_comma)-rpath$(emu_comma)$(CUDA_HOME)/lib64,\
                 $(LDLIBS))

# Keep the rewritten sources (make would delete them as intermediates); compiler messages point
# into cuda/*.cu anyway.
.SECONDARY: $(EMU_GEN)

$(EMU_REWRITE): $(EMU_DIR)/launch_rewrite.c
	@mkdir -p $(dir $@)
	$(CC) $(OPT) -g -std=c11 -Wall -Wextra -o $@ $<

$(EMU_OUT)/cuda/%.cpp: cuda/%.cu $(EMU_REWRITE)
	@mkdir -p $(dir $@)
	$(EMU_REWRITE) $< $@

# nvcc includes cuda_runtime.h in every .cu file; so does this.
$(EMU_OUT)/cuda/%.o: $(EMU_OUT)/cuda/%.cpp
	$(CXX) $(EMU_CXXFLAGS) -include cuda_runtime.h -c $< -o $@

$(EMU_OUT)/%.o: $(EMU_DIR)/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

# The sources that mention MALA_CUDA, and the parity suite.
$(EMU_OUT)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DMALA_CUDA -c $< -o $@

$(EMU_TEST): $(EMU_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) $(OPT) -g -fopenmp -o $@ $^ $(EMU_LDLIBS) $(CHECK_LIBS)

# The command line's objects, those that mention MALA_CUDA rebuilt with it, and those that
# mention MALA_NCCL rebuilt without it (the emulator has no NCCL).
EMU_CLI_C    = $(shell grep -l 'MALA_CUDA\|MALA_NCCL' $(CLI_SRC))
EMU_CLI_OBJ  = $(filter-out $(EMU_CLI_C:%.c=$(BUILD)/%.o),$(CLI_OBJ)) $(EMU_CLI_C:%.c=$(EMU_OUT)/%.o)

$(EMU_MALA): $(EMU_CLI_OBJ) $(VIEW_OBJ) $(SERVE_OBJ) $(filter-out $(EMU_OUT)/tests/%,$(EMU_OBJ))
	$(CXX) $(OPT) -g -fopenmp -o $@ $^ $(EMU_LDLIBS) $(SDL_LIBS) $(MHD_LIBS)

# Runs the two mala programs; it takes only the npy and safetensors readers from the library (so
# no CUDA library is linked in a CUDA=1 build either).
$(EMU_CLI_TEST): $(EMU_DIR)/test_cli_emu.c $(BUILD)/libmala.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libmala.a $(EMU_LDLIBS) $(CHECK_LIBS)

# libFuzzer harnesses of the loaders of untrusted bytes (tests/fuzz/fuzz_*.c), built with clang's
# -fsanitize=fuzzer,address,undefined (UB aborts: -fno-sanitize-recover=all). Included by the
# Makefile.
#
#   make fuzz            build, then run every harness for FUZZ_S seconds (default 60), one after
#                        the other, on its seeds and regression inputs; the corpus grows in
#                        build-fuzz/corpus/<name>, crashes land in build-fuzz/artifacts/
#   make fuzz-regress    (CI) every committed seed and regression input through its harness,
#                        then a FUZZ_REGRESS_S-second run (default 10) of each harness
#   make fuzz-build      the harnesses only: build-fuzz/fuzz_<name>
#
# tests/fuzz/seeds/<name>/ hold small seed inputs, tests/fuzz/regress/<name>/ every input that
# once crashed (or misbehaved), tests/fuzz/dict/<name>.dict libFuzzer dictionaries.
# tests/fuzz/campaign.sh runs the long campaign whose figures are in docs/testing.md.
FUZZ_CC        ?= clang-14
FUZZ_S         ?= 60
FUZZ_REGRESS_S ?= 10
FUZZ_OUT       ?= build-fuzz
FUZZ_SAN        = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS     = -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wno-unused-parameter -MMD -MP $(FUZZ_SAN) \
                  -I. -I/usr/include/stb
FUZZ_LIB_SRC    = core/common.c core/half.c formats/json.c formats/npy.c formats/zip_dir.c formats/safetensors.c formats/image_io.c \
                  formats/atomic_file.c formats/png_text.c formats/st_meta.c core/rng.c formats/torch_legacy.c formats/idx.c \
                  data/latents.c model/vae_table.c formats/view_settings.c eval/fmnist_table.c
FUZZ_LIB_SRC   += pipeline/gen_params_parse.c
FUZZ_LIB_SRC   += model/vae_json.c  # diffusers' config.json (fuzz_vae_config)
FUZZ_LIB_SRC   += compare/compare_config.c model/dit_config.c  # an arm's attention setting is DiT's
FUZZ_LIB_OBJ    = $(FUZZ_LIB_SRC:%.c=$(FUZZ_OUT)/%.o)
# fuzz_checkpoint builds the networks a file describes: the model layer and the CPU backend.
FUZZ_NET_SRC    = $(wildcard model/*.c) train/train_meta.c train/run_settings.c train/eval_every.c $(filter-out core/dist.c,$(wildcard core/*.c cpu/*.c formats/*.c))
FUZZ_NET_OBJ    = $(filter-out $(FUZZ_LIB_OBJ),$(FUZZ_NET_SRC:%.c=$(FUZZ_OUT)/%.o))
FUZZ_NAMES      = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS       = $(FUZZ_NAMES:%=$(FUZZ_OUT)/fuzz_%)
# -rss_limit_mb also caps single allocations; -timeout is per input.
FUZZ_RUN_FLAGS  = -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1

.PHONY: fuzz fuzz-build fuzz-regress

fuzz-build: $(FUZZ_BINS)

# stb_image_write's JPEG bit writer shifts signed ints (as in the main build).
$(FUZZ_OUT)/formats/image_io.o: FUZZ_CFLAGS += -fno-sanitize=shift

$(FUZZ_OUT)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_OUT)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(filter %.o,$^) -ljpeg -lz -lm $(FUZZ_LDLIBS)

$(FUZZ_OUT)/fuzz_checkpoint: $(FUZZ_NET_OBJ)
# fuzz_serve_request: the server's parsers, and the prompt against class names (model/checkpoint.c).
$(FUZZ_OUT)/fuzz_serve_request: $(FUZZ_NET_OBJ) $(FUZZ_OUT)/server/serve_request.o $(FUZZ_OUT)/server/base64.o \
  $(FUZZ_OUT)/pipeline/gen_prompt.o
$(FUZZ_OUT)/fuzz_serve_request: private FUZZ_CFLAGS += $(FUZZ_NET_FLAGS)
$(FUZZ_OUT)/fuzz_serve_request: private FUZZ_LDLIBS = -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) $(BLAS_LIB) -llapacke
FUZZ_NET_FLAGS  = -fopenmp=libgomp -I$(BLAS_DIR:/usr/lib/%=/usr/include/%)
$(FUZZ_NET_OBJ): FUZZ_CFLAGS += $(FUZZ_NET_FLAGS)
# (private: not inherited by the objects the other harnesses share)
$(FUZZ_OUT)/fuzz_checkpoint: private FUZZ_CFLAGS += $(FUZZ_NET_FLAGS)
$(FUZZ_OUT)/fuzz_checkpoint: private FUZZ_LDLIBS = -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) $(BLAS_LIB) -llapacke

fuzz: $(FUZZ_BINS)
	@set -e; for n in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ_OUT)/corpus/$$n $(FUZZ_OUT)/artifacts; echo "== fuzz_$$n for $(FUZZ_S) s"; \
	  dict=; [ -f tests/fuzz/dict/$$n.dict ] && dict=-dict=tests/fuzz/dict/$$n.dict; \
	  $(FUZZ_OUT)/fuzz_$$n $(FUZZ_RUN_FLAGS) $$dict -max_total_time=$(FUZZ_S) \
	    -artifact_prefix=$(FUZZ_OUT)/artifacts/$$n- $(FUZZ_OUT)/corpus/$$n tests/fuzz/seeds/$$n \
	    $$(ls -d tests/fuzz/regress/$$n 2>/dev/null || true) > $(FUZZ_OUT)/fuzz_$$n.log 2>&1 \
	    || { tail -n 60 $(FUZZ_OUT)/fuzz_$$n.log; echo "fuzz_$$n: a finding (see $(FUZZ_OUT)/artifacts/)"; exit 1; }; \
	  grep -h "stat::number_of_executed_units\|stat::peak_rss_mb" $(FUZZ_OUT)/fuzz_$$n.log | sed "s/^/   fuzz_$$n /"; \
	done; echo "fuzz: no findings"

fuzz-regress: $(FUZZ_BINS)
	@set -e; for n in $(FUZZ_NAMES); do \
	  inputs=$$(ls -d tests/fuzz/seeds/$$n/* tests/fuzz/regress/$$n/* 2>/dev/null || true); \
	  echo "== fuzz_$$n: $$(echo $$inputs | wc -w) committed inputs, then $(FUZZ_REGRESS_S) s of fuzzing"; \
	  $(FUZZ_OUT)/fuzz_$$n $(FUZZ_RUN_FLAGS) $$inputs > $(FUZZ_OUT)/regress_$$n.log 2>&1 \
	    || { tail -n 40 $(FUZZ_OUT)/regress_$$n.log; echo "fuzz_$$n: a committed input fails"; exit 1; }; \
	  rm -rf $(FUZZ_OUT)/ci_corpus/$$n; mkdir -p $(FUZZ_OUT)/ci_corpus/$$n $(FUZZ_OUT)/artifacts; \
	  dict=; [ -f tests/fuzz/dict/$$n.dict ] && dict=-dict=tests/fuzz/dict/$$n.dict; \
	  $(FUZZ_OUT)/fuzz_$$n $(FUZZ_RUN_FLAGS) $$dict -max_total_time=$(FUZZ_REGRESS_S) \
	    -artifact_prefix=$(FUZZ_OUT)/artifacts/$$n- $(FUZZ_OUT)/ci_corpus/$$n tests/fuzz/seeds/$$n \
	    > $(FUZZ_OUT)/short_$$n.log 2>&1 \
	    || { tail -n 40 $(FUZZ_OUT)/short_$$n.log; echo "fuzz_$$n: a finding (see $(FUZZ_OUT)/artifacts/)"; exit 1; }; \
	  grep -h "stat::number_of_executed_units" $(FUZZ_OUT)/short_$$n.log | sed "s/^/   fuzz_$$n /"; \
	done; echo "fuzz-regress: every committed input passes, no findings"
.SECONDARY: $(FUZZ_LIB_OBJ) $(FUZZ_NET_OBJ)

# Header dependencies (a changed header, e.g. core/backend.h's op table, rebuilds what includes it).
-include $(shell find $(FUZZ_OUT) -name '*.d' 2>/dev/null)

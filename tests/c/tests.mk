# tests/c/tests.mk: the direct C tests (included at the end of the Makefile).
#
#   make test-c        build and run every program against the emulator build,
#                      under both kernel policies (fast, then teaching);
#                      also against the CUDA build when `nvidia-smi -L` finds a GPU
#   make test-c-emu    the emulator build only (both policies)
#   make test-c-cuda   the CUDA build only (needs nvcc and a GPU; both policies)
#   make check-c T=test_matmul FILTER=tiled [KERNELS=teaching] [BACKEND=cuda]
#                      the fast loop for one kernel: builds only what that
#                      program needs and runs it with MT_TEST_FILTER=FILTER
#
# Each program prints its own `N passed, N failed`; tests/c/run_tests.sh runs
# them all (a failing or crashing program does not stop the others), prints
# one summary line per program and the total, and fails at the end if any
# program failed. Binaries: build/tests/emu/ and build/tests/cuda/, each with
# an rpath to build/ ($ORIGIN/../..), so they run from any directory.

# Every program, on both builds; the emulator-only ones (test_harness tests
# the harness, whose fork-per-group every CUDA run of the others exercises;
# its groups that crash and hang on purpose have no place under
# compute-sanitizer); those linked with the broken kernels of broken_kernels.cu.
TEST_C_NAMES    := test_indexing test_map test_zip test_reduce test_softmax test_logsumexp test_attention test_conv test_pool test_layernorm test_optim test_where test_gather test_matmul test_matmul_epilogue test_memory_errors \
                   test_hostile test_policy test_graph test_new_output \
                   test_matmul_typed \
                   test_attention_tiled \
                   test_matmul_tf32 \
                   test_batchnorm \
                   test_reduce_index_rows \
                   test_conv_tf32 \
                   test_optim_list \
                   test_attention_mma \
                   test_conv_winograd
TEST_C_EMU_ONLY := test_harness test_emu_checks \
                   test_emu_group
TEST_C_BROKEN   := test_memory_errors test_emu_checks
TEST_C_CC       := gcc
# _GNU_SOURCE: the POSIX and Linux calls of the harness (fork, mmap, readlink).
TEST_C_CFLAGS   := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Isrc -Itests/c
TEST_C_RPATH    := -Wl,-rpath,'$$ORIGIN/../..'

TEST_C_EMU_DIR   := $(BUILD)/tests/emu
TEST_C_CUDA_DIR  := $(BUILD)/tests/cuda
TEST_C_EMU_BINS  := $(addprefix $(TEST_C_EMU_DIR)/,$(TEST_C_NAMES) $(TEST_C_EMU_ONLY))
TEST_C_CUDA_BINS := $(addprefix $(TEST_C_CUDA_DIR)/,$(TEST_C_NAMES))
TEST_C_OBJS      := $(TEST_C_EMU_BINS:=.o) $(TEST_C_CUDA_BINS:=.o) \
                    $(TEST_C_EMU_DIR)/broken_kernels.o $(TEST_C_CUDA_DIR)/broken_kernels.o

.PHONY: test-c test-c-emu test-c-cuda test-c-build check-c

# Runs the emulator variant, then the CUDA variant if there is a GPU; fails
# at the end if either failed.
test-c:
	@status=0; \
	$(MAKE) --no-print-directory test-c-emu || status=1; \
	if nvidia-smi -L >/dev/null 2>&1; then \
	    $(MAKE) --no-print-directory test-c-cuda || status=1; \
	else \
	    echo "test-c: no GPU (nvidia-smi -L failed): the CUDA build of the C tests is not run"; \
	fi; \
	exit $$status

test-c-build: $(TEST_C_EMU_BINS)

# Both kernel policies (src/policy.h): the default paths on the fast rungs,
# then on the teaching kernels only. The second run leaves out the programs
# that run no library kernel (the harness's own tests, the broken kernels of
# broken_kernels.cu), whose results the policy cannot change. Each run is
# complete; the target fails at the end if either failed.
TEST_C_NO_POLICY := test_harness test_emu_checks \
                    test_emu_group
# Also left out of the emulator's teaching pass: programs that call every
# kernel by name (mt_matmul_tf32_tile: no launcher asks the policy), so the
# pass would run the same kernels on the same inputs again; minutes of the
# emulator's full checks. test_conv_tf32 too (mt_conv2d_tf32*: no launcher
# asks the policy, and it makes no copy; 98 s a teaching pass). (The policy changes only the copy that makes a
# strided operand row-major, test_map's under both policies.) The CUDA
# build runs them under both. test_attention_tiled returns at once under
# the teaching policy on the emulator, for the same reason.
TEST_C_BY_NAME   := test_matmul_tf32 test_conv_tf32
# The tensor-core programs: under the emulator's full checks each costs one
# to three minutes of a CI core (every raw shared-memory access of an mma or
# wgmma tile traps; docs/testing.md, "How long make test takes"), where
# every other program together takes about two. `make test` runs them with
# the default checks (seconds; the same cases and comparisons), `make
# test-full` and `make test-c` with the full ones (HEAVY_C_CHECK=full).
TEST_C_HEAVY     := test_attention_tiled test_matmul_tf32 test_conv_tf32 test_attention_mma
HEAVY_C_CHECK    ?= full
test-c-emu: $(TEST_C_EMU_BINS)
	@status=0; \
	MINITENSOR_KERNELS=fast bash tests/c/run_tests.sh emulator \
	    $(filter-out $(addprefix $(TEST_C_EMU_DIR)/,$(TEST_C_HEAVY)),$(TEST_C_EMU_BINS)) || status=1; \
	MINITENSOR_EMU_CHECK=$(HEAVY_C_CHECK) MINITENSOR_KERNELS=fast bash tests/c/run_tests.sh \
	    emulator/$(or $(HEAVY_C_CHECK),default-checks) $(addprefix $(TEST_C_EMU_DIR)/,$(TEST_C_HEAVY)) || status=1; \
	MINITENSOR_KERNELS=teaching bash tests/c/run_tests.sh emulator/teaching \
	    $(filter-out $(addprefix $(TEST_C_EMU_DIR)/,$(TEST_C_NO_POLICY) $(TEST_C_BY_NAME)),$(TEST_C_EMU_BINS)) || status=1; \
	exit $$status

test-c-cuda: $(TEST_C_CUDA_BINS)
	@status=0; \
	MINITENSOR_KERNELS=fast bash tests/c/run_tests.sh cuda $(TEST_C_CUDA_BINS) || status=1; \
	MINITENSOR_KERNELS=teaching bash tests/c/run_tests.sh cuda/teaching $(TEST_C_CUDA_BINS) || status=1; \
	exit $$status

# The C tests run with the emulator's full checks (shared-memory bounds and
# races, guard pages; docs/emulator.md): about twice the time, still seconds.
test-c-emu check-c: export MINITENSOR_EMU_CHECK := full

# One program, one filter: `make check-c T=test_matmul FILTER=tiled`. Builds
# the library and that program only (header dependencies: a kernel edit
# recompiles its own file), then runs it. KERNELS=teaching runs it under the
# teaching policy; BACKEND=cuda on the CUDA build.
T       ?=
FILTER  ?=
KERNELS ?=
BACKEND ?= emu
CHECK_C_BIN := $(if $(filter cuda,$(BACKEND)),$(TEST_C_CUDA_DIR),$(TEST_C_EMU_DIR))/$(T)
check-c: $(if $(T),$(CHECK_C_BIN))
	@if [ -z "$(T)" ]; then \
	    echo "check-c: name a program, e.g. make check-c T=test_matmul FILTER=tiled" \
	         "(programs: $(TEST_C_NAMES) $(TEST_C_EMU_ONLY))"; exit 2; fi
	MT_TEST_FILTER='$(FILTER)' $(if $(KERNELS),MINITENSOR_KERNELS=$(KERNELS)) $(CHECK_C_BIN)

# ---- emulator variant --------------------------------------------------------
# The same C objects serve both variants; they are compiled per directory
# only to keep the two builds independent.
$(TEST_C_EMU_DIR)/%.o: tests/c/%.c
	@mkdir -p $(dir $@)
	$(TEST_C_CC) $(TEST_C_CFLAGS) $(DEPFLAGS) -c $< -o $@

# broken_kernels.cu goes through the emulator pipeline like src/*.cu.
$(TEST_C_EMU_DIR)/broken_kernels.cpp: tests/c/broken_kernels.cu minitensor/cuda/_cu2emu.py
	@mkdir -p $(dir $@)
	$(PYTHON) minitensor/cuda/_cu2emu.py $< $@

$(TEST_C_EMU_DIR)/broken_kernels.o: $(TEST_C_EMU_DIR)/broken_kernels.cpp $(BUILD)/.deps-ok
	$(CXX) $(EMU_CXXFLAGS) $(DEPFLAGS) -c $< -o $@

$(addprefix $(TEST_C_EMU_DIR)/,$(TEST_C_BROKEN)): %: %.o $(TEST_C_EMU_DIR)/broken_kernels.o $(EMU_LIB)
	$(CXX) -o $@ $(filter %.o,$^) -L$(BUILD) -lminitensor_emu $(EMU_LIBS) -lm $(TEST_C_RPATH)

# test_emu_group runs the kernels of group_kernels.cu (launch groups of
# several emulated devices), translated like broken_kernels.cu.
$(TEST_C_EMU_DIR)/group_kernels.cpp: tests/c/group_kernels.cu minitensor/cuda/_cu2emu.py
	@mkdir -p $(dir $@)
	$(PYTHON) minitensor/cuda/_cu2emu.py $< $@

$(TEST_C_EMU_DIR)/group_kernels.o: $(TEST_C_EMU_DIR)/group_kernels.cpp $(BUILD)/.deps-ok
	$(CXX) $(EMU_CXXFLAGS) $(DEPFLAGS) -c $< -o $@

$(TEST_C_EMU_DIR)/test_emu_group: $(TEST_C_EMU_DIR)/test_emu_group.o $(TEST_C_EMU_DIR)/group_kernels.o $(EMU_LIB)
	$(CXX) -o $@ $(filter %.o,$^) -L$(BUILD) -lminitensor_emu $(EMU_LIBS) -lm $(TEST_C_RPATH)

$(TEST_C_EMU_DIR)/%: $(TEST_C_EMU_DIR)/%.o $(EMU_LIB)
	$(TEST_C_CC) -o $@ $< -L$(BUILD) -lminitensor_emu -lm $(TEST_C_RPATH)

# ---- CUDA variant -------------------------------------------------------------
$(TEST_C_CUDA_DIR)/%.o: tests/c/%.c
	@mkdir -p $(dir $@)
	$(TEST_C_CC) $(TEST_C_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(TEST_C_CUDA_DIR)/broken_kernels.o: tests/c/broken_kernels.cu $(BUILD)/cuda/.archs
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $(DEPFLAGS) -c $< -o $@

$(TEST_C_CUDA_DIR)/test_memory_errors: $(TEST_C_CUDA_DIR)/test_memory_errors.o $(TEST_C_CUDA_DIR)/broken_kernels.o $(CUDA_LIB)
	$(NVCC) -o $@ $(filter %.o,$^) -L$(BUILD) -lminitensor_cuda -lm -Xlinker -rpath -Xlinker '$$ORIGIN/../..'

$(TEST_C_CUDA_DIR)/%: $(TEST_C_CUDA_DIR)/%.o $(CUDA_LIB)
	$(TEST_C_CC) -o $@ $< -L$(BUILD) -lminitensor_cuda -lm $(TEST_C_RPATH)

# Keep the objects (they are intermediates of pattern rules).
.SECONDARY: $(TEST_C_OBJS) $(TEST_C_EMU_DIR)/broken_kernels.cpp $(TEST_C_EMU_DIR)/group_kernels.cpp

# ---- the bug corpus against compute-sanitizer (tools/sanitizer_compare.sh) ----
# broken_driver runs one kernel of broken_kernels.cu by name. The CUDA
# variant is compiled for one GPU (CHECK_ARCH, 90 by default: an H100) with
# -lineinfo, so that compute-sanitizer names the .cu lines; it needs no GPU
# to build, only to run.
SANITIZER_DIR := $(BUILD)/sanitizer
.PHONY: sanitizer-emu sanitizer-cuda
sanitizer-emu: $(SANITIZER_DIR)/broken_driver_emu
sanitizer-cuda: $(SANITIZER_DIR)/broken_driver_cuda

$(SANITIZER_DIR)/broken_driver_emu: $(TEST_C_EMU_DIR)/broken_driver.o $(TEST_C_EMU_DIR)/broken_kernels.o $(EMU_LIB)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $(filter %.o,$^) -L$(BUILD) -lminitensor_emu $(EMU_LIBS) -lm -Wl,-rpath,'$$ORIGIN/..'

$(SANITIZER_DIR)/broken_kernels.o: tests/c/broken_kernels.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_BASE) -gencode=arch=compute_$(CHECK_ARCH),code=sm_$(CHECK_ARCH) $(DEPFLAGS) -c $< -o $@

$(SANITIZER_DIR)/broken_driver.o: tests/c/broken_driver.c
	@mkdir -p $(dir $@)
	$(TEST_C_CC) $(TEST_C_CFLAGS) -c $< -o $@

$(SANITIZER_DIR)/broken_driver_cuda: $(SANITIZER_DIR)/broken_driver.o $(SANITIZER_DIR)/broken_kernels.o
	$(NVCC) -gencode=arch=compute_$(CHECK_ARCH),code=sm_$(CHECK_ARCH) -o $@ $^

.SECONDARY: $(TEST_C_EMU_DIR)/broken_driver.o

# tests/c/tests.mk: the direct C tests (included at the end of the Makefile).
#
#   make test-c        build and run every program against the emulator build;
#                      also against the CUDA build when `nvidia-smi -L` finds a GPU
#   make test-c-emu    the emulator build only
#   make test-c-cuda   the CUDA build only (needs nvcc and a GPU)
#
# Each program prints its own `N passed, N failed`; tests/c/run_tests.sh runs
# them all (a failing or crashing program does not stop the others), prints
# one summary line per program and the total, and fails at the end if any
# program failed. Binaries: build/tests/emu/ and build/tests/cuda/, each with
# an rpath to build/ ($ORIGIN/../..), so they run from any directory.

TEST_C_NAMES   := test_indexing test_map test_zip test_reduce test_softmax test_gather test_matmul test_memory_errors
TEST_C_CC      := gcc
TEST_C_CFLAGS  := -std=c11 -O2 -g -Wall -Wextra -Isrc -Itests/c
TEST_C_HEADERS := $(wildcard tests/c/*.h) src/minitensor.h src/indexing.h
TEST_C_RPATH   := -Wl,-rpath,'$$ORIGIN/../..'

TEST_C_EMU_DIR   := $(BUILD)/tests/emu
TEST_C_CUDA_DIR  := $(BUILD)/tests/cuda
TEST_C_EMU_BINS  := $(TEST_C_NAMES:%=$(TEST_C_EMU_DIR)/%)
TEST_C_CUDA_BINS := $(TEST_C_NAMES:%=$(TEST_C_CUDA_DIR)/%)

.PHONY: test-c test-c-emu test-c-cuda test-c-build

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

test-c-emu: $(TEST_C_EMU_BINS)
	@bash tests/c/run_tests.sh emulator $(TEST_C_EMU_BINS)

test-c-cuda: $(TEST_C_CUDA_BINS)
	@bash tests/c/run_tests.sh cuda $(TEST_C_CUDA_BINS)

# ---- emulator variant --------------------------------------------------------
# The same C objects serve both variants; they are compiled per directory
# only to keep the two builds independent.
$(TEST_C_EMU_DIR)/%.o: tests/c/%.c $(TEST_C_HEADERS)
	@mkdir -p $(dir $@)
	$(TEST_C_CC) $(TEST_C_CFLAGS) -c $< -o $@

# broken_kernels.cu goes through the emulator pipeline like src/*.cu.
$(TEST_C_EMU_DIR)/broken_kernels.cpp: tests/c/broken_kernels.cu tools/cu2emu.py
	@mkdir -p $(dir $@)
	$(PYTHON) tools/cu2emu.py $< $@

$(TEST_C_EMU_DIR)/broken_kernels.o: $(TEST_C_EMU_DIR)/broken_kernels.cpp $(HEADERS) $(BUILD)/.deps-ok
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@

$(TEST_C_EMU_DIR)/test_memory_errors: $(TEST_C_EMU_DIR)/test_memory_errors.o $(TEST_C_EMU_DIR)/broken_kernels.o $(EMU_LIB)
	$(CXX) -o $@ $(filter %.o,$^) -L$(BUILD) -lminitensor_emu $(EMU_LIBS) -lm $(TEST_C_RPATH)

$(TEST_C_EMU_DIR)/%: $(TEST_C_EMU_DIR)/%.o $(EMU_LIB)
	$(TEST_C_CC) -o $@ $< -L$(BUILD) -lminitensor_emu -lm $(TEST_C_RPATH)

# ---- CUDA variant -------------------------------------------------------------
$(TEST_C_CUDA_DIR)/%.o: tests/c/%.c $(TEST_C_HEADERS)
	@mkdir -p $(dir $@)
	$(TEST_C_CC) $(TEST_C_CFLAGS) -c $< -o $@

$(TEST_C_CUDA_DIR)/broken_kernels.o: tests/c/broken_kernels.cu $(HEADERS) $(BUILD)/cuda/.archs
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

$(TEST_C_CUDA_DIR)/test_memory_errors: $(TEST_C_CUDA_DIR)/test_memory_errors.o $(TEST_C_CUDA_DIR)/broken_kernels.o $(CUDA_LIB)
	$(NVCC) -o $@ $(filter %.o,$^) -L$(BUILD) -lminitensor_cuda -lm -Xlinker -rpath -Xlinker '$$ORIGIN/../..'

$(TEST_C_CUDA_DIR)/%: $(TEST_C_CUDA_DIR)/%.o $(CUDA_LIB)
	$(TEST_C_CC) -o $@ $< -L$(BUILD) -lminitensor_cuda -lm $(TEST_C_RPATH)

# Keep the objects (they are intermediates of pattern rules).
.SECONDARY: $(TEST_C_NAMES:%=$(TEST_C_EMU_DIR)/%.o) $(TEST_C_NAMES:%=$(TEST_C_CUDA_DIR)/%.o) \
            $(TEST_C_EMU_DIR)/broken_kernels.cpp

# ---- test_hostile: descriptors and pointers that lie about their memory -----
# A block of its own (the lists above are expanded where they are defined):
# the program joins both variants' lists and the runners' prerequisites.
TEST_C_EMU_BINS  += $(TEST_C_EMU_DIR)/test_hostile
TEST_C_CUDA_BINS += $(TEST_C_CUDA_DIR)/test_hostile
test-c-build test-c-emu: $(TEST_C_EMU_DIR)/test_hostile
test-c-cuda: $(TEST_C_CUDA_DIR)/test_hostile
.SECONDARY: $(TEST_C_EMU_DIR)/test_hostile.o $(TEST_C_CUDA_DIR)/test_hostile.o

# ---- the emulator's own checks (emulator only) --------------------------------
# test_emu_checks.c runs the broken kernels of broken_kernels.cu that are
# undefined behaviour on a GPU; test-c-emu runs it after the others.
TEST_C_EMU_ONLY := $(TEST_C_EMU_DIR)/test_emu_checks
TEST_C_EMU_BINS += $(TEST_C_EMU_ONLY)
test-c-emu test-c-build: $(TEST_C_EMU_ONLY)

$(TEST_C_EMU_DIR)/test_emu_checks: $(TEST_C_EMU_DIR)/test_emu_checks.o $(TEST_C_EMU_DIR)/broken_kernels.o $(EMU_LIB)
	$(CXX) -o $@ $(filter %.o,$^) -L$(BUILD) -lminitensor_emu $(EMU_LIBS) -lm $(TEST_C_RPATH)

.SECONDARY: $(TEST_C_EMU_DIR)/test_emu_checks.o

# The C tests run with the emulator's full checks (shared-memory bounds and
# races, guard pages; docs/emulator.md): about twice the time, still seconds.
test-c-emu: export MINITENSOR_EMU_CHECK := full

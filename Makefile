# minitensor: build the engine twice from the same sources, run the tests.
#
#   make            build/libminitensor_emu.so (always) and
#                   build/libminitensor_cuda.so (where nvcc and a GPU are found)
#   make cuda       build/libminitensor_cuda.so, GPU or not
#   make cuda-check nvcc compiles the kernels for one GPU (CHECK_ARCH) and
#                   links them, to catch compile errors on a machine without
#                   a GPU (make test does this where nvcc has no GPU to run on)
#   make test-c     C tests of the kernels (emulator; CUDA too on a GPU machine),
#                   under both kernel policies (fast, teaching)
#   make check-c T=test_matmul FILTER=tiled
#                   one C test program, one filter (tests/c/tests.mk)
#   make test       everything CI runs: C tests, then the Python suite under
#                   the fast kernel policy, then under the teaching one
#   make demo       the main job: train a digit classifier
#   make demo-resnet  a small ResNet on generated images of shapes (ARGS=...)
#   make grade      score the course's tasks (course/grade.mk, docs/coursework.md)
#   make lab        open the notebooks in JupyterLab (installed on first use)
#   make handout    a student repository: the course's tasks stubbed
#                   (TASKS=a,b to choose, default all; OUT=dir, default
#                   ../minitensor-handout); see course/tasks.toml
#   make autograder the zip Gradescope takes (TASKS=, HIDDEN=dir,
#                   OUT=file, default build/autograder.zip)
#
# Variables a user may override:
#   CUDA_ARCHS="75 80 86 89 90"   machine code generated for these GPUs (+PTX)
#   CHECK_ARCH=90                 the GPU that cuda-check compiles for
#   PYTHON=python3                interpreter used to make the virtualenv
#   JOBS=<cores>                  parallel jobs (make -j); default: every core

SHELL       := /bin/bash
BUILD       := build
PYTHON      ?= python3
NVCC        ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CXX         ?= g++
CUDA_ARCHS  ?= 75 80 86 89 90
VENV        := .venv
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
# Sub-makes (make test runs some) share the top make's jobs.
ifeq ($(MAKELEVEL),0)
MAKEFLAGS   += -j$(JOBS)
endif
VPY         := $(VENV)/bin/python

SRCS        := $(wildcard src/*.cu)
NAMES       := $(notdir $(SRCS:.cu=))
# Every object lists the headers it includes in a .d file next to it (the
# compilers write them: -MMD; -MP adds an empty rule per header, so that a
# deleted header does not stop make). A header edit then rebuilds only the
# objects that include it. The .d files are read at the end of this file.
DEPFLAGS    := -MMD -MP

# ---- emulator build: the .cu files, translated, compiled by the host C++ ----
# EMU_OPT=-O0 builds faster and runs slower (the course kit's tests of stubs).
EMU_OPT      ?= -O2
EMU_CXXFLAGS := -std=c++17 $(EMU_OPT) -g -fPIC -DMT_EMULATOR -Isrc -Wall -Wextra -Wno-unused-parameter
# threadIdx and blockIdx are thread-local variables of a library that Python
# loads with dlopen, so every read goes through the dynamic TLS model. On
# x86-64, TLS descriptors (gnu2) make such a read a short call instead of
# __tls_get_addr (arm64 uses descriptors already). Initial-exec TLS would be
# faster still, but a dlopen'ed library may find no static TLS space left.
ifeq ($(shell uname -m),x86_64)
EMU_CXXFLAGS += -mtls-dialect=gnu2
endif
EMU_LIBS     := -lboost_context -pthread
EMU_RT_NAMES := emu_runtime emu_memory emu_launch_count emu_launch emu_block emu_fibers emu_switch emu_shared emu_faults emu_async emu_tma emu_errors emu_devices emu_group
EMU_RT_OBJS  := $(EMU_RT_NAMES:%=$(BUILD)/emu/%.o)
EMU_OBJS     := $(NAMES:%=$(BUILD)/emu/%.o) $(EMU_RT_OBJS)
EMU_LIB      := $(BUILD)/libminitensor_emu.so

# ---- CUDA build: nvcc, machine code for each arch plus PTX for the newest ----
LAST_ARCH    := $(lastword $(CUDA_ARCHS))
GENCODE      := $(foreach a,$(CUDA_ARCHS),-gencode=arch=compute_$(a),code=sm_$(a)) \
                -gencode=arch=compute_$(LAST_ARCH),code=compute_$(LAST_ARCH)
NVCC_BASE    := -std=c++17 -O3 -lineinfo -Isrc -Xcompiler -fPIC -Xcompiler -Wall --threads 0
NVCC_FLAGS   := $(NVCC_BASE) $(GENCODE)
CUDA_OBJS    := $(NAMES:%=$(BUILD)/cuda/%.o)
CUDA_LIB     := $(BUILD)/libminitensor_cuda.so
CHECK_ARCH   ?= 90

# The libraries a program runs on here: the CUDA build only where there is a
# GPU to run it. Elsewhere nvcc for five GPUs would cost minutes of every
# first build (and of every edit of a kernel) for a library nothing can load;
# `make test` compiles the kernels for one GPU instead (cuda-check), so that
# a change that breaks nvcc is still caught on a machine without a GPU.
HAVE_GPU := $(if $(NVCC),$(shell nvidia-smi -L >/dev/null 2>&1 && echo yes))
LIBS := $(EMU_LIB)
ifneq ($(HAVE_GPU),)
LIBS += $(CUDA_LIB)
endif

.PHONY: all emu cuda cuda-check test test-full test-c test-py test-py-teaching demo demo-cnn demo-gpt demo-resnet clean FORCE
all: $(LIBS)
emu: $(EMU_LIB)
cuda: $(CUDA_LIB)

# The system packages the emulator needs (Boost.Context); see tools/setup.sh.
$(BUILD)/.deps-ok: tools/setup.sh
	@bash tools/setup.sh system
	@mkdir -p $(BUILD) && touch $@

$(BUILD)/emu/%.cpp: src/%.cu minitensor/cuda/_cu2emu.py
	@mkdir -p $(dir $@)
	$(PYTHON) minitensor/cuda/_cu2emu.py $< $@

$(BUILD)/emu/%.o: $(BUILD)/emu/%.cpp $(BUILD)/.deps-ok
	$(CXX) $(EMU_CXXFLAGS) $(DEPFLAGS) -c $< -o $@

# The emulator's own runtime: emu_runtime.cpp (the CUDA API twins),
# emu_memory.cpp (device memory), emu_scheduler.cpp (fibers, barriers,
# launches) and emu_launch_count.cpp (launches per kernel, for
# mt_launch_count).
$(EMU_RT_OBJS): $(BUILD)/emu/%.o: src/emu/%.cpp $(BUILD)/.deps-ok
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) $(DEPFLAGS) -c $< -o $@

$(EMU_LIB): $(EMU_OBJS)
	$(CXX) -shared -o $@ $^ $(EMU_LIBS)

# Rewritten only when CUDA_ARCHS changes, so a new arch list rebuilds everything.
$(BUILD)/cuda/.archs: FORCE
	@mkdir -p $(dir $@)
	@echo "$(CUDA_ARCHS)" > $@.new; cmp -s $@.new $@ || mv $@.new $@; rm -f $@.new

$(BUILD)/cuda/%.o: src/%.cu $(BUILD)/cuda/.archs
	$(NVCC) $(NVCC_FLAGS) $(DEPFLAGS) -c $< -o $@

# The wgmma rung (src/matmul_tf32_wgmma*.cu) needs Hopper's arch-specific
# instructions (sm_90a): where 90 is among CUDA_ARCHS this file's sm_90
# machine code (of each file named in WGMMA_NAMES) is sm_90a's instead, and MT_WGMMA_SM90A tells the library it
# has it (tf32_wgmma_available); on every other arch the kernel traps and the
# library takes the mma.sync rung.
comma := ,
WGMMA_GENCODE = $(foreach a,$(filter-out 90,$(CUDA_ARCHS)),-gencode=arch=compute_$(a),code=sm_$(a)) \
                $(if $(filter 90,$(CUDA_ARCHS)),-gencode=arch=compute_90a$(comma)code=sm_90a -DMT_WGMMA_SM90A) \
                -gencode=arch=compute_$(LAST_ARCH),code=compute_$(LAST_ARCH)
WGMMA_NAMES := matmul_tf32_wgmma matmul_tf32_wgmma_mn matmul_tf32_tma
$(WGMMA_NAMES:%=$(BUILD)/cuda/%.o): $(BUILD)/cuda/%.o: src/%.cu $(BUILD)/cuda/.archs
	$(NVCC) $(NVCC_BASE) $(WGMMA_GENCODE) $(DEPFLAGS) -c $< -o $@

# cuda-check: the same sources, one GPU, a library of its own that nothing loads.
# Every stage of nvcc runs (the front end, cicc, ptxas, the host compiler, the
# link), so every error nvcc can raise is raised, ptxas's limits (a static
# tile over 48 KiB of shared memory) included; only the optimizers are off:
# the host compiler's (-O0), ptxas's (-Xptxas -O0) and cicc's, the device
# code's own optimizer (-Xcicc -O0), which took most of the time: a file of
# many tile configurations, src/conv_igemm_tf32.cu, compiles in 4 s instead
# of 34 (docs/testing.md). PTX alone (code=compute_$(CHECK_ARCH)) would skip
# ptxas and with it those limits.
CUDA_CHECK_DIR   := $(BUILD)/cuda-check
CUDA_CHECK_OBJS  := $(NAMES:%=$(CUDA_CHECK_DIR)/%.o)
CUDA_CHECK_FLAGS := -std=c++17 -O0 -Isrc -Xcompiler -fPIC -Xcompiler -Wall -Xptxas -O0 -Xcicc -O0 \
                    -gencode=arch=compute_$(CHECK_ARCH),code=sm_$(CHECK_ARCH)
$(CUDA_CHECK_DIR)/%.o: src/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_CHECK_FLAGS) $(DEPFLAGS) -c $< -o $@
$(WGMMA_NAMES:%=$(CUDA_CHECK_DIR)/%.o): $(CUDA_CHECK_DIR)/%.o: src/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(filter-out -gencode=%,$(CUDA_CHECK_FLAGS)) $(DEPFLAGS) $(if $(filter 90,$(CHECK_ARCH)),\
	    -gencode=arch=compute_90a$(comma)code=sm_90a -DMT_WGMMA_SM90A,\
	    -gencode=arch=compute_$(CHECK_ARCH)$(comma)code=sm_$(CHECK_ARCH)) -c $< -o $@

$(CUDA_CHECK_DIR)/libminitensor_cuda.so: $(CUDA_CHECK_OBJS)
	$(NVCC) -shared -gencode=arch=compute_$(CHECK_ARCH),code=sm_$(CHECK_ARCH) -o $@ $^

cuda-check: $(CUDA_CHECK_DIR)/libminitensor_cuda.so
	@echo "cuda-check: the kernels compile and link with nvcc for sm_$(CHECK_ARCH)"

$(CUDA_LIB): $(CUDA_OBJS)
	@echo "CUDA build: machine code for $(CUDA_ARCHS:%=sm_%) and PTX for compute_$(LAST_ARCH) (override: make CUDA_ARCHS=\"...\")"
	$(NVCC) -shared $(GENCODE) -o $@ $^

# Keep the translated sources: gdb and compiler messages point at the .cu
# files through #line, but a reader may want to see what cu2emu.py produced.
.SECONDARY: $(NAMES:%=$(BUILD)/emu/%.cpp)

include tests/c/tests.mk
include course/grade.mk

# ---- Python: a virtualenv from requirements.txt, and the pytest suite ----
$(VENV)/.ok: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $@

test-py: $(LIBS) $(VENV)/.ok
	$(VPY) -m pytest -q tests

# The suite again under the teaching kernel policy (src/policy.h): every
# default op on the kernels students write. tests/conftest.py skips, with the
# reason, the files that run no kernel whose choice depends on the policy.
test-py-teaching: $(LIBS) $(VENV)/.ok
	MINITENSOR_KERNELS=teaching $(VPY) -m pytest -q tests

# make test keeps both cores of a 2-core CI machine busy (docs/testing.md,
# "How long make test takes"): nvcc's compile check (where nvcc has no GPU)
# runs beside everything from the start, one compile at a time and at a
# lower priority (nice), so that it takes only the CPU the build and the
# tests leave (nothing waits for it before the end); once the
# libraries and the C test programs are built, the course kit's tests (a
# pytest of their own: they build and grade copies of the repository, and
# write nothing here but under build/) run beside the C tests and the rest
# of the Python suite. Their output goes to build/cuda-check.log and
# build/course-tests.log, whose tail is shown at the end (all of it when
# they failed). Every part runs; the target fails at the end if any part
# failed. The second pass of the Python suite runs under the teaching
# kernel policy.
#
# Two depths of the emulator's full checks (docs/emulator.md: shared-memory
# races and bounds, guard pages), which cost up to a thousand times the
# default run on a tensor-core kernel:
#   make test       (CI, the README) the C tests under the full checks but
#                   for the tensor-core programs (TEST_C_HEAVY, tests.mk),
#                   the Python suite with the default checks; the course
#                   kit grades under the full checks, as `make grade` does.
#                   14 to 16 minutes on 2 cores (docs/testing.md).
#   make test-full  the C tests and the Python suite all under the full
#                   checks: about an hour on 2 cores. Before a change to a
#                   kernel lands (docs/testing.md says which), beside its
#                   compute-sanitizer run on a GPU.
CUDA_CHECK_IN_TEST := $(if $(NVCC),$(if $(HAVE_GPU),,yes))
COURSE_TESTS       := tests/test_course_kit.py tests/test_course_grade.py
test:      PY_EMU_CHECK :=
test:      HEAVY_C_CHECK :=
test-full: PY_EMU_CHECK := full
test-full: HEAVY_C_CHECK := full
test test-full:
	@status=0; \
	mkdir -p $(BUILD); rm -f $(BUILD)/cuda-check.status $(BUILD)/course-tests.status; \
	if [ -n "$(CUDA_CHECK_IN_TEST)" ]; then \
	    echo "cuda-check: nvcc compiles the kernels for sm_$(CHECK_ARCH) beside the tests ($(BUILD)/cuda-check.log)"; \
	    ( nice -n 10 $(MAKE) --no-print-directory -j1 cuda-check > $(BUILD)/cuda-check.log 2>&1; \
	      echo $$? > $(BUILD)/cuda-check.status ) & \
	fi; \
	$(MAKE) --no-print-directory $(LIBS) $(DIST_LIBS) $(P2P_LIBS) $(VENV)/.ok test-c-build || status=1; \
	echo "course kit: $(COURSE_TESTS) run beside the other tests ($(BUILD)/course-tests.log)"; \
	( MINITENSOR_EMU_CHECK=full $(VPY) -m pytest -q $(COURSE_TESTS) > $(BUILD)/course-tests.log 2>&1; \
	  echo $$? > $(BUILD)/course-tests.status ) & \
	$(MAKE) --no-print-directory test-c HEAVY_C_CHECK=$(HEAVY_C_CHECK) || status=1; \
	MINITENSOR_EMU_CHECK=$(PY_EMU_CHECK) $(VPY) -m pytest -q tests $(COURSE_TESTS:%=--ignore=%) || status=1; \
	$(MAKE) --no-print-directory test-py-teaching || status=1; \
	wait; \
	if [ "$$(cat $(BUILD)/course-tests.status 2>/dev/null)" = 0 ]; then \
	    echo "course kit ($(COURSE_TESTS)):"; tail -n 1 $(BUILD)/course-tests.log; \
	else echo "course kit ($(COURSE_TESTS)) FAILED:"; cat $(BUILD)/course-tests.log; status=1; fi; \
	if [ -n "$(CUDA_CHECK_IN_TEST)" ]; then \
	    if [ "$$(cat $(BUILD)/cuda-check.status 2>/dev/null)" = 0 ]; then tail -n 1 $(BUILD)/cuda-check.log; \
	    else echo "cuda-check FAILED:"; tail -n 60 $(BUILD)/cuda-check.log; status=1; fi; \
	fi; \
	exit $$status

# The main job: train an MLP on the 8x8 digits (data/digits.csv.gz) and check
# its held-out accuracy; saves build/digits_mlp.npz. See examples/train_digits.py.
# `make demo DEMO_ARGS=--graph` runs each training step as one replayed CUDA graph.
demo: $(LIBS) $(VENV)/.ok
	$(VPY) examples/train_digits.py $(DEMO_ARGS)

# The same digits with a small CNN (examples/train_digits_cnn.py): two 3x3
# convolutions and a max pooling; fails unless it beats the MLP held out.
demo-cnn: $(LIBS) $(VENV)/.ok
	$(VPY) examples/train_digits_cnn.py

# A tiny character-level GPT on The Devil's Dictionary (examples/train_gpt.py):
# fails unless the held-out loss falls below 2.6 (a uniform guess is 4.42).
demo-gpt: $(LIBS) $(VENV)/.ok
	$(VPY) examples/train_gpt.py

# A small ResNet (3x3 convolutions, BatchNorm2d, residual adds, global average
# pooling) on generated 12x12 colour images of six shapes
# (examples/train_resnet.py): fails unless it reaches its held-out target.
# ARGS="--torch --batch 256 --width 64 --size 32 --steps 50" also runs it
# in PyTorch, at a size for a GPU.
demo-resnet: $(LIBS) $(VENV)/.ok
	$(VPY) examples/train_resnet.py $(ARGS)

# The course kit (course/tasks.toml, tools/course.py): a student repository
# with the chosen tasks' code replaced by stubs that fail with the task's name.
# (OUT is shared with `make grade`, whose reports go to build/grade by
# default: each target gives its own default.)
TASKS ?=
.PHONY: handout
handout:
	$(PYTHON) tools/course.py handout --tasks "$(TASKS)" --out "$(or $(OUT),../minitensor-handout)"

# Gradescope: the zip of an autograder (course/gradescope/make_autograder.py):
# setup.sh, run_autograder, the handout of TASKS as minitensor/ and the
# hidden tests of HIDDEN=dir as hidden/ (never inside the handout). OUT
# defaults to build/autograder.zip. autograder-build is what setup.sh builds
# in the handout, once, so that a submission rebuilds only what it changes.
.PHONY: autograder autograder-build
autograder:
	$(PYTHON) course/gradescope/make_autograder.py --tasks "$(TASKS)" $(if $(HIDDEN),--hidden "$(HIDDEN)") \
	    --out "$(or $(OUT),$(BUILD)/autograder.zip)"

autograder-build: $(EMU_LIB) test-c-build $(VENV)/.ok

# Rebuild notebooks/*.ipynb from their sources in notebooks/src/ and execute
# them, so that they are committed with their figures (see docs/testing.md).
.PHONY: notebooks
notebooks: $(LIBS) $(VENV)/.ok
	$(VPY) notebooks/build_notebooks.py

# What launches and one __syncthreads() cost an emulated thread
# (docs/emulator.md): bench/emu_barrier_cost.cu, bench/emu_launch.cu and the
# Python cases of bench/emu_launch.py.
.PHONY: bench-emu bench-emu-build
BENCH_EMU := $(BUILD)/bench/emu_barrier_cost $(BUILD)/bench/emu_launch
$(BUILD)/bench/%.cpp: bench/%.cu minitensor/cuda/_cu2emu.py
	@mkdir -p $(dir $@)
	$(PYTHON) minitensor/cuda/_cu2emu.py $< $@

$(BENCH_EMU): $(BUILD)/bench/%: $(BUILD)/bench/%.cpp $(EMU_LIB)
	$(CXX) $(EMU_CXXFLAGS) -o $@ $< -L$(BUILD) -lminitensor_emu $(EMU_LIBS) -Wl,-rpath,'$$ORIGIN/..'

bench-emu-build: $(BENCH_EMU)

bench-emu: $(BENCH_EMU) $(VENV)/.ok
	$(VPY) bench/emu_launch.py --build $(BUILD)

# ---- distributed: collectives over MPI (emulator) and NCCL (CUDA) ----------
# A library of its own (src/dist/, docs/distributed.md), so that the core
# never depends on MPI or NCCL:
#   build/libminitensor_dist_emu.so    src/dist/comm.cu and comm_mpi.cu through
#                                      cu2emu.py and g++ with OpenMPI's flags
#                                      (mpicxx --showme), linked with the
#                                      emulator core library
#   build/libminitensor_dist_cuda.so   src/dist/comm.cu and comm_nccl.cu: nvcc,
#                                      -lnccl; built when nvcc and nccl.h are
#                                      found
#   make dist        both (what this machine can build)
#   make test-dist   the distributed tests only (tests/test_distributed.py)
# `make test` runs those tests too (test-py needs the dist libraries).
DIST_HEADERS  := src/dist/minitensor_dist.h src/dist/comm_internal.h src/minitensor.h src/minitensor_ops.h
DIST_EMU_OBJS := $(BUILD)/dist/emu/comm.o $(BUILD)/dist/emu/comm_mpi.o
DIST_CUDA_OBJS := $(BUILD)/dist/cuda/comm.o $(BUILD)/dist/cuda/comm_nccl.o
.SECONDARY: $(DIST_EMU_OBJS:.o=.cpp)
DIST_EMU_LIB  := $(BUILD)/libminitensor_dist_emu.so
DIST_CUDA_LIB := $(BUILD)/libminitensor_dist_cuda.so
# NCCL: nccl.h and libnccl from NCCL_HOME (e.g. pip's nvidia/nccl folder) when
# given, else from the system or the CUDA toolkit.
NCCL_HOME     ?=
CUDA_HOME_DIR := $(if $(NVCC),$(abspath $(dir $(NVCC))/..))
NCCL_H        := $(firstword $(wildcard $(if $(NCCL_HOME),$(NCCL_HOME)/include/nccl.h) /usr/include/nccl.h $(CUDA_HOME_DIR)/include/nccl.h))
NCCL_LIBFILE  := $(firstword $(wildcard $(foreach d,$(if $(NCCL_HOME),$(NCCL_HOME)/lib) /usr/lib/x86_64-linux-gnu $(CUDA_HOME_DIR)/lib $(CUDA_HOME_DIR)/lib64,$(d)/libnccl.so $(d)/libnccl.so.2)))
NCCL_INC      := $(if $(NCCL_H),-I$(dir $(NCCL_H)))
DIST_LIBS     := $(DIST_EMU_LIB)
ifneq ($(HAVE_GPU),)
ifneq ($(and $(NCCL_H),$(NCCL_LIBFILE)),)
DIST_LIBS     += $(DIST_CUDA_LIB)
endif
endif

.PHONY: dist test-dist
dist: $(DIST_LIBS)

# OpenMPI (mpicxx, mpirun); see tools/setup.sh.
$(BUILD)/.deps-mpi-ok: tools/setup.sh
	@bash tools/setup.sh mpi
	@mkdir -p $(BUILD) && touch $@

$(BUILD)/dist/emu/%.cpp: src/dist/%.cu minitensor/cuda/_cu2emu.py
	@mkdir -p $(dir $@)
	$(PYTHON) minitensor/cuda/_cu2emu.py $< $@

# mpicxx's flags are asked for in the recipe, after setup.sh has installed it.
$(BUILD)/dist/emu/%.o: $(BUILD)/dist/emu/%.cpp $(DIST_HEADERS) $(BUILD)/.deps-mpi-ok
	$(CXX) $(EMU_CXXFLAGS) -DOMPI_SKIP_MPICXX=1 -Isrc/dist $$(mpicxx --showme:compile) -c $< -o $@

$(DIST_EMU_LIB): $(DIST_EMU_OBJS) $(EMU_LIB)
	$(CXX) -shared -o $@ $(DIST_EMU_OBJS) -L$(BUILD) -Wl,--no-as-needed -lminitensor_emu -Wl,--as-needed $$(mpicxx --showme:link) -Wl,-rpath,'$$ORIGIN'

$(BUILD)/dist/cuda/%.o: src/dist/%.cu $(DIST_HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 -Isrc -Isrc/dist $(NCCL_INC) -Xcompiler -fPIC -Xcompiler -Wall -c $< -o $@

$(DIST_CUDA_LIB): $(DIST_CUDA_OBJS) $(CUDA_LIB)
	$(NVCC) -shared -o $@ $(DIST_CUDA_OBJS) -L$(BUILD) -lminitensor_cuda -Xlinker $(NCCL_LIBFILE) \
	    -Xlinker -rpath -Xlinker $(dir $(NCCL_LIBFILE)) -Xlinker -rpath -Xlinker '$$ORIGIN'

test-dist: $(LIBS) $(DIST_LIBS) $(VENV)/.ok
	$(VPY) -m pytest -q tests/test_distributed.py

# The Python suite includes tests/test_distributed.py.
test-py: $(DIST_LIBS)

# ---- one process, several GPUs: the p2p all-reduce ladder ------------------
# src/dist/p2p_*.cu (docs/distributed.md, "One kernel over several GPUs"): a
# library of its own, linked with the core, no MPI or NCCL:
#   build/libminitensor_p2p_emu.so    through cu2emu.py and g++ (several
#                                     emulated devices: MINITENSOR_EMU_DEVICES)
#   build/libminitensor_p2p_cuda.so   nvcc, CUDA_ARCHS as the core
#   make p2p        what this machine can build
P2P_NAMES     := p2p_group p2p_naive p2p_ring p2p_shot
P2P_HEADERS   := src/dist/minitensor_p2p.h src/dist/p2p_internal.h src/minitensor.h src/check.h src/launch.h
P2P_EMU_OBJS  := $(P2P_NAMES:%=$(BUILD)/p2p/emu/%.o)
P2P_CUDA_OBJS := $(P2P_NAMES:%=$(BUILD)/p2p/cuda/%.o)
P2P_CHECK_OBJS := $(P2P_NAMES:%=$(CUDA_CHECK_DIR)/p2p/%.o)
.SECONDARY: $(P2P_EMU_OBJS:.o=.cpp)
P2P_EMU_LIB   := $(BUILD)/libminitensor_p2p_emu.so
P2P_CUDA_LIB  := $(BUILD)/libminitensor_p2p_cuda.so
P2P_LIBS      := $(P2P_EMU_LIB) $(if $(HAVE_GPU),$(P2P_CUDA_LIB))

.PHONY: p2p
p2p: $(P2P_LIBS)

$(BUILD)/p2p/emu/%.cpp: src/dist/%.cu minitensor/cuda/_cu2emu.py
	@mkdir -p $(dir $@)
	$(PYTHON) minitensor/cuda/_cu2emu.py $< $@

$(BUILD)/p2p/emu/%.o: $(BUILD)/p2p/emu/%.cpp $(P2P_HEADERS) $(BUILD)/.deps-ok
	$(CXX) $(EMU_CXXFLAGS) -Isrc/dist -c $< -o $@

$(P2P_EMU_LIB): $(P2P_EMU_OBJS) $(EMU_LIB)
	$(CXX) -shared -o $@ $(P2P_EMU_OBJS) -L$(BUILD) -Wl,--no-as-needed -lminitensor_emu -Wl,--as-needed -Wl,-rpath,'$$ORIGIN'

$(BUILD)/p2p/cuda/%.o: src/dist/%.cu $(P2P_HEADERS) $(BUILD)/cuda/.archs
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Isrc/dist -c $< -o $@

$(P2P_CUDA_LIB): $(P2P_CUDA_OBJS) $(CUDA_LIB)
	$(NVCC) -shared $(GENCODE) -o $@ $(P2P_CUDA_OBJS) -L$(BUILD) -lminitensor_cuda -Xlinker -rpath -Xlinker '$$ORIGIN'

# cuda-check compiles the p2p kernels too.
$(CUDA_CHECK_DIR)/p2p/%.o: src/dist/%.cu $(P2P_HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_CHECK_FLAGS) -Isrc/dist -c $< -o $@
cuda-check: $(P2P_CHECK_OBJS)

# The Python suite includes tests/test_p2p.py; notebook 10 runs the ladder.
test-py test-py-teaching notebooks: $(P2P_LIBS)

clean:
	rm -rf $(BUILD)

# The header dependencies the compilers wrote (DEPFLAGS above). An object
# that has none (built before this scheme, or never) is rebuilt once, so that
# it gets its list.
DEP_OBJS := $(EMU_OBJS) $(CUDA_OBJS) $(CUDA_CHECK_OBJS) $(TEST_C_OBJS)
$(foreach o,$(DEP_OBJS),$(if $(wildcard $(o:.o=.d)),,$(if $(wildcard $(o)),$(eval $(o): FORCE))))
-include $(wildcard $(DEP_OBJS:.o=.d))

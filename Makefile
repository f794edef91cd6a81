# Makefile - builds dlhfs (the FUSE daemon) and dlh-train (the MPI trainer)
#
#   make            build everything into $(BUILD)/
#   make deps       install the Debian packages that are missing (apt-get)
#   make check      build, then run the whole test suite (unit + mount + MPI)
#   make asan       the same suite built with AddressSanitizer/UBSan
#   make fuzz       libFuzzer targets of the parsers, FUZZ_SECONDS (60) each
#                   (make fuzz-deps installs clang)
#   make bench      benchmarks (bench/), each printing a table with ratios
#   make bench-nodes one job on one and two nodes (namespaces; root)
#   make bench-deps what only the benchmarks need (hyperfine)
#   make example    mount at /dlh and train examples/fashion-mnist-mlp.ini
#   make GPU=1      also build dlh-train's CUDA backend (cuBLAS, NCCL) and
#                   bench-nccl-bw; GPU=0 leaves them out; by default they are
#                   built when nvcc is found (/usr/local/cuda/bin or PATH)

BUILD  ?= build
CC     ?= cc
OPT    ?= -O2 -g
SAN    ?=

DEPS_DEB = fuse3 libfuse3-dev libinih-dev openmpi-bin libopenmpi-dev \
           libopenblas-dev zlib1g-dev dataset-fashion-mnist pkg-config \
           make gcc g++ procps util-linux passwd openssh-client openssh-server iproute2 \
           prometheus-node-exporter prometheus curl man-db python3 python3-torch chromium \
           rsync slurmctld slurmd slurm-client munge

STD      = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
# -Wformat-truncation guesses at snprintf into bounded buffers, which is how
# we truncate on purpose; the kernel keeps it out of its default warnings too.
WARN     = -Wall -Wextra -Werror -Wno-format-truncation
ifeq ($(SAN),1)
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
BASE_CFLAGS = $(STD) $(WARN) $(OPT) $(SANFLAGS) -I.
BASE_LDFLAGS = $(SANFLAGS)

# Flags come from pkg-config; evaluated lazily so `make deps` works on a bare machine.
FUSE_CFLAGS  = $(shell pkg-config --cflags fuse3) -DFUSE_USE_VERSION=312
FUSE_LIBS    = $(shell pkg-config --libs fuse3)
INIH_CFLAGS  = $(shell pkg-config --cflags inih)
INIH_LIBS    = $(shell pkg-config --libs inih)
MPI_CFLAGS   = $(shell pkg-config --cflags ompi-c)
MPI_LIBS     = $(shell pkg-config --libs ompi-c)
BLAS_CFLAGS  = $(shell pkg-config --cflags openblas)
BLAS_LIBS    = $(shell pkg-config --libs openblas)
ZLIB_CFLAGS  = $(shell pkg-config --cflags zlib)
ZLIB_LIBS    = $(shell pkg-config --libs zlib)

# The CUDA backend (engine/train/cuda/gpu.cu) or, without CUDA, its stub.
# With CUDA, gpu.cu becomes $(BUILD)/dlh-train-cuda.so, which dlh-train opens
# (cuda/load.c) only when a GPU is asked for: linked in, cuBLAS, NCCL and the
# CUDA runtime cost a CPU run ~150 MB of resident memory per rank.
# .cu files are compiled by nvcc without sanitizers (make asan loads them).
NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
ifeq ($(origin GPU),undefined)
GPU := $(if $(NVCC),1,0)
endif
# sm_90 (H100/H200) machine code, plus compute_90 PTX for later GPUs
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
ifeq ($(GPU),1)
ifeq ($(NVCC),)
$(error GPU=1: nvcc not found in /usr/local/cuda/bin or PATH (set NVCC=...))
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_CFLAGS = -isystem $(CUDA_HOME)/include
GPU_OBJ  = $(BUILD)/obj/engine/train/cuda/load.o
GPU_LIBS = -ldl
CUDA_LIBS = -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnccl -lcublas -lcublasLt \
           -lcudart_static -ldl -lrt -lpthread -lstdc++
GPU_BIN  = $(BUILD)/dlh-train-cuda.so $(BUILD)/bench-nccl-bw \
           $(BUILD)/tests/test_train_gpu_emu $(BUILD)/dlh-train-gpuemu $(BUILD)/dlh-calib-gpuemu
else
GPU_OBJ  = $(BUILD)/obj/engine/train/cuda/stub.o
GPU_LIBS =
GPU_BIN  =
endif
NVCC_FLAGS = -std=c++17 $(OPT) --fmad=false $(CUDA_ARCH) -I. \
             -Xcompiler -Wall,-Wextra,-Werror,-Wno-format-truncation

SCHEMA_SRC = $(wildcard schema/*.c)
# the daemon's engine: every folder of engine/ but the two programs (see engine/README.md)
ENGINE_SRC = $(filter-out engine/train/% engine/calib/% engine/probe/% engine/run/shepherd.c \
	engine/run/rank.c engine/run/agent.c,\
	$(wildcard engine/*/*.c))
FS_SRC     = $(wildcard fs/*.c)
TRAIN_SRC  = $(wildcard engine/train/*.c)
UNIT_SRC   = $(wildcard tests/unit/test_*.c)

SCHEMA_OBJ = $(SCHEMA_SRC:%.c=$(BUILD)/obj/%.o)
ENGINE_OBJ = $(ENGINE_SRC:%.c=$(BUILD)/obj/%.o)
FS_OBJ     = $(FS_SRC:%.c=$(BUILD)/obj/%.o)
TRAIN_OBJ  = $(TRAIN_SRC:%.c=$(BUILD)/obj/%.o) $(GPU_OBJ)
TRAIN_LIB_OBJ = $(filter-out $(BUILD)/obj/engine/train/main.o,$(TRAIN_OBJ))
UNIT_BIN   = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# what dlh-train and dlh-calib link of the daemon's engine
SHARED_OBJ = $(BUILD)/obj/engine/util/util.o $(BUILD)/obj/engine/contract/contract.o \
	$(BUILD)/obj/engine/run/join.o

LIBSCHEMA = $(BUILD)/libdlhschema.a
LIBENGINE = $(BUILD)/libdlhengine.a
LIBTRAIN  = $(BUILD)/libdlhtrain.a

.PHONY: all deps check check-examples asan bench bench-estimate bench-nodes bench-fs bench-deps example clean fuzz fuzz-deps \
	install
all: $(BUILD)/dlhfs $(BUILD)/dlh-train $(BUILD)/dlh-calib $(BUILD)/dlh-shepherd $(BUILD)/dlh-probe \
	$(BUILD)/dlh-rank $(BUILD)/dlh-agent \
	$(UNIT_BIN) $(GPU_BIN) \
	$(BUILD)/tests/stallfs $(BUILD)/tests/poller

$(BUILD)/obj/schema/%.o: schema/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(INIH_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/engine/train/%.o: engine/train/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(MPI_CFLAGS) $(BLAS_CFLAGS) $(ZLIB_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/engine/train/cuda/%.pic.o: engine/train/cuda/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -fPIC -MMD -MP -c $< -o $@
# (cuDNN is opened at run time by dnn.cu, not linked: a machine without it
# still runs the backend, its convolutions on cuBLAS)
$(BUILD)/dlh-train-cuda.so: $(BUILD)/obj/engine/train/cuda/gpu.pic.o \
		$(BUILD)/obj/engine/train/cuda/calib.pic.o $(BUILD)/obj/engine/train/cuda/dnn.pic.o
	$(NVCC) $(CUDA_ARCH) -shared -o $@ $^ -L$(CUDA_HOME)/lib64 -Xlinker -rpath,$(CUDA_HOME)/lib64 \
		-lnccl -lcublas -lcublasLt -ldl
$(BUILD)/obj/engine/calib/%.o: engine/calib/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(MPI_CFLAGS) $(BLAS_CFLAGS) $(ZLIB_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/engine/%.o: engine/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/fs/%.o: fs/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(FUSE_CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(MPI_CFLAGS) $(BLAS_CFLAGS) $(ZLIB_CFLAGS) -MMD -MP -c $< -o $@
# tests of fs/ see its headers as fs/ does
$(BUILD)/obj/tests/unit/test_fs_%.o: tests/unit/test_fs_%.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(FUSE_CFLAGS) -MMD -MP -c $< -o $@

$(LIBSCHEMA): $(SCHEMA_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
# the daemon reads data headers (engine/plan/dataset.c) with the trainer's readers,
# and the estimator sizes the trainer's batch ring with its rule (prefetch.c) and
# its shards and buffers with its plan (plan.c), and checks each argv it makes
# with its option parser (opts.c): linked, not copied
ENGINE_DATA_OBJ = $(BUILD)/obj/engine/train/idx.o $(BUILD)/obj/engine/train/csv.o \
	$(BUILD)/obj/engine/train/prefetch.o $(BUILD)/obj/engine/train/rng.o \
	$(BUILD)/obj/engine/train/plan.o $(BUILD)/obj/engine/train/files.o \
	$(BUILD)/obj/engine/train/opts.o
$(LIBENGINE): $(ENGINE_OBJ) $(ENGINE_DATA_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^
$(LIBTRAIN): $(TRAIN_LIB_OBJ) $(SHARED_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/dlhfs: $(FS_OBJ) $(LIBENGINE) $(LIBSCHEMA)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(FUSE_LIBS) $(INIH_LIBS) $(ZLIB_LIBS) -lpthread -lm
# the trainer shares the engine's file helpers (atomic writes, mkdir -p) and
# the daemon-program contract (engine/contract: metrics.csv's row format)
$(BUILD)/dlh-train: $(TRAIN_OBJ) $(SHARED_OBJ)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(MPI_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) $(GPU_LIBS) -lm
# the calibration microbenchmarks (engine/plan/calib.c runs them under mpirun);
# they time the trainer's own loader and initialisation
# what the daemon runs on each node of its pool to learn what it has
$(BUILD)/dlh-probe: $(BUILD)/obj/engine/probe/main.o $(BUILD)/obj/engine/probe/hold.o $(LIBENGINE) $(LIBSCHEMA)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(INIH_LIBS) $(ZLIB_LIBS) -lpthread -lm
# what holds each run, so that it outlives dlhfs (engine/run/shepherd.c)
# (a requeued command's take-up: engine/run/resume.c, from the engine's library)
$(BUILD)/dlh-shepherd: $(BUILD)/obj/engine/run/shepherd.o $(LIBENGINE) $(LIBSCHEMA)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(INIH_LIBS) $(ZLIB_LIBS) -lpthread -lm
# what gives a [job] command's ranks torchrun's environment (engine/run/rank.c)
$(BUILD)/dlh-rank: $(BUILD)/obj/engine/run/rank.o $(BUILD)/obj/engine/run/join.o
	$(CC) $(BASE_LDFLAGS) -o $@ $^
# one launch agent for nodes reached in different ways (engine/run/agent.c)
$(BUILD)/dlh-agent: $(BUILD)/obj/engine/run/agent.o
	$(CC) $(BASE_LDFLAGS) -o $@ $^
$(BUILD)/dlh-calib: $(BUILD)/obj/engine/calib/main.o $(LIBTRAIN)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(MPI_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) $(GPU_LIBS) -lm
# Unit tests link only the module they cover: test_train* the trainer,
# test_schema* the spec language, test_fs_X fs/X.c over the engine (no
# mount, no libfuse), the rest the engine (and schema).
UNIT_TRAIN  = $(filter $(BUILD)/tests/test_train%,$(UNIT_BIN))
UNIT_SCHEMA = $(filter $(BUILD)/tests/test_schema%,$(UNIT_BIN))
UNIT_FS     = $(filter $(BUILD)/tests/test_fs_%,$(UNIT_BIN))
UNIT_ENGINE = $(filter-out $(UNIT_TRAIN) $(UNIT_SCHEMA) $(UNIT_FS),$(UNIT_BIN))
# the tests that check the layer stack against the reference MLP
# (tests/unit/ref_mlp.c, the tests' oracle, never part of dlh-train) link it too
REF_MLP_OBJ = $(BUILD)/obj/tests/unit/ref_mlp.o
UNIT_TRAIN_REF = $(BUILD)/tests/test_train_net $(BUILD)/tests/test_train_layers
$(filter-out $(UNIT_TRAIN_REF),$(UNIT_TRAIN)): $(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBTRAIN)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(MPI_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) $(GPU_LIBS) -lm
$(UNIT_TRAIN_REF): $(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(REF_MLP_OBJ) $(LIBTRAIN)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(MPI_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) $(GPU_LIBS) -lm
$(UNIT_SCHEMA): $(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBSCHEMA)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(INIH_LIBS) -lm
$(UNIT_ENGINE): $(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBENGINE) $(LIBSCHEMA)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(INIH_LIBS) $(ZLIB_LIBS) -lpthread -lm
$(UNIT_FS): $(BUILD)/tests/test_fs_%: $(BUILD)/obj/tests/unit/test_fs_%.o $(BUILD)/obj/fs/%.o \
		$(LIBENGINE) $(LIBSCHEMA)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(INIH_LIBS) $(ZLIB_LIBS) -lpthread -lm

# test_train_gpu again, against gpu.cu compiled as plain C++ over
# tests/unit/gpu_emu.h (kernels run on the CPU; sanitizers apply to them)
CXX ?= g++
EMU_CXX = $(CXX) -std=c++17 -x c++ $(OPT) $(SANFLAGS) -Wall -Wextra -Werror \
	-Wno-format-truncation -DDLT_GPU_EMULATE -include tests/unit/gpu_emu.h -I. \
	$(BLAS_CFLAGS) $(MPI_CFLAGS) -MMD -MP
$(BUILD)/obj/tests/unit/gpu_emu.o: engine/train/cuda/gpu.cu tests/unit/gpu_emu.h
	@mkdir -p $(dir $@)
	$(EMU_CXX) -c $< -o $@
# the GPU calibration (calib.cu) and the cuDNN convolutions (dnn.cu) over
# the same emulation (one emulated device: its state is shared)
$(BUILD)/obj/tests/unit/gpu_emu_%.o: engine/train/cuda/%.cu tests/unit/gpu_emu.h
	@mkdir -p $(dir $@)
	$(EMU_CXX) -c $< -o $@
$(BUILD)/tests/test_train_gpu_emu: $(BUILD)/obj/tests/unit/test_train_gpu.o \
		$(BUILD)/obj/tests/unit/gpu_emu.o $(BUILD)/obj/tests/unit/gpu_emu_dnn.o $(LIBTRAIN)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(MPI_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) -lstdc++ -lm
# dlh-train over the same emulation: --device gpu runs main.c's GPU path
# (NCCL bootstrap, steps, eval, checkpoints) on the CPU (tests/it/60-gpu.sh)
$(BUILD)/dlh-train-gpuemu: $(filter-out $(GPU_OBJ),$(TRAIN_OBJ)) $(SHARED_OBJ) \
		$(BUILD)/obj/tests/unit/gpu_emu.o $(BUILD)/obj/tests/unit/gpu_emu_dnn.o
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(MPI_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) -lstdc++ -lm

# dlh-calib over the same emulation: --phase gpu runs calib.cu on the CPU
# (tests/it/61-gpucalib.sh mounts with -o calib=build/dlh-calib-gpuemu)
$(BUILD)/dlh-calib-gpuemu: $(BUILD)/obj/engine/calib/main.o \
		$(filter-out $(GPU_OBJ),$(TRAIN_LIB_OBJ)) $(SHARED_OBJ) \
		$(BUILD)/obj/tests/unit/gpu_emu.o $(BUILD)/obj/tests/unit/gpu_emu_calib.o \
		$(BUILD)/obj/tests/unit/gpu_emu_dnn.o
	$(CC) $(BASE_LDFLAGS) -o $@ $^ $(MPI_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) -lstdc++ -lm

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

deps:
	@missing=""; for p in $(DEPS_DEB); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "all Debian packages present"; fi

# what the mount tests start beside dlhfs: a filesystem that never answers a read
$(BUILD)/tests/stallfs: tests/helpers/stallfs.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(FUSE_CFLAGS) $(BASE_LDFLAGS) -o $@ $< $(FUSE_LIBS)
# a reader that waits in poll(2) (tests/it/42-poll.sh)
$(BUILD)/tests/poller: tests/helpers/poller.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(BASE_LDFLAGS) -o $@ $<

check: all
	tests/run $(BUILD)

# the examples' published accuracies, the CNN's 8 epochs too (minutes to tens
# of minutes on a small machine: not part of check)
check-examples: all
	DLH_TEST_SLOW=1 tests/run $(BUILD) 96-examples

asan:
	$(MAKE) BUILD=build-asan SAN=1 OPT="-O1 -g" check

$(BUILD)/bench-launch: bench/launch.c $(LIBENGINE)
	$(CC) $(BASE_CFLAGS) $(BASE_LDFLAGS) -o $@ $^ $(ZLIB_LIBS) -lpthread -lm

# leave-one-out refits of a state dir's history (bench/estimate's second column)
$(BUILD)/bench-estimate: bench/estimate_tool.c $(LIBENGINE) $(LIBSCHEMA)
	$(CC) $(BASE_CFLAGS) $(BASE_LDFLAGS) -o $@ $^ $(INIH_LIBS) $(ZLIB_LIBS) -lpthread -lm

# ncclAllReduce bus bandwidth, 1..256 MB (GPU builds; bench/nccl-bw runs it)
$(BUILD)/bench-nccl-bw: bench/nccl_bw.c
	$(CC) $(BASE_CFLAGS) $(MPI_CFLAGS) $(CUDA_CFLAGS) $(BASE_LDFLAGS) -o $@ $< \
		$(MPI_LIBS) $(CUDA_LIBS) -lm

bench: all $(BUILD)/bench-launch $(BUILD)/bench-estimate
	bench/run $(BUILD)

# predicted vs actual wall time of a dozen real runs of the built-in trainer
# and of programs of their own, estimated by their profiles (bench/estimate)
bench-estimate: all $(BUILD)/bench-estimate
	bench/estimate $(BUILD)

# one job on one and two nodes (namespaces on this machine; root): samples/s,
# allreduce per step, scaling efficiency, the estimate's error (bench/nodes)
bench-nodes: all
	bench/nodes $(BUILD)

# reading the mount against the FUSE floor: open+read+close of a live file,
# stat, and cat of 1000 status files, each against a minimal libfuse
# filesystem with kernel caching measured in the same run (bench/fs/run)
$(BUILD)/bench-minfs: bench/fs/minfs.c
	$(CC) $(BASE_CFLAGS) $(FUSE_CFLAGS) $(BASE_LDFLAGS) -o $@ $< $(FUSE_LIBS)
$(BUILD)/bench-fsbench: bench/fs/fsbench.c
	$(CC) $(BASE_CFLAGS) $(BASE_LDFLAGS) -o $@ $<
bench-fs: all $(BUILD)/bench-minfs $(BUILD)/bench-fsbench
	bench/fs/run $(BUILD)

# what only the benchmarks need: hyperfine (the PyTorch peer comes with make deps)
bench-deps:
	@missing=""; for p in hyperfine; do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

# libFuzzer targets (clang) for the parsers of what users write: the spec,
# a ctl line, the pool file, a metrics.csv row; each runs FUZZ_SECONDS from
# its seed corpus (tests/fuzz/corpus/NAME); `make fuzz-deps` installs clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD    = build-fuzz
FUZZ_NAMES    = spec ctl poolfile metrics_row
FUZZ_FLAGS    = -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
fuzz:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang WARN="-Wall -Wextra -Werror" SANFLAGS="$(FUZZ_FLAGS)" \
		OPT="-O1 -g" $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz/fuzz_%)
	tests/fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS)
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIBENGINE) $(LIBSCHEMA)
	@mkdir -p $(dir $@)
	clang $(STD) -Wall -Wextra -Werror -O1 -g -I. -fsanitize=fuzzer,address,undefined \
		-o $@ $^ $(INIH_LIBS) $(ZLIB_LIBS) -lpthread -lm
fuzz-deps:
	@dpkg -s clang >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang; }

example: all
	examples/run.sh $(BUILD)

clean:
	rm -rf build build-asan build-fuzz

# make install [PREFIX=/usr/local] [DESTDIR=]: the programs in PREFIX/lib/dlhfs
# (dlhfs finds its tools beside itself), PREFIX/bin/dlhfs, the man pages
# dlhfs(8) and dlhfs-spec(5), the systemd unit, the examples, and the Python
# library dlhfs.py in PYTHONDIR, where /usr/bin/python3 (else PATH's python3)
# looks under PREFIX (Debian 12, /usr/local: lib/python3.11/dist-packages).
# It copies what BUILD holds (make first); it builds nothing, so that it
# never mixes flags.
PREFIX ?= /usr/local
DESTDIR ?=
DLH_LIBEXEC = $(PREFIX)/lib/dlhfs
DLH_PYTHON = $(firstword $(wildcard /usr/bin/python3) python3)
DLH_PYVER = $(shell $(DLH_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYTHONDIR ?= $(PREFIX)/lib/python$(DLH_PYVER)/dist-packages
DLH_PROGRAMS = dlhfs dlh-train dlh-calib dlh-shepherd dlh-probe dlh-rank dlh-agent
install:
	@for p in $(DLH_PROGRAMS); do [ -x $(BUILD)/$$p ] || { \
	  echo "make install: $(BUILD)/$$p is missing: run make first" >&2; exit 1; }; done
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(DLH_LIBEXEC) \
	  $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/share/doc/dlhfs/examples
	install -m 755 $(addprefix $(BUILD)/,$(DLH_PROGRAMS)) $(DESTDIR)$(DLH_LIBEXEC)/
	if [ -f $(BUILD)/dlh-train-cuda.so ]; then \
	  install -m 644 $(BUILD)/dlh-train-cuda.so $(DESTDIR)$(DLH_LIBEXEC)/; fi
	ln -sfn ../lib/dlhfs/dlhfs $(DESTDIR)$(PREFIX)/bin/dlhfs
	install -m 644 fs/dlhfs.8 $(DESTDIR)$(PREFIX)/share/man/man8/dlhfs.8
	install -m 644 schema/dlhfs-spec.5 $(DESTDIR)$(PREFIX)/share/man/man5/dlhfs-spec.5
	sed 's|@PREFIX@|$(PREFIX)|g' fs/dlhfs.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/dlhfs.service
	install -m 644 examples/*.ini $(DESTDIR)$(PREFIX)/share/doc/dlhfs/examples/
	install -d $(DESTDIR)$(PREFIX)/share/doc/dlhfs/examples/pytorch-ddp
	install -m 644 examples/pytorch-ddp/README.md examples/pytorch-ddp/fashion-mnist-ddp.ini \
	  examples/pytorch-ddp/train.py $(DESTDIR)$(PREFIX)/share/doc/dlhfs/examples/pytorch-ddp/
	@case "$(PYTHONDIR)" in */python/dist-packages) echo "make install: no $(DLH_PYTHON)" \
	  "to say where dlhfs.py goes: set PYTHONDIR" >&2; exit 1 ;; esac
	install -d $(DESTDIR)$(PYTHONDIR)
	install -m 644 engine/contract/dlhfs.py $(DESTDIR)$(PYTHONDIR)/dlhfs.py

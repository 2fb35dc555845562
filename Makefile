# Ember - one readable Makefile (STYLE.md rule 12).
#
#   make            build emberd, ember and libember.a into $(BUILD)/
#   make run        build and run the main job
#   make test       install missing Debian packages, build, run every test
#   make asan       the same tests under AddressSanitizer + UBSan (build/asan/)
#   make install    PREFIX=/usr/local DESTDIR=
#   make image      build the container image ember:latest (podman, as root)
#   make image-test build it, then run it with a model and check it
#   make ARCH=arm64 the same, cross-built for AArch64 into build/arm64/
#   make test-arm64 that build's kernel and golden tests under qemu-aarch64
#   make clean
#   V=1             show the full commands

CC       ?= cc
CXX      ?= c++
BUILD    ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
OPT      ?= -O2

# ARCH=arm64: cross-build for AArch64 with Debian's gcc-aarch64-linux-gnu
# and the :arm64 libraries (multiarch; `make deps-arm64` installs them),
# into build/arm64/ so the host's build stays. README, ARM64.
ifeq ($(ARCH),arm64)
CROSS    ?= aarch64-linux-gnu-
CC       := $(CROSS)gcc
CXX      := $(CROSS)g++
BUILD    := build/arm64
PKG_CONFIG_PATH_ARM64 := /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
# libpthreadpool and libsentencepiece are not Multi-Arch: same in Debian 12
# (their :arm64 packages would remove the host's), so deps-arm64 unpacks
# them here instead of installing them.
ARM64_SYSROOT := $(BUILD)/sysroot
CPPFLAGS_ARCH := -I$(ARM64_SYSROOT)/usr/include
LDFLAGS  += -L$(ARM64_SYSROOT)/usr/lib/aarch64-linux-gnu
endif

WARN     := -Wall -Wextra -Werror
# The engine's layers (README, Architecture): base <- format <- model <-
# compute (the device contract; cpu/ is one device) <- text <- runtime.
# Headers are included by name; tests/integration/test_layering.sh checks
# which layer may include which.
ENGINE_DIRS := engine/base engine/format engine/model engine/compute \
	       engine/compute/cpu engine/compute/cpu/kernels engine/text engine/runtime
CPPFLAGS := $(addprefix -I,$(ENGINE_DIRS)) -Iserver -Itools -Itools/convert -D_GNU_SOURCE $(CPPFLAGS_ARCH)
CFLAGS   := -std=c11 $(OPT) -g $(WARN) -fno-strict-aliasing -pthread
CXXFLAGS := -std=c++17 $(OPT) -g $(WARN) -pthread
DEPFLAGS  = -MMD -MP

ifeq ($(FUZZ),1)
# libFuzzer build (make fuzz, clang only): instrumented objects, no -Werror
# (another compiler's warnings must not stop a fuzzing run).
SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
CFLAGS   := $(filter-out -Werror,$(CFLAGS)) $(SANFLAGS)
CXXFLAGS := $(filter-out -Werror,$(CXXFLAGS)) $(SANFLAGS)
endif

ifeq ($(SANITIZE),1)
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
CFLAGS   += $(SANFLAGS)
CXXFLAGS += $(SANFLAGS)
LDFLAGS  += $(SANFLAGS)
endif

# Kernels for one ISA live in files named *_avx2.c / *_avx512.c and only they
# get that ISA's flags; cpu.c picks among them at run time, so the binary
# still runs on a CPU without them.
# Only a compiler targeting x86-64 knows these flags; for any other target
# those files compile to nothing (their code is under #if __x86_64__).
TARGET_ARCH := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine)))
ifeq ($(TARGET_ARCH),x86_64)
ISA_avx2   := -mavx2 -mfma -mf16c
ISA_avx512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
ISA_amx    := $(ISA_avx512) -mamx-tile -mamx-int8 -mamx-bf16
endif
# AArch64: NEON is the baseline (*_neon.c need no flag); the dot-product
# and int8 matrix-multiply kernels are in *_dotprod_neon.c / *_i8mm_neon.c.
ifeq ($(TARGET_ARCH),aarch64)
ISA_dotprod := -march=armv8.2-a+dotprod
ISA_i8mm    := -march=armv8.2-a+dotprod+i8mm
endif

PKG_CONFIG  ?= pkg-config
ifeq ($(ARCH),arm64)
PKG_CONFIG  := PKG_CONFIG_LIBDIR=$(PKG_CONFIG_PATH_ARM64) pkg-config
endif
PKGS_ENGINE := libpcre2-8
PKGS_SERVER := libmicrohttpd jansson libuv
PKGS_TEST   := check
LIBS_ENGINE  = $(shell $(PKG_CONFIG) --libs $(PKGS_ENGINE) 2>/dev/null) -lsentencepiece -lpthreadpool -lstdc++ -lm
LIBS_SERVER  = $(shell $(PKG_CONFIG) --libs $(PKGS_SERVER) 2>/dev/null)
LIBS_TOOLS   = $(shell $(PKG_CONFIG) --libs jansson 2>/dev/null)
LIBS_TEST    = $(shell $(PKG_CONFIG) --libs $(PKGS_TEST) 2>/dev/null) $(LIBS_TOOLS)

ENGINE_SRC := $(foreach d,$(ENGINE_DIRS),$(wildcard $(d)/*.c))
# The Vulkan device (README, Vulkan): VULKAN=1 builds engine/compute/vulkan/
# and its shaders (glslc -> SPIR-V as C arrays under $(BUILD)/vkspv/,
# embedded by vk_shaders.c); libvulkan is loaded with dlopen at run time, so
# nothing more is linked. Otherwise a stub answers "not built in". `make
# test` sets VULKAN=1 where glslc and the headers are installed (make deps).
VULKAN ?= 0
VK_DIR := engine/compute/vulkan
VK_AUTO = $(if $(and $(shell command -v glslc),$(wildcard /usr/include/vulkan/vulkan.h)),1,0)
CPPFLAGS += -I$(VK_DIR)
ifeq ($(VULKAN),1)
ENGINE_SRC += $(wildcard $(VK_DIR)/*.c)
else
ENGINE_SRC += $(VK_DIR)/stub/vk_stub.c
endif
ENGINE_CXX := $(foreach d,$(ENGINE_DIRS),$(wildcard $(d)/*.cc))
SERVER_SRC := $(wildcard server/*.c)
TOOLS_SRC  := $(wildcard tools/*.c tools/convert/*.c)
TEST_SRC   := $(wildcard tests/test_*.c)
# Tools' sub-commands are linked into the unit tests too (all but main).
TOOLS_LIB_SRC := $(filter-out tools/ember.c,$(TOOLS_SRC))
# So are the server's modules (all but main), for their unit tests.
SERVER_LIB_SRC := $(filter-out server/main.c,$(SERVER_SRC))

obj = $(patsubst %.c,$(BUILD)/%.o,$(patsubst %.cc,$(BUILD)/%.o,$(1)))
ENGINE_OBJ := $(call obj,$(ENGINE_SRC) $(ENGINE_CXX))
SERVER_OBJ := $(call obj,$(SERVER_SRC))
TOOLS_OBJ  := $(call obj,$(TOOLS_SRC))
TOOLS_LIB_OBJ := $(call obj,$(TOOLS_LIB_SRC))
SERVER_LIB_OBJ := $(call obj,$(SERVER_LIB_SRC))
TEST_OBJ   := $(call obj,$(TEST_SRC) tests/check_main.c tests/testutil.c)

LIBEMBER := $(BUILD)/libember.a
EMBERD   := $(BUILD)/emberd
EMBER    := $(BUILD)/ember
UNIT     := $(BUILD)/check_unit
LOADGEN  := $(BUILD)/loadgen
FWDSTEP  := $(BUILD)/forward_step
DECPROF  := $(BUILD)/decode_prof
FCCMP    := $(BUILD)/fc_compare
GEMMQ    := $(BUILD)/gemm_q
ATTNP    := $(BUILD)/attn_prompt
GMASK    := $(BUILD)/grammar_mask
MEMBW    := $(BUILD)/membw
PACKAB   := $(BUILD)/pack_ab
PIPERATE := $(BUILD)/pipe_rate
LINEPASS := $(BUILD)/line_pass
# Fuzz targets: tests/fuzz/fuzz_<name>.c. replay_<name> runs the kept
# corpus through the same code in every build (make test); fuzz_<name> is
# the libFuzzer binary (make fuzz).
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
REPLAY_BIN := $(patsubst %,$(BUILD)/replay_%,$(FUZZ_NAMES))
FUZZ_SECONDS ?= 60
.SECONDARY: $(call obj,$(wildcard tests/fuzz/*.c))

ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2);
endif

.PHONY: all bench run test unit integration asan fuzz stress install clean deps image image-test image-deps
all: $(LIBEMBER) $(EMBERD) $(EMBER) $(LOADGEN) $(FWDSTEP) $(GEMMQ) $(GMASK) $(REPLAY_BIN)

# The benchmarks that need more than the build's own libraries: fc_compare
# links XNNPACK, which nothing else uses (README, Kernels).
bench: all $(FCCMP) $(MEMBW) $(PACKAB) $(PIPERATE) $(LINEPASS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) $(ISAFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cc
	@mkdir -p $(@D)
	$(call say,CXX,$<)$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/engine/compute/cpu/kernels/%_avx2.o: ISAFLAGS = $(ISA_avx2)
$(BUILD)/engine/compute/cpu/kernels/%_avx512.o: ISAFLAGS = $(ISA_avx512)
$(BUILD)/engine/compute/cpu/kernels/%_dotprod_neon.o: ISAFLAGS = $(ISA_dotprod)
$(BUILD)/engine/compute/cpu/kernels/%_i8mm_neon.o: ISAFLAGS = $(ISA_i8mm)
# Debian 12's aarch64 GCC 12 stops with an internal compiler error
# vectorizing the tests' fmax(double) reductions (test_forward.c, ...).
ifeq ($(TARGET_ARCH),aarch64)
$(BUILD)/tests/%.o: CFLAGS += -fno-tree-vectorize
endif
$(BUILD)/engine/compute/cpu/kernels/%_amx.o: ISAFLAGS = $(ISA_amx)
$(BUILD)/engine/compute/cpu/kernels/kernels_amx_bf16.o: ISAFLAGS = $(ISA_amx)
$(BUILD)/engine/compute/cpu/kernels/kernels_amx_fx.o: ISAFLAGS = $(ISA_amx)
# The AMX blocking on a software tile model (tests/test_amx_model.c)
# includes kernels_amx.c: AVX-512 code, run only where the CPU has it.
ifeq ($(TARGET_ARCH),x86_64)
$(BUILD)/tests/test_amx_model.o: ISAFLAGS = $(ISA_avx512)
$(BUILD)/tests/test_amx_bf16.o: ISAFLAGS = $(ISA_avx512)
$(BUILD)/tests/test_amx_bf16_kq.o: ISAFLAGS = $(ISA_avx512)
$(BUILD)/tests/test_amx_split.o: ISAFLAGS = $(ISA_avx512)
$(BUILD)/tests/test_amx_fx.o: ISAFLAGS = $(ISA_avx512)
$(BUILD)/bench/pipe_rate.o: ISAFLAGS = $(ISA_avx512)
endif

$(LIBEMBER): $(ENGINE_OBJ) $(BUILD)/vulkan.flag
	$(call say,AR,$@)rm -f $@ && ar rcs $@ $(filter %.o,$^)

# Rewritten when VULKAN changes, so the library is remade with the other
# device's objects.
$(BUILD)/vulkan.flag: FORCE
	@mkdir -p $(@D); echo $(VULKAN) > $@.tmp; cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
FORCE:

VK_SPV := $(patsubst $(VK_DIR)/shaders/%.comp,$(BUILD)/vkspv/%.spv.h,$(wildcard $(VK_DIR)/shaders/*.comp))
$(BUILD)/vkspv/%.spv.h: $(VK_DIR)/shaders/%.comp $(VK_DIR)/shaders/common.glsl
	@mkdir -p $(@D)
	$(call say,GLSLC,$<)glslc --target-env=vulkan1.2 -O -mfmt=c -o $@ $<
# matmul, embed, gemm and coopmat once more per other block type
# (name:dtype.h number), each with only its own dequantization (common.glsl,
# QTYPE).
VK_QTYPES := q4_1:3 q5_0:6 q5_1:7 q2_k:10 q3_k:11 q4_k:12 q5_k:13 q6_k:14 iq4_nl:20 iq4_xs:23
VK_SPV += $(foreach q,$(VK_QTYPES),$(foreach s,matmul embed gemm coopmat,$(BUILD)/vkspv/$(s)_$(firstword $(subst :, ,$(q))).spv.h))
VK_QNUM = $(lastword $(subst :, ,$(filter $*:%,$(VK_QTYPES))))
$(BUILD)/vkspv/matmul_%.spv.h: $(VK_DIR)/shaders/matmul.comp $(VK_DIR)/shaders/common.glsl
	@mkdir -p $(@D)
	$(call say,GLSLC,$@)glslc --target-env=vulkan1.2 -O -mfmt=c -DQTYPE=$(VK_QNUM) -o $@ $<
$(BUILD)/vkspv/embed_%.spv.h: $(VK_DIR)/shaders/embed.comp $(VK_DIR)/shaders/common.glsl
	@mkdir -p $(@D)
	$(call say,GLSLC,$@)glslc --target-env=vulkan1.2 -O -mfmt=c -DQTYPE=$(VK_QNUM) -o $@ $<
$(BUILD)/vkspv/gemm_%.spv.h: $(VK_DIR)/shaders/gemm.comp $(VK_DIR)/shaders/common.glsl
	@mkdir -p $(@D)
	$(call say,GLSLC,$@)glslc --target-env=vulkan1.2 -O -mfmt=c -DQTYPE=$(VK_QNUM) -o $@ $<
$(BUILD)/vkspv/coopmat_%.spv.h: $(VK_DIR)/shaders/coopmat.comp $(VK_DIR)/shaders/common.glsl
	@mkdir -p $(@D)
	$(call say,GLSLC,$@)glslc --target-env=vulkan1.2 -O -mfmt=c -DQTYPE=$(VK_QNUM) -o $@ $<
$(BUILD)/$(VK_DIR)/vk_shaders.o: $(VK_SPV)
$(BUILD)/$(VK_DIR)/vk_shaders.o: CPPFLAGS += -I$(BUILD)/vkspv

$(EMBERD): $(SERVER_OBJ) $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $(SERVER_OBJ) $(LIBEMBER) $(LIBS_SERVER) $(LIBS_ENGINE) -o $@

$(EMBER): $(TOOLS_OBJ) $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $(TOOLS_OBJ) $(LIBEMBER) $(LIBS_TOOLS) $(LIBS_ENGINE) -o $@

# The load generator for the daemon (bench/): plain sockets; of libember
# only the clock and the buffer rule.
$(LOADGEN): $(call obj,bench/loadgen.c bench/response.c engine/base/buf.c engine/base/clock.c)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -lm -o $@

# Times one batched forward step over 1..16 sequences (bench/SERVE_RESULTS.md).
$(FWDSTEP): $(BUILD)/bench/forward_step.o $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ $(LIBS_ENGINE) -o $@

# Where a one-token decode step's time goes: the step against its matrix
# products alone (issue 17).
all: $(DECPROF)
$(DECPROF): $(BUILD)/bench/decode_prof.o $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ $(LIBS_ENGINE) -o $@

# Our F32 GEMM against XNNPACK's fully-connected operator (kernels.c says
# which one runs, and why): the only binary that links XNNPACK.
$(FCCMP): $(BUILD)/bench/fc_compare.o $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ -lXNNPACK $(LIBS_ENGINE) -o $@

# Times the quantized GEMM on a TinyLlama layer's shapes (kernel tuning).
$(GEMMQ): $(BUILD)/bench/gemm_q.o $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ $(LIBS_ENGINE) -o $@

# Times one prompt's attention on one layer, one thread (LEVELS.md, attn16).
all: $(ATTNP)
$(ATTNP): $(BUILD)/bench/attn_prompt.o $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ $(LIBS_ENGINE) -o $@

# Packed K-quant rows against the file layout, alternated (LEVELS.md).
$(PACKAB): $(BUILD)/bench/pack_ab.o $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ $(LIBS_ENGINE) -o $@

# The VNNI tiles' instruction mixes in core cycles: a kernel's floor
# (LEVELS.md, "The 8-token step's floor").
$(PIPERATE): $(BUILD)/bench/pipe_rate.o
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

# A cache line's cost between CPUs 0 and 1: the state a two-thread
# figure was taken in (LEVELS.md, call23).
$(LINEPASS): $(BUILD)/bench/line_pass.o
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ -o $@

# Streaming read bandwidth, to set decode rates against (bench/RESULTS.md).
$(MEMBW): $(call obj,bench/membw.c bench/membw_read.c engine/base/clock.c)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ -o $@

# The grammar mask's cost per token on real vocabularies (issue 20).
$(GMASK): $(BUILD)/bench/grammar_mask.o $(BUILD)/server/json_schema.o \
	  $(BUILD)/server/json_schema_scalar.o $(BUILD)/server/jsonw.o $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ $(LIBS_TOOLS) $(LIBS_ENGINE) -o $@

$(BUILD)/replay_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/replay.o $(SERVER_LIB_OBJ) $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $^ $(LIBS_SERVER) $(LIBS_ENGINE) -o $@

$(BUILD)/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(SERVER_LIB_OBJ) $(LIBEMBER)
	$(call say,LD,$@)$(CXX) -fsanitize=fuzzer,address,undefined -pthread $^ $(LIBS_SERVER) $(LIBS_ENGINE) -o $@

# The suite list is generated from the file names: tests/test_foo.c defines
# `Suite *suite_foo(void)`, so adding a test file needs no other edit.
$(BUILD)/tests/suites.h: $(TEST_SRC) Makefile
	@mkdir -p $(@D)
	$(Q)for f in $(TEST_SRC); do b=$${f#tests/test_}; echo "SUITE($${b%.c})"; done > $@.tmp && \
	  (cmp -s $@.tmp $@ || mv $@.tmp $@); rm -f $@.tmp

$(BUILD)/tests/check_main.o: CPPFLAGS += -I$(BUILD)/tests
$(BUILD)/tests/check_main.o: $(BUILD)/tests/suites.h

$(UNIT): $(TEST_OBJ) $(TOOLS_LIB_OBJ) $(SERVER_LIB_OBJ) $(LIBEMBER)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -pthread $(TEST_OBJ) $(TOOLS_LIB_OBJ) $(SERVER_LIB_OBJ) $(LIBEMBER) $(LIBS_TEST) $(LIBS_SERVER) $(LIBS_ENGINE) -o $@

# ---- running -------------------------------------------------------------

# The built-in demo model: made here (nothing can be downloaded), seeded
# random weights, so its text is gibberish; see README for real models.
DEMO := $(BUILD)/models/demo-q8_0.gguf
$(DEMO): | $(EMBER)
	@mkdir -p $(@D)
	$(EMBER) synth --preset demo --type q8_0 --seed 42 -o $@

run: deps
	$(MAKE) --no-print-directory all $(DEMO)
	@echo "emberd on http://127.0.0.1:8080 serving the demo model: its weights are"
	@echo "random, so it answers gibberish (README: real models). Ctrl-C stops it."
	$(EMBERD) --model=$(DEMO) --host=127.0.0.1 --port=8080

# Check's per-test timeouts are for hangs, not speed: the 2-core machines
# here may be loaded, and ASan is ~5x slower.
CK_MULT := $(if $(filter 1,$(SANITIZE)),6,3)
unit: $(UNIT)
	CK_TIMEOUT_MULTIPLIER=$(CK_MULT) $(UNIT)

integration: all
	BUILD=$(BUILD) tests/integration/run.sh

# Long reliability runs (tests/stress/, not part of make test; the short
# versions run there through tests/integration/test_stress_*.sh).
# STRESS_SECONDS/STRESS_CLIENTS/STRESS_SLOTS size the soak.
STRESS_SECONDS ?= 1800
STRESS_CLIENTS ?= 32
STRESS_SLOTS ?= 8
stress: all
	BUILD=$(BUILD) SHARED=$(CURDIR)/../shared /usr/bin/python3 tests/stress/faults.py --streams 16
	BUILD=$(BUILD) /usr/bin/python3 tests/stress/netabuse.py --slow 500 --idle 10000
	BUILD=$(BUILD) /usr/bin/python3 tests/stress/soak.py --duration $(STRESS_SECONDS) \
	  --clients $(STRESS_CLIENTS) --slots $(STRESS_SLOTS)

test: deps
	$(MAKE) --no-print-directory VULKAN=$(VK_AUTO) all $(UNIT)
	$(MAKE) --no-print-directory VULKAN=$(VK_AUTO) unit
	$(MAKE) --no-print-directory VULKAN=$(VK_AUTO) integration

asan: deps
	$(MAKE) --no-print-directory BUILD=build/asan SANITIZE=1 OPT=-O1 all build/asan/check_unit
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(MAKE) --no-print-directory BUILD=build/asan SANITIZE=1 OPT=-O1 unit integration

# Each target for FUZZ_SECONDS with libFuzzer (clang), starting from the kept
# corpus; a crash stops with its input in build/fuzz/: fix it, then copy
# the input into tests/fuzz/corpus/<target>/ so make test replays it forever.
fuzz: deps
	@command -v clang >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang
	$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang CXX=clang++ FUZZ=1 OPT=-O1 \
	  $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_NAMES))
	@for n in $(FUZZ_NAMES); do mkdir -p build/fuzz/corpus/$$n; \
	  echo "fuzz_$$n: $(FUZZ_SECONDS) s"; \
	  build/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 \
	    -artifact_prefix=build/fuzz/crash-$$n- build/fuzz/corpus/$$n tests/fuzz/corpus/$$n \
	    || exit 1; done

# ---- container image -------------------------------------------------------
# The Dockerfile built and run with Debian's podman, as root, on this kind of
# machine: runc (crun fails on the hybrid cgroup layout here), no default
# rlimits (podman's are refused here: containers.conf default_ulimits = []),
# no registry: the debian:12-slim base is made with mmdebstrap and imported
# once, then reused (a second `make image` rebuilds from podman's layer
# cache). --format docker keeps the HEALTHCHECK (OCI images drop it).
# podman, runc and mmdebstrap are their own list (image-deps), not part of
# DEB_PKGS: `make test` and every CI job that does not build images stay
# without a container stack (and the Dockerfile's build stage, which mirrors
# DEB_PKGS, without it too).
IMAGE      ?= ember:latest
IMAGE_BASE := debian:12-slim
IMAGE_DIR  := $(BUILD)/image
IMAGE_PKGS := podman runc mmdebstrap
PODMAN_CONF = $(abspath $(IMAGE_DIR))/containers.conf
PODMAN      = CONTAINERS_CONF=$(PODMAN_CONF) podman --runtime runc

image-deps:
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(IMAGE_PKGS)"

image: image-deps
	@mkdir -p $(IMAGE_DIR)
	@printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' > $(IMAGE_DIR)/containers.conf
	@if ! $(PODMAN) image exists $(IMAGE_BASE); then \
	  echo "making $(IMAGE_BASE) with mmdebstrap (once)"; \
	  mmdebstrap --quiet --variant=minbase --format=tar bookworm $(IMAGE_DIR)/base.tar && \
	  $(PODMAN) import $(IMAGE_DIR)/base.tar $(IMAGE_BASE) && rm -f $(IMAGE_DIR)/base.tar; \
	fi
	$(PODMAN) build --pull=never --network=host --format docker -t $(IMAGE) .

# Runs the image with a synthetic model: tests/container/test_image.py.
image-test: image $(EMBER)
	CONTAINERS_CONF=$(PODMAN_CONF) PODMAN="podman --runtime runc" IMAGE=$(IMAGE) EMBER=$(EMBER) IMAGE_DIR=$(IMAGE_DIR) \
	  /usr/bin/python3 tests/container/test_image.py

# ---- Debian packages -------------------------------------------------------
# What the build and the tests need; installed only when missing (haproxy:
# tests/integration/test_scaleout.py runs docker/haproxy.cfg on loopback;
# unicode-data and bzip2: tests/test_unicode_nfc.c reads the Unicode
# conformance file NormalizationTest.txt.bz2; the Vulkan packages: the
# Vulkan device's build (headers, glslc) and its tests on Mesa's lavapipe,
# README, Vulkan). The Dockerfile's build stage
# installs DEB_PKGS_BUILD (tests/integration/test_deploy.sh checks it).
DEB_PKGS_BUILD := gcc g++ make pkg-config libmicrohttpd-dev libjansson-dev libuv1-dev \
	libxnnpack-dev libpthreadpool-dev libsentencepiece-dev libpcre2-dev
DEB_PKGS_TEST := check libsubunit-dev curl python3 python3-numpy python3-requests python3-httpx \
	haproxy unicode-data bzip2 \
	libvulkan-dev glslc mesa-vulkan-drivers vulkan-tools
DEB_PKGS := $(DEB_PKGS_BUILD) $(DEB_PKGS_TEST)
# The OpenAI SDK test needs node and npm: whatever is on PATH serves (e.g.
# NodeSource's build, which bundles npm); Debian's are installed only when
# there is none, since Debian's npm conflicts with NodeSource's nodejs.
DEB_PKGS += $(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm)

deps:
	@missing=$$(for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  if [ "$$(id -u)" != 0 ]; then echo "run as root (or: apt-get install" $$missing")"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# ---- ARM64: cross-build, tests under qemu -----------------------------------
# `make ARCH=arm64` cross-builds everything into build/arm64/ (README,
# ARM64); `make test-arm64` builds the unit tests for AArch64 and runs the
# kernel and golden suites under qemu-aarch64 at every ARM level
# (tests/arm64/run_qemu.sh). deps-arm64 installs the cross compiler, qemu
# and the :arm64 libraries (multiarch), and unpacks the two that cannot be
# installed beside the host's (see ARM64_SYSROOT above).
ARM64_DEB_PKGS := gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user libc6-dev:arm64 \
	libmicrohttpd-dev:arm64 libjansson-dev:arm64 libuv1-dev:arm64 libpcre2-dev:arm64 \
	check:arm64 libsubunit-dev:arm64 libstdc++6:arm64
ARM64_UNPACK   := libpthreadpool0 libpthreadpool-dev libsentencepiece0 libsentencepiece-dev
ARM64_ROOT     := build/arm64/sysroot

.PHONY: deps-arm64 test-arm64
deps-arm64:
	@if ! dpkg --print-foreign-architectures | grep -qx arm64; then \
	  echo "dpkg --add-architecture arm64"; dpkg --add-architecture arm64 && apt-get update -qq; fi
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(ARM64_DEB_PKGS)"
	@if [ ! -f $(ARM64_ROOT)/.unpacked ]; then \
	  echo "unpacking $(ARM64_UNPACK) (arm64) into $(ARM64_ROOT)"; \
	  rm -rf $(ARM64_ROOT) && mkdir -p $(ARM64_ROOT)/debs && \
	  (cd $(ARM64_ROOT)/debs && apt-get download -q $(addsuffix :arm64,$(ARM64_UNPACK)) 2>&1 | grep -v '^W: Download is performed unsandboxed' ; true) && \
	  for d in $(ARM64_ROOT)/debs/*.deb; do dpkg-deb -x $$d $(ARM64_ROOT) || exit 1; done && \
	  test -e $(ARM64_ROOT)/usr/lib/aarch64-linux-gnu/libpthreadpool.so && touch $(ARM64_ROOT)/.unpacked; \
	fi

test-arm64: deps-arm64
	$(MAKE) --no-print-directory ARCH=arm64 all build/arm64/check_unit
	ROOT=$(ARM64_ROOT) BUILD=build/arm64 tests/arm64/run_qemu.sh

# ---- install -----------------------------------------------------------------

# PREFIX=/usr is a distribution install: configuration in /etc, state in
# /var, units in /lib/systemd/system (Debian 12's systemdsystemunitdir). Any
# other prefix keeps everything under it. The units in systemd/ name the /usr
# paths; install rewrites them to the chosen ones. An existing emberd.conf
# is the admin's and is never overwritten.
ifeq ($(PREFIX),/usr)
SYSCONFDIR := /etc
LOCALSTATEDIR := /var
UNITDIR    := /lib/systemd/system
else
SYSCONFDIR := $(PREFIX)/etc
LOCALSTATEDIR := $(PREFIX)/var
UNITDIR    := $(PREFIX)/lib/systemd/system
endif
MANDIR   := $(PREFIX)/share/man
MODELDIR := $(LOCALSTATEDIR)/lib/ember/models
UNIT_SED := -e 's|/usr/bin/emberd|$(PREFIX)/bin/emberd|g' \
	-e 's|/etc/ember/|$(SYSCONFDIR)/ember/|g' \
	-e 's|/var/lib/ember/models|$(MODELDIR)|g'

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SYSCONFDIR)/ember \
	  $(DESTDIR)$(UNITDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 \
	  $(DESTDIR)$(MODELDIR)
	install -m 755 $(EMBERD) $(EMBER) $(DESTDIR)$(PREFIX)/bin/
	for u in emberd.service emberd.socket; do \
	  sed $(UNIT_SED) systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u.tmp && \
	  chmod 644 $(DESTDIR)$(UNITDIR)/$$u.tmp && \
	  mv $(DESTDIR)$(UNITDIR)/$$u.tmp $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	install -m 644 man/ember.1 $(DESTDIR)$(MANDIR)/man1/ember.1
	install -m 644 man/emberd.8 $(DESTDIR)$(MANDIR)/man8/emberd.8
	@conf=$(DESTDIR)$(SYSCONFDIR)/ember/emberd.conf; \
	if [ ! -f conf/emberd.conf ]; then echo "install: conf/emberd.conf missing: not installed"; \
	elif [ -e $$conf ]; then echo "install: keeping existing $$conf"; \
	else echo "install -m 644 conf/emberd.conf $$conf"; install -m 644 conf/emberd.conf $$conf; fi

clean:
	rm -rf build

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

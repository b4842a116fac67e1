# SPDX-License-Identifier: MIT
# The front door: make, make test, make demo, make install, make deb. CMake does the work.

BUILD    ?= build
ASAN     ?= build-asan
PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deb test test-plain test-loaded test-asan test-fuzz test-gpu demo bench install fuzz format format-check tidy clean

all: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_INSTALL_PREFIX=$(PREFIX)

# The CPU tier twice, as CI runs it: a plain build and the ASan+UBSan build; the IPC tests once
# more with every core kept busy; the fuzzers (make fuzz) where clang has libFuzzer; then the GPU
# tier where an NVIDIA GPU and nvcc are present.
test: test-plain test-loaded test-asan test-fuzz test-gpu

test-plain: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# A test that leans on timing fails here rather than on someone's busy machine. tests/load.py
# ends its busy loops however the run ends (failure, timeout, signal). The driver double does
# kernels' writes and host-to-device copies late here (FAKECUDA_KERNEL_LATER, _DMA_LATER: when
# their stream is next waited for, asked about or given work), as a busy GPU does: an order
# between streams that the server fails to keep reads stale memory instead of passing.
test-loaded: all
	cd $(BUILD) && FAKECUDA_KERNEL_LATER=1 FAKECUDA_DMA_LATER=1 \
	    python3 $(CURDIR)/tests/load.py -- ctest --output-on-failure -j $(JOBS) -L ipc

test-gpu: all
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && \
	    command -v nvcc >/dev/null 2>&1; then \
	    tests/gpu/run.sh $(BUILD); \
	else \
	    echo "GPU tier skipped: no NVIDIA GPU or no nvcc here"; \
	fi

test-asan:
	cmake -S . -B $(ASAN) $(GENERATOR) -DOPENMPS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ctest --output-on-failure -j $(JOBS) -LE package

# The main job: the concurrency experiment B1 (docs/benchmark-definitions.md).
demo: all
	@scripts/demo.sh $(BUILD)

# The benchmark harness (issue #4): B1-B6 natively, under NVIDIA MPS and under openmps.
# Options through BENCH_N, BENCH_REPEATS, BENCH_MODES, BENCH_WORKLOADS, BENCH_OUT.
bench: all
	@python3 bench/run.py --build $(BUILD)

install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

# The Debian package (docs/operations.md, "Installing"): the programs alone (no tests, so no
# Python) built for /usr in $(DEB_BUILD), packed by CPack. The package.deb test checks it.
DEB_BUILD ?= build-deb
deb:
	@JOBS=$(JOBS) scripts/deb.sh $(DEB_BUILD)

# libFuzzer targets (clang, with ASan and UBSan), one per directory of tests/fuzz/corpus, each
# FUZZ_SECONDS from its saved corpus. New inputs go to build-fuzz/corpus/<target>, a finding to
# build-fuzz/<target>-{crash,leak,timeout,oom}-* and fails make: a crash, a sanitizer report, a
# leak, or one input running past FUZZ_TIMEOUT seconds (a request that keeps the server busy that
# long is a denial of service). CTest replays the saved corpora in every build.
FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 25
FUZZ_CC ?= clang
fuzz:
	CC=$(FUZZ_CC) cmake -S . -B build-fuzz $(GENERATOR) -DOPENMPS_FUZZ=ON -DOPENMPS_SANITIZE=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	for d in tests/fuzz/corpus/*/; do f=$$(basename $$d); mkdir -p build-fuzz/corpus/$$f && \
	  echo "== $$f" && build-fuzz/tests/$$f -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=$(FUZZ_TIMEOUT) -artifact_prefix=build-fuzz/$$f- build-fuzz/corpus/$$f $$d || \
	  { echo "make fuzz: $$f found a problem: its input is build-fuzz/$$f-*" >&2; exit 1; }; done

# make test's fuzz step: make fuzz where $(FUZZ_CC) links a libFuzzer target (Debian: clang and
# libclang-rt-dev, which .ci/run installs); skipped, saying so, elsewhere.
test-fuzz:
	@probe=$$(mktemp) && \
	if command -v $(FUZZ_CC) >/dev/null 2>&1 && \
	    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' | \
	    $(FUZZ_CC) -x c -fsanitize=fuzzer,address,undefined -o $$probe - >/dev/null 2>&1; then \
	    rm -f $$probe; $(MAKE) --no-print-directory fuzz; \
	else \
	    rm -f $$probe; \
	    echo "fuzz step skipped: no $(FUZZ_CC) with libFuzzer here (apt-get install clang libclang-rt-dev)"; \
	fi

SOURCES := $(shell git ls-files '*.c' '*.h' ':!src/*/gen/*' 2>/dev/null)
format:
	clang-format -i $(SOURCES)
format-check:
	clang-format --dry-run --Werror $(SOURCES)
tidy: all
	clang-tidy -p $(BUILD) --quiet $(filter %.c,$(SOURCES))

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz

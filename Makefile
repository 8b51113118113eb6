# Entry points for people; the build itself is CMake + Ninja.
BUILD ?= build
# Line tables only (-g1): backtraces and perf keep file:line, the binary and the build are a quarter smaller and
# faster than with full debug info.
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
	-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
# The portable build (docs/release.md): compiled against Debian 11's glibc, taken as a package into
# $(SYSROOT) by scripts/fetch-sysroot.sh, so that the binaries the tests run are the ones users get and they
# load on glibc 2.28 and newer. PORTABLE=0 builds against this machine's glibc instead (no download).
PORTABLE ?= 1
SYSROOT ?= $(BUILD)/sysroot
ifeq ($(PORTABLE),1)
PORTABLE_FLAGS = -DCMAKE_TOOLCHAIN_FILE=cmake/PortableToolchain.cmake -DGPUDX_SYSROOT=$(abspath $(SYSROOT))
PORTABLE_STAMP = $(SYSROOT)/.gpudx-sysroot
endif
DIST ?= dist
JOBS ?= $(shell nproc)
# Tests run two per core: most of them wait (on a deadline, a child, a socket) far longer than they compute, and
# none depends on timing or on what runs beside it (the deadlines of tests that hang on purpose allow 10 s of
# slack; an answering stand-in gets a minute).
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
SANITIZE_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# Sanitizer builds compile at -O1 with line tables only (-g1): what ASan, UBSan and TSan report needs no more,
# and it roughly halves their build time on a 2-core CI machine.
SANITIZER_CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
# The ASan + UBSan suite and the fuzz targets share one clang build ($(SANITIZE_BUILD)): libFuzzer needs clang,
# and the fuzz targets' objects (the layers, instrumented for coverage, ASan and UBSan) are the suite's, so the
# library is compiled once for both (docs/reliability.md). fuzz/run.sh configures the same when run alone.
FUZZ_CXX ?= clang++-16
FUZZ_CC ?= clang-16
SANITIZE_CONFIGURE = cmake -S . -B $(SANITIZE_BUILD) -G Ninja $(SANITIZER_CMAKE_FLAGS) -DGPUDX_SANITIZE=ON \
	-DGPUDX_FUZZ=ON -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DCMAKE_C_COMPILER=$(FUZZ_CC)
# What the sanitizers run: the tests whose C++ runs in the test's own process or in a program it starts and
# waits on briefly (GoogleTest suites, the agent's, driver, fault, checkpoint, fleet, shim and stand-in tests),
# at the normal suite's parallelism. Left to the normal build (docs/reliability.md says why): the shell-driven
# end-to-end tests (label e2e: the same library code, reached through the binary, each run paying the sanitizer
# runtime's start), the tests against third-party programs (integration), the packages (package, deploy), the
# ENOSYS runs (portability: the same code with system calls refused), the layer check (a CMake script) and the
# pages in Chromium (browser: the binary's HTML, checked by a browser, not by the sanitizers).
SANITIZE_TESTS ?= -LE '^(integration|e2e|browser|package|deploy|portability|layers)$$'

.PHONY: all deps build run test test-integration bench release clean
.PHONY: test-sanitize test-tsan fuzz sanitize-build tsan-build

all: build

deps:
	@bash scripts/install-deps.sh

$(SYSROOT)/.gpudx-sysroot: | deps
	bash scripts/fetch-sysroot.sh $(SYSROOT)

$(BUILD)/build.ninja: | deps $(PORTABLE_STAMP)
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) $(PORTABLE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# An unhealthy verdict is the report's news, not a failed make: the exit code is shown, not propagated.
run: build
	@$(BUILD)/gpudx diagnose; rc=$$?; echo; echo "gpudx diagnose exited $$rc (0 healthy, 1 errors, 2 warnings, 3 could not evaluate)"

# TEST_EXCLUDE: a label regex left out (.ci/run leaves integration and browser to test-integration, which runs
# them with their programs required, so CI does not run them twice).
TEST_EXCLUDE ?=
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS) $(if $(TEST_EXCLUDE),-LE '$(TEST_EXCLUDE)')

# Against the real programs operators run (Slurm daemons, promtool, node_exporter, cpack/dpkg-deb): installs
# them, then runs the tests labelled `integration`. GPUDX_REQUIRE_INTEGRATION=1 turns their "skipped, not
# installed" into a failure, so this target cannot pass by skipping. Slurm's test needs root. The pages in Chromium
# (label browser) are held to the same rule.
test-integration: build
	bash scripts/install-deps.sh --with-integration --with-browser
	cd $(BUILD) && GPUDX_REQUIRE_INTEGRATION=1 ctest --output-on-failure -L '^(integration|browser)$$'

# The clang build the ASan + UBSan suite and the fuzz targets share (docs/reliability.md): everything the suite
# runs and every fuzz target. A target of its own so that .ci/run can compile it while the normal suite runs.
sanitize-build:
	bash scripts/install-deps.sh --with-fuzz
	$(SANITIZE_CONFIGURE)
	cmake --build $(SANITIZE_BUILD) --target all fuzz_targets -j $(JOBS)

# The suite under AddressSanitizer and UndefinedBehaviorSanitizer (SANITIZE_TESTS). Tests that preload a library
# into an instrumented program (the shim, the fault injector) load it ahead of the ASan runtime, which ASan
# refuses unless verify_asan_link_order=0.
# The symbolizer of the clang that built them, so that a report names functions, files and lines (without it
# ASan prints bare addresses: "invalid path to external symbolizer").
SANITIZE_SYMBOLIZER ?= $(firstword $(wildcard /usr/lib/llvm-16/bin/llvm-symbolizer /usr/bin/llvm-symbolizer-16 /usr/bin/llvm-symbolizer))
test-sanitize: sanitize-build
	cd $(SANITIZE_BUILD) && ASAN_OPTIONS=verify_asan_link_order=0 UBSAN_OPTIONS=print_stacktrace=1 \
		$(if $(SANITIZE_SYMBOLIZER),ASAN_SYMBOLIZER_PATH=$(SANITIZE_SYMBOLIZER)) \
		ctest --output-on-failure -j $(TEST_JOBS) $(SANITIZE_TESTS)

# The preload shim and its tests under ThreadSanitizer (label shim), in a build directory of its own.
tsan-build: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja $(SANITIZER_CMAKE_FLAGS) -DGPUDX_TSAN=ON
	cmake --build $(TSAN_BUILD) --target shim_tests -j $(JOBS)

test-tsan: tsan-build
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" ctest --output-on-failure -L shim

# Every libFuzzer target for FUZZ_SECONDS (default 30) each, built in $(SANITIZE_BUILD) (after
# `make test-sanitize`, nothing is left to compile); fails on any crash.
fuzz:
	bash scripts/install-deps.sh --with-fuzz
	$(SANITIZE_CONFIGURE)
	FUZZ_BUILD=$(SANITIZE_BUILD) BUILD_JOBS=$(JOBS) bash fuzz/run.sh

# dist/: the stripped binaries with their debug information beside them, the manual page, the examples, a
# tarball of all of it, the .deb and the .rpm (scripts/make-release.sh, docs/release.md).
release: build
	bash scripts/install-deps.sh --with-release
	bash scripts/make-release.sh $(BUILD) $(DIST)

bench: build
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)

clean:
	rm -rf $(BUILD) $(DIST)

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

.PHONY: all deps build run test test-integration bench release clean
.PHONY: test-sanitize test-tsan fuzz

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

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

# Against the real programs operators run (Slurm daemons, promtool, node_exporter, cpack/dpkg-deb): installs
# them, then runs the tests labelled `integration`. GPUDX_REQUIRE_INTEGRATION=1 turns their "skipped, not
# installed" into a failure, so this target cannot pass by skipping. Slurm's test needs root.
test-integration: build
	bash scripts/install-deps.sh --with-integration
	cd $(BUILD) && GPUDX_REQUIRE_INTEGRATION=1 ctest --output-on-failure -L integration

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer, in a build directory of its own
# (docs/reliability.md). Tests that preload a library into an instrumented program (the shim, the fault
# injector) load it ahead of libasan, which ASan refuses unless verify_asan_link_order=0.
# Left to the normal build: the tests against third-party programs (label integration: Slurm's daemons, promtool,
# Prometheus, the package tools), which exercise their programs more than gpudx's code, and
# e2e.unprivileged_scenarios, the suite's longest test, whose code paths the other e2e scenarios run as root.
test-sanitize: deps
	cmake -S . -B $(SANITIZE_BUILD) -G Ninja $(SANITIZER_CMAKE_FLAGS) -DGPUDX_SANITIZE=ON
	cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	cd $(SANITIZE_BUILD) && ASAN_OPTIONS=verify_asan_link_order=0 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS) -LE integration -E '^e2e\.unprivileged_scenarios$$'

# The preload shim and its tests under ThreadSanitizer (label shim), in a build directory of its own.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja $(SANITIZER_CMAKE_FLAGS) -DGPUDX_TSAN=ON
	cmake --build $(TSAN_BUILD) --target shim_tests -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 report_signal_unsafe=0" ctest --output-on-failure -L shim

# Every libFuzzer target for FUZZ_SECONDS (default 30) each, with clang in build-fuzz; fails on any crash.
fuzz:
	bash scripts/install-deps.sh --with-fuzz
	BUILD_JOBS=$(JOBS) bash fuzz/run.sh

# dist/: the stripped binaries with their debug information beside them, the manual page, the examples, a
# tarball of all of it, the .deb and the .rpm (scripts/make-release.sh, docs/release.md).
release: build
	bash scripts/install-deps.sh --with-release
	bash scripts/make-release.sh $(BUILD) $(DIST)

bench: build
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)

clean:
	rm -rf $(BUILD) $(DIST)

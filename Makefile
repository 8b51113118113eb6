# Entry points for people; the build itself is CMake + Ninja.
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
JOBS ?= $(shell nproc)

.PHONY: all deps build run test bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# An unhealthy verdict is the report's news, not a failed make: the exit code is shown, not propagated.
run: build
	@$(BUILD)/gpudx diagnose; rc=$$?; echo; echo "gpudx diagnose exited $$rc (0 healthy, 1 errors, 2 warnings, 3 could not evaluate)"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)

clean:
	rm -rf $(BUILD)

# Two commands on a fresh machine (README): `make run` and `make test`.
# Each installs what is missing (Debian packages), configures, builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
APT_PACKAGES := cmake g++ make libboost-program-options-dev libfmt-dev libyaml-cpp-dev \
                nlohmann-json3-dev catch2 python3-matplotlib python3-yaml

.PHONY: deps configure build run test clean deepspeed-stack

deps:
	@bash cmake/install-deps.sh $(APT_PACKAGES)

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@bash cli/main-job.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) out

# The deepspeed backend's Python stack for an offline GPU host (docs/DEEPSPEED_BACKEND.md)
deepspeed-stack:
	@bash runtime/deepspeed/fetch-stack.sh .alst/wheels

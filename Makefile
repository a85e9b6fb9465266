# Two commands on a fresh machine (README): `make run` and `make test`.
# Each installs what is missing (Debian packages), configures, builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
APT_PACKAGES := cmake g++ make libboost-program-options-dev libfmt-dev libyaml-cpp-dev \
                nlohmann-json3-dev catch2 python3-matplotlib python3-yaml clang libclang-rt-14-dev
# The hardening build (issue 17): clang, ASan + UBSan, libFuzzer targets (cmake/sanitizers.cmake).
HARDENING ?= build-hardening
FUZZ_CI_SECONDS ?= 120
FUZZ_CI_RUNS ?= 3000
FUZZ_SECONDS ?= 600

.PHONY: deps configure build run test clean deepspeed-stack hardening hardening-test fuzz

deps:
	@bash cmake/install-deps.sh $(APT_PACKAGES)

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@bash reports/main-job.sh $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory hardening-test

# The CPU test suite under ASan + UBSan, then every fuzz target for FUZZ_CI_RUNS inputs from seed 1.
hardening: deps
	@CC=clang CXX=clang++ cmake -S . -B $(HARDENING) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 \
	  -DULYSSES_SANITIZE=ON -DULYSSES_FUZZ=ON -DULYSSES_ENABLE_CUDA=OFF $(CMAKE_FLAGS)
	@cmake --build $(HARDENING) -j $(JOBS)

# Left out under the sanitizers: the CPU backend's whole validation set (24 s in the ordinary build,
# over 18 min under ASan at -O1); the same paths run in the shorter cpu-backend tests.
HARDENING_SKIP := validate runs a set on the CPU backend

hardening-test: hardening
	@cd $(HARDENING) && ctest --output-on-failure -j $(JOBS) -E '$(HARDENING_SKIP)'
	@FUZZ_RUNS=$(FUZZ_CI_RUNS) bash tests/fuzz/run.sh $(HARDENING) $(FUZZ_CI_SECONDS)

# On demand: every fuzz target for FUZZ_SECONDS each (make fuzz FUZZ_SECONDS=600).
fuzz: hardening
	@bash tests/fuzz/run.sh $(HARDENING) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(HARDENING) out

# The deepspeed backend's Python stack for an offline GPU host (docs/DEEPSPEED_BACKEND.md)
deepspeed-stack:
	@bash runtime/deepspeed/fetch-stack.sh .alst/wheels

# irisgen: `make` generates the HIP kernels and Go wrappers and compiles the
# kernels; `make test` is what CI runs (.ci/run). Nothing here needs a GPU
# except `make test-gpu`.

GO      ?= go
IRISGEN ?= $(GO) run ./cmd/irisgen
BUILD   ?= build
# AMD kernels for the CPU-only CI check: every generated kernel as one
# bundle per module for every AMD target CI covers, built by Debian's clang-19
# (hipcc 5.2 does not know gfx942), and again by hipcc for its targets as a
# second compiler. irisgen checks every code object it writes.
HIP_ARCH   ?= gfx90a,gfx940,gfx942
HIP_CLANG  ?= clang++-19
HIPCC_ARCH ?= gfx90a,gfx940
# GPU test binaries: <package dir>:<binary name>. The GPU suite's owner adds
# packages here; tests/gpu/run.sh runs $(BUILD)/<name>.test.
GPU_TESTS ?= ./runtime/gpu:platform ./tests/gpu:gpu

.PHONY: all generate kernels test test-go test-check test-hip gpu-build test-gpu bench clean help

all: generate kernels

help:
	@echo "make            generate + kernels"
	@echo "make generate   regenerate generated/hip and generated/collectives from specs/ and templates/"
	@echo "make kernels    compile generated/hip/*.hip (nvcc if installed, else hipcc or clang) into generated/kernels"
	@echo "make test       go vet, go test -race, irisgen check, every kernel built by $(HIP_CLANG) ($(HIP_ARCH)) and hipcc ($(HIPCC_ARCH))"
	@echo "make gpu-build  build the GPU test binaries and irisgen into $(BUILD)/ (carry it to a GPU machine)"
	@echo "make test-gpu   gpu-build, then run tests/gpu/run.sh (needs GPUs; nvcc kernels, or with IRISGEN_PLATFORM=hip the AMD compiler)"
	@echo "make bench      gpu-build, then irisgen bench beside NCCL and torch symmetric memory into $(BUILD)/bench (needs GPUs)"
	@echo "make clean      remove $(BUILD)/ and generated/kernels/"

generate:
	$(IRISGEN) generate

kernels:
	$(IRISGEN) kernels

test: test-go test-check test-hip

test-go:
	$(GO) vet ./...
	$(GO) test -race ./...
	@# Say so when the GPU suite is left out (no `gpu` tag, no GPUs here).
	@$(GO) test -count=1 -v -run '^TestGPUSuiteSkipped$$' ./tests/gpu | grep -B1 -e '--- SKIP' || true

test-check:
	$(IRISGEN) check

# Compiles every generated kernel with the real AMD compilers; a compile
# error or a code object that is not an AMDGPU ELF for its target fails the
# run. The code objects go to $(BUILD), so the kernels of `make kernels` are
# left alone.
test-hip:
	$(IRISGEN) kernels -platform hip -compiler $(HIP_CLANG) -arch $(HIP_ARCH) -kernels-out $(BUILD)/kernels-hip
	$(IRISGEN) kernels -platform hip -compiler hipcc -arch $(HIPCC_ARCH) -kernels-out $(BUILD)/kernels-hipcc

gpu-build:
	@mkdir -p $(BUILD)
	$(GO) build -o $(BUILD)/irisgen ./cmd/irisgen
	@set -e; for t in $(GPU_TESTS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "$(GO) test -c -tags gpu -o $(BUILD)/$$name.test $$pkg"; \
		$(GO) test -c -tags gpu -o $(BUILD)/$$name.test $$pkg; \
	done

test-gpu: gpu-build
	BUILD=$(BUILD) tests/gpu/run.sh

# The benchmark: nvcc kernels, then irisgen bench on every GPU of the machine
# (tables, CSV and plots in $(BUILD)/bench; see docs/performance.md).
bench: gpu-build
	$(BUILD)/irisgen kernels -platform cuda -kernels-out $(BUILD)/kernels
	IRISGEN_KERNELS=$(CURDIR)/$(BUILD)/kernels $(BUILD)/irisgen bench -out $(BUILD)/bench

clean:
	rm -rf $(BUILD) generated/kernels

# irisgen: `make` generates the HIP kernels and Go wrappers and compiles the
# kernels; `make test` is what CI runs (.ci/run). Nothing here needs a GPU
# except `make test-gpu` and `make bench`. Both install what they need when
# it is missing (.ci/deps: apt-get as root or with sudo, else the command
# to run).

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
# The GPU suite's tier and shard (tests/gpu/run.sh -list shows them).
TIER  ?= quick
SHARD ?= all
# The example downstream repository (its own module), built and tested
# like a user's.
DOWNSTREAM := tests/downstream

.PHONY: all deps deps-test generate kernels test test-go test-check test-hip test-downstream gpu-build gpu-kernels test-gpu bench clean help

all: generate kernels

help:
	@echo "make                 generate + kernels"
	@echo "make generate        regenerate generated/hip and generated/collectives from specs/ and templates/ (irisgen.yaml)"
	@echo "make kernels         compile generated/hip/*.hip (nvcc if installed, else hipcc or clang) into generated/collectives/kernels"
	@echo "make test            go vet, go test -race, irisgen check, every kernel built by $(HIP_CLANG) ($(HIP_ARCH)) and hipcc ($(HIPCC_ARCH)), tests/downstream"
	@echo "make test-downstream only tests/downstream: go generate + check, vet, test, AMD compile of its kernels ($(HIP_ARCH))"
	@echo "make gpu-build       build irisgen, irisgen-gpu, the GPU test binaries and the downstream programs into $(BUILD)/ (they embed the kernels built so far)"
	@echo "make gpu-kernels     compile every kernel with nvcc next to its generated package (this repository's and tests/downstream's)"
	@echo "make test-gpu        gpu-kernels, gpu-build, then tests/gpu/run.sh TIER SHARD (TIER=$(TIER): quick, full, sanitize; SHARD=$(SHARD); needs nvcc and GPUs; docs/testing-gpu.md)"
	@echo "make bench           gpu-build, then irisgen bench beside NCCL and torch symmetric memory into $(BUILD)/bench (needs GPUs)"
	@echo "make clean           remove $(BUILD)/ and the compiled kernels"

# What each step needs is said once, in .ci/deps, which installs what is
# missing.
deps:
	@.ci/deps build

deps-test:
	@.ci/deps test

# go generate runs gen.go's line: irisgen generate with irisgen.yaml.
generate:
	$(GO) generate ./...

kernels: deps
	$(IRISGEN) kernels

test: test-go test-check test-hip test-downstream

test-go test-hip test-downstream: | deps-test

test-go:
	@# Every Go file gofmt'd (generated ones are by construction).
	@out=$$("$$($(GO) env GOROOT)/bin/gofmt" -l .) || exit 1; if [ -n "$$out" ]; then echo "gofmt -l: not formatted (run gofmt -w on them):"; echo "$$out"; exit 1; fi
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

# The README's downstream workflow, as a user's repository runs it: the
# checked-in code is current, `go generate ./...` at the module root then
# check is clean, `go tool irisgen generate` and check from a subdirectory
# too, vet, the tests on the fake platform, and the AMD compile of its
# kernels (its own collectives and the catalogue's it names).
test-downstream:
	cd $(DOWNSTREAM) && $(GO) tool irisgen check
	cd $(DOWNSTREAM) && $(GO) generate ./... && $(GO) tool irisgen check
	cd $(DOWNSTREAM)/internal/gen/coll && $(GO) tool irisgen generate && $(GO) tool irisgen check
	cd $(DOWNSTREAM) && $(GO) vet ./... && $(GO) test -race ./...
	cd $(DOWNSTREAM) && $(GO) tool irisgen kernels -platform hip -compiler $(HIP_CLANG) -arch $(HIP_ARCH) -kernels-out $(abspath $(BUILD))/downstream-kernels-hip

gpu-build:
	@mkdir -p $(BUILD)
	$(GO) build -o $(BUILD)/irisgen ./cmd/irisgen
	$(GO) build -o $(BUILD)/irisgen-gpu ./cmd/irisgen-gpu
	cd $(DOWNSTREAM) && $(GO) build -o $(abspath $(BUILD))/stencil ./cmd/stencil
	cd $(DOWNSTREAM) && $(GO) build -o $(abspath $(BUILD))/stencil-gpu ./cmd/stencil-gpu
	@set -e; for t in $(GPU_TESTS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "$(GO) test -c -tags gpu -o $(BUILD)/$$name.test $$pkg"; \
		$(GO) test -c -tags gpu -o $(BUILD)/$$name.test $$pkg; \
	done

# nvcc code objects next to each generated package, so that the binaries of
# gpu-build embed them.
gpu-kernels:
	$(IRISGEN) kernels -platform cuda
	cd $(DOWNSTREAM) && $(GO) tool irisgen kernels -platform cuda

test-gpu: gpu-kernels
	$(MAKE) gpu-build
	BUILD=$(BUILD) tests/gpu/run.sh $(TIER) $(SHARD)

# The benchmark: nvcc kernels, then irisgen bench on every GPU of the machine
# (tables, CSV and plots in $(BUILD)/bench; see docs/performance.md).
bench: gpu-build
	$(BUILD)/irisgen kernels -platform cuda -kernels-out $(BUILD)/kernels
	IRISGEN_KERNELS=$(abspath $(BUILD))/kernels $(BUILD)/irisgen bench -out $(BUILD)/bench

clean:
	rm -rf $(BUILD) generated/kernels
	find generated/collectives/kernels $(DOWNSTREAM)/internal/gen/coll/kernels \( -name '*.hsaco' -o -name '*.fatbin' \) -delete 2>/dev/null || true

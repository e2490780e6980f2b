#!/usr/bin/env bash
# Runs the GPU suite from prebuilt binaries: `make test-gpu` builds the
# kernels with nvcc next to each generated package, then the binaries, which
# embed them, then runs this. Logs go to $OUT (or build/gpu-logs) when set.
# Steps: the platform smoke tests, the suite (both worlds), `irisgen probe` in
# an in-process world and as the ranks of a 2-process world (global capture),
# the downstream example's program (tests/downstream) in both worlds, and
# with SANITIZE=1 a compute-sanitizer memcheck run. No kernel environment
# variable is set: every program finds its code objects in the packages it
# imports.
#
# On a GPU machine without Go, in two runs: KERNELS_ONLY=1 compiles the code
# objects there with the carried build/irisgen into each package's kernels/
# and packs them into $LOG/kernels.tar.gz; unpack that at the repository
# root on a machine with Go, `make gpu-build`, carry the tree with build/
# back and run this script.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
LOG=${OUT:-$B/gpu-logs}
mkdir -p "$LOG"
# Never use NVLink multicast on shared machines (see shared/GPU.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset IRISGEN_KERNELS
BIN=$PWD/$B
PLATFORM=${IRISGEN_PLATFORM:-cuda}
# The downstream example runs in its own module directory, as a user's
# repository would (irisgen reads its irisgen.yaml there).
downstream() { (cd tests/downstream && "$@"); }

status=0
step() { # step NAME CMD...: runs CMD, keeps its log, remembers a failure
  local name=$1; shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$LOG/$name.log"
  echo "== $name: rc=$rc in $((SECONDS - t0))s"
  [ $rc -eq 0 ] || status=1
}

if [ -n "${KERNELS_ONLY:-}" ]; then
  step kernels "$B/irisgen" kernels -platform "$PLATFORM"
  step downstream-kernels downstream "$BIN/irisgen" kernels -platform "$PLATFORM"
  tar -czf "$LOG/kernels.tar.gz" $(ls generated/*/kernels/*.fatbin generated/*/kernels/*.hsaco \
    tests/downstream/internal/gen/*/kernels/*.fatbin tests/downstream/internal/gen/*/kernels/*.hsaco 2>/dev/null) || status=1
  echo "== code objects in $LOG/kernels.tar.gz: unpack at the repository root, then make gpu-build"
  exit $status
fi
step platform "$B/platform.test" -test.v -test.count=1
step suite "$B/gpu.test" -test.v -test.count=1 -test.timeout 60m ${SUITE_ARGS:-}
step probe "$B/irisgen" probe -replays 100
step probe-processes "$B/irisgen" run -n 2 -- "$B/irisgen" probe -replays 20
step downstream-local downstream "$BIN/stencil"
GPUS=${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
[ "${GPUS:-0}" -gt 0 ] || GPUS=2
step downstream-process downstream "$BIN/irisgen" run -n "$GPUS" -- "$BIN/stencil"
if [ -n "${SANITIZE:-}" ] && command -v compute-sanitizer >/dev/null; then
  IRISGEN_TEST_WORLDS=2 IRISGEN_TEST_QUICK=1 step memcheck compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$B/gpu.test" -test.v -test.count=1 -test.run 'TestDeviceBarrier|TestHeapTranslation|TestCatalogue|TestMoE$|TestGroups|TestRMSNorm$'
fi
exit $status

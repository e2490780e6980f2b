#!/usr/bin/env bash
# Runs the GPU suite from prebuilt binaries (`make test-gpu` builds them; on a
# GPU machine with no Go toolchain, carry build/ and run this script alone).
# Logs go to $OUT (or build/gpu-logs) when set. Steps: kernels (nvcc), the
# platform smoke tests, the suite (both worlds), `irisgen probe` in an
# in-process world and as the ranks of a 2-process world (global capture),
# and with SANITIZE=1 a compute-sanitizer memcheck run.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
LOG=${OUT:-$B/gpu-logs}
mkdir -p "$LOG"
# Never use NVLink multicast on shared machines (see shared/GPU.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export IRISGEN_KERNELS=${IRISGEN_KERNELS:-$PWD/$B/kernels}

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

step kernels "$B/irisgen" kernels -platform "${IRISGEN_PLATFORM:-cuda}" -kernels-out "$IRISGEN_KERNELS"
step platform "$B/platform.test" -test.v -test.count=1
step suite "$B/gpu.test" -test.v -test.count=1 -test.timeout 30m ${SUITE_ARGS:-}
step probe "$B/irisgen" probe -replays 100
step probe-processes "$B/irisgen" run -n 2 -- "$B/irisgen" probe -replays 20
if [ -n "${SANITIZE:-}" ] && command -v compute-sanitizer >/dev/null; then
  IRISGEN_TEST_WORLDS=2 IRISGEN_TEST_QUICK=1 step memcheck compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$B/gpu.test" -test.v -test.count=1 -test.run 'TestDeviceBarrier|TestHeapTranslation|TestCatalogue|TestMoE$|TestGroups'
fi
exit $status

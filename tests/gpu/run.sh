#!/usr/bin/env bash
# The GPU suite in tiers and shards, from prebuilt binaries: no Go is needed
# on the GPU machine. `make gpu-build` (or `make test-gpu`) builds
# $BUILD/gpu.test, platform.test, irisgen and stencil with the nvcc code
# objects embedded; carry $BUILD to the GPU machine and run this there.
#
#   tests/gpu/run.sh [TIER [SHARD]]     run (TIER and SHARD may also come from the environment)
#   tests/gpu/run.sh -list [TIER]       the shards of a tier (of every tier), with estimated seconds
#   tests/gpu/run.sh -tests TIER        the test patterns of each shard (tests/gpu/shards_test.go checks them)
#   tests/gpu/run.sh -rows KIND FILE... result lines as rows of docs/testing-gpu.md's record (KIND: the machine)
#   tests/gpu/run.sh -left TIER WORLD [FILE...]  the shards of TIER that no result line of a world of WORLD
#                                       among FILEs passed (or met the tool's limit in), with their estimates;
#                                       a FILE may be docs/testing-gpu.md, whose record rows count too
#
# TIER: quick (default), full or sanitize; docs/testing-gpu.md says what each
# holds and how long its shards take. SHARD: all (default), a shard's name,
# names separated by commas, or i/N: every N-th shard of the tier from the
# i-th (1 <= i <= N; mind the estimates: a set must fit the call).
#
# Each shard prints one result line and writes it to $LOG/result-TIER-SHARD.txt,
# its whole log to $LOG/log-TIER-SHARD.txt; LOG is $OUT when set, else
# $BUILD/gpu-logs. The line holds tier, shard, worlds, tests passed, failed
# and skipped, cases (the IRISGEN_CASES lines of the tests, probe's claims,
# the downstream example's cases), sanitizer errors and hazards, seconds,
# the GPUs and driver from nvidia-smi, the date and the result, so a record
# can be assembled from separate runs.
#
# Environment:
#   BUILD                the binaries (default build)
#   IRISGEN_TEST_WORLDS  world sizes, comma-separated (default: quick 2 and the
#                        GPU count when larger; full and sanitize the GPU count)
#   SHARD_LIMIT          seconds for one shard (default: three times its
#                        estimate, at least 120; 0: no limit but CALL_LIMIT):
#                        a shard that hangs is stopped (CUT) there and the
#                        next shards of the run get their time
#   CALL_LIMIT           seconds for all shards of this run (default 570, inside
#                        a 10-minute call); a step stopped at the limit makes its
#                        shard CUT (rerun it with more time), and a shard is not
#                        started (NOT_RUN) when less is left than half its
#                        estimate; 0: no limit
#   CUDA_VISIBLE_DEVICES the GPUs to use, by index (the GPU count and the
#                        result line's GPUs are of these only)
#   LANES                worlds of 2 side by side (default 1): with
#                        IRISGEN_TEST_WORLDS=2 on 2 x LANES GPUs or more, the
#                        shards are dealt to LANES runs, each on its own pair
#                        (on 4 GPUs, a 2-GPU tier in up to half the time)
#   GRAPH_WAIT_LIMIT     seconds for each run of $BUILD/graph_wait, the tool's
#                        own check before initcheck-capture-copy (default 60)
#   PROFILE=1            a CPU profile of each in-process step's test binary,
#                        $LOG/profile-TIER-SHARD-STEP.pprof (`go tool pprof -top
#                        $BUILD/gpu.test FILE`): where the host spends a
#                        shard's time (generating and checking data, host
#                        barriers, waiting for the GPU in cgo calls)
#   COMPUTE_SANITIZER    the sanitizer (default: compute-sanitizer on PATH or
#                        under /usr/local/cuda*/bin)
#   KERNELS_ONLY=1       compile the code objects here with the carried
#                        $BUILD/irisgen into each package's kernels/ and pack
#                        them into $LOG/kernels.tar.gz (for a machine with
#                        nvcc but no Go: unpack at the repository root where
#                        Go is, make gpu-build, carry $BUILD back, run this)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=${BUILD:-build}
case $B in /*) BIN=$B ;; *) BIN=$PWD/$B ;; esac
PLATFORM=${IRISGEN_PLATFORM:-cuda}
# Never use NVLink multicast on shared machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The ranks say which variant they are at (capture, back to back, rules):
# a copy-engine wait has no time limit, and the log of a step that hangs
# then names the case.
export IRISGEN_TEST_TRACE=${IRISGEN_TEST_TRACE-1}
# No kernel variable: every program finds its code objects in the packages
# it imports.
unset IRISGEN_KERNELS

# The shards, one a line: tier|name|seconds on 2 GPUs|seconds on 4 GPUs|what.
# The seconds are estimates from the tests' case counts and sizes (see
# docs/testing-gpu.md); a sanitize shard's are the more uncertain.
shard_table() {
  cat <<'EOF'
quick|inprocess|220|480|in-process world: every test at quick sizes (every variant x dtype x op at 1, 7, 4099 and 1Mi elements; faults, refused and mismatched launches, visibility and the probe in both worlds; capture, groups, MoE, the stall guard), the platform tests, irisgen probe, the downstream example; the copy-engine variants' tests again with IRISGEN_PEER_WRITES=0
quick|processes|65|110|irisgen run -n N: TestProcessWorld (barriers, catalogue, capture, groups) and TestRMSNormProcessWorld at quick sizes, the downstream example; the copy-engine variants' catalogue and capture parts again with IRISGEN_PEER_WRITES=0
full|catalogue-a|45|55|TestCatalogue at every size up to 64Mi: all_reduce one_shot, one_shot_staged, one_shot_push, one_shot_lamport
full|catalogue-b|45|55|TestCatalogue at every size up to 64Mi: all_reduce two_shot, atomic, spinlock, ring
full|catalogue-c|45|180|TestCatalogue at every size up to 64Mi: reduce_scatter, all_gather, all_to_all
full|large|45|50|TestLargeOffsets (1.25 GiB a rank past the first GiB), TestParamLargeOffsets
full|params|100|250|TestParamCollectives up to 64Mi, TestParamRules, TestParamBackToBack, TestParamCapture
full|rmsnorm|45|40|TestRMSNorm and TestRMSNormAuto up to 2048 tokens, TestRMSNormRules, TestRMSNormBackToBack, TestRMSNormCapture
full|moe|40|70|TestMoE (with 8192 x 7168, k 8), TestMoEGraph, TestMoEBadExpert, TestMoECapacity
full|launches|55|70|TestBackToBack, TestCapture, TestGroups, TestConvenience, TestParamConvenience, TestPlacementAndAliasing, the barrier and heap tests, TestLaunchTail
full|faults|100|94|the fault tests (refused and mismatched launches included) and TestBarrierVisibility and TestProbeProcessWorld in both worlds, the platform tests, irisgen probe in both worlds, the downstream example in both worlds
full|proc-catalogue-a|50|64|irisgen run -n N: TestProcessWorld's catalogue up to 64Mi, the variants of catalogue-a
full|proc-catalogue-b|50|62|irisgen run -n N: TestProcessWorld's catalogue up to 64Mi, the variants of catalogue-b
full|proc-catalogue-c|50|182|irisgen run -n N: TestProcessWorld's catalogue up to 64Mi, the variants of catalogue-c
full|proc-params|105|240|irisgen run -n N: TestProcessWorld's collectives with parameters up to 64Mi (matrix, rules, back-to-back, capture)
full|proc-moe|40|69|irisgen run -n N: TestProcessWorld's MoE cases and graph
full|proc-rest|75|52|irisgen run -n N: TestProcessWorld's barriers, back-to-back and rules, convenience calls, capture, groups; TestRMSNormProcessWorld up to 2048 tokens
sanitize|memcheck-catalogue-a|34|65|memcheck: catalogue-a at full sizes
sanitize|memcheck-catalogue-b|33|68|memcheck: catalogue-b at full sizes
sanitize|memcheck-catalogue-c|69|190|memcheck: catalogue-c at full sizes
sanitize|memcheck-large|34|56|memcheck: TestLargeOffsets, TestParamLargeOffsets
sanitize|memcheck-params|65|158|memcheck: TestParamCollectives up to 64Mi, TestParamRules
sanitize|memcheck-rmsnorm|23|33|memcheck: TestRMSNorm and TestRMSNormAuto up to 2048 tokens, TestRMSNormRules
sanitize|memcheck-moe|65|92|memcheck: TestMoE (with 8192 x 7168), TestMoEGraph, TestMoEBadExpert, TestMoECapacity
sanitize|memcheck-b2b|53|108|memcheck: TestBackToBack, TestParamBackToBack, TestRMSNormBackToBack, TestGroups
sanitize|memcheck-capture|10|20|memcheck: TestCapture, TestParamCapture, TestRMSNormCapture, TestConvenience, TestParamConvenience, TestPlacementAndAliasing, the barrier and heap tests
sanitize|memcheck-processes-a|40|70|memcheck, irisgen run -n N, quick sizes: TestProcessWorld's barriers, catalogue, back-to-back and rules, convenience calls, capture and groups; TestRMSNormProcessWorld
sanitize|memcheck-processes-b|41|92|memcheck, irisgen run -n N, quick sizes: TestProcessWorld's MoE cases and graph and collectives with parameters
sanitize|racecheck-catalogue|63|107|racecheck: TestCatalogue at quick sizes
sanitize|racecheck-params|67|187|racecheck: TestParamCollectives, TestParamRules at quick sizes
sanitize|racecheck-rmsnorm|94|114|racecheck: TestRMSNorm, TestRMSNormAuto, TestRMSNormRules at quick sizes
sanitize|racecheck-moe|68|107|racecheck: TestMoE, TestMoEGraph, TestMoEBadExpert, TestMoECapacity at quick sizes
sanitize|racecheck-b2b|333|431|racecheck: TestBackToBack, TestParamBackToBack, TestRMSNormBackToBack, TestGroups at quick sizes
sanitize|racecheck-capture|146|179|racecheck: TestCapture, TestParamCapture, TestRMSNormCapture, TestConvenience, TestParamConvenience, TestPlacementAndAliasing, the barrier and heap tests
sanitize|synccheck-catalogue|18|42|synccheck: as racecheck-catalogue
sanitize|synccheck-params|18|62|synccheck: as racecheck-params
sanitize|synccheck-rmsnorm|11|17|synccheck: as racecheck-rmsnorm
sanitize|synccheck-moe|22|29|synccheck: as racecheck-moe
sanitize|synccheck-b2b|46|77|synccheck: as racecheck-b2b
sanitize|synccheck-capture|10|16|synccheck: as racecheck-capture
sanitize|initcheck-catalogue-a|95|185|initcheck: TestCatalogue at quick sizes, all_reduce
sanitize|initcheck-catalogue-b|70|170|initcheck: TestCatalogue at quick sizes, reduce_scatter, all_gather, all_to_all
sanitize|initcheck-params-a|75|280|initcheck: TestParamCollectives at quick sizes, broadcast and gather but lamport
sanitize|initcheck-params-b|100|383|initcheck: TestParamCollectives at quick sizes, reduce and scatter but lamport
sanitize|initcheck-params-c|60|215|initcheck: TestParamCollectives at quick sizes, send_recv and shift push and pull; TestParamRules
sanitize|initcheck-params-d|150|480|initcheck: send_recv's and shift's copy_push at quick sizes as processes: TestProcessWorld's params part (irisgen run -n N, a sanitizer to a rank)
sanitize|initcheck-lamport|75|330|initcheck: TestParamCollectives at quick sizes, the lamport variants (broadcast lamport and lamport_relay, reduce, gather, scatter, send_recv)
sanitize|initcheck-rmsnorm|110|190|initcheck: as racecheck-rmsnorm
sanitize|initcheck-moe-a|160|215|initcheck: TestMoE's f32 cases at quick sizes (f16 is left out)
sanitize|initcheck-moe-b|293|460|initcheck: TestMoE's bf16 cases at quick sizes, TestMoEGraph (10 graph rounds), TestMoEBadExpert, TestMoECapacity
sanitize|initcheck-b2b-a|161|360|initcheck: TestBackToBack and TestGroups at quick sizes, 10 rounds a case
sanitize|initcheck-b2b-b|160|330|initcheck: TestParamBackToBack and TestRMSNormBackToBack at quick sizes, 10 rounds a case
sanitize|initcheck-capture|178|550|initcheck: as racecheck-capture but the copy-engine variants, 10 rounds a case
sanitize|initcheck-capture-copy|150|300|initcheck: the copy-engine variants' capture alone, 10 rounds a case: TestProcessWorld's capture part (irisgen run -n N), then TestCapture and TestParamCapture in-process (where their replays hung on 2 H100s: docs/testing-gpu.md)
EOF
}

# The quick tier's in-process step runs every test but the multi-process
# world's (its processes step runs them).
QUICK_SKIP='^(TestProcessWorld|TestRMSNormProcessWorld)$'
# The variant sets of the catalogue's shards (IRISGEN_TEST_VARIANTS), and
# the test families as -test.run patterns.
VARIANTS_A='^all_reduce/(one_shot|one_shot_staged|one_shot_push|one_shot_lamport)$'
VARIANTS_B='^all_reduce/(two_shot|atomic|spinlock|ring)$'
VARIANTS_C='^(reduce_scatter|all_gather|all_to_all)/'
LARGE='^(TestLargeOffsets|TestParamLargeOffsets)$'
MOE='^(TestMoE|TestMoEGraph|TestMoEBadExpert|TestMoECapacity)$'
# initcheck takes TestMoE in two halves by dtype (its third name level):
# all of it, about 330 s on 2 GPUs, would not fit a shard on 4.
MOE_HALF='^TestMoE$/^world[0-9]+$/^(f32|f16)$'
LAUNCHES='^(TestBackToBack|TestCapture|TestGroups|TestConvenience|TestParamConvenience|TestPlacementAndAliasing|TestHeapTranslation|TestHostBarrier|TestDeviceBarrier|TestBarrierTimeout|TestLaunchTail)$'
FAULTS='^(TestFaultTimeoutRecovery|TestFaultKilledRank|TestFaultReplay|TestFaultRefusedLaunch|TestFaultRefusedCopyLaunch|TestFaultCopyReleasePending|TestFaultMismatchedLaunch|TestGraphUseGuard|TestBarrierVisibility|TestProbeProcessWorld)$'
# The sanitizers' families: the kernel tests, without the timing and fault
# tests (a sanitizer adds nothing to what they check, and slows the timings
# they assert).
# The copy-engine variants' tests, which the quick tier runs again with
# IRISGEN_PEER_WRITES=0: their barriers then copy their flags into the
# peers' memory, as on CUDA 13.1 and later drivers.
COPY_TESTS='^(TestCatalogue|TestCapture|TestBackToBack|TestParamCollectives|TestParamBackToBack|TestParamCapture|TestFaultRefusedCopyLaunch)$'
SAN_CATALOGUE='^TestCatalogue$'
SAN_PARAMS='^(TestParamCollectives|TestParamRules)$'
SAN_RMSNORM='^(TestRMSNorm|TestRMSNormAuto|TestRMSNormRules)$'
SAN_B2B='^(TestBackToBack|TestParamBackToBack|TestRMSNormBackToBack|TestGroups)$'
# initcheck's b2b in two halves of SAN_B2B: whole, it did not fit 8 minutes
# on 4 GPUs.
SAN_B2B_A='^(TestBackToBack|TestGroups)$'
SAN_B2B_B='^(TestParamBackToBack|TestRMSNormBackToBack)$'
SAN_CAPTURE='^(TestCapture|TestParamCapture|TestRMSNormCapture|TestConvenience|TestParamConvenience|TestPlacementAndAliasing|TestHeapTranslation|TestHostBarrier|TestDeviceBarrier|TestBarrierTimeout)$'
# initcheck's shards of the catalogue and of the collectives with
# parameters, by variant: whole, each took 209 and 390 s on 2 H100s and
# would not fit a shard on 4.
INIT_CATALOGUE_A='^all_reduce/'
INIT_PARAMS_A='^(broadcast|gather)/(push|pull|scatter_gather|copy_push)$'
INIT_PARAMS_B='^(reduce|scatter)/(push|pull|split|relay|copy_push)$'
INIT_PARAMS_C='^(send_recv|shift)/(push|pull)$'
# Their copy-engine variants apart: under initcheck in a world of 4 a
# rank's cuMemcpyAsync of send_recv copy_push never returned.
INIT_PARAMS_D='^(send_recv|shift)/copy_push$'
# The Lamport variants apart: with them params-b would not fit a shard on 4
# GPUs (it took 402 s without them).
INIT_PARAMS_LAMPORT='/lamport(_relay)?$'
# The copy-engine variants (IRISGEN_TEST_VARIANTS), and the tests that
# capture them: initcheck takes their replays in a shard of their own.
COPY_VARIANTS='copy_push$'
COPY_CAPTURE='^(TestCapture|TestParamCapture)$'

# shard_steps TIER NAME: the shard's steps (gotest, procs, cmd below).
shard_steps() {
  local tier=$1 name=$2
  QUICK=
  ROUNDS=
  DTYPES=
  SAN=()
  case $tier in
  quick)
    QUICK=1
    case $name in
    inprocess)
      cmd platform "$BIN/platform.test" -test.v -test.count=1
      gotest suite . "$QUICK_SKIP"
      gotest copies-without-peer-writes "$COPY_TESTS" '' IRISGEN_PEER_WRITES=0 IRISGEN_TEST_VARIANTS="$COPY_VARIANTS"
      cmd probe "$BIN/irisgen" probe
      cmd downstream "${DOWNSTREAM[@]}" "$BIN/stencil" -quick
      ;;
    processes)
      procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=barriers,catalogue,capture,groups
      procs rmsnorm-process-world '^TestRMSNormProcessWorld$'
      procs process-world-without-peer-writes '^TestProcessWorld$' IRISGEN_TEST_PARTS=catalogue,capture IRISGEN_PEER_WRITES=0 IRISGEN_TEST_VARIANTS="$COPY_VARIANTS"
      procs_cmd downstream-processes "${DOWNSTREAM[@]}" "$BIN/irisgen" run -n WORLD -- "$BIN/stencil" -quick
      ;;
    *) return 1 ;;
    esac
    ;;
  full)
    case $name in
    catalogue-a) gotest catalogue '^TestCatalogue$' '' IRISGEN_TEST_VARIANTS="$VARIANTS_A" ;;
    catalogue-b) gotest catalogue '^TestCatalogue$' '' IRISGEN_TEST_VARIANTS="$VARIANTS_B" ;;
    catalogue-c) gotest catalogue '^TestCatalogue$' '' IRISGEN_TEST_VARIANTS="$VARIANTS_C" ;;
    large) gotest large "$LARGE" ;;
    params) gotest params '^(TestParamCollectives|TestParamRules|TestParamBackToBack|TestParamCapture)$' ;;
    rmsnorm) gotest rmsnorm '^(TestRMSNorm|TestRMSNormAuto|TestRMSNormRules|TestRMSNormBackToBack|TestRMSNormCapture)$' ;;
    moe) gotest moe "$MOE" ;;
    launches) gotest launches "$LAUNCHES" ;;
    faults)
      cmd platform "$BIN/platform.test" -test.v -test.count=1
      gotest faults "$FAULTS"
      cmd probe "$BIN/irisgen" probe -replays 100
      procs_cmd probe-processes "$BIN/irisgen" run -n WORLD -- "$BIN/irisgen" probe -replays 20
      cmd downstream "${DOWNSTREAM[@]}" "$BIN/stencil"
      procs_cmd downstream-processes "${DOWNSTREAM[@]}" "$BIN/irisgen" run -n WORLD -- "$BIN/stencil"
      ;;
    proc-catalogue-a) procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=catalogue IRISGEN_TEST_VARIANTS="$VARIANTS_A" ;;
    proc-catalogue-b) procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=catalogue IRISGEN_TEST_VARIANTS="$VARIANTS_B" ;;
    proc-catalogue-c) procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=catalogue IRISGEN_TEST_VARIANTS="$VARIANTS_C" ;;
    proc-params) procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=params,paramrest ;;
    proc-moe) procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=moe,moegraph ;;
    proc-rest)
      procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=barriers,b2b,convenience,capture,groups
      procs rmsnorm-process-world '^TestRMSNormProcessWorld$'
      ;;
    *) return 1 ;;
    esac
    ;;
  sanitize)
    local tool=${name%%-*} family=${name#*-}
    case $tool in
    memcheck) ;;
    racecheck | synccheck) QUICK=1 ;; # see docs/testing-gpu.md: their hazards do not depend on the size
    # and 10 rounds a back-to-back or replay case, not 100; f32 and bf16,
    # not f16: its kernels take bf16's code paths (2-byte elements), and an
    # uninitialised read comes from a code path (docs/testing-gpu.md)
    initcheck) QUICK=1 ROUNDS=10 DTYPES=f32,bf16 ;;
    *) return 1 ;;
    esac
    SAN=("$SANITIZER" --tool "$tool" --error-exitcode 3 --target-processes all)
    case $tool/$family in
    memcheck/catalogue-a) gotest catalogue "$SAN_CATALOGUE" '' IRISGEN_TEST_VARIANTS="$VARIANTS_A" ;;
    memcheck/catalogue-b) gotest catalogue "$SAN_CATALOGUE" '' IRISGEN_TEST_VARIANTS="$VARIANTS_B" ;;
    memcheck/catalogue-c) gotest catalogue "$SAN_CATALOGUE" '' IRISGEN_TEST_VARIANTS="$VARIANTS_C" ;;
    memcheck/large) gotest large "$LARGE" ;;
    memcheck/processes-a)
      QUICK=1
      procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=barriers,catalogue,b2b,convenience,capture,groups
      procs rmsnorm-process-world '^TestRMSNormProcessWorld$'
      ;;
    memcheck/processes-b)
      QUICK=1
      procs process-world '^TestProcessWorld$' IRISGEN_TEST_PARTS=moe,moegraph,params,paramrest
      ;;
    initcheck/catalogue-a) gotest catalogue "$SAN_CATALOGUE" '' IRISGEN_TEST_VARIANTS="$INIT_CATALOGUE_A" ;;
    initcheck/catalogue-b) gotest catalogue "$SAN_CATALOGUE" '' IRISGEN_TEST_VARIANTS="$VARIANTS_C" ;;
    initcheck/params-a) gotest params '^TestParamCollectives$' '' IRISGEN_TEST_VARIANTS="$INIT_PARAMS_A" ;;
    initcheck/params-b) gotest params '^TestParamCollectives$' '' IRISGEN_TEST_VARIANTS="$INIT_PARAMS_B" ;;
    initcheck/params-c) gotest params "$SAN_PARAMS" '' IRISGEN_TEST_VARIANTS="$INIT_PARAMS_C" ;;
    initcheck/lamport) gotest params '^TestParamCollectives$' '' IRISGEN_TEST_VARIANTS="$INIT_PARAMS_LAMPORT" ;;
    # The copy_push variants as processes, a sanitizer to a rank (the
    # matrix alone: no replays, which initcheck cannot run). Not
    # in-process: there, in a world of 4, one rank's host thread never
    # comes back from an async copy under initcheck while the same cases
    # pass as processes (docs/testing-gpu.md).
    initcheck/params-d) procs params-copy-processes '^TestProcessWorld$' IRISGEN_TEST_PARTS=params IRISGEN_TEST_VARIANTS="$INIT_PARAMS_D" ;;
    */catalogue) gotest catalogue "$SAN_CATALOGUE" ;;
    */params) gotest params "$SAN_PARAMS" ;;
    */rmsnorm) gotest rmsnorm "$SAN_RMSNORM" ;;
    initcheck/moe-a) gotest moe "$MOE_HALF" ;;
    initcheck/moe-b) gotest moe "$MOE" "$MOE_HALF" ;;
    */moe) gotest moe "$MOE" ;;
    */b2b) gotest b2b "$SAN_B2B" ;;
    initcheck/b2b-a) gotest b2b "$SAN_B2B_A" ;;
    initcheck/b2b-b) gotest b2b "$SAN_B2B_B" ;;
    initcheck/capture) gotest capture "$SAN_CAPTURE" '' IRISGEN_TEST_SKIP_VARIANTS="$COPY_VARIANTS" ;;
    initcheck/capture-copy)
      # As processes first, a sanitizer to a rank, then in-process, one
      # sanitizer for every rank (where they hung): the two tell a limit
      # of the tool from a fault of the copies.
      graph_wait
      if [ -n "${TOOL_HANG:-}" ]; then
        note "== capture-copy: not run: the sanitizer hangs on graph_wait, which runs no irisgen code, so a hang in these replays would tell nothing of irisgen (result TOOL_LIMIT)"
      else
        procs capture-copy-processes '^TestProcessWorld$' IRISGEN_TEST_PARTS=capture IRISGEN_TEST_VARIANTS="$COPY_VARIANTS"
        gotest capture-copy "$COPY_CAPTURE" '' IRISGEN_TEST_VARIANTS="$COPY_VARIANTS"
      fi
      ;;
    */capture) gotest capture "$SAN_CAPTURE" ;;
    *) return 1 ;;
    esac
    ;;
  *) return 1 ;;
  esac
}

# --- describing (-tests) -------------------------------------------------

# In describe mode the step functions print
# "shard<TAB>kind<TAB>run<TAB>skip<TAB>variants<TAB>skipped variants<TAB>parts"
# instead of running.
DESCRIBE=
describe() { # describe KIND RUN SKIP VAR=VAL...
  local kind=$1 run=$2 skip=$3 v variants="" skipvariants="" parts=""
  shift 3
  for v in "$@"; do
    case $v in
    IRISGEN_TEST_VARIANTS=*) variants=${v#*=} ;;
    IRISGEN_TEST_SKIP_VARIANTS=*) skipvariants=${v#*=} ;;
    IRISGEN_TEST_PARTS=*) parts=${v#*=} ;;
    esac
  done
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$CUR_SHARD" "$kind" "$run" "$skip" "$variants" "$skipvariants" "$parts"
}

# --- running --------------------------------------------------------------

# The downstream example runs in its own module directory, as a user's
# repository would (irisgen reads its irisgen.yaml there).
DOWNSTREAM=(env -C tests/downstream)

now() { date +%s; }
time_left() { # seconds the shard under way may still take (run_left within SHARD_DEADLINE)
  local left
  left=$(run_left)
  if [ -n "$SHARD_DEADLINE" ] && [ $((SHARD_DEADLINE - $(now))) -lt "$left" ]; then left=$((SHARD_DEADLINE - $(now))); fi
  echo "$left"
}
run_left() { # seconds this run may still take; a large number without a limit
  if [ "$CALL_LIMIT" -le 0 ]; then echo 1000000; else echo $((CALL_START + CALL_LIMIT - $(now))); fi
}
# limit_name: which limit time_left is now (for the messages).
limit_name() {
  if [ "$(time_left)" -lt "$(run_left)" ]; then
    echo "the shard's time limit (SHARD_LIMIT, ${SHARD_SECONDS}s: it may hang, see its log)"
  else
    echo "the run's time limit (CALL_LIMIT)"
  fi
}
SHARD_DEADLINE=

# counters of the shard under way
reset_counts() { PASSED=0 FAILED=0 SKIPPED=0 CASES=0 ERRORS=0 HAZARDS=0 KINDS="" CUT=0 TOOL_HANG=""; }

# tally LOGFILE MODE RC: adds a step's results to the counters. MODE go: the
# test binary's own results; procs: rank 0's of `irisgen run`; cmd: one
# program, passed when it exits 0.
tally() {
  local f=$1 mode=$2 rc=$3 p f_ s c e h
  case $mode in
  go) read -r p f_ s < <(awk '/^--- PASS: Test/{p++} /^--- FAIL: Test/{f++} /^--- SKIP: Test/{s++} END{print p+0, f+0, s+0}' "$f") ;;
  procs) read -r p f_ s < <(awk '/^\[rank 0\] --- PASS: Test/{p++} /^\[rank 0\] --- FAIL: Test/{f++} /^\[rank 0\] --- SKIP: Test/{s++} END{print p+0, f+0, s+0}' "$f") ;;
  cmd) p=0 f_=0 s=0 ;;
  esac
  if [ "$rc" -eq 0 ] && [ $((p + f_ + s)) -eq 0 ] && [ "$mode" != cmd ]; then
    note "== no test ran: a pattern that matches nothing is a failure"
    f_=1
  fi
  if [ "$mode" = cmd ]; then
    if [ "$rc" -eq 0 ]; then p=1; else f_=1; fi
  elif [ "$rc" -ne 0 ] && [ "$f_" -eq 0 ]; then
    f_=1 # a crash, a timeout, a failed rank other than 0, a sanitizer's report
  fi
  c=$(awk '
    /^(\[rank 0\] )?IRISGEN_CASES [0-9]+ / { sub(/^\[rank 0\] /, ""); n += $2 }
    /^(\[rank 0\] )?all [0-9]+ claims hold/ { sub(/^\[rank 0\] /, ""); n += $2 }
    /^(\[rank 0\] )?stencil: .*: [0-9]+ cases passed/ { for (i = 1; i < NF; i++) if ($(i+1) == "cases" && $(i+2) == "passed") n += $i }
    END { print n + 0 }' "$f")
  e=$(awk '/ERROR SUMMARY: [0-9]+ error/ { for (i = 1; i < NF; i++) if ($i == "SUMMARY:") n += $(i+1) } END { print n + 0 }' "$f")
  h=$(awk '/RACECHECK SUMMARY: [0-9]+ hazard/ { for (i = 1; i < NF; i++) if ($i == "SUMMARY:") n += $(i+1) } END { print n + 0 }' "$f")
  PASSED=$((PASSED + p)) FAILED=$((FAILED + f_)) SKIPPED=$((SKIPPED + s))
  CASES=$((CASES + c)) ERRORS=$((ERRORS + e)) HAZARDS=$((HAZARDS + h))
}

# step NAME MODE KIND ENV... -- CMD...: runs CMD with ENV, within the time
# left, appends its output to the shard's log and tallies it.
step() {
  local name=$1 mode=$2 kind=$3 left rc t0 out
  shift 3
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  case " $KINDS " in *" $kind "*) ;; *) KINDS="${KINDS:+$KINDS }$kind" ;; esac
  left=$(time_left)
  if [ "$left" -le 15 ]; then
    echo "== $name: not started, the time is up: $(limit_name)" | tee -a "$SHARD_LOG"
    FAILED=$((FAILED + 1)) CUT=$((CUT + 1))
    return
  fi
  out=$(mktemp)
  echo "== $name: ${envs[*]} $*" | tee -a "$SHARD_LOG"
  t0=$SECONDS
  env "${envs[@]}" timeout -k 10 "$left" "$@" >"$out" 2>&1
  rc=$?
  cat "$out" >>"$SHARD_LOG"
  if [ "$rc" -ne 0 ]; then
    grep -E -- '--- FAIL' "$out" | head -n 40
    tail -n 20 "$out"
  fi
  tally "$out" "$mode" "$rc"
  # Stopped at the run's limit: by timeout, or by the test binary's own
  # -test.timeout, which the limit sets. The failure that brings is the
  # cut's, not a test's (the shard is CUT, unless a test failed before).
  if [ "$rc" -eq 124 ] || { [ "$rc" -ne 0 ] && grep -q 'panic: test timed out after' "$out"; }; then
    CUT=$((CUT + 1))
    note "== $name: stopped at $(limit_name): rerun the shard with more time"
  fi
  note "== $name: rc=$rc in $((SECONDS - t0))s"
  rm -f "$out"
}

note() { echo "$*" | tee -a "$SHARD_LOG"; }

# test_env: the environment of a suite step.
test_env() {
  local e=("IRISGEN_TEST_WORLDS=$WORLDS")
  [ -n "$QUICK" ] && e+=(IRISGEN_TEST_QUICK=1)
  [ -n "$ROUNDS" ] && e+=("IRISGEN_TEST_ROUNDS=$ROUNDS")
  [ -n "$DTYPES" ] && e+=("IRISGEN_TEST_DTYPES=$DTYPES")
  printf '%s\n' "${e[@]}"
}

# gotest NAME RUN SKIP VAR=VAL...: the suite in the in-process world (every
# world of WORLDS, and the multi-process parts of the tests that run both).
gotest() {
  local name=$1 run=$2 skip=${3:-}
  shift 2
  [ $# -gt 0 ] && shift
  if [ -n "$DESCRIBE" ]; then describe gotest "$run" "$skip" "$@"; return; fi
  local left envs=()
  mapfile -t envs < <(test_env)
  left=$(time_left)
  local args=(-test.v -test.count=1 -test.timeout "$((left > 40 ? left - 20 : 20))s" -test.run "$run")
  [ -n "$skip" ] && args+=(-test.skip "$skip")
  [ "${PROFILE:-}" = 1 ] && args+=(-test.cpuprofile "$LOG/profile-${SHARD_TAG:-$name}-$name.pprof")
  step "$name" go in-process "${envs[@]}" "$@" -- "${SAN[@]}" "$BIN/gpu.test" "${args[@]}"
}

# procs NAME RUN VAR=VAL...: the test binary as the ranks of a multi-process
# world of every size of WORLDS, started by irisgen run.
procs() {
  local name=$1 run=$2 w left envs=()
  shift 2
  if [ -n "$DESCRIBE" ]; then describe procs "$run" "" "$@"; return; fi
  mapfile -t envs < <(test_env)
  for w in ${WORLDS//,/ }; do
    left=$(time_left)
    step "$name-w$w" procs processes "${envs[@]}" "$@" -- \
      "$BIN/irisgen" run -n "$w" -- "${SAN[@]}" "$BIN/gpu.test" -test.v -test.count=1 \
      -test.timeout "$((left > 40 ? left - 20 : 20))s" -test.run "$run"
  done
}

# cmd NAME CMD...: a program on every GPU (probe, the downstream example)
# or the platform tests; procs_cmd NAME CMD...: `irisgen run` in CMD starts
# a multi-process world of every size of WORLDS (WORLD in CMD stands for
# the size).
cmd() {
  local name=$1
  shift
  [ -n "$DESCRIBE" ] && return
  if [ "$name" = platform ]; then
    step "$name" go in-process -- "$@"
  else
    step "$name" cmd in-process -- "$@"
  fi
}

procs_cmd() {
  local name=$1 w
  shift
  [ -n "$DESCRIBE" ] && return
  for w in ${WORLDS//,/ }; do
    step "$name-w$w" cmd processes -- "${@/#WORLD/$w}"
  done
}

# graph_wait: $BIN/graph_wait (tests/gpu/sanitizer/graph_wait.cu, built by
# make gpu-kernels; two GPUs' graphs that wait on flags the other writes,
# with no irisgen code) plainly and under the shard's sanitizer,
# GRAPH_WAIT_LIMIT seconds each (60), its verdict in the shard's log. Not
# tallied: it tests the tool, not irisgen. A hang under the sanitizer alone
# is the tool's: TOOL_HANG is set, and the shard's replays are not run (its
# result is TOOL_LIMIT) instead of hanging until its time limit.
graph_wait() {
  [ -n "$DESCRIBE" ] && return
  local bin=$BIN/graph_wait plain san
  if [ ! -x "$bin" ]; then
    note "== graph_wait: $bin not built (make gpu-kernels builds it): no verdict on the tool"
    return
  fi
  plain=$(bounded "$bin" 10)
  san=$(bounded "${SAN[@]}" "$bin" 10)
  note "== graph_wait (the tool alone, no irisgen code): plain: $plain; sanitizer: $san"
  [ "$plain" = ok ] && [ "${san%% *}" = hung ] && TOOL_HANG=1
  return 0
}

# bounded CMD...: CMD within GRAPH_WAIT_LIMIT seconds (60), its output in
# the shard's log; prints how it ended: ok, hung (...) or failed (...).
bounded() {
  local lim=${GRAPH_WAIT_LIMIT:-60} rc
  timeout -k 5 "$lim" "$@" >>"$SHARD_LOG" 2>&1
  rc=$?
  case $rc in
  0) echo ok ;;
  124 | 137) echo "hung (stopped after $lim s)" ;;
  *) echo "failed (exit $rc)" ;;
  esac
}

# run_shard TIER NAME: one shard, its result line and files.
run_shard() {
  local tier=$1 name=$2 t0 result
  SHARD_LOG=$LOG/log-$tier-$name.txt
  SHARD_TAG=$tier-$name
  RESULT=$LOG/result-$tier-$name.txt
  : >"$SHARD_LOG"
  reset_counts
  t0=$(now)
  local est left
  SHARD_DEADLINE=
  est=$(estimate "$tier" "$name") left=$(time_left)
  SHARD_SECONDS=${SHARD_LIMIT:-$((3 * est > 120 ? 3 * est : 120))}
  [ "$SHARD_SECONDS" -gt 0 ] && SHARD_DEADLINE=$(($(now) + SHARD_SECONDS))
  if [ "$left" -le 15 ] || [ "$left" -lt $((est / 2)) ]; then
    result=NOT_RUN
    echo "== $tier/$name: not started: ${left}s left of the run (CALL_LIMIT), the shard takes about ${est}s" | tee -a "$SHARD_LOG"
  elif [ "$tier" = sanitize ] && [ -z "$SANITIZER" ]; then
    result=FAIL
    FAILED=1
    echo "== $tier/$name: compute-sanitizer not found (set COMPUTE_SANITIZER)" | tee -a "$SHARD_LOG"
  else
    echo "== shard $tier/$name on worlds $WORLDS" | tee -a "$SHARD_LOG"
    shard_steps "$tier" "$name"
    result=PASS
    if [ "$ERRORS" -gt 0 ] || [ "$HAZARDS" -gt 0 ] || [ "$FAILED" -gt "$CUT" ]; then
      result=FAIL
    elif [ "$CUT" -gt 0 ]; then
      result=CUT
    elif [ -n "${TOOL_HANG:-}" ] && [ $((PASSED + FAILED)) -eq 0 ]; then
      result=TOOL_LIMIT
    fi
  fi
  local line
  line="tier=$tier shard=$name worlds=$WORLDS kinds=${KINDS// /+} tests=$((PASSED + FAILED + SKIPPED)) passed=$PASSED failed=$FAILED skipped=$SKIPPED"
  line+=" cases=$CASES sanitizer_errors=$ERRORS hazards=$HAZARDS seconds=$(($(now) - t0)) gpus=\"$DEVICE\"${CUDA_VISIBLE_DEVICES:+ gpu_ids=$CUDA_VISIBLE_DEVICES} driver=$DRIVER date=$(date -u +%Y-%m-%dT%H:%M:%SZ) result=$result"
  echo "$line" >"$RESULT"
  echo "RESULT $line"
  [ "$result" = PASS ]
}

# --- the command line -------------------------------------------------------

tier_shards() { shard_table | awk -F'|' -v t="$1" '$1 == t { print $2 }'; }

# estimate TIER NAME: the shard's estimated seconds in its largest world
# (the table's 2-GPU column up to a world of 2, else the 4-GPU column).
estimate() {
  local max=0 w
  for w in ${WORLDS//,/ }; do [ "$w" -gt "$max" ] && max=$w; done
  shard_table | awk -F'|' -v t="$1" -v n="$2" -v c=$((max > 2 ? 4 : 3)) '$1 == t && $2 == n { print $c }'
}

list() {
  local t
  for t in ${1:-quick full sanitize}; do
    echo "$t:"
    shard_table | awk -F'|' -v t="$t" '$1 == t { printf "  %-22s ~%4ds on 2 GPUs, ~%4ds on 4 GPUs  %s\n", $2, $3, $4, $5; a += $3; b += $4 }
      END { printf "  %-22s ~%4ds on 2 GPUs, ~%4ds on 4 GPUs  (one call runs up to CALL_LIMIT seconds of them)\n", "total", a, b }'
  done
}

# AWK_FIELDS: fields() reads a result line ($0) into f[key] (quotes off).
AWK_FIELDS='
  function fields(  s, kv, k, v) {
    split("", f); s = $0
    while (match(s, /[a-z_]+=("[^"]*"|[^ ]*)/)) {
      kv = substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH)
      k = kv; sub(/=.*/, "", k); v = kv; sub(/^[^=]*=/, "", v); gsub(/"/, "", v); f[k] = v
    }
  }'

valid_tier() {
  case $1 in quick | full | sanitize) return 0 ;; esac
  echo "run.sh: no tier $1: quick, full or sanitize (run.sh -list)" >&2
  return 1
}

case ${1:-} in
-list)
  [ -z "${2:-}" ] || valid_tier "$2" || exit 2
  list "${2:-}"
  exit 0
  ;;
-rows)
  [ $# -ge 3 ] || { echo "usage: run.sh -rows KIND result-*.txt" >&2; exit 2; }
  kind=$2
  shift 2
  awk -v kind="$kind" "$AWK_FIELDS"'
    {
      fields()
      r = f["result"]
      if (f["tier"] == "sanitize") r = r " (" f["sanitizer_errors"] " errors, " f["hazards"] " hazards)"
      if (f["gpu_ids"] != "") f["gpus"] = f["gpus"] " (GPUs " f["gpu_ids"] ")"
      printf "| %s | %s | %s | %s | %s | %s | %s/%s/%s | %s | %s | %s | %s |\n", f["tier"], f["shard"], kind, f["gpus"], f["worlds"],
        f["kinds"], f["passed"], f["failed"], f["skipped"], f["cases"], f["seconds"], substr(f["date"], 1, 10), r
    }' "$@"
  exit 0
  ;;
-left)
  [ $# -ge 3 ] || { echo "usage: run.sh -left TIER WORLD [result-*.txt | docs/testing-gpu.md ...]" >&2; exit 2; }
  valid_tier "$2" || exit 2
  [[ $3 =~ ^[0-9]+$ ]] && [ "$3" -ge 2 ] || { echo "run.sh: -left: world $3: want a world size of 2 or more" >&2; exit 2; }
  tier=$2 world=$3
  shift 3
  for f in "$@"; do [ -r "$f" ] || { echo "run.sh: -left: $f: no such file" >&2; exit 2; }; done
  # The shards that a result line of this world passed (or found the
  # tool's limit in), then the tier's others with their estimates.
  # A file may be result lines or docs/testing-gpu.md's record: a row of
  # its tables (-rows' columns) counts for the shard it names, with or
  # without a footnote mark ("racecheck-params (a)") or as "SHARD's
  # tests, rerun ...".
  passed=$(awk -v t="$tier" -v w="$world" "$AWK_FIELDS"'
    /^\|/ {
      if (split($0, c, "|") < 13) next
      for (i in c) gsub(/^ +| +$/, "", c[i])
      tr = c[2]; shard = c[3]; worlds = c[6]; result = c[12]
      sub(/ \([a-z0-9]\)$/, "", shard); sub(/'"'"'s tests, rerun.*$/, "", shard)
    }
    !/^\|/ { fields(); tr = f["tier"]; shard = f["shard"]; worlds = f["worlds"]; result = f["result"] }
    tr == t && result ~ /^(PASS|TOOL_LIMIT)( |$)/ {
      n = split(worlds, ws, / *, */)
      for (i = 1; i <= n; i++) if (ws[i] == w) print shard
    }' /dev/null "$@")
  shard_table | awk -F'|' -v t="$tier" -v w="$world" -v c=$((world > 2 ? 4 : 3)) -v passed="$passed" '
    BEGIN { n = split(passed, p, "\n"); for (i = 1; i <= n; i++) ok[p[i]] = 1 }
    $1 == t && !ok[$2] { printf "  %-22s ~%4ds  %s\n", $2, $c, $5; left++; sum += $c }
    END { printf "%s in a world of %s: %d shard(s) left, ~%ds\n", t, w, left, sum }'
  exit 0
  ;;
-tests)
  valid_tier "${2:-}" || exit 2
  DESCRIBE=1 SANITIZER=compute-sanitizer
  for CUR_SHARD in $(tier_shards "$2"); do
    shard_steps "$2" "$CUR_SHARD" || { echo "run.sh: shard $CUR_SHARD of $2 has no steps" >&2; exit 1; }
  done
  exit 0
  ;;
-*)
  sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
  ;;
esac

LOG=${OUT:-$B/gpu-logs}
mkdir -p "$LOG"

if [ -n "${KERNELS_ONLY:-}" ]; then
  status=0
  "$B/irisgen" kernels -platform "$PLATFORM" || status=1
  "${DOWNSTREAM[@]}" "$BIN/irisgen" kernels -platform "$PLATFORM" || status=1
  # shellcheck disable=SC2046 # the code objects' paths have no spaces
  tar -czf "$LOG/kernels.tar.gz" $(ls generated/*/kernels/*.fatbin generated/*/kernels/*.hsaco \
    tests/downstream/internal/gen/*/kernels/*.fatbin tests/downstream/internal/gen/*/kernels/*.hsaco 2>/dev/null) || status=1
  echo "== code objects in $LOG/kernels.tar.gz: unpack at the repository root, then make gpu-build"
  exit $status
fi

TIER=${1:-${TIER:-quick}}
SHARD=${2:-${SHARD:-all}}
valid_tier "$TIER" || exit 2
CALL_LIMIT=${CALL_LIMIT:-570}
for v in CALL_LIMIT SHARD_LIMIT; do
  [[ ${!v:-0} =~ ^[0-9]+$ ]] || { echo "run.sh: $v=${!v}: want whole seconds (0: no limit)" >&2; exit 2; }
done
CALL_START=$(now)

for f in gpu.test platform.test irisgen stencil; do
  [ -x "$B/$f" ] || { echo "run.sh: $B/$f is missing: make gpu-build (or carry $B from a machine with Go)" >&2; exit 2; }
done

# The GPUs the tests see: CUDA_VISIBLE_DEVICES (indices) narrows them, so two
# runs of a world of 2 can share a machine of 4, each on its own pair. IDS:
# their indices (nvidia-smi's, in PCI bus order), as CUDA_VISIBLE_DEVICES
# takes them (LANES).
SMI_GPUS=()
[ -n "${CUDA_VISIBLE_DEVICES:-}" ] && SMI_GPUS=(-i "$CUDA_VISIBLE_DEVICES")
IDS=$(nvidia-smi --query-gpu=index --format=csv,noheader "${SMI_GPUS[@]}" 2>/dev/null | grep '^[0-9]' | paste -sd, -)
[ -n "$IDS" ] || IDS=${CUDA_VISIBLE_DEVICES:-} # an nvidia-smi that takes no list of ids
GPUS=$(tr ',' '\n' <<<"$IDS" | grep -c . || true)
DEVICE=$(nvidia-smi --query-gpu=name --format=csv,noheader "${SMI_GPUS[@]}" 2>/dev/null | sort | uniq -c | awk '{c=$1; $1=""; printf "%s%sx%s", (n++ ? ", " : ""), c, $0}')
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
DEVICE=${DEVICE:-unknown} DRIVER=${DRIVER:-unknown}
if [ -n "${IRISGEN_TEST_WORLDS:-}" ]; then
  WORLDS=$IRISGEN_TEST_WORLDS
elif [ "${GPUS:-0}" -lt 2 ]; then
  echo "run.sh: $GPUS GPU(s) here: the suite needs 2 or more, or IRISGEN_TEST_WORLDS (with IRISGEN_SHARE_GPUS=1 for worlds larger than the GPUs)" >&2
  exit 2
elif [ "$TIER" = quick ] && [ "$GPUS" -gt 2 ]; then
  WORLDS=2,$GPUS
else
  WORLDS=$GPUS
fi
SANITIZER=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || find /usr/local/cuda*/bin -name compute-sanitizer 2>/dev/null | head -n 1)}

ALL=$(tier_shards "$TIER")
case $SHARD in
all) SHARDS=$ALL ;;
*/*)
  i=${SHARD%/*} n=${SHARD#*/}
  if ! [[ $i =~ ^[0-9]+$ && $n =~ ^[0-9]+$ ]] || [ "$i" -lt 1 ] || [ "$i" -gt "$n" ]; then
    echo "run.sh: SHARD=$SHARD: want i/N with 1 <= i <= N" >&2
    exit 2
  fi
  SHARDS=$(echo "$ALL" | awk -v i="$i" -v n="$n" '(NR - i) % n == 0')
  ;;
*)
  SHARDS=${SHARD//,/ }
  for s in $SHARDS; do
    grep -qx -- "$s" <<<"$ALL" || { echo "run.sh: $TIER has no shard $s:" >&2; list "$TIER" >&2; exit 2; }
  done
  ;;
esac

# lanes: deals SHARDS to LANES runs of a world of 2, each on its own pair
# of the visible GPUs (the longest estimate first, to the lane with the
# least), runs them side by side and prints their result lines.
lanes() {
  local ids i s least pids=() status=0 lane=() load=()
  IFS=, read -r -a ids <<<"$IDS"
  if [ "$WORLDS" != 2 ] || [ "${#ids[@]}" -lt $((2 * LANES)) ]; then
    echo "run.sh: LANES=$LANES runs worlds of 2 side by side, each on a pair of GPUs: want IRISGEN_TEST_WORLDS=2 and $((2 * LANES)) GPUs or more (worlds $WORLDS, GPUs ${IDS:-none})" >&2
    return 2
  fi
  for ((i = 0; i < LANES; i++)); do lane[i]="" load[i]=0; done
  rm -f "$LOG"/lane-*.txt
  while read -r _ s; do
    least=0
    for ((i = 1; i < LANES; i++)); do [ "${load[i]}" -lt "${load[least]}" ] && least=$i; done
    lane[least]+="${lane[least]:+,}$s" load[least]=$((load[least] + $(estimate "$TIER" "$s")))
  done < <(for s in $SHARDS; do echo "$(estimate "$TIER" "$s") $s"; done | sort -rn)
  for ((i = 0; i < LANES; i++)); do
    [ -n "${lane[i]}" ] || continue
    echo "== lane $((i + 1)) on GPUs ${ids[2 * i]},${ids[2 * i + 1]}: ${lane[i]} (about ${load[i]}s; log $LOG/lane-$((i + 1)).txt)"
    # nvidia-smi numbers the GPUs in PCI bus order; make CUDA do the same.
    CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES="${ids[2 * i]},${ids[2 * i + 1]}" LANES=1 IRISGEN_TEST_WORLDS=2 \
      CALL_LIMIT=$([ "$CALL_LIMIT" -le 0 ] && echo 0 || run_left) OUT="$LOG" \
      bash "$PWD/tests/gpu/run.sh" "$TIER" "${lane[i]}" >"$LOG/lane-$((i + 1)).txt" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || status=1; done
  cat "$LOG"/lane-*.txt | grep '^RESULT '
  return $status
}

LANES=${LANES:-1}
[[ $LANES =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: LANES=$LANES: want a count of 1 or more" >&2; exit 2; }
if [ "$LANES" -gt 1 ]; then
  lanes
  exit $?
fi
status=0
for s in $SHARDS; do
  run_shard "$TIER" "$s" || status=1
done
exit $status

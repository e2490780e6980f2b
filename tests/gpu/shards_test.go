//go:build !gpu

package gpu_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// The shards of tests/gpu/run.sh, checked without a GPU: every test of the
// suite runs in the quick and the full tier, every part of the
// multi-process world in the full tier, every variant of the catalogue in
// exactly one of the full tier's catalogue shards of each world, and every
// kernel test under every sanitizer. A test added to the suite and to no
// shard fails here.

// shardStep is a line of `run.sh -tests TIER`.
type shardStep struct {
	shard, kind, run, skip, variants, skipVariants, parts string
}

func shardSteps(t *testing.T, tier string) []shardStep {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	out, err := exec.Command("bash", "run.sh", "-tests", tier).Output()
	if err != nil {
		t.Fatalf("run.sh -tests %s: %v", tier, err)
	}
	var steps []shardStep
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			t.Fatalf("run.sh -tests %s: line %q: want 7 fields", tier, line)
		}
		steps = append(steps, shardStep{f[0], f[1], f[2], f[3], f[4], f[5], f[6]})
	}
	return steps
}

// tierShards is the names of a tier's shards, in run.sh's order.
func tierShards(t *testing.T, tier string) []string {
	t.Helper()
	var names []string
	for _, s := range shardSteps(t, tier) {
		if !slices.Contains(names, s.shard) {
			names = append(names, s.shard)
		}
	}
	return names
}

// suiteFiles parses the suite's files (build tag gpu) and calls fn with each
// and the file set that places its nodes.
func suiteFiles(t *testing.T, fn func(fset *token.FileSet, f *ast.File)) {
	t.Helper()
	names, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if readHead(t, name) == "//go:build gpu" {
			fn(fset, f)
		}
	}
}

// readHead is the first line of the file name.
func readHead(t *testing.T, name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}

// noGPU are the tests of the suite's files that need no GPU: `make test`
// runs them, the shards need not.
var noGPU = []string{"TestSuiteCoversEveryVariant"}

// suiteTests are the top-level tests of the GPU suite that need a GPU.
func suiteTests(t *testing.T) []string {
	var tests []string
	suiteFiles(t, func(_ *token.FileSet, f *ast.File) {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") && !slices.Contains(noGPU, fd.Name.Name) {
				tests = append(tests, fd.Name.Name)
			}
		}
	})
	if len(tests) < 20 {
		t.Fatalf("found %d tests in the suite: the parse is broken", len(tests))
	}
	return tests
}

// processPartNames are the names of TestProcessWorld's parts (processParts).
func processPartNames(t *testing.T) []string {
	var names []string
	suiteFiles(t, func(_ *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "processParts" {
				return true
			}
			for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
				lit := e.(*ast.CompositeLit).Elts[0].(*ast.BasicLit)
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, s)
			}
			return false
		})
	})
	if len(names) == 0 {
		t.Fatal("processParts not found")
	}
	return names
}

// levels splits a -test.run or -test.skip pattern as the testing package
// does: at each slash outside brackets and parentheses, one regexp a level
// of a test's name.
func levels(pattern string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range pattern {
		switch c {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '/':
			if depth == 0 {
				out = append(out, pattern[start:i])
				start = i + 1
			}
		}
	}
	return append(out, pattern[start:])
}

// runs reports whether step runs the top-level test name, all of it or
// part of its subtests (a pattern of several levels).
func (s shardStep) runs(t *testing.T, name string) bool {
	ok, err := regexp.MatchString(levels(s.run)[0], name)
	if err != nil {
		t.Fatalf("shard %s: -test.run %q: %v", s.shard, s.run, err)
	}
	// A skip of several levels leaves the rest of the test to run.
	if skip := levels(s.skip); s.skip != "" && len(skip) == 1 {
		skipped, err := regexp.MatchString(skip[0], name)
		if err != nil {
			t.Fatalf("shard %s: -test.skip %q: %v", s.shard, s.skip, err)
		}
		ok = ok && !skipped
	}
	return ok
}

// TestShardsSplitTestsWhole: a shard that runs part of a test's subtests
// (a -test.run of several levels) has a partner under the same tool that
// runs the test skipping exactly that part, and the other way round, so
// that a test cut in two still runs whole.
func TestShardsSplitTestsWhole(t *testing.T) {
	tool := func(shard string) string { name, _, _ := strings.Cut(shard, "-"); return name }
	tests := suiteTests(t)
	for _, tier := range []string{"quick", "full", "sanitize"} {
		steps := shardSteps(t, tier)
		partner := func(s shardStep, match func(o shardStep) bool) bool {
			return slices.ContainsFunc(steps, func(o shardStep) bool { return o.shard != s.shard && tool(o.shard) == tool(s.shard) && match(o) })
		}
		// o runs every test that s runs part of.
		covers := func(o, s shardStep) bool {
			return !slices.ContainsFunc(tests, func(name string) bool { return s.runs(t, name) && !o.runs(t, name) })
		}
		for _, s := range steps {
			if len(levels(s.run)) > 1 && !partner(s, func(o shardStep) bool { return o.skip == s.run && covers(o, s) }) {
				t.Errorf("%s: shard %s runs part of a test (%q) and no shard runs the rest (-test.skip %q)", tier, s.shard, s.run, s.run)
			}
			if len(levels(s.skip)) > 1 && !partner(s, func(o shardStep) bool { return o.run == s.skip }) {
				t.Errorf("%s: shard %s skips part of a test (%q) that no shard runs", tier, s.shard, s.skip)
			}
		}
	}
}

// TestShardsSplitVariantsWhole: a shard that leaves variants out of its
// tests (IRISGEN_TEST_SKIP_VARIANTS) has a partner under the same tool that
// runs exactly those variants (IRISGEN_TEST_VARIANTS) in each of its tests
// that has them: the tests the quick tier runs with those variants alone.
func TestShardsSplitVariantsWhole(t *testing.T) {
	tool := func(shard string) string { name, _, _ := strings.Cut(shard, "-"); return name }
	tests, quick := suiteTests(t), shardSteps(t, "quick")
	for _, tier := range []string{"quick", "full", "sanitize"} {
		steps := shardSteps(t, tier)
		for _, s := range steps {
			if s.skipVariants == "" {
				continue
			}
			partner := func(o shardStep) bool { return tool(o.shard) == tool(s.shard) && o.variants == s.skipVariants }
			if !slices.ContainsFunc(steps, partner) {
				t.Errorf("%s: shard %s leaves out the variants %q and no %s shard runs them", tier, s.shard, s.skipVariants, tool(s.shard))
				continue
			}
			for _, name := range tests {
				has := slices.ContainsFunc(quick, func(q shardStep) bool { return q.variants == s.skipVariants && q.runs(t, name) })
				if has && s.runs(t, name) && !slices.ContainsFunc(steps, func(o shardStep) bool { return partner(o) && o.runs(t, name) }) {
					t.Errorf("%s: shard %s leaves the variants %q out of %s and no %s shard runs them there", tier, s.shard, s.skipVariants, name, tool(s.shard))
				}
			}
		}
	}
}

// TestShardsCopyVariants: the pattern the shards select the copy-engine
// variants with matches those and no other variant of the catalogue.
func TestShardsCopyVariants(t *testing.T) {
	var pattern string
	for _, s := range shardSteps(t, "quick") {
		if strings.Contains(s.run, "TestCapture") && s.variants != "" {
			pattern = s.variants
		}
	}
	if pattern == "" {
		t.Fatal("the quick tier has no step of the copy-engine variants alone")
	}
	re := regexp.MustCompile(pattern)
	copies := 0
	for _, e := range collectives.Catalogue {
		name := e.Collective + "/" + e.Variant
		isCopy := e.Descriptor().Engine == irismodel.EngineCopy
		if re.MatchString(name) != isCopy {
			t.Errorf("%s: copy engine: %v; matched by %q: %v", name, isCopy, pattern, !isCopy)
		}
		if isCopy {
			copies++
		}
	}
	if copies == 0 {
		t.Error("no copy-engine variant in the catalogue")
	}
}

func TestShardsRunEveryTest(t *testing.T) {
	tests := suiteTests(t)
	for _, tier := range []string{"quick", "full"} {
		steps := shardSteps(t, tier)
		for _, name := range tests {
			if !slices.ContainsFunc(steps, func(s shardStep) bool { return s.runs(t, name) }) {
				t.Errorf("tier %s: no shard runs %s (add it to a shard of tests/gpu/run.sh)", tier, name)
			}
		}
	}
}

// TestShardsRunEveryProcessPart: the full tier and memcheck split
// TestProcessWorld's parts between their shards and run every one.
func TestShardsRunEveryProcessPart(t *testing.T) {
	parts := processPartNames(t)
	for _, tier := range []string{"full", "sanitize"} {
		ran := map[string]bool{}
		for _, s := range shardSteps(t, tier) {
			if s.kind != "procs" || !s.runs(t, "TestProcessWorld") {
				continue
			}
			if s.parts == "" {
				t.Errorf("%s: shard %s runs every part of TestProcessWorld: the tier splits them", tier, s.shard)
			}
			for _, p := range strings.Split(s.parts, ",") {
				if !slices.Contains(parts, p) {
					t.Errorf("%s: shard %s: TestProcessWorld has no part %q (its parts: %v)", tier, s.shard, p, parts)
				}
				ran[p] = true
			}
		}
		for _, p := range parts {
			if !ran[p] {
				t.Errorf("%s: no shard runs TestProcessWorld's part %q", tier, p)
			}
		}
	}
}

// TestShardsSplitTheCatalogue: the full tier's catalogue shards of each
// world (in-process, processes), memcheck's and initcheck's split the
// catalogue's variants between them, each variant in exactly one; and
// initcheck's shards of the collectives with parameters (in-process, or
// as processes) split theirs.
func TestShardsSplitTheCatalogue(t *testing.T) {
	variantsOf := func(colls ...string) []string {
		var variants []string
		for _, e := range collectives.Catalogue {
			if slices.Contains(colls, e.Collective) {
				variants = append(variants, e.Collective+"/"+e.Variant)
			}
		}
		return variants
	}
	check := func(what string, steps []shardStep, variants []string) {
		if len(steps) < 2 {
			t.Fatalf("%s: %d shards, want the variants split", what, len(steps))
		}
		for _, v := range variants {
			var in []string
			for _, s := range steps {
				if ok, err := regexp.MatchString(s.variants, v); err != nil {
					t.Fatalf("shard %s: IRISGEN_TEST_VARIANTS %q: %v", s.shard, s.variants, err)
				} else if ok {
					in = append(in, s.shard)
				}
			}
			if len(in) != 1 {
				t.Errorf("%s: %s is in the shards %v, want exactly one", what, v, in)
			}
		}
	}
	var inProcess, processes []shardStep
	for _, s := range shardSteps(t, "full") {
		switch {
		case s.kind == "gotest" && s.runs(t, "TestCatalogue"):
			inProcess = append(inProcess, s)
		case s.kind == "procs" && s.runs(t, "TestProcessWorld") && strings.Contains(s.parts, "catalogue"):
			processes = append(processes, s)
		}
	}
	catalogue := variantsOf("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
	check("full, in-process", inProcess, catalogue)
	check("full, processes", processes, catalogue)
	// sanitized: tool's shards that run test in-process (part "") or the
	// multi-process world's part.
	sanitized := func(tool, test, part string) []shardStep {
		var steps []shardStep
		for _, s := range shardSteps(t, "sanitize") {
			kind := "gotest"
			if part != "" {
				kind = "procs"
			}
			if strings.HasPrefix(s.shard, tool+"-") && s.kind == kind && s.runs(t, test) &&
				(part == "" || slices.Contains(strings.Split(s.parts, ","), part)) {
				steps = append(steps, s)
			}
		}
		return steps
	}
	check("sanitize, memcheck", sanitized("memcheck", "TestCatalogue", ""), catalogue)
	check("sanitize, initcheck", sanitized("initcheck", "TestCatalogue", ""), catalogue)
	// initcheck runs the copy_push variants' parameter matrix as processes
	// alone (TestProcessWorld's params part): in-process it hangs in the tool.
	check("sanitize, initcheck, parameters",
		append(sanitized("initcheck", "TestParamCollectives", ""), sanitized("initcheck", "TestProcessWorld", "params")...),
		variantsOf("broadcast", "gather", "reduce", "scatter", "send_recv", "shift"))
}

// TestShardsSanitizeEveryKernelTest: each of the four sanitizers runs every
// test of the suite but the timing and fault tests; the large-offset and
// multi-process tests run under memcheck alone (see docs/testing-gpu.md),
// but for the copy-engine variants' capture as processes under initcheck.
func TestShardsSanitizeEveryKernelTest(t *testing.T) {
	none := []string{"TestFaultTimeoutRecovery", "TestFaultKilledRank", "TestFaultReplay", "TestFaultRefusedLaunch", "TestFaultRefusedCopyLaunch", "TestFaultCopyReleasePending", "TestFaultMismatchedLaunch", "TestGraphUseGuard",
		"TestBarrierVisibility", "TestProbeProcessWorld", "TestLaunchTail"}
	memcheckOnly := []string{"TestLargeOffsets", "TestParamLargeOffsets", "TestProcessWorld", "TestRMSNormProcessWorld"}
	// initcheck runs the copy-engine variants' capture as processes too
	// (initcheck-capture-copy: a sanitizer to a rank).
	also := map[string][]string{"initcheck": {"TestProcessWorld"}}
	steps := shardSteps(t, "sanitize")
	for _, tool := range []string{"memcheck", "racecheck", "synccheck", "initcheck"} {
		var mine []shardStep
		for _, s := range steps {
			if strings.HasPrefix(s.shard, tool+"-") {
				mine = append(mine, s)
			}
		}
		for _, name := range suiteTests(t) {
			want := !slices.Contains(none, name) && (tool == "memcheck" || !slices.Contains(memcheckOnly, name) || slices.Contains(also[tool], name))
			if ran := slices.ContainsFunc(mine, func(s shardStep) bool { return s.runs(t, name) }); ran != want {
				t.Errorf("%s runs %s: %v, want %v", tool, name, ran, want)
			}
		}
	}
}

// fakeTools writes stand-ins of the suite's binaries and of nvidia-smi and
// compute-sanitizer into dir: each prints what the real one prints that
// run.sh reads (test results, IRISGEN_CASES lines, probe's claims, the
// downstream example's cases, the sanitizer's summary), FAILME=1 makes the
// suite fail a test, CUTME=1 makes it stop at its -test.timeout, SANERR=n
// makes the sanitizer report n errors.
func fakeTools(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		// FAKE_GPUS H100s (2 unless set); -i narrows them to a list of indices.
		"bin/nvidia-smi": `ids=$(seq 0 $((${FAKE_GPUS:-2} - 1))); q=
while [ $# -gt 0 ]; do case $1 in -i) ids=$(tr , ' ' <<<"$2"); shift ;; --query-gpu=*) q=${1#*=} ;; esac; shift; done
for i in $ids; do case $q in
index) echo $i ;; name) echo "NVIDIA H100 80GB HBM3" ;; driver*) echo 580.159.04 ;; esac; done`,
		"bin/compute-sanitizer": `while [ "${1#-}" != "$1" ]; do shift 2; done
FAKE_SAN=1 "$@"; rc=$?
echo "========= ERROR SUMMARY: ${SANERR:-0} errors"
[ "${SANERR:-0}" = 0 ] || exit 3
exit $rc`,
		"build/gpu.test": `[ -n "${SLEEPME:-}" ] && exec sleep "$SLEEPME" # a test that hangs
echo "worlds=$IRISGEN_TEST_WORLDS quick=${IRISGEN_TEST_QUICK:-} args=$*"
echo "    --- PASS: TestA/world2 (0.10s)"
echo "IRISGEN_CASES 660 TestA"
echo "--- PASS: TestA (1.00s)"
echo "--- SKIP: TestB (0.00s)"
if [ -n "${FAILME:-}" ]; then echo "    --- FAIL: TestC/world2 (0.10s)"; echo "--- FAIL: TestC (0.10s)"; echo FAIL; exit 1; fi
if [ -n "${CUTME:-}" ]; then echo "panic: test timed out after 22s"; exit 2; fi
if [ "${IRISGEN_TEST_ROUNDS:-}" != "${WANTROUNDS:-}" ]; then echo "--- FAIL: TestRounds: IRISGEN_TEST_ROUNDS=${IRISGEN_TEST_ROUNDS:-}"; exit 1; fi
if [ "${IRISGEN_TEST_DTYPES:-}" != "${WANTDTYPES:-}" ]; then echo "--- FAIL: TestDTypes: IRISGEN_TEST_DTYPES=${IRISGEN_TEST_DTYPES:-}"; exit 1; fi
echo PASS`,
		"build/platform.test": `echo "--- PASS: TestEvents (0.10s)"; echo PASS`,
		"build/irisgen": `if [ "$1" = run ]; then n=$3; shift 4; rc=0
  for k in $(seq 0 $((n-1))); do RANK=$k "$@" | sed "s/^/[rank $k] /"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1; done; exit $rc; fi
[ "$1" = probe ] && echo "all 142 claims hold"`,
		"build/stencil": `case $PWD in */tests/downstream) ;; *) echo "not in tests/downstream"; exit 1 ;; esac
if [ -n "${RANK:-}" ]; then echo "stencil: rank $RANK of 2 (process world): 180 cases passed"
else echo "stencil: 2 GPUs (in-process world): 180 cases passed on every rank (1, 2)"; fi`,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/usr/bin/env bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeToolsDir is a directory with the stand-ins of fakeTools (the test
// is skipped without bash).
func fakeToolsDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	dir := t.TempDir()
	fakeTools(t, dir)
	return dir
}

// runShAll runs run.sh ARGS with env on the stand-ins in dir: its output,
// the fields of every result line it wrote (each with its file's name and
// path) and its error.
func runShAll(t *testing.T, dir string, env []string, args ...string) (string, []map[string]string, error) {
	t.Helper()
	out := t.TempDir()
	c := exec.Command("bash", append([]string{"run.sh"}, args...)...)
	c.Env = append(os.Environ(), "BUILD="+filepath.Join(dir, "build"), "OUT="+out, "PATH="+filepath.Join(dir, "bin")+":"+os.Getenv("PATH"),
		"IRISGEN_TEST_WORLDS=", "COMPUTE_SANITIZER=", "TIER=", "SHARD=", "SHARD_LIMIT=", "CALL_LIMIT=", "CUDA_VISIBLE_DEVICES=", "LANES=")
	c.Env = append(c.Env, env...)
	log, runErr := c.CombinedOutput()
	files, _ := filepath.Glob(filepath.Join(out, "result-*.txt"))
	var results []map[string]string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fields := map[string]string{}
		for _, m := range regexp.MustCompile(`(\w+)=("[^"]*"|\S+)`).FindAllStringSubmatch(string(b), -1) {
			fields[m[1]] = strings.Trim(m[2], `"`)
		}
		fields["file"], fields["path"] = filepath.Base(f), f
		results = append(results, fields)
	}
	return string(log), results, runErr
}

// runSh is runShAll of a run that writes one result line: its fields, and
// the run's output as "log".
func runSh(t *testing.T, dir string, env []string, args ...string) map[string]string {
	t.Helper()
	log, results, _ := runShAll(t, dir, env, args...)
	if len(results) != 1 {
		t.Fatalf("run.sh %v: %d result files, want one\n%s", args, len(results), log)
	}
	results[0]["log"] = log
	return results[0]
}

// expectFields checks the fields of a result line against want.
func expectFields(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s=%q, want %q (%v)", got["file"], k, got[k], v, got)
		}
	}
}

// TestRunShShardLimit: a shard that hangs is stopped at its own limit
// (SHARD_LIMIT), well inside the run's, and is CUT, saying which limit.
func TestRunShShardLimit(t *testing.T) {
	t.Parallel()
	dir := fakeToolsDir(t)
	start := time.Now()
	got := runSh(t, dir, []string{"SLEEPME=120", "SHARD_LIMIT=17", "CALL_LIMIT=300"}, "full", "moe")
	expectFields(t, got, map[string]string{"result": "CUT", "failed": "1"})
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("run.sh took %v: the shard's limit of 17 s did not stop it", d)
	}
	if !strings.Contains(got["log"], "the shard's time limit (SHARD_LIMIT, 17s") {
		t.Errorf("run.sh's log does not name the shard's limit:\n%s", got["log"])
	}
}

// TestRunShLanes: LANES=2 on 4 GPUs deals the shards of a world of 2 to
// two runs, each on its own pair, whose result lines name the pair; it
// refuses fewer GPUs than the lanes need.
func TestRunShLanes(t *testing.T) {
	t.Parallel()
	dir := fakeToolsDir(t)
	run := func(env ...string) (string, []map[string]string, error) {
		return runShAll(t, dir, append([]string{"IRISGEN_TEST_WORLDS=2", "LANES=2"}, env...), "sanitize", "memcheck-moe,racecheck-moe,synccheck-moe")
	}
	log, results, err := run("FAKE_GPUS=4")
	if err != nil || len(results) != 3 {
		t.Fatalf("LANES=2 on 4 GPUs: %v, %d result lines, want 3\n%s", err, len(results), log)
	}
	pairs := map[string]bool{}
	for _, r := range results {
		expectFields(t, r, map[string]string{"worlds": "2", "gpus": "2x NVIDIA H100 80GB HBM3", "result": "PASS"})
		pairs[r["gpu_ids"]] = true
	}
	if !pairs["0,1"] || !pairs["2,3"] || len(pairs) != 2 {
		t.Errorf("the shards ran on the GPUs %v, want both pairs 0,1 and 2,3\n%s", pairs, log)
	}
	if n := strings.Count(log, "RESULT "); n != 3 {
		t.Errorf("run.sh printed %d result lines, want 3:\n%s", n, log)
	}
	if log, results, err := run("FAKE_GPUS=2"); err == nil || len(results) != 0 || !strings.Contains(log, "want IRISGEN_TEST_WORLDS=2 and 4 GPUs or more") {
		t.Errorf("LANES=2 on 2 GPUs: %v, %d result lines, want a refusal:\n%s", err, len(results), log)
	}
}

// TestRunShGraphWait: initcheck-capture-copy first runs graph_wait plainly
// and under the sanitizer and says in its log which of them hung; when the
// sanitizer alone hangs, the shard's replays are not run (TOOL_LIMIT);
// otherwise, and without the program (which the log says), they run.
func TestRunShGraphWait(t *testing.T) {
	t.Parallel()
	dir := fakeToolsDir(t)
	env := []string{"WANTROUNDS=10", "WANTDTYPES=f32,bf16", "GRAPH_WAIT_LIMIT=2", "HANG_UNDER_SANITIZER=1"}
	got := runSh(t, dir, env, "sanitize", "initcheck-capture-copy")
	expectFields(t, got, map[string]string{"result": "PASS"})
	if !strings.Contains(got["log"], "graph_wait: ") || !strings.Contains(got["log"], "not built") {
		t.Errorf("without build/graph_wait the log should say it is not built:\n%s", got["log"])
	}
	gw := "[ -n \"${HANG_PLAIN:-}\" ] && exec sleep 30\n[ -n \"${FAKE_SAN:-}\" ] && [ -n \"${HANG_UNDER_SANITIZER:-}\" ] && exec sleep 30\necho 'eager ok'; echo 'graph ok (10 rounds)'\n"
	if err := os.WriteFile(filepath.Join(dir, "build", "graph_wait"), []byte("#!/usr/bin/env bash\n"+gw), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env          []string
		want, result string
	}{
		// The tool hangs without irisgen: the replays are not run.
		{env, "plain: ok; sanitizer: hung (stopped after 2 s)", "TOOL_LIMIT"},
		{env[:2], "plain: ok; sanitizer: ok", "PASS"},
		// Plainly hung too: not the tool's; the shard runs.
		{append(env, "HANG_PLAIN=1"), "plain: hung (stopped after 2 s); sanitizer: hung (stopped after 2 s)", "PASS"},
	} {
		got := runSh(t, dir, c.env, "sanitize", "initcheck-capture-copy")
		expectFields(t, got, map[string]string{"result": c.result})
		if ran := got["tests"] != "0"; ran != (c.result != "TOOL_LIMIT") {
			t.Errorf("env %v: tests=%s: the replays should run unless the tool hangs alone", c.env, got["tests"])
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(got["path"]), "log-sanitize-initcheck-capture-copy.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "== graph_wait (the tool alone, no irisgen code): " + c.want; !strings.Contains(string(b), want) || !strings.Contains(got["log"], want) {
			t.Errorf("env %v: want %q in the shard's log and run.sh's output:\n%s", c.env, want, got["log"])
		}
	}
}

// TestRunShResultLines runs run.sh on the stand-ins and checks the result
// lines it writes: what passed, failed and was skipped, the cases summed
// over the tests (rank 0's alone in a multi-process world), probe's claims
// and the downstream example's cases, the sanitizer's errors, and the
// result.
func TestRunShResultLines(t *testing.T) {
	t.Parallel()
	dir := fakeToolsDir(t)
	run := func(env []string, args ...string) map[string]string { t.Helper(); return runSh(t, dir, env, args...) }
	expect := func(got, want map[string]string) { t.Helper(); expectFields(t, got, want) }
	// platform (1 pass) + suite, and the copy variants' tests again
	// without peer writes (each 1 pass, 1 skip, 660 cases) + probe (142
	// claims) + the downstream example (180 cases).
	quick := run(nil, "quick", "inprocess")
	expect(quick, map[string]string{"file": "result-quick-inprocess.txt", "tier": "quick", "shard": "inprocess",
		"worlds": "2", "kinds": "in-process", "tests": "7", "passed": "5", "failed": "0", "skipped": "2", "cases": strconv.Itoa(2*660 + 142 + 180),
		"sanitizer_errors": "0", "gpus": "2x NVIDIA H100 80GB HBM3", "driver": "580.159.04", "result": "PASS"})
	// The line as a row of the record in docs/testing-gpu.md.
	row, err := exec.Command("bash", "run.sh", "-rows", "nvidia-h100-x2", quick["path"]).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "| quick | inprocess | nvidia-h100-x2 | 2x NVIDIA H100 80GB HBM3 | 2 | in-process | 5/0/2 | 1642 | "; !strings.HasPrefix(string(row), want) ||
		!strings.HasSuffix(string(row), " | PASS |\n") {
		t.Errorf("run.sh -rows: %q, want %q... PASS |", row, want)
	}
	// Two GPUs of four, by CUDA_VISIBLE_DEVICES: a world of 2, named by those two.
	pair := run([]string{"FAKE_GPUS=4", "CUDA_VISIBLE_DEVICES=2,3"}, "quick", "inprocess")
	expect(pair, map[string]string{"worlds": "2", "gpus": "2x NVIDIA H100 80GB HBM3", "gpu_ids": "2,3", "result": "PASS"})
	if row, err := exec.Command("bash", "run.sh", "-rows", "nvidia-h100-x4", pair["path"]).Output(); err != nil ||
		!strings.HasPrefix(string(row), "| quick | inprocess | nvidia-h100-x4 | 2x NVIDIA H100 80GB HBM3 (GPUs 2,3) | 2 |") {
		t.Errorf("run.sh -rows of a pair of 4 GPUs: %q, %v", row, err)
	}
	expect(run([]string{"FAKE_GPUS=4"}, "quick", "inprocess"), map[string]string{"worlds": "2,4", "gpus": "4x NVIDIA H100 80GB HBM3"})
	// Worlds 2 and 4, each: TestProcessWorld, TestRMSNormProcessWorld and
	// TestProcessWorld's copy variants without peer writes (rank 0's pass,
	// skip and 660 cases) and the downstream example.
	expect(run([]string{"IRISGEN_TEST_WORLDS=2,4"}, "quick", "processes"), map[string]string{"worlds": "2,4", "kinds": "processes",
		"tests": "14", "passed": "8", "skipped": "6", "cases": strconv.Itoa(2 * (3*660 + 180)), "result": "PASS"})
	// The faults shard: the platform tests, the suite, probe in-process and
	// as processes (rank 0's claims alone), the downstream example in both.
	expect(run(nil, "full", "faults"), map[string]string{"kinds": "in-process+processes", "tests": "7", "passed": "6", "skipped": "1",
		"cases": strconv.Itoa(660 + 142 + 142 + 180 + 180), "result": "PASS"})
	expect(run([]string{"FAILME=1"}, "full", "moe"), map[string]string{"tests": "3", "passed": "1", "failed": "1", "result": "FAIL"})
	expect(run([]string{"SANERR=2"}, "sanitize", "memcheck-moe"), map[string]string{"sanitizer_errors": "2", "failed": "1", "result": "FAIL"})
	expect(run(nil, "sanitize", "racecheck-moe"), map[string]string{"sanitizer_errors": "0", "result": "PASS"})
	// initcheck, about six times slower, caps the rounds of a case and
	// leaves out f16; the other tools do neither.
	expect(run([]string{"WANTROUNDS=10", "WANTDTYPES=f32,bf16"}, "sanitize", "initcheck-b2b-a"), map[string]string{"result": "PASS"})
	expect(run([]string{"WANTROUNDS=10", "WANTDTYPES=f32,bf16"}, "sanitize", "initcheck-b2b-b"), map[string]string{"result": "PASS"})
	expect(run([]string{"WANTROUNDS=10"}, "sanitize", "initcheck-b2b-a"), map[string]string{"result": "FAIL"})
	expect(run(nil, "sanitize", "racecheck-b2b"), map[string]string{"result": "PASS"})
	expect(run([]string{"WANTROUNDS=10"}, "sanitize", "racecheck-b2b"), map[string]string{"result": "FAIL"})
	expect(run([]string{"WANTDTYPES=f32,bf16"}, "sanitize", "racecheck-b2b"), map[string]string{"result": "FAIL"})
	list, err := exec.Command("bash", "run.sh", "-list", "full").Output()
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(list), "\n") - 1 // the tier's line, then a shard a line
	expect(run([]string{"SHARD=2/" + strconv.Itoa(n), "TIER=full"}), map[string]string{"shard": "catalogue-b"})
	expect(run([]string{"CALL_LIMIT=1"}, "full", "launches"), map[string]string{"result": "NOT_RUN"})
	// A shard is not started with less time left than half its estimate
	// (params: 100 s on 2 GPUs), and is started with more.
	expect(run([]string{"CALL_LIMIT=45"}, "full", "params"), map[string]string{"result": "NOT_RUN"})
	expect(run([]string{"CALL_LIMIT=55"}, "full", "params"), map[string]string{"result": "PASS"})
	// A step stopped at the run's limit cuts its shard (a cut is no test's
	// failure); a failed test still fails it.
	expect(run([]string{"CUTME=1"}, "full", "moe"), map[string]string{"failed": "1", "result": "CUT"})
	expect(run([]string{"CUTME=1", "SANERR=1"}, "sanitize", "memcheck-moe"), map[string]string{"result": "FAIL"})
}

// TestMatrixLoopsFilter: every loop of the suite over one of its matrices
// (catalogue, paramCatalogue, normCatalogue) honours the shards' variant
// filters (IRISGEN_TEST_VARIANTS, IRISGEN_TEST_SKIP_VARIANTS: it calls
// variantSelected) or says why it takes every variant, in a comment on the
// line above it that starts "every variant:". TestParamCapture's loop did
// neither, so initcheck-capture replayed the copy-engine variants its shard
// leaves out, and hung there (2026-11-27).
func TestMatrixLoopsFilter(t *testing.T) {
	matrices := []string{"catalogue", "paramCatalogue", "normCatalogue"}
	loops := 0
	suiteFiles(t, func(fset *token.FileSet, f *ast.File) {
		reasoned := map[int]bool{} // lines below a comment that says "every variant:"
		for _, cg := range f.Comments {
			if strings.HasPrefix(cg.List[len(cg.List)-1].Text, "// every variant:") {
				reasoned[fset.Position(cg.End()).Line+1] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			rs, ok := n.(*ast.RangeStmt)
			if !ok {
				return true
			}
			if id, ok := rs.X.(*ast.Ident); !ok || !slices.Contains(matrices, id.Name) {
				return true
			}
			loops++
			filters := false
			ast.Inspect(rs.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "variantSelected" {
						filters = true
					}
				}
				return !filters
			})
			if at := fset.Position(rs.Pos()); !filters && !reasoned[at.Line] {
				t.Errorf("%s: a loop over %s neither calls variantSelected nor says why it takes every variant (a comment on the line above: \"// every variant: ...\")", at, rs.X)
			}
			return true
		})
	})
	if loops < 20 {
		t.Fatalf("found %d loops over the matrices: the parse is broken", loops)
	}
}

// TestRunShLeft: run.sh -left lists the shards of a tier that no result
// line of the world passed (PASS or TOOL_LIMIT) among the files given, in
// the tier's order, each once, and their count and estimated seconds.
func TestRunShLeft(t *testing.T) {
	t.Parallel()
	all := tierShards(t, "sanitize")
	dir := t.TempDir()
	line := func(tier, shard, worlds, result string) string {
		return fmt.Sprintf("tier=%s shard=%s worlds=%s kinds=in-process tests=1 passed=1 failed=0 skipped=0 cases=1 sanitizer_errors=0 hazards=0 seconds=1 gpus=\"4x NVIDIA H200\" driver=580 date=2026-11-28T00:00:00Z result=%s\n", tier, shard, worlds, result)
	}
	files := map[string]string{
		"a.txt": line("sanitize", all[0], "4", "PASS") + line("sanitize", all[1], "4", "TOOL_LIMIT"),
		"b.txt": line("sanitize", all[2], "4", "CUT") + line("sanitize", all[3], "2", "PASS"),
		"c.txt": line("sanitize", all[4], "4", "FAIL") + line("full", all[5], "4", "PASS"),
		"d.txt": line("sanitize", all[4], "2,4", "PASS"),
	}
	var paths []string
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	left := func(world string) []string {
		t.Helper()
		out, err := exec.Command("bash", append([]string{"run.sh", "-left", "sanitize", world}, paths...)...).Output()
		if err != nil {
			t.Fatalf("run.sh -left sanitize %s: %v\n%s", world, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var names []string
		for _, l := range lines[:len(lines)-1] {
			names = append(names, strings.Fields(l)[0])
		}
		if want := fmt.Sprintf("sanitize in a world of %s: %d shard(s) left, ~", world, len(names)); !strings.HasPrefix(lines[len(lines)-1], want) {
			t.Errorf("world %s: last line %q, want %q...", world, lines[len(lines)-1], want)
		}
		return names
	}
	// World 4: shards 0, 1 and 4 passed (4 after a failure); 2 was cut, 3
	// passed in a world of 2 only, 5 in another tier.
	if got, want := left("4"), append(slices.Clone(all[2:4]), all[5:]...); !slices.Equal(got, want) {
		t.Errorf("world 4: %v, want %v", got, want)
	}
	if got, want := left("2"), append(slices.Clone(all[:3]), all[5:]...); !slices.Equal(got, want) {
		t.Errorf("world 2: %v, want %v", got, want)
	}
	// docs/testing-gpu.md's record rows count as result lines do: a
	// footnote mark and "'s tests, rerun" name the shard, a row of a shard
	// as it was once (another set of tests) does not, nor a failure, nor
	// the header.
	row := func(tier, shard, world, result string) string {
		return fmt.Sprintf("| %s | %s | nvidia-h200-x4, call 1 | 4x NVIDIA H200 | %s | in-process | 1/0/0 | 1 | 1 | 2026-11-28 | %s |\n", tier, shard, world, result)
	}
	record := "| tier | shard | kind | GPUs | world | in-process / processes | tests | cases | seconds | date | result |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		row("sanitize", all[0]+" (a)", "4", "PASS (0 errors, 0 hazards)") +
		row("sanitize", all[1]+"'s tests, rerun with abc1234", "2, 4", "PASS (0 errors)") +
		row("sanitize", all[2]+" (as it was: more tests)", "4", "PASS (0 errors, 0 hazards)") +
		row("sanitize", all[3], "4", "FAIL (1 errors, 0 hazards)") +
		row("full", all[4], "4", "PASS") +
		row("sanitize", all[5], "4", "TOOL_LIMIT (0 errors, 0 hazards)")
	md := filepath.Join(dir, "record.md")
	if err := os.WriteFile(md, []byte("# Record\n\nprose | with a bar\n\n"+record), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "run.sh", "-left", "sanitize", "4", md).Output()
	if err != nil {
		t.Fatalf("run.sh -left sanitize 4 %s: %v\n%s", md, err, out)
	}
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "  ") {
			got = append(got, strings.Fields(l)[0])
		}
	}
	if want := append(slices.Clone(all[2:5]), all[6:]...); !slices.Equal(got, want) {
		t.Errorf("from a record: %v, want %v", got, want)
	}
	if out, err := exec.Command("bash", "run.sh", "-left", "sanitize", "x").CombinedOutput(); err == nil || !strings.Contains(string(out), "want a world size") {
		t.Errorf("a bad world: %v, %s", err, out)
	}
	if out, err := exec.Command("bash", "run.sh", "-left", "sanitize", "4", filepath.Join(dir, "none.txt")).CombinedOutput(); err == nil || !strings.Contains(string(out), "no such file") {
		t.Errorf("a missing file: %v, %s", err, out)
	}
}

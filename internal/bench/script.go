package bench

import (
	_ "embed" // baselines.py
	"slices"
	"strconv"
	"strings"
)

// BaselinesScript is baselines.py: NCCL and torch symmetric memory timed
// like irisgen's collectives, in the same CSV schema. `irisgen bench` writes
// it next to its results and runs it with python3.
//
//go:embed baselines.py
var BaselinesScript []byte

// BaselineArgs is the command line of baselines.py for cfg: the selected
// collectives and scenarios it has a torch baseline of (knownCollectives,
// scenarios), nil when there is none (the barrier alone, or a package of
// collectives torch has no call for).
func BaselineArgs(script, csvPath string, cfg Config) []string {
	var colls []string
	scs := applicable(cfg.Entries)
	for _, name := range cfg.selectedNames() {
		if knownCollectives[name].torch || slices.ContainsFunc(scs, func(sc scenario) bool { return sc.name == name && sc.torch }) {
			colls = append(colls, name)
		}
	}
	if len(colls) == 0 {
		return nil
	}
	return []string{script, "--world", strconv.Itoa(cfg.World), "--sizes", joinInts(cfg.Sizes),
		"--dtypes", strings.Join(cfg.DTypes, ","), "--modes", strings.Join(cfg.Modes, ","),
		"--warmup", strconv.Itoa(cfg.Warmup), "--repeats", strconv.Itoa(max(cfg.Repeats, 1)), "--out", csvPath,
		"--moe-tokens", joinInts(MoETokens), "--moe-hidden", strconv.FormatInt(MoEHidden, 10),
		"--moe-k", joinInts(MoEK),
		"--rmsnorm-tokens", joinInts(RMSNormTokens), "--rmsnorm-hidden", strconv.FormatInt(RMSNormHidden, 10),
		"--collectives", strings.Join(colls, ",")}
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

package bench

import _ "embed"

// BaselinesScript is baselines.py: NCCL and torch symmetric memory timed
// like irisgen's collectives, in the same CSV schema. `irisgen bench` writes
// it next to its results and runs it with python3.
//
//go:embed baselines.py
var BaselinesScript []byte

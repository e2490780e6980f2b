// Command irisgen-gpu holds irisgen's commands that run on GPUs, bench
// (time the collectives beside NCCL and torch symmetric memory) and probe
// (prove graph capture of every variant and mode), for irisgen's
// catalogue: it is gputools.Main with the catalogue linked. They link the
// generated package and the GPU platform, so they live apart from the
// generator: `irisgen` stays a lean code generator and runs this program,
// found beside itself or on PATH, for `irisgen bench` and `irisgen probe`
// in irisgen's repository. Build it with `make gpu-build`
// (build/irisgen-gpu) or
// `go install github.com/irisgen/irisgen/cmd/irisgen-gpu`. A repository of
// your own benches and probes its package with a main like this one (see
// package gputools).
package main

import (
	"os"

	"github.com/irisgen/irisgen/gputools"

	_ "github.com/irisgen/irisgen/generated/collectives" // the catalogue
)

func main() { os.Exit(gputools.Program{Name: "irisgen-gpu"}.Run(os.Args[1:])) }

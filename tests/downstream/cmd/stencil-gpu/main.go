// Command stencil-gpu benches and probes this repository's generated
// package: irisgen's GPU commands (gputools) with the package linked, so
// they see its own collectives (halo_exchange, root_broadcast) and the
// catalogue's it generates (all_reduce, moe_dispatch, moe_combine).
//
//	go run ./cmd/stencil-gpu bench -n 2 -collectives halo_exchange,root_broadcast
//	go run ./cmd/stencil-gpu probe -n 2
//	go tool irisgen run -n 2 -- ./stencil-gpu probe   # multi-process
//
// `go tool irisgen bench` and `go tool irisgen probe` build the same
// program on the fly.
package main

import (
	"os"

	"github.com/irisgen/irisgen/gputools"

	_ "example.com/stencil/internal/gen/coll" // the collectives and their code objects
)

func main() { os.Exit(gputools.Main(os.Args[1:])) }

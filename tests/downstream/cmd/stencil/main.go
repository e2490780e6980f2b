// Command stencil runs this repository's generated collectives on the GPUs
// and checks every result against a CPU reference (package exchange): its
// own halo exchange and broadcast from a root (both variants of each), and
// the catalogue's all_reduce (every variant and auto) and MoE dispatch and
// combine, which irisgen.yaml's catalogue key generates into the same
// package; f32, f16 and bf16, several sizes, eagerly and replayed from a
// captured graph.
//
// In-process world (one goroutine a GPU):
//
//	stencil -world 2
//
// Multi-process world (one process a GPU), started by irisgen's launcher:
//
//	go tool irisgen run -n 2 -- ./stencil
//
// The kernels come from the generated package, which embeds the code
// objects `go tool irisgen kernels` built; no environment variable is
// needed. The exit code is 1 when any check fails.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisrt"

	"example.com/stencil/internal/exchange"
)

func main() {
	world := flag.Int("world", 0, "GPUs of the in-process world (0: every GPU); ignored under `irisgen run`")
	quick := flag.Bool("quick", false, "leave out the largest size")
	flag.Parse()
	if err := run(*world, *quick); err != nil {
		fmt.Fprintln(os.Stderr, "stencil:", err)
		os.Exit(1)
	}
}

func run(world int, quick bool) error {
	sizes := exchange.Sizes
	if quick {
		sizes = sizes[:len(sizes)-1]
	}
	opts := irisrt.Options{HeapBytes: 256 << 20}
	if os.Getenv("RANK") != "" { // started by `irisgen run`
		r, err := irisrt.JoinProcessWorld(opts)
		if err != nil {
			return err
		}
		n, err := exchange.All(r, sizes)
		err = errors.Join(err, r.Close())
		if err != nil {
			return fmt.Errorf("rank %d: %w", r.Rank(), err)
		}
		fmt.Printf("stencil: rank %d of %d (process world): %d cases passed\n", r.Rank(), r.World(), n)
		return nil
	}
	if world == 0 {
		p, err := gpu.Load()
		if err != nil {
			return err
		}
		if world, err = p.DeviceCount(); err != nil {
			return err
		}
	}
	w, err := irisrt.NewLocalWorld(world, opts)
	if err != nil {
		return err
	}
	var cases atomic.Int64
	err = w.Run(func(r *irisrt.Rank) error {
		n, err := exchange.All(r, sizes)
		cases.Add(int64(n))
		if err != nil {
			return fmt.Errorf("rank %d: %w", r.Rank(), err)
		}
		return nil
	})
	err = errors.Join(err, w.Close())
	if err != nil {
		return err
	}
	fmt.Printf("stencil: %d GPUs (in-process world): %d cases passed on every rank (%s)\n", world, cases.Load()/int64(world), strings.Trim(fmt.Sprint(sizes), "[]"))
	return nil
}

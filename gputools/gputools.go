// Package gputools runs irisgen's GPU commands, bench (time the
// collectives beside NCCL and torch) and probe (prove graph capture of
// every variant and mode), on the generated packages linked into the
// program that calls it: a generated package registers its collectives
// when it is imported, so a main of five lines benches and probes a
// repository's own package:
//
//	package main
//
//	import (
//		"os"
//
//		"github.com/irisgen/irisgen/gputools"
//
//		_ "example.com/stencil/internal/gen/coll" // its collectives and code objects
//	)
//
//	func main() { os.Exit(gputools.Main(os.Args[1:])) }
//
// Then `go run ./cmd/stencil-gpu bench -n 2` or `probe -n 2`, or under
// `irisgen run -n 2 --` for a multi-process probe. `go tool irisgen bench`
// and `probe` in such a repository build that program themselves (see the
// README), and irisgen-gpu is it for irisgen's catalogue. The commands
// read everything they do to a collective from its package's table, so a
// new collective needs nothing here. The package links the GPU runtime
// and the standard library only (NCCL and torch are loaded at run time,
// when a benchmark asks for its baselines).
package gputools

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/irisgen/irisgen/internal/bench"
	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Main runs the command args names, bench or probe (`help` lists them),
// with the rest of args as its flags, and returns the exit code: 0 ok, 1
// a failure (a claim that did not hold, a regression), 2 a wrong
// invocation.
func Main(args []string) int { return Program{}.Run(args) }

// Program is Main with its choices made; the zero value is Main's.
type Program struct {
	// Name is the program's name in its usage text; "": its executable's.
	Name string
	// Platform is the GPU library; nil: gpu.Load. With another platform
	// (tests: the fake), bench runs no baselines.
	Platform gpu.Platform
	// Kernels are the code objects, as irisrt.Options.Kernels.
	Kernels fs.FS
	// Stdout and Stderr: nil for the process's.
	Stdout, Stderr io.Writer
}

// Run is Main for p.
func (p Program) Run(args []string) int {
	if p.Name == "" {
		p.Name = filepath.Base(os.Args[0])
	}
	if p.Stdout == nil {
		p.Stdout = os.Stdout
	}
	if p.Stderr == nil {
		p.Stderr = os.Stderr
	}
	prog := &cli.Program{
		Name:  p.Name,
		Intro: p.Name + " runs irisgen's GPU commands on the generated packages it links (" + strings.Join(linked(), ", ") + ").",
		Order: []string{"bench", "probe"},
		Commands: []*cli.Command{
			{Name: "bench", Summary: benchSummary, Usage: benchUsage, Help: benchHelp, Run: p.runBench},
			{Name: "probe", Summary: probeSummary, Usage: probeUsage, Help: probeHelp, Run: p.runProbe},
		},
	}
	return prog.Main(args, p.Stdout, p.Stderr)
}

// tables are the generated packages of collectives the program links:
// every registered one but the benchmark's own compute kernel's
// (bench.ComputePackage), which bench -overlap launches beside them and
// which is no collective to time or probe.
func tables() []*irisimpl.Table {
	return slices.DeleteFunc(irisimpl.Tables(), func(t *irisimpl.Table) bool { return t.ImportPath == bench.ComputePackage })
}

// linked lists the import paths of the generated packages in the program.
func linked() []string {
	var paths []string
	for _, t := range tables() {
		paths = append(paths, t.ImportPath)
	}
	if len(paths) == 0 {
		return []string{"none"}
	}
	return paths
}

// packageFlag is the help of -package, which both commands have.
const packageFlag = "import path of the generated package to run (default: every generated package the program links)"

// entries are the variants of the generated package pkg ("": of every one
// the program links), checked to be usable and to name each collective
// once.
func entries(pkg string) ([]irisimpl.Entry, string, error) {
	tables := tables()
	if len(tables) == 0 {
		return nil, "", cli.Fail(fmt.Errorf("no generated package is linked into this program: import yours in its main " +
			"(import _ \"IMPORT/PATH/OF/YOUR/PACKAGE\") beside github.com/irisgen/irisgen/gputools"))
	}
	if pkg != "" {
		i := slices.IndexFunc(tables, func(t *irisimpl.Table) bool { return t.ImportPath == pkg })
		if i < 0 {
			return nil, "", cli.UsageErr("-package %s: the program does not link it (it links %s)", pkg, strings.Join(linked(), ", "))
		}
		tables = tables[i : i+1]
	}
	var out []irisimpl.Entry
	from := map[string]string{}
	var paths []string
	for _, t := range tables {
		es := t.Entries()
		if es == nil && len(t.Collectives) > 0 {
			return nil, "", cli.Fail(fmt.Errorf("the generated package %s cannot be used (its plans say why): regenerate it", t.ImportPath))
		}
		for _, e := range es {
			if o, ok := from[e.Collective]; ok && o != t.ImportPath {
				return nil, "", cli.UsageErr("the collective %s is in both %s and %s: choose one package with -package", e.Collective, o, t.ImportPath)
			}
			from[e.Collective] = t.ImportPath
		}
		out = append(out, es...)
		paths = append(paths, t.ImportPath)
	}
	return out, strings.Join(paths, ", "), nil
}

// checkNames refuses names that are not in have (-collectives).
func checkNames(names, have []string, pkgs string) error {
	for _, n := range names {
		if !slices.Contains(have, n) {
			return cli.UsageErr("-collectives: %q is not a collective or scenario of %s (it has %s)", n, pkgs, strings.Join(have, ", "))
		}
	}
	return nil
}

// platform is p's GPU library.
func (p Program) platform() (gpu.Platform, error) {
	if p.Platform != nil {
		return p.Platform, nil
	}
	return gpu.Load()
}

// options are the world options of p's commands.
func (p Program) options(o irisrt.Options) irisrt.Options {
	o.Platform, o.Kernels = p.Platform, p.Kernels
	return o
}

// worldSize resolves -n against this machine's GPUs (0: all of them); at
// least `least` ranks. Where share allows it and IRISGEN_SHARE_GPUS is set,
// ranks may share GPUs (up to irisrt.MaxWorld).
func (p Program) worldSize(n, least int, share bool) (int, error) {
	pl, err := p.platform()
	if err != nil {
		return 0, cli.Fail(err)
	}
	count, err := pl.DeviceCount()
	if err != nil {
		return 0, cli.Fail(err)
	}
	if n == 0 {
		n = count
	}
	if share {
		ok, err := irisrt.ShareGPUsEnv()
		if err != nil {
			return 0, cli.UsageErr("%v", err)
		}
		if ok && n >= least && n <= irisrt.MaxWorld {
			return n, nil
		}
	}
	if n < least || n > count {
		return 0, cli.UsageErr("-n %d: this machine has %d GPUs, and this command needs %d to %d", n, count, least, count)
	}
	return n, nil
}

// deviceName is e.g. "2x NVIDIA H200" from nvidia-smi ("2x GPU" when
// nvidia-smi is missing; the platform's name when it is not the GPU
// library's).
func (p Program) deviceName(world int) string {
	name := "GPU"
	if p.Platform != nil {
		name = p.Platform.Name()
	} else if b, err := exec.Command("nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0").Output(); err == nil {
		name = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%dx %s", world, name)
}

// Package fakekernels serves the kernels of generated packages on the fake
// platform (fakegpu) as the code objects `irisgen kernels` builds serve
// them on a GPU: one module per collective, holding every kernel of every
// variant, dtype and op, with the collective's spec hash. The fake runs no
// kernel (see fakegpu.Platform.OnLaunch), so a test sees what a package's
// plans and launches do, and tools that take any generated package (bench
// and probe, through gputools) run their planning and dispatch on it.
package fakekernels

import (
	"fmt"
	"testing/fstest"

	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// For adds to p a module for every collective of the tables and returns the
// code objects to pass as irisrt.Options.Kernels. A registered table is
// irisimpl.Registered(importPath). Two tables may hold a collective of the
// same name only with the same spec (as the catalogue's collectives
// generated into a downstream package do): Options.Kernels serves one code
// object per collective name.
func For(p *fakegpu.Platform, tables ...*irisimpl.Table) (fstest.MapFS, error) {
	fsys := fstest.MapFS{}
	hashes := map[string]string{}
	for _, t := range tables {
		if len(t.Collectives) > 0 && t.Entries() == nil {
			return nil, fmt.Errorf("fakekernels: the table of %s is unusable: make a plan of it to see why", t.ImportPath)
		}
		for ci := range t.Collectives {
			c := &t.Collectives[ci]
			if h, ok := hashes[c.Name]; ok {
				if h != c.SpecHash {
					return nil, fmt.Errorf("fakekernels: two tables hold a collective %q of different specs; serve them to worlds of their own", c.Name)
				}
				continue
			}
			hashes[c.Name] = c.SpecHash
			var names []string
			for vi := range c.Variants {
				v := &c.Variants[vi]
				for _, dt := range append([]irismodel.DType{0}, c.DTypes...) {
					for _, op := range append([]string{""}, c.Ops...) {
						names = append(names, v.Kernel(dt, op))
					}
				}
			}
			image := []byte("fake code object of " + c.Name + " " + c.SpecHash)
			p.AddModule(image, names, map[string][]byte{irismodel.SpecHashSymbol(c.Name): append([]byte(c.SpecHash), 0)})
			fsys[irismodel.KernelFile(p.Name(), c.Name)] = &fstest.MapFile{Data: image}
		}
	}
	return fsys, nil
}

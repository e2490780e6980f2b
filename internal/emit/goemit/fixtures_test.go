package goemit

import (
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Hand-built IR, so the emitter is tested on its own input contract.

func pos(line int) ir.Pos { return ir.Pos{File: "specs/x.yaml", Line: line, Col: 3} }

func kernels(c, v string, dts []irismodel.DType, ops []ir.Op) []ir.Kernel {
	var ks []ir.Kernel
	if len(ops) == 0 {
		ops = []ir.Op{ir.OpNone}
	}
	for _, d := range dts {
		for _, o := range ops {
			ks = append(ks, ir.Kernel{Name: irismodel.KernelName(c, v, d, string(o)), DType: d, Op: o})
		}
	}
	return ks
}

var allCapture = []ir.Capture{
	{Mode: irismodel.BarrierDevice, Capturable: true},
	{Mode: irismodel.BarrierHost, Reason: "host barriers synchronise the stream and meet peers on the CPU"},
	{Mode: irismodel.BarrierNone, Capturable: true},
}

func use(t *ir.Tensor, a ir.Access) ir.Use {
	return ir.Use{Tensor: t, Access: a, Placement: ir.PlacementOf(a), Pos: pos(20)}
}

// allGather has two variants that differ in where the remote access is.
func allGather() *ir.Collective {
	in := &ir.Tensor{TensorDesc: irismodel.TensorDesc{Name: "input", Dir: irismodel.In, Shape: irismodel.Shape{irismodel.DimSize(0)}}, Pos: pos(5)}
	out := &ir.Tensor{TensorDesc: irismodel.TensorDesc{Name: "output", Dir: irismodel.Out, Shape: irismodel.Shape{irismodel.DimWorld, irismodel.DimSize(0)}}, Pos: pos(6)}
	dts := []irismodel.DType{irismodel.F32, irismodel.F16, irismodel.BF16}
	mk := func(name string, ain, aout ir.Access) *ir.Variant {
		return &ir.Variant{
			Name: name, Template: "all_gather_" + name,
			Uses:     []ir.Use{use(in, ain), use(out, aout)},
			Aliasing: ir.AliasForbid,
			Barriers: []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone},
			Launch:   ir.Launch{Threads: 512, MaxBlocks: 16, VectorBytes: 16},
			Capture:  allCapture,
			Kernels:  kernels("all_gather", name, dts, nil),
			Pos:      pos(10),
		}
	}
	return &ir.Collective{
		Name: "all_gather", Summary: "Concatenate every rank's `input` into `output` on every rank.",
		SpecFile: "specs/all_gather.yaml", SpecHash: "0123abcd", DTypes: dts,
		Symbols: []string{"n"}, Tensors: []*ir.Tensor{in, out},
		Variants: []*ir.Variant{
			mk("push", ir.LocalRead, ir.LocalWrite|ir.RemoteWrite),
			mk("pull", ir.LocalRead|ir.RemoteRead, ir.LocalWrite),
		},
		Pos: pos(1),
	}
}

// barrier has no tensors, no dtypes and one variant.
func barrier() *ir.Collective {
	return &ir.Collective{
		Name: "barrier", Summary: "Wait until every rank has arrived.", SpecFile: "specs/barrier.yaml", SpecHash: "feed",
		Variants: []*ir.Variant{{
			Name: "device", Template: "barrier_device", Aliasing: ir.AliasAllow,
			Barriers: []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost},
			Launch:   ir.Launch{Threads: 64, MaxBlocks: 1, VectorBytes: 16},
			Capture:  allCapture[:2],
			Kernels:  []ir.Kernel{{Name: "irisgen_barrier_device"}},
			Pos:      pos(4),
		}},
		Pos: pos(1),
	}
}

// allReduce has ops, an inout-free pair, and a ring variant whose only
// remote access is on a workspace tensor shaped by blocks.
func allReduce() *ir.Collective {
	in := &ir.Tensor{TensorDesc: irismodel.TensorDesc{Name: "input", Dir: irismodel.In, Shape: irismodel.Shape{irismodel.DimSize(0)}}, Pos: pos(5)}
	out := &ir.Tensor{TensorDesc: irismodel.TensorDesc{Name: "output", Dir: irismodel.Out, Shape: irismodel.Shape{irismodel.DimSize(0)}}, Pos: pos(6)}
	ws := &ir.Tensor{TensorDesc: irismodel.TensorDesc{Name: "scratch", Dir: irismodel.Workspace, Shape: irismodel.Shape{irismodel.DimBlocks, 2, irismodel.DimWorld, 4096}}, Pos: pos(7)}
	dts := []irismodel.DType{irismodel.F32, irismodel.BF16}
	ops := []ir.Op{ir.OpSum, ir.OpMax}
	return &ir.Collective{
		Name: "all_reduce", Summary: "Reduce input over all ranks into output.", SpecFile: "specs/all_reduce.yaml", SpecHash: "abc",
		DTypes: dts, Ops: ops, Symbols: []string{"n"}, Tensors: []*ir.Tensor{in, out, ws},
		Variants: []*ir.Variant{{
			Name: "ring", Template: "all_reduce_ring", Aliasing: ir.AliasAllow,
			Uses:     []ir.Use{use(in, ir.LocalRead), use(out, ir.LocalWrite), use(ws, ir.LocalRead|ir.RemoteWrite)},
			Barriers: []irismodel.Barrier{irismodel.BarrierDevice},
			Launch:   ir.Launch{Threads: 256, MaxBlocks: 8, VectorBytes: 16},
			Capture:  allCapture[:1],
			Kernels:  kernels("all_reduce", "ring", dts, ops),
			Pos:      pos(10),
		}},
		Pos: pos(1),
	}
}

// Package irismodel is the vocabulary of irisgen's collectives that the
// generator (internal/ir) and the runtime (runtime/irisrt, runtime/irisimpl)
// share, defined once: element types (DType, with their sizes and the host
// conversions of the 16-bit ones), barrier modes (Barrier), tensor
// directions and shapes (Dir, Dim, Shape: the spec spelling, the element
// count), a tensor of a collective's signature (TensorDesc, with its element
// type in a plan), launch parameters (ParamKind, ParamDesc with its range,
// the values a launch passes: Param), the tuning rules of an auto variant
// (AutoRule, Choose), the limits both sides check (MaxWorld, ThreadStep,
// MaxThreads, MaxBlocks) and the names both sides must agree on
// (KernelName, SpecHashSymbol, KernelFile with each platform's ObjectExt).
//
// Each of these is defined here and nowhere else: internal/ir embeds the
// descriptors with their spec positions, goemit writes them into the
// generated table, internal/tuning writes AutoRules, and the runtime reads
// them (docs/internals.md, "One home per rule"). It imports nothing of
// irisgen, so generated packages, downstream programs and the generator can
// all use it; it holds no state.
package irismodel

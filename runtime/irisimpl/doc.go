// Package irisimpl is the contract between the Go code irisgen generates and
// the runtime, as protobuf-go's runtime/protoimpl is for its generated code:
// generated packages import it, people do not. It holds
//
//   - the descriptor table a generated package writes once and registers in
//     init (Table, Collective, Variant, SizeParam, Use; Register,
//     Registered), with the model's TensorDesc, ParamDesc and AutoRule
//     (runtime/irismodel) inside;
//   - the interpreter of that table: the checks of a constructor and of a
//     launch, the kernel name (Variant.Kernel), the plan's grid, workspace,
//     staging and address slots (Blocks), the packing of the kernel's
//     arguments, and the convenience call with its plan cache
//     (Collective.RunParams);
//   - VariantPlan, which every generated plan type embeds, with NewPlanOf,
//     the body of every generated constructor;
//   - the catalogue a generated package exposes under its own names (Entry,
//     TensorInfo, AnyPlan: tools that pick a variant at run time);
//   - the API level generated code checks at compile time (API, MinAPI).
//
// The typed surface a user calls is the generated package's; the values it
// takes and returns (Rank, Tensor, the typed errors) are runtime/irisrt's,
// and the dtypes, barrier modes and launch parameters runtime/irismodel's.
// irisimpl drives irisrt's plan core through runtime/internal/core, which
// irisrt does not export to users. docs/internals.md ("The generated-code
// contract") lists it, and "One home per rule" what lives where.
package irisimpl

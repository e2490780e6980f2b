// Package irisrt is irisgen's Go runtime as its users call it: tensors, the
// symmetric heap, in-process and multi-process worlds with their host
// rendezvous, groups, graphs, and the typed errors launches return. Plans
// are made and launched through the typed wrappers of a generated package;
// the contract those wrappers are written against (the descriptor table and
// its interpreter) is runtime/irisimpl, the dtypes, barrier modes and
// launch parameters are runtime/irismodel. Underneath, irisrt keeps the plan
// core (everything a launch needs, allocated before any capture; launch
// numbers, fingerprints and refusals; the loading of code objects), which
// it hands to irisimpl through runtime/internal/core instead of exporting
// it.
// It lives in runtime/irisrt, beside the platform layer (runtime/gpu) and the
// device header (runtime/include), and is named so that it does not shadow
// the standard library's runtime package.
//
// Plans and launches are collective: every rank makes the same calls in the
// same order. Each rank numbers its launch calls, and every kernel carries
// its number and a fingerprint of the launch, which the kernels compare
// where they meet (launch.go): a launch one rank refuses on the host makes
// its peers' kernels of it give up at once (*PeerRefusedError), launches
// that differ are found (*MismatchError), both world faults like a timeout
// (faults.go): close the world and start a new one. After a world, plan,
// group or graph is closed, every call that would reach the GPU returns a
// *ClosedError.
package irisrt

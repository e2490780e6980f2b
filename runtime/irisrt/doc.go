// Package irisrt is irisgen's Go runtime: element types and tensors, the
// symmetric heap, in-process and multi-process worlds with their host
// rendezvous, plans (everything a launch needs, allocated before any capture),
// the interpreter of the descriptor tables that generated packages hand it
// (Table: their checks, kernel names, plan shapes, convenience calls and
// catalogue), the registry and loading of the code objects they embed, and
// the typed errors their launch wrappers return.
// It lives in runtime/irisrt, beside the platform layer (runtime/gpu) and the
// device header (runtime/include), and is named so that it does not shadow
// the standard library's runtime package.
//
// The generated wrappers in generated/collectives call exactly the API listed
// in docs/internals.md ("Runtime API that generated wrappers call").
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

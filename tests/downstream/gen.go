// Package stencil is an example of a repository that generates its
// collectives with irisgen: its own halo exchange and broadcast from a root
// (specs/, templates/), and irisgen's all_reduce, moe_dispatch and
// moe_combine (irisgen.yaml's catalogue key), all generated into one
// package, internal/gen/coll, checked in, and run on GPUs by cmd/stencil
// against a CPU reference.
package stencil

//go:generate go tool irisgen generate

// Package stencil is an example of a repository that generates its own
// collectives with irisgen: a halo exchange and a broadcast (specs/,
// templates/, irisgen.yaml), generated into internal/gen and checked in,
// run on GPUs by cmd/stencil against a CPU reference.
package stencil

//go:generate go tool irisgen generate

//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing where the kernel cannot stop a child with its
// parent: a bench stopped by a signal may leave its sampler running.
func dieWithParent(*exec.Cmd) {}

package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel stop cmd when the process that started it
// ends, however it ends (a bench stopped by a signal runs no deferred
// Stop).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

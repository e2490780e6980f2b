//go:build !linux

package launch

import (
	"fmt"
	"syscall"
)

// waitExit blocks until process pid has exited and says how. Outside Linux
// it reaps the process (there is no portable way not to), so its group id
// could in principle be reused before finish signals it.
func waitExit(pid int) (ok bool, status string) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Sprintf("could not be waited for (%v)", err)
		}
		break
	}
	if ws.Signaled() {
		return killedBy(ws.Signal())
	}
	return exitedWith(ws.ExitStatus())
}

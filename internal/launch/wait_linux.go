package launch

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"
)

// waitExit blocks until process pid has exited and says how, without
// reaping it: the zombie keeps its pid, and so its process group's id,
// from being reused, so signalling the group stays safe until finish reaps
// it (waitid with WNOWAIT, as the os package itself does).
func waitExit(pid int) (ok bool, status string) {
	const pPID, wNOWAIT = 1, 0x01000000
	const cldExited = 1 // CLD_EXITED; CLD_KILLED and CLD_DUMPED carry a signal
	var info [128]byte  // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|wNOWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return false, fmt.Sprintf("could not be waited for (%v)", e)
		}
		break
	}
	// si_signo, si_errno, si_code, then the union (pointer-aligned), whose
	// SIGCHLD member is si_pid, si_uid, si_status.
	union := (12 + unsafe.Sizeof(uintptr(0)) - 1) &^ (unsafe.Sizeof(uintptr(0)) - 1)
	code := int32(binary.NativeEndian.Uint32(info[8:]))
	st := int(int32(binary.NativeEndian.Uint32(info[union+8:])))
	if code == cldExited {
		return exitedWith(st)
	}
	return killedBy(syscall.Signal(st))
}

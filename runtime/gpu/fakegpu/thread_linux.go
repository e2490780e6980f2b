package fakegpu

import "syscall"

// osThread is the calling OS thread's id.
func osThread() int { return syscall.Gettid() }

//go:build !linux

package fakegpu

// osThread is 0 where the thread's id is not known: captures are not
// checked for the thread that ends them.
func osThread() int { return 0 }

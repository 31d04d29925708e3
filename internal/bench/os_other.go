//go:build !linux

package bench

import "syscall"

// setDeathSignal does nothing where there is no parent-death signal; the
// child is still stopped on every return path of Run.
func setDeathSignal(*syscall.SysProcAttr) {}

// kernelRelease is unknown here.
func kernelRelease() string { return "" }

//go:build linux

package bench

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// setDeathSignal asks the kernel to SIGKILL the child when the thread that
// started it dies, which for a Go program means when the process dies (the
// runtime does not end threads of unlocked goroutines), so that a crashed or
// killed benchmark leaves no server behind.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// kernelRelease returns uname's release, e.g. "6.8.0-45-generic".
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

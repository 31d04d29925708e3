//go:build linux

package bench

import "golang.org/x/sys/unix"

// kernelRelease returns uname's release, e.g. "6.8.0-45-generic".
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

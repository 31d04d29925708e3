//go:build !linux

package sleep

import (
	"time"
)

// sysWait reports that the system-call methods are Linux-only here.
func sysWait(method string, d time.Duration) (func(), error) {
	return nil, errNotLinux
}

// cpuTimes is not measured off Linux.
func cpuTimes() (user, sys time.Duration) { return 0, 0 }

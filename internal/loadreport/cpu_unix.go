//go:build unix

package loadreport

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns the CPU time the process has used, in user and kernel
// mode, all its threads together.
func processCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

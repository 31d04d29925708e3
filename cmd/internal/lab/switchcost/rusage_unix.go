//go:build unix

package switchcost

import (
	"syscall"
	"time"
)

// rusage is the whole process's counters, every thread included (living
// and exited): /proc/self/status only counts the main thread's switches.
type rusage struct {
	cpu        time.Duration // user + system
	vol, invol int64         // voluntary, involuntary context switches
	ok         bool
}

func selfUsage() rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return rusage{}
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return rusage{cpu: cpu, vol: int64(ru.Nvcsw), invol: int64(ru.Nivcsw), ok: true}
}

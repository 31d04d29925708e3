//go:build linux

package osprio

import (
	"fmt"

	"golang.org/x/sys/unix"
)

const supported = true

func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

func lower(p Policy) error {
	if p.Sched != 0 {
		attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: uint32(p.Sched), Nice: int32(p.Nice)}
		if err := unix.SchedSetAttr(0, attr, 0); err != nil {
			return fmt.Errorf("osprio: sched_setattr(%s): %w", p.Name, err)
		}
		return nil
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), p.Nice); err != nil {
		return fmt.Errorf("osprio: setpriority(nice %d): %w", p.Nice, err)
	}
	return nil
}

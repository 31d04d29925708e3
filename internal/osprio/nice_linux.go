package osprio

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func lowerNice(tid, n int) error {
	if tid == 0 {
		tid = unix.Gettid()
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil {
		return fmt.Errorf("osprio: setpriority(%d): %w", n, err)
	}
	return nil
}

func lowerNiceSlice(tid, n int, slice time.Duration) error {
	cur, err := current(tid)
	if err != nil {
		return err
	}
	policy := uint32(cur.policy)
	if policy != unix.SCHED_NORMAL && policy != unix.SCHED_BATCH {
		policy = unix.SCHED_NORMAL
	}
	attr := unix.SchedAttr{Policy: policy, Flags: uint64(cur.flags), Nice: int32(n), Runtime: uint64(slice)}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		return fmt.Errorf("osprio: sched_setattr(nice %d, slice %v): %w", n, slice, err)
	}
	return nil
}

func threadSlice(tid int) (time.Duration, error) {
	var attr unix.SchedAttr
	_, _, errno := unix.RawSyscall6(unix.SYS_SCHED_GETATTR, uintptr(tid), uintptr(unsafe.Pointer(&attr)), unix.SizeofSchedAttr, 0, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("osprio: sched_getattr: %w", errno)
	}
	return time.Duration(attr.Runtime), nil
}

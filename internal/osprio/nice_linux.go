package osprio

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func lowerNice(tid, n int, slice time.Duration) error {
	if tid == 0 {
		tid = unix.Gettid()
	}
	if slice > 0 {
		attr, err := getAttr(tid)
		if err == nil && (attr.Policy == unix.SCHED_NORMAL || attr.Policy == unix.SCHED_BATCH) {
			set := unix.SchedAttr{
				Policy:  attr.Policy,
				Flags:   attr.Flags & unix.SCHED_FLAG_RESET_ON_FORK,
				Nice:    int32(n),
				Runtime: uint64(slice),
			}
			if unix.SchedSetAttr(tid, &set, 0) == nil {
				return nil
			}
			// A kernel that refuses the slice still takes the nice value.
		}
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil {
		return fmt.Errorf("osprio: setpriority(%d): %w", n, err)
	}
	return nil
}

func baseSlice() time.Duration {
	for _, tid := range []int{0, unix.Getpid()} {
		attr, err := getAttr(tid)
		if err != nil || (attr.Policy != unix.SCHED_NORMAL && attr.Policy != unix.SCHED_BATCH) || attr.Nice > 0 {
			continue // not a normal thread: it may have been lowered, with a slice of its own
		}
		return time.Duration(attr.Runtime)
	}
	return 0
}

// getAttr reads thread tid's sched_attr (0: the calling thread's).
// sched_getattr never blocks: RawSyscall spares the runtime's
// entersyscall/exitsyscall, and unlike unix.SchedGetAttr this does not
// allocate.
func getAttr(tid int) (unix.SchedAttr, error) {
	var attr unix.SchedAttr
	_, _, errno := unix.RawSyscall6(unix.SYS_SCHED_GETATTR, uintptr(tid), uintptr(unsafe.Pointer(&attr)), unix.SizeofSchedAttr, 0, 0, 0)
	if errno != 0 {
		return unix.SchedAttr{}, fmt.Errorf("osprio: sched_getattr: %w", errno)
	}
	return attr, nil
}

package osprio

import (
	"fmt"
	"os"
	"strconv"
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

func setProcessSlice(from, to time.Duration) int {
	if from <= 0 {
		return 0
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		attr, err := getAttr(tid)
		if err != nil || attr.Policy != unix.SCHED_NORMAL && attr.Policy != unix.SCHED_BATCH || time.Duration(attr.Runtime) != from {
			continue
		}
		// A child process forked from a thread with a slice of its own
		// keeps it, across exec too; with the flag it starts at the
		// kernel's.
		var flags uint64
		if to > 0 {
			flags = unix.SCHED_FLAG_RESET_ON_FORK
		}
		set := unix.SchedAttr{Policy: attr.Policy, Flags: flags, Nice: attr.Nice, Runtime: uint64(to)}
		if unix.SchedSetAttr(tid, &set, 0) == nil {
			n++
		}
	}
	return n
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

//go:build linux

package hogproc

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// lowerAll makes every thread of this process SCHED_IDLE.
func lowerAll() (int, error) {
	return lowerThreads(func() ([]int, error) { return threadIDs("self") }, setIdle)
}

// setIdle makes thread tid SCHED_IDLE (any thread may lower itself or a
// thread of its own process; no privilege is needed).
func setIdle(tid int) error {
	return unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_IDLE}, 0)
}

// threadIDs returns the ids of the threads of process proc ("self" or a
// pid), from /proc/PROC/task.
func threadIDs(proc string) ([]int, error) {
	entries, err := os.ReadDir("/proc/" + proc + "/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// CheckThreads checks from outside that every thread of process pid is
// SCHED_IDLE (sched_getattr on each). It returns how many it checked, or
// an error naming the first thread that is not.
func CheckThreads(pid int) (int, error) {
	tids, err := threadIDs(strconv.Itoa(pid))
	if err != nil {
		return 0, fmt.Errorf("listing the hog's threads: %w", err)
	}
	n := 0
	for _, tid := range tids {
		attr, err := unix.SchedGetAttr(tid, 0)
		switch {
		case errors.Is(err, unix.ESRCH):
			continue // exited since the listing
		case err != nil:
			return n, fmt.Errorf("the hog's thread %d: sched_getattr: %w", tid, err)
		case attr.Policy != unix.SCHED_IDLE:
			return n, fmt.Errorf("the hog's thread %d has scheduling policy %d, not SCHED_IDLE (%d)", tid, attr.Policy, unix.SCHED_IDLE)
		}
		n++
	}
	return n, nil
}

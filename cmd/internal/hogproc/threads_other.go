//go:build !linux

package hogproc

import (
	"errors"
	"fmt"
)

// lowerAll fails: SCHED_IDLE is Linux's.
func lowerAll() (int, error) {
	return 0, fmt.Errorf("%w: SCHED_IDLE is a Linux scheduling policy", ErrNoSchedIdle)
}

// CheckThreads fails: SCHED_IDLE is Linux's.
func CheckThreads(pid int) (int, error) {
	return 0, errors.New("SCHED_IDLE is a Linux scheduling policy")
}

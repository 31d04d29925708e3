// Lowering every thread of the process, whatever the OS's call for one.

package hogproc

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// LowerAll makes every thread of this process SCHED_IDLE, as the floor's
// hog does before its work, and returns how many it lowered; threads the
// runtime starts later are cloned from lowered ones and inherit the
// policy. Its error wraps ErrNoSchedIdle (not Linux, or sched_setattr
// refused). `cpusched lab libcalls` lowers its floor's server with it.
func LowerAll() (int, error) { return lowerAll() }

// lowerThreads applies set to every thread that list returns, and lists
// again until two listings in a row, a millisecond apart, hold no thread
// it has not set: a thread that the runtime started meanwhile from one not
// yet lowered is found by a later listing, and one started from a lowered
// thread inherits SCHED_IDLE when it is cloned. One clean listing was not
// enough: a clone that copied its parent's policy just before the parent
// was lowered can join the thread list only after that listing (a
// loaded machine's bench found such a thread at normal priority). A
// thread that exits before set reaches it is not counted.
// It returns how many threads it lowered; any other failure wraps
// ErrNoSchedIdle, since the process cannot then be the floor.
func lowerThreads(list func() ([]int, error), set func(tid int) error) (int, error) {
	seen := map[int]bool{}
	lowered, clean := 0, 0
	for {
		tids, err := list()
		if err != nil {
			return 0, fmt.Errorf("%w: listing the threads: %v", ErrNoSchedIdle, err)
		}
		fresh := false
		for _, tid := range tids {
			if seen[tid] {
				continue
			}
			seen[tid], fresh = true, true
			switch err := set(tid); {
			case err == nil:
				lowered++
			case !errors.Is(err, syscall.ESRCH): // ESRCH: it has exited
				return 0, fmt.Errorf("%w: thread %d: sched_setattr(SCHED_IDLE): %v", ErrNoSchedIdle, tid, err)
			}
		}
		if fresh {
			clean = 0
			continue
		}
		if clean++; clean == 2 {
			return lowered, nil
		}
		time.Sleep(time.Millisecond)
	}
}

package osprio

import (
	"fmt"
	"time"
)

// The milder lowering: a nice value, for threads that cannot be raised
// back and may have to run beside another busy process (the cpusched
// package's hand-off threads where it lacks the privilege to raise).

// LowerNice sets the nice value of thread tid of this process (0: the
// calling thread) to n (1..19), keeping its policy. Raising a thread's
// nice value needs no privilege; lowering it back does.
func LowerNice(tid, n int) error { return lowerNice(tid, n) }

// MinSlice and MaxSlice bound the slice LowerNiceSlice asks for: the
// range the kernel clamps a custom slice to.
const (
	MinSlice = 100 * time.Microsecond
	MaxSlice = 100 * time.Millisecond
)

// LowerNiceSlice is LowerNice that also asks the kernel for a custom
// slice (sched_setattr's sched_runtime, Linux 6.12 and later; earlier
// kernels ignore it): the time the thread may run before a thread that
// woke beside it on its CPU is picked. EEVDF protects a running thread's
// slice from wake-up preemption (RUN_TO_PARITY), 0.75 ms times
// 1+log2(CPUs) by default, so a normal-priority thread that wakes beside
// a nice thread can wait that long; a short slice ends the wait early.
// SCHED_IDLE threads need none of this: the kernel preempts them at every
// wake-up. A slice of 0 asks for the default. Like LowerNice, it needs no
// privilege; it keeps SCHED_BATCH and makes any other policy
// SCHED_OTHER.
func LowerNiceSlice(tid, n int, slice time.Duration) error {
	if slice != 0 && (slice < MinSlice || slice > MaxSlice) {
		return fmt.Errorf("osprio: LowerNiceSlice: slice %v, want 0 or %v..%v", slice, MinSlice, MaxSlice)
	}
	return lowerNiceSlice(tid, n, slice)
}

// ThreadSlice returns the slice of thread tid of this process (0: the
// calling thread) as the kernel reports it: the custom one, or the
// default; 0 on kernels before Linux 6.12.
func ThreadSlice(tid int) (time.Duration, error) { return threadSlice(tid) }

// Idle reports whether a is SCHED_IDLE, at any nice value (a thread lowered
// to a nice value and then to SCHED_IDLE keeps the nice value).
func (a Attr) Idle() bool { return a.policy == schedIdle }

// Nice returns a's nice value.
func (a Attr) Nice() int { return int(a.nice) }

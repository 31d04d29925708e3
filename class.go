package cpusched

// Class: a task's scheduling class, with Linux's meanings.

import "fmt"

// Class is a task's scheduling class, with the meaning of Linux's policies.
type Class int

const (
	// ClassNormal shares the CPU by nice weight and group weight (SCHED_NORMAL).
	ClassNormal Class = iota
	// ClassRealtime runs before every other class, but is throttled to 95% of
	// the slot time in each second while others wait, as the kernel's
	// sched_rt_runtime_us default, so that no other class starves.
	ClassRealtime
	// ClassBatch shares like ClassNormal but never preempts a running task
	// early and runs with slices four times as long (SCHED_BATCH).
	ClassBatch
	// ClassIdle runs only when no Normal, Batch or Realtime task waits, except
	// for a guaranteed 0.3% of the slot time (the share of the kernel's
	// SCHED_IDLE weight 3 against a nice-0 task's 1024) so it still
	// progresses.
	ClassIdle
)

// String returns the class name.
func (c Class) String() string {
	switch c {
	case ClassNormal:
		return "normal"
	case ClassRealtime:
		return "realtime"
	case ClassBatch:
		return "batch"
	case ClassIdle:
		return "idle"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// ParseClass returns the class named s (normal, realtime, batch, idle).
func ParseClass(s string) (Class, error) {
	for c := ClassNormal; c <= ClassIdle; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("cpusched: unknown class %q (valid: normal, realtime, batch, idle)", s)
}

// numClasses is the number of public classes, the length of Stats.Classes.
const numClasses = int(ClassIdle) + 1

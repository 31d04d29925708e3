// Package osprio lowers the kernel scheduling priority of the calling OS
// thread, for cpusched's IsolationOSPriority workers, and reads the CPU
// time the calling thread has used (ThreadCPU).
//
// On Linux, nice and the scheduling policy are per thread: a goroutine that
// has called runtime.LockOSThread can lower its own thread's priority
// without touching the rest of the process. An unprivileged thread cannot
// raise its priority back, so a lowered thread must stay locked until its
// goroutine exits (the runtime then discards the thread).
package osprio

import (
	"fmt"
	"strings"
)

// Policy is a kernel setting for a worker thread.
type Policy struct {
	Name  string // as ParsePolicy spells it
	Sched int    // 0 normal, 3 batch, 5 idle (Linux's SCHED_* numbers)
	Nice  int
}

// Policies that the OS-priority mode was measured with.
var (
	Idle   = Policy{Name: "idle", Sched: 5}
	Batch  = Policy{Name: "batch10", Sched: 3, Nice: 10}
	Nice19 = Policy{Name: "nice19", Nice: 19}
	Nice10 = Policy{Name: "nice10", Nice: 10}
)

var all = []Policy{Idle, Batch, Nice19, Nice10}

// ParsePolicy returns the policy named s.
func ParsePolicy(s string) (Policy, error) {
	var names []string
	for _, p := range all {
		if p.Name == s {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Policy{}, fmt.Errorf("osprio: unknown policy %q (valid: %s)", s, strings.Join(names, ", "))
}

// Supported reports whether this platform has per-thread priorities.
func Supported() bool { return supported }

// Lower applies p to the calling thread. The caller must have locked its
// goroutine to the thread and must never unlock it.
func Lower(p Policy) error { return lower(p) }

// ThreadCPU returns the CPU time, in ns, that the calling OS thread has
// used (CLOCK_THREAD_CPUTIME_ID; a system call, a fraction of a
// microsecond), or 0 where it cannot be read. Only differences between two
// readings on one thread mean anything: call it from a goroutine locked to
// its thread.
func ThreadCPU() int64 { return threadCPU() }

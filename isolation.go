package cpusched

// Isolation: how the scheduler keeps the rest of the program fast, and
// the worker count each mode chooses.

import (
	"fmt"

	"github.com/cpusched/cpusched/internal/osprio"
)

// Isolation says how a Scheduler keeps the goroutines it does not run (the
// rest of the program: HTTP handlers, timers, the netpoller) fast while its
// tasks use the CPU.
type Isolation int

const (
	// IsolationReserve runs tasks on fewer worker slots than GOMAXPROCS, as
	// cpuworker does, so that goroutines outside the scheduler always find a
	// free P: GOMAXPROCS<=2: 1 slot; <=5: n-1; <=7: n-2; else n-n/4. It
	// protects latency by leaving CPUs unused by tasks. It is the default
	// where IsolationOSPriority is not available.
	//
	// At GOMAXPROCS 1 (a one-CPU cpuset, or GOMAXPROCS=1 set by the
	// operator or the program) the 1 slot would hold the only P, and the
	// rest of the program would wait for Go's 10 ms preemption, so New
	// raises GOMAXPROCS to 2 while the Scheduler is open, as
	// IsolationOSPriority raises it, and the last such Scheduler's Close
	// restores it (see New); the same with WithWorkers at or above
	// GOMAXPROCS: the worker count plus one. Elsewhere GOMAXPROCS is left
	// alone.
	IsolationReserve Isolation = iota
	// IsolationNone runs tasks on GOMAXPROCS slots: all the CPU for tasks,
	// and no protection for the rest of the program beyond the Go runtime's
	// own round-robin.
	IsolationNone
	// IsolationOSPriority (Linux) runs tasks on GOMAXPROCS worker slots
	// whose threads run at a lower kernel priority (SCHED_IDLE), and
	// raises GOMAXPROCS to the worker count plus one: the kernel preempts
	// a task's thread the moment another thread of the program wakes, so
	// the rest of the program stays fast and the tasks still get every
	// idle cycle. It is the default on Linux; its slice defaults to 10 ms.
	//
	// Where a lowered thread can be raised back (CAP_SYS_NICE, or an
	// RLIMIT_NICE that allows it; New probes once), a task runs on its own
	// goroutine (Run's caller, or one started for Go), locked to its thread
	// while fn runs, and that thread is lowered once the task has computed
	// for 250 us by the thread's CPU clock (checked at the task's
	// Checkpoints, and by the slice monitor for tasks that make none); fn's
	// return puts it back. So short tasks cost no thread switch and run at
	// the thread's own priority: an empty Run costs what it does in the
	// other modes and one system call more, gettid, which finds its thread
	// for the monitor: a microsecond or two where system calls are slow
	// (docs/performance.md#scheduler-calls). Tasks of a
	// function whose recent tasks ran long are handed to hand-off threads,
	// goroutines locked to lowered threads for good, which protect the rest
	// of the program better under long tasks; once that function's tasks are
	// short again they run on their own goroutines again. Where a thread
	// cannot be raised back (a container's default: no CAP_SYS_NICE,
	// RLIMIT_NICE 0), every task is handed off, which costs a thread
	// wake-up each way unless the hand-off thread is still spinning after a
	// short task (docs/measurements/ospriority-settings.md#hand-off); the
	// hand-off threads are then lowered to nice 10, not SCHED_IDLE, and
	// while other processes keep the CPUs busy a task leaves its thread at
	// its next Checkpoint and the thread is ended
	// (docs/design.md#without-the-privilege-to-raise). So it is, with
	// the privilege too, where the process has one CPU (a one-CPU cpuset
	// or affinity mask, a cgroup limit of 1 CPU or less): its one slot cannot be lent,
	// and a SCHED_IDLE thread holding it stalls each stop of the world
	// beside a busy fast path (docs/design.md#one-cpu). Stats says which
	// path is in effect (ThreadsRaisable). Either way a task on a lowered
	// hand-off thread yields the thread to the kernel at a Checkpoint
	// every 0.25 ms (a system call), so that a thread of the program that
	// waits for the CPU gets it; work without Checkpoints cannot.
	//
	// While other processes keep the CPUs the process may use busy
	// (Stats.Contended), every thread of the process that has the kernel's
	// own time slice gets its shortest, 0.1 ms (sched_attr's runtime:
	// Linux 6.12 and later; no privilege needed), until no Scheduler reads
	// them busy or the Scheduler closes: a stop of the world then waits
	// less for the process's threads to get the CPU back from the others'
	// (docs/design.md#a-busy-machine). A thread given a slice of its own
	// is left as it is. Every task that calls Checkpoint then takes turns
	// too, at normal priority as well (a task on its own goroutine once it
	// has computed 0.25 ms), in a system call the runtime knows of: a
	// thread that waits for the CPU there leaves its P to a stop of the
	// world.
	//
	// With every slot taken the rest of the program has one P. While it
	// keeps that P busy with goroutines waiting for more, the scheduler
	// lends it a slot: it runs one task fewer at once (the first task to
	// come to a Checkpoint gives its slot up), down to one, and gives the
	// slot back once the rest of the program leaves a P idle again. A
	// server whose own work needs more than one CPU then has about the Ps
	// it would have with the CPU-heavy work in another process, and the
	// tasks get less of the CPU while it is that busy. A quiet program
	// loses nothing to it. Stats.Lent and Stats.Lends count it
	// (docs/measurements/ospriority-settings.md#lending-slots).
	//
	// Under a cgroup CPU limit (a container's) that set GOMAXPROCS, it
	// runs one worker fewer than the limit rounded up, at least 1: the
	// kernel throttles the whole cgroup once the quota is spent,
	// low-priority threads or not, so the workers must leave part of the
	// quota unused (see New). Where thread priorities are unavailable, New
	// falls back to IsolationReserve, logs a warning (WithLogger), and
	// Stats reports the mode in effect.
	IsolationOSPriority
)

// String returns the mode's name as the command line spells it.
func (m Isolation) String() string {
	switch m {
	case IsolationReserve:
		return "reserve"
	case IsolationNone:
		return "none"
	case IsolationOSPriority:
		return "ospriority"
	}
	return fmt.Sprintf("Isolation(%d)", int(m))
}

// ParseIsolation returns the mode named s: "reserve", "none" or, where
// IsolationModes lists it, "ospriority".
func ParseIsolation(s string) (Isolation, error) {
	for _, m := range isolationModes {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("cpusched: unknown isolation mode %q (valid: %s)", s, isolationNames())
}

// IsolationModes returns every mode this build supports, in the order the
// benchmark measures them.
func IsolationModes() []Isolation { return append([]Isolation(nil), isolationModes...) }

func isolationNames() string {
	s := ""
	for i, m := range isolationModes {
		if i > 0 {
			s += ", "
		}
		s += m.String()
	}
	return s
}

func (m Isolation) valid() bool {
	for _, v := range isolationModes {
		if v == m {
			return true
		}
	}
	return false
}

// DefaultIsolation returns the mode New uses without WithIsolation:
// IsolationOSPriority on Linux, which measured best (the probe's tail as
// low as reserve's with most of the CPU-heavy throughput instead of about
// half: docs/performance.md#the-main-job), IsolationReserve elsewhere.
func DefaultIsolation() Isolation {
	if osprio.Supported() {
		return IsolationOSPriority
	}
	return IsolationReserve
}

// reserveWorkers returns the worker count IsolationReserve uses for
// GOMAXPROCS procs: cpuworker's rule, which leaves at least one P free
// from 2 up; at 1 it is 1, and New raises GOMAXPROCS (reserveProcs).
func reserveWorkers(procs int) int {
	switch {
	case procs <= 2:
		return 1
	case procs <= 5:
		return procs - 1
	case procs <= 7:
		return procs - 2
	default:
		return procs - procs/4
	}
}

var isolationModes = []Isolation{IsolationNone, IsolationReserve, IsolationOSPriority}

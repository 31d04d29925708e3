// Package osprio lowers, and puts back, the kernel scheduling priority of
// an OS thread, for cpusched's IsolationOSPriority, and reads the CPU time
// a thread has used (ThreadCPU, ThreadCPUOf).
//
// On Linux, nice and the scheduling policy are per thread: a goroutine that
// has called runtime.LockOSThread can lower its own thread's priority
// without touching the rest of the process. Raising it back needs
// CAP_SYS_NICE, or an RLIMIT_NICE that allows the nice value it goes back
// to (since Linux 2.6.39 an unprivileged thread may leave SCHED_IDLE for
// SCHED_OTHER only within RLIMIT_NICE, whose default of 0 allows nothing).
// A lowered thread whose setting was not restored must stay locked until
// its goroutine exits: the runtime then discards the thread instead of
// running other goroutines on it.
package osprio

import "fmt"

// Lower's setting, the only one: SCHED_IDLE (Linux's SCHED_* number) at
// nice 0. Why this one and not a nice level or SCHED_BATCH: cpusched's
// ospriority.go.
const (
	schedIdle = 5
	idleNice  = 0
)

// Supported reports whether this platform has per-thread priorities.
func Supported() bool { return supported }

// ThreadCPU returns the CPU time, in ns, that the calling OS thread has
// used (CLOCK_THREAD_CPUTIME_ID; a system call, a fraction of a
// microsecond), or 0 where it cannot be read. Only differences between two
// readings on one thread mean anything: call it from a goroutine locked to
// its thread.
func ThreadCPU() int64 { return threadCPU() }

// ThreadCPUOf is ThreadCPU for thread tid of this process, read from any
// thread; 0 where it cannot be read.
func ThreadCPUOf(tid int) int64 { return threadCPUOf(tid) }

// Lower makes the calling thread SCHED_IDLE (at nice 0). The caller must
// have locked its goroutine to the thread, and must not unlock it unless
// Restore put back the setting that Current read before.
func Lower() error { return lower(0) }

// Yield offers the calling thread's CPU to the other threads runnable on
// it (sched_yield), and returns when the kernel runs the thread again: at
// once where nothing else waits there. It does nothing where the system
// has no such call. The goroutine keeps its P meanwhile, as it does when
// the kernel preempts its thread.
func Yield() { yield() }

// YieldReleasing is Yield made as a system call the runtime knows of: while
// the kernel runs other threads, the thread waits inside the call, and its
// P is in a system call, which a stop-the-world takes without waiting for
// the thread, and which the runtime may hand to another thread.
func YieldReleasing() { yieldReleasing() }

// ThreadID returns the calling thread's id (gettid), for LowerThread.
func ThreadID() int { return threadID() }

// LowerThread reads the setting of thread tid of this process and, unless
// it is already the one Lower makes, lowers the thread as Lower does; it
// reports whether it did. Any thread of the process may call it for any
// other (lowering needs no privilege). The goroutine locked to thread tid
// must stay locked until it has put the returned setting back with
// Restore.
func LowerThread(tid int) (before Attr, lowered bool, err error) {
	before, err = current(tid)
	if err != nil || before.Lowered() {
		return before, false, err
	}
	if err := lower(tid); err != nil {
		return before, false, err
	}
	return before, true, nil
}

// Attr is a thread's scheduling setting, as Current read it: the policy,
// its nice value (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE) or realtime
// priority (SCHED_FIFO, SCHED_RR), and whether it resets on fork.
type Attr struct {
	policy   uint8 // SCHED_OTHER 0 .. SCHED_EXT 7, not SCHED_DEADLINE 6
	nice     int8  // -20..19
	priority uint8 // 1..99 for SCHED_FIFO and SCHED_RR, else 0
	flags    uint8 // SCHED_FLAG_RESET_ON_FORK or 0
}

// Current returns the calling thread's setting, for Restore. It fails for
// a SCHED_DEADLINE thread, whose parameters it does not keep: do not lower
// such a thread. The caller must have locked its goroutine to the thread.
func Current() (Attr, error) { return current(0) }

// Restore applies a, which Current read on this thread, to the calling
// thread. On failure the thread keeps the setting it had; see the package
// comment for what that asks of its goroutine.
func (a Attr) Restore() error { return restore(a) }

// Lowered reports whether a is the setting that Lower makes, so a thread
// already there (a task's goroutine that calls Run) need not be lowered
// and restored.
func (a Attr) Lowered() bool {
	return a.policy == schedIdle && a.nice == idleNice
}

// String describes a for logs: "policy 0 nice 0".
func (a Attr) String() string {
	if a.policy == 1 || a.policy == 2 { // SCHED_FIFO, SCHED_RR
		return fmt.Sprintf("policy %d priority %d", a.policy, a.priority)
	}
	return fmt.Sprintf("policy %d nice %d", a.policy, a.nice)
}

// RestoreThread applies a, which Current or LowerThread read, to thread
// tid of this process: raising it back needs the privilege Restore needs.
// The goroutine locked to tid keeps its lock.
func (a Attr) RestoreThread(tid int) error { return restoreThread(tid, a) }

// ProcessCPU returns the CPU time, in ns, that every thread of this
// process has used (CLOCK_PROCESS_CPUTIME_ID), or 0 where it cannot be
// read. Only differences between two readings mean anything.
func ProcessCPU() int64 { return processCPU() }

// CurrentThread is Current for thread tid of this process, read from any
// thread.
func CurrentThread(tid int) (Attr, error) { return current(tid) }

package cpusched

// IsolationOSPriority: tasks run on OS threads whose kernel priority is
// lowered, and GOMAXPROCS is raised above the worker count, so that
// goroutines outside the scheduler always find a free P and their threads
// preempt the tasks' threads in the kernel the moment they wake. No
// Checkpoint is needed for that protection; Checkpoint still orders
// cpusched's own tasks.
//
// Own goroutines, lowered late. Where a lowered thread can be raised back
// (CAP_SYS_NICE, or an RLIMIT_NICE that allows the setting it came from;
// New probes it once, probeOSRestore), a task runs on its own goroutine as
// in the other modes: the Run caller's, or for Go one the scheduler starts.
// That goroutine is locked to its thread while fn runs (lockThread), so
// the thread id the task records stays its thread, and that thread is
// lowered once the task has computed for osLowerAfter by the thread's CPU
// clock (lowerIfLongLocked): by the monitor, or by the task itself at a
// Checkpoint, since the monitor's timer runs late while the P that set it
// runs the task. The lowered thread stays lowered until fn returns, when
// the task's goroutine puts the setting back and unlocks (unlockThread).
// So a short task costs no thread hand-off and no priority change at all
// (an empty Run: a lock, a gettid and the slot's bookkeeping), and a long
// task runs at normal priority for its first osLowerAfter only, then as a
// worker would. Once a function's recent tasks have been long, its next
// tasks are handed to worker threads after all (dispatch says why), and
// once they are short again, they run on their own goroutines again.
//
// A task whose thread is not lowered waits in Blocking's fn, and for its
// slot back, unlocked, so the wake after a socket wait is a goroutine's,
// not a thread's; a task on a lowered thread keeps it (raising and
// lowering again costs two system calls, and the thread's wake is what a
// worker pays).
// The runtime does not pass a locked thread's setting on to the threads it
// starts meanwhile (newm hands that to its template thread); a child
// process started from fn on a lowered thread does start lowered.
//
// The hand-off: for long tasks, and, where a thread cannot be raised back
// for every task, a worker goroutine locked
// to a lowered thread for good runs the task:
//
// A task parked at a Checkpoint keeps its worker goroutine (and thread)
// blocked, so the workers are a pool that grows past the slot count when
// tasks are parked; idle workers wait for the next task, and the pool keeps
// at most maxIdleOSWorkers of them. Their threads are never unlocked: an
// unprivileged thread cannot raise its priority back, so a worker that
// exits takes its thread with it. (If that thread is the main one, which
// the runtime cannot end, the runtime parks it for good: one idle thread
// stays lowered, and runs nothing.)

import (
	"runtime"
	"time"

	"github.com/cpusched/cpusched/internal/cgroupcpu"
	"github.com/cpusched/cpusched/internal/osprio"
)

// osPrioritySlice is IsolationOSPriority's default slice. In that mode the
// kernel protects the rest of the program, so the slice only orders
// cpusched's own tasks, and every switch between tasks there is a switch
// between locked OS threads, which left the CPUs partly idle at 1 ms
// slices: 10 ms slices kept more of the demo's CPU-heavy throughput, with a
// lower probe p99 (cpusched bench -modes ospriority -slice 10ms against the
// default run at 1 ms; docs/performance.md, "Slice (osPrioritySlice)").
// Small tasks pay for it: their p99 rises, within the
// two slices plus service time a queued task may wait.
const osPrioritySlice = 10 * time.Millisecond

// defaultOSPolicy is IsolationOSPriority's thread setting. SCHED_IDLE,
// which gave the lowest tail under a CPU hog in the prototype measured
// before this project started and in this project's quiet-machine runs,
// with garbage collection busy as good as the others; a comparison on a
// machine shared with other builds was too noisy to overrule it
// (docs/performance.md, "Thread setting"). A constant in effect: only the
// package's tests set another (config.osPolicy).
var defaultOSPolicy = osprio.Idle

// probeOSPriority checks that a thread's priority can be lowered here, on a
// throwaway locked thread.
func probeOSPriority(p osprio.Policy) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the thread
		errc <- osprio.Lower(p)
	}()
	return <-errc
}

// probeOSRestore checks, on a throwaway locked thread, that a lowered
// thread can be raised back here.
func probeOSRestore(p osprio.Policy) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		before, err := osprio.Current()
		if err == nil {
			err = osprio.Lower(p)
		}
		if err == nil {
			err = before.Restore()
		}
		if err == nil {
			runtime.UnlockOSThread()
		} // else exit locked: the runtime discards the thread
		errc <- err
	}()
	return <-errc
}

// osAccess is what New asks of the operating system for
// IsolationOSPriority: whether a thread can be lowered, whether a lowered
// thread can be raised back, and the cgroup CPU limit. The package's tests
// replace it to play a machine without the privilege or with a quota.
type osAccess struct {
	probeLower   func(osprio.Policy) error
	probeRestore func(osprio.Policy) error
	cgroupLimit  func() (cpus float64, limited bool, err error)
}

// realOS is the operating system itself.
var realOS = osAccess{
	probeLower:   probeOSPriority,
	probeRestore: probeOSRestore,
	cgroupLimit:  cgroupcpu.Limit,
}

package cpusched

// IsolationOSPriority: tasks run on OS threads whose kernel priority is
// lowered, and GOMAXPROCS is raised above the worker count, so that
// goroutines outside the scheduler always find a free P and their threads
// preempt the tasks' threads in the kernel the moment they wake. No
// Checkpoint is needed for that protection; Checkpoint still orders
// cpusched's own tasks. The mode's parts, one file each:
//
//	ospriority.go  this overview, the mode's defaults, and New's probes of
//	               what the operating system allows (osAccess)
//	procs.go       the CPU budget the worker count comes from, and the
//	               GOMAXPROCS raise while the mode is open
//	dispatch.go    which tasks run on their own goroutines and which are
//	               handed off, by the table of task lengths
//	lowering.go    a task on its own goroutine: its thread locked, then
//	               lowered once the task has computed for osLowerAfter
//	handoff.go     the hand-off threads: a pool of goroutines locked to
//	               lowered threads for good, which run the handed-off tasks
//	lend.go        fewer tasks at once while the rest of the program keeps
//	               busy every P the tasks leave it
//	pin.go         a Checkpoint's hand-off wakes the next task's thread on
//	               the CPU the yielding thread leaves
//
// Own goroutines, lowered late. Where a lowered thread can be raised back
// (CAP_SYS_NICE, or an RLIMIT_NICE that allows the setting it came from;
// New probes it once, probeOSRestore), a task runs on its own goroutine as
// in the other modes: the Run caller's, or for Go one the scheduler starts.
// That goroutine is locked to its thread while fn runs, and the thread is
// lowered once the task has computed for osLowerAfter, then put back when
// fn returns (lowering.go says by whom and when). So a short task costs no
// thread hand-off and no priority change at all, and a long task runs at
// normal priority for its first osLowerAfter only.
//
// The hand-off. Once a function's recent tasks have been long, its next
// tasks go to hand-off threads (dispatch says why), and once they are short
// again, back to their own goroutines. Where a thread cannot be raised
// back, every task is handed off.
//
// The setting. A lowered thread is SCHED_IDLE (osprio.Lower), the one
// setting the mode has: it gave the lowest tail under a CPU hog in the
// prototype measured before this project started and in this project's
// quiet-machine runs, with garbage collection busy as good as the others
// (nice 19 and 10, SCHED_BATCH at nice 10); a comparison on a machine
// shared with other builds was too noisy to overrule it
// (docs/performance.md#thread-setting).
//
// The runtime does not pass a locked thread's setting on to the threads it
// starts meanwhile (newm hands that to its template thread); a child
// process started from fn on a lowered thread does start lowered.

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
// lower probe p99 (docs/performance.md#slice-ospriorityslice).
// Small tasks pay for it: their p99 rises, within the
// two slices plus service time a queued task may wait.
const osPrioritySlice = 10 * time.Millisecond

// probeOSPriority checks that a thread's priority can be lowered here, on a
// throwaway locked thread.
func probeOSPriority() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the thread
		errc <- osprio.Lower()
	}()
	return <-errc
}

// probeOSRestore checks, on a throwaway locked thread, that a lowered
// thread can be raised back here.
func probeOSRestore() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		before, err := osprio.Current()
		if err == nil {
			err = osprio.Lower()
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
	probeLower   func() error
	probeRestore func() error
	cgroupLimit  func() (cpus float64, limited bool, err error)
}

// realOS is the operating system itself.
var realOS = osAccess{
	probeLower:   probeOSPriority,
	probeRestore: probeOSRestore,
	cgroupLimit:  cgroupcpu.Limit,
}

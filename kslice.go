package cpusched

// Short kernel slices while contended: in IsolationOSPriority, while a
// Scheduler reads other processes keeping the CPUs busy (contention.go),
// every normal thread of the process asks the kernel for its shortest
// time slice, contendedKernelSlice; once no Scheduler reads so, they get
// the kernel's own back.
//
// Why. Beside a CPU-bound neighbour the process's threads take turns with
// the neighbour's on the CPUs, in the kernel's slices (EEVDF: a thread
// picked runs its slice out before a waiting one of the same weight gets
// the CPU). A stop of the world waits until every thread that holds a P
// has been run, and the thread that stopped it must run again to start
// it; each wait can be a slice or two of the neighbour's. A shorter slice
// gives a thread an earlier deadline each time it becomes eligible, so
// the process's threads get the CPU back sooner. What it measured is in
// docs/measurements/busy-machine.md#short-kernel-slices.
//
// What it touches. The slice (sched_attr.sched_runtime, Linux 6.12 and
// later; older kernels ignore it) needs no privilege, and changes neither
// policy nor nice value. Only threads at the kernel's own slice take it:
// one with a slice of its own (a hand-off thread at nice 10, retire.go, or
// one the program set) is left alone, and on the way back only threads
// still at contendedKernelSlice are reset. Threads the runtime starts
// meanwhile are caught every sliceReapply; a process forked meanwhile
// starts at the kernel's slice (osprio.SetProcessSlice). It is
// process-wide, as GOMAXPROCS is (procs.go): the first Scheduler to turn
// contended sets it, the last to turn quiet or close puts it back.

import (
	"sync"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

const (
	// contendedKernelSlice is the kernel slice of the process's threads
	// while contended: the kernel's shortest (it clamps to 0.1-100 ms).
	contendedKernelSlice = 100 * time.Microsecond
	// sliceReapply is how often, while contended, the threads the
	// runtime started since are given the short slice too.
	sliceReapply = 100 * time.Millisecond
)

// kernelSlices is the process-wide state: how many Schedulers hold the
// short slices, and the kernel's own slice as the first found it (0:
// the kernel reports none, and nothing is done).
var kernelSlices struct {
	sync.Mutex
	holds int
	base  time.Duration
}

// sliceHold is one Scheduler's part, kept by its monitor goroutine (and,
// once the monitor has stopped, by release).
type sliceHold struct {
	held bool
	last int64 // when the short slices were last set
}

// tendSlices is the monitor's step after each pass, outside s.mu: it takes
// the short slices when the guard has turned contended, sets them on new
// threads every sliceReapply while it stays so, and lets them go when it
// has turned quiet. now is the pass's time.
func (m *osMode) tendSlices(now int64) {
	if m == nil || m.guard == nil {
		return
	}
	h := &m.slices
	switch contended := m.keepNormal.Load(); {
	case contended && !h.held:
		h.held, h.last = true, now
		holdSlices()
	case contended && now-h.last >= int64(sliceReapply):
		h.last = now
		reapplySlices()
	case !contended && h.held:
		h.held = false
		releaseSlices()
	}
}

// dropSlices is close's step, the monitor stopped: a Scheduler closed
// while contended lets its hold go.
func (m *osMode) dropSlices() {
	if m.slices.held {
		m.slices.held = false
		releaseSlices()
	}
}

func holdSlices() {
	kernelSlices.Lock()
	defer kernelSlices.Unlock()
	if kernelSlices.holds == 0 {
		kernelSlices.base = osprio.BaseSlice()
	}
	kernelSlices.holds++
	osprio.SetProcessSlice(kernelSlices.base, contendedKernelSlice)
}

func reapplySlices() {
	kernelSlices.Lock()
	defer kernelSlices.Unlock()
	if kernelSlices.holds > 0 {
		osprio.SetProcessSlice(kernelSlices.base, contendedKernelSlice)
	}
}

func releaseSlices() {
	kernelSlices.Lock()
	defer kernelSlices.Unlock()
	kernelSlices.holds--
	if kernelSlices.holds == 0 && kernelSlices.base > 0 {
		osprio.SetProcessSlice(contendedKernelSlice, 0)
	}
}

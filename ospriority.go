package cpusched

// IsolationOSPriority: tasks run on OS threads whose kernel priority is
// lowered, and GOMAXPROCS is raised above the worker count, so that
// goroutines outside the scheduler always find a free P and their threads
// preempt the tasks' threads in the kernel the moment they wake. No
// Checkpoint is needed for that protection; Checkpoint still orders
// cpusched's own tasks.
//
// The mode is a layer under the core. The core owns the slots: it starts,
// parks and ends tasks, and hands slots on. The mode owns the threads the
// tasks run on: which goroutine runs a task (its own, or a hand-off
// thread's), locked or not, at what priority, on which CPU. The core calls
// the mode only at named transitions (transitions.go, which lists them in
// the order of a task's life), methods of Scheduler.os, the nil *osMode in
// the other modes, where each does nothing; it tests no state of the
// mode's. The mode calls back into the core only where it hands a slot on
// itself (the hold timer, releaseHold; a lent slot given back, lendLocked;
// a Blocking call that kept its slot and lost it, endHold; the idle
// watch's release and retake, idleLocked) or charges a task whose thread
// it moves (leaveThread), through the core's own steps (giveUpSlotLocked,
// pickLocked, resume, unblock, retakeLocked, chargeLocked,
// taskCPULocked). The mode's parts, one file each:
//
//	transitions.go the layer's surface: each point where the core calls
//	               the mode, and what the mode does there
//	ospriority.go  this overview; the mode's state, on the Scheduler
//	               (osMode) and on each Task (osTask); its parts of a
//	               slot's start (osStartLocked), of fn's start (beginFn)
//	               and of a task's end (osEndLocked); yield on wake; what
//	               the thread's CPU clock says of a task, for the lane and
//	               the charge (threadClock, cpuOfClock, ownLaneCPU); the
//	               mode's defaults, and New's probes of what the operating
//	               system allows (osAccess)
//	procs.go       the CPU budget the worker count comes from, and the
//	               GOMAXPROCS raise while the mode is open
//	dispatch.go    which tasks run on their own goroutines and which are
//	               handed off, by the table of task lengths
//	lowering.go    a task on its own goroutine: its thread locked, then
//	               lowered once the task has computed for osLowerAfter
//	handoff.go     the hand-off threads: a pool of goroutines locked to
//	               their threads for good, which run the handed-off tasks
//	hold.go        a Blocking call whose recent calls were short keeps its
//	               task's slot
//	idle.go        a task with WithIdleRelease whose thread sleeps gives
//	               its slot up, and takes one back once it computes
//	lend.go        fewer tasks at once while the rest of the program keeps
//	               busy every P the tasks leave it
//	contention.go  the guard: whether other processes keep the CPUs the
//	               task threads may use busy (contended) or not (quiet);
//	               it decides, and reads threads' clocks, never sets them
//	raise.go       its orders carried out: contended, no task thread is
//	               lowered, and lowered ones are raised back
//	retire.go      where a lowered thread cannot be raised back: hand-off
//	               threads at nice 10, not SCHED_IDLE, and contended, tasks
//	               leave their lowered threads, which end
//	pin.go         a Checkpoint's hand-off wakes the next task's thread on
//	               the CPU the yielding thread leaves, and slice pins; a
//	               parked task's wait on its thread (parkThread,
//	               unparkThread)
//
// What the mode does to threads, and who does it:
//   - lock: a task's own goroutine is locked to its thread while fn runs
//     (lockThread), and waits for its slot unlocked unless its thread is
//     lowered (unlockThreadToWait); a hand-off thread's goroutine is
//     locked for good (handoffLoop).
//   - lower: a task's own thread, by lowerIfLongLocked once the task has
//     computed for osLowerAfter, called by the monitor (lowerLongLocked)
//     and by the task at the Checkpoints lowerSelf paces; unlockThread
//     puts the setting back when fn returns. A hand-off thread lowers
//     itself before each task it runs while the machine is quiet
//     (fitHandoffThread, from handoffBegin), and stays lowered after.
//   - raise: while other processes keep the CPUs busy (contention.go),
//     the guard raises the running tasks' lowered threads back to their
//     setting (enterContendedLocked, and each window, guardLocked),
//     startLocked a parked task's (fitThreadLocked), a hand-off thread
//     itself before its task (fitHandoffThread) and startHandoff an idle
//     hand-off thread before it wakes it; leaving contention lowers the
//     running ones again (relowerLocked). Raising needs the privilege
//     that own goroutines need (osMode.own).
//   - read the CPU clock: the thread of a task on its own goroutine, to
//     lower it (lowerIfLongLocked); every running task's lowered thread,
//     every guardWindow, for the guard (markThreadsLocked); a lowered or
//     hand-off thread its own, and a task's own thread while fn runs, for
//     the lane and the charge (threadClock, for readCPU: charge.go), and
//     a Stats snapshot a running task's (threadCPUOfLocked).
//   - pin: the yielding thread at a Checkpoint's hand-off pins the next
//     task's waiting thread to its own CPU (placeWoken, or give for an
//     idle hand-off thread), which puts its mask back as it wakes
//     (unparkThread, unpin); with slice pins the waker places a long
//     task's hand-off thread for its slice (cpuTable.place) (pin.go).
//   - yield on wake: a lowered thread that runs again after sleeping, a
//     hand-off thread given a task or a parked task given its slot back,
//     offers its CPU once (yieldWoken).
//   - hold: a task's thread keeps its slot through a short Blocking call
//     (hold.go) rather than hand it to another thread and back.
//   - lend: the monitor lends slots to the rest of the program, and the
//     first task to come to a Checkpoint gives its slot up (lend.go).
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
// back, every task is handed off; so it is where the process has one CPU
// (oneCPU: a one-CPU cpuset or affinity mask, a cgroup limit of 1 CPU or
// less), privilege or not. There the mode has one slot, which
// lending cannot free (lend.go keeps one running), so beside a fast path
// that keeps the CPU busy a SCHED_IDLE thread holds its P while the
// kernel hardly runs it, and every stop of the world waits for it; a
// nice-10 hand-off thread that takes turns is run often enough to stop
// at once (docs/measurements/ospriority-settings.md#one-cpu).
//
// The setting. Where a lowered thread can be raised back, it is
// SCHED_IDLE (osprio.Lower): it gave the lowest tail under a CPU hog in
// the prototype measured before this project started and in this
// project's quiet-machine runs, with garbage collection busy as good as
// the others (nice 19 and 10, SCHED_BATCH at nice 10); a comparison on a
// machine shared with other builds was too noisy to overrule it
// (docs/measurements/ospriority-settings.md#thread-setting). Where it
// cannot, a hand-off thread is at nice 10 instead, with a kernel time
// slice longer than the kernel's own (unraisableNice, unraisableSlice,
// retire.go): a SCHED_IDLE thread that cannot be raised stalls the
// program beside a busy process.
//
// The runtime does not pass a locked thread's setting on to the threads it
// starts meanwhile (newm hands that to its template thread); a child
// process started from fn on a lowered thread does start lowered.

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/cgroupcpu"
	"github.com/cpusched/cpusched/internal/osprio"
)

// osMode is IsolationOSPriority's state: Scheduler.os, nil in the other
// modes, made in New (openOSMode). The core calls the mode only through
// its methods in transitions.go (see the file comment).
type osMode struct {
	// s is the scheduler whose mode this is.
	s *Scheduler
	// Set in New and never changed. own: tasks may run on their own
	// goroutines, whose threads are lowered once long (lowering.go);
	// false where every task is handed off. raisable: a lowered thread
	// can be raised back here (probeOSRestore) and the process has more
	// than one CPU; without it, a lowered thread is retired rather than
	// raised (retired counts them).
	// capacity is the CPU budget
	// the guard compares the process's CPU time with. guard is the
	// monitor's state for outside contention (contention.go) and lender
	// its state for lending (lend.go), both under s.mu; pins is the slice
	// pins' table (pin.go), under its own lock; guard and pins are nil
	// where there are none. procs is the GOMAXPROCS raise (procs.go),
	// released once, from release.
	own      bool
	raisable bool
	// lowSlice is the kernel time slice a hand-off thread takes with
	// unraisableNice where threads cannot be raised (retire.go), 0 for
	// the kernel's own.
	lowSlice time.Duration
	// baseNice is the nice value of the thread that called New, where
	// threads cannot be raised: a thread above it is lowered
	// (onNormalThread).
	baseNice int
	capacity float64
	guard    *guard
	pins     *cpuTable
	lender   *lender
	procs    *procsHold
	// slices is this Scheduler's hold on the short kernel slices while
	// contended (kslice.go): the monitor's, then release's.
	slices sliceHold

	// Atomics, read without s.mu. keepNormal: no task thread is lowered,
	// as other processes keep the CPUs busy (contention.go; written under
	// s.mu). lengths is the table of task lengths by function (dispatch).
	// blockAvg is the moving average of Blocking's fn durations over all
	// tasks, for a task's first call (hold.go); a lost update costs
	// nothing.
	keepNormal atomic.Bool
	retired    atomic.Uint64
	loose      atomic.Uint64
	lengths    [kindSlots]atomic.Int32
	blockAvg   atomic.Int64

	// Under s.mu. lastStart is when a task on its own goroutine last got
	// a slot, for the monitor's lowering (lowerLongLocked); lastLendStart
	// when any task did, for the lender. lent is how many slots are lent
	// to the rest of the program now, since lentSince (lend.go); lends
	// counts the slots lent so far, and lentTime the slot time lent up to
	// lentSince (Stats.Lends, Stats.LentTime).
	lastStart     int64
	lastLendStart int64
	lent          int
	lentSince     int64
	lends         uint64
	lentTime      int64
	// idle holds the tasks whose slots the idle watch gave up, which it
	// looks at until they take one back, and idleReleases counts the
	// releases (Stats.IdleReleases): idle.go.
	idle         []*Task
	idleReleases uint64

	// The hand-off threads (handoff.go), under s.mu: the idle ones, and
	// whether Close is stopping them; threads counts them all.
	// handoffFrom is the setting hand-off threads had before they lowered
	// themselves, the one a raise puts back (contention.go).
	idleThreads     []*handoffThread
	threadsStopping bool
	threads         sync.WaitGroup
	handoffFrom     osprio.Attr
}

// openOSMode sets IsolationOSPriority up for s, in New: the GOMAXPROCS
// raise, the slice pins, the guard, the lender, and whether tasks may run
// on their own goroutines (a lowered thread can be raised back, and a
// monitor lowers their threads). h is the tests' hooks, zero in
// production.
func (s *Scheduler) openOSMode(h testHooks) {
	cfg := s.cfg
	m := &osMode{s: s, procs: raiseProcs(cfg.workers+spareProcs, s.log)}
	s.os = m
	if !h.noSlicePins {
		m.pins = newCPUTable(cfg.workers)
	}
	if !h.noGuard {
		m.guard = newGuard(h.guardReads())
		s.othersLocked(s.clock.Now()) // the machine's watch begins
	}
	m.capacity = float64(procsBudget())
	if cfg.cpuLimit.cpus > 0 {
		m.capacity = min(m.capacity, cfg.cpuLimit.cpus)
	}
	m.lender = &lender{sample: h.lendSample, tick: int64(lendTick)}
	if m.lender.sample == nil {
		m.lender.sample = readGoroutineCounts()
	}
	if h.lendTick > 0 {
		m.lender.tick = int64(h.lendTick)
	}
	unraisable := func() {
		m.lowSlice = unraisableSlice(osprio.BaseSlice())
		if cur, err := osprio.Current(); err == nil {
			m.baseNice = cur.Nice()
		}
	}
	if err := h.osAccess().probeRestore(); err != nil {
		s.log.Info("cpusched: a lowered thread cannot be raised back here; IsolationOSPriority hands every task to a hand-off thread", "err", err)
		unraisable()
		return
	}
	if oneCPU(m.capacity, runtime.NumCPU(), cfg.cpuLimit.cpus) {
		// The file comment says why one CPU takes the path of threads
		// that cannot be raised, though these could be.
		s.log.Info("cpusched: one CPU; IsolationOSPriority hands every task to a hand-off thread at nice 10, as where threads cannot be raised", "cpu_budget", m.capacity)
		unraisable()
		return
	}
	m.raisable = true
	if h.handoffAll || h.noMonitor {
		return // no monitor to lower the threads: hand tasks off
	}
	m.own = true
}

// oneCPU reports whether a process with a CPU budget of capacity, numCPU
// CPUs in its affinity mask and a cgroup CPU limit of limit (0: none
// applied) has one CPU to run on: its mask or its limit says so. A
// GOMAXPROCS of 1 that the operator set on more CPUs does not: the
// kernel still runs a lowered thread on the CPUs the program leaves.
func oneCPU(capacity float64, numCPU int, limit float64) bool {
	return capacity <= 1 && (numCPU <= 1 || limit > 0 && limit <= 1)
}

// osStartLocked is the mode's part of startLocked, at now, t having just
// been given a slot: the slice pins count it, the lender and the monitor's
// lowering note the start and the monitor watches, the guard opens a
// window if none is open, and a parked task's thread is raised or lowered
// to fit the scheduler's state (contention.go).
func (s *Scheduler) osStartLocked(t *Task, now int64) {
	m := s.os
	if m.pins != nil {
		m.pins.started(len(s.running))
	}
	m.lastLendStart = now
	if m.own && !t.os.handoff {
		m.lastStart = now // the monitor lowers t's thread if t runs long
	}
	s.watchLocked() // the lender samples while tasks run (lend.go)
	s.guardBeginLocked(now)
	if t.os.tid.Load() != 0 {
		s.fitThreadLocked(t) // a parked task's thread, raised or lowered
	}
}

// beginFn is the mode's part of call before fn runs on t's goroutine
// (osMode.begin), recorded in r. A task on its own goroutine counts the
// time its goroutine took to run as not computing (noteWake), and is
// locked to its thread (lockThread), which end unlocks; a hand-off
// thread reads its CPU clock and is fitted to the scheduler's state
// (handoffBegin), and its task leaves it if it must, handed off just
// before the guard turned contended (retire.go). Where threads cannot be
// raised, a task on its own goroutine (dispatched while contended) is
// locked to its thread too, never lowered (lockContended).
func (s *Scheduler) beginFn(t *Task, r *osRun) {
	if r.handoff {
		r.start = s.handoffBegin(t)
		s.os.mayLeave(t)
		return
	}
	if s.os.own {
		s.noteWake(t)
		s.lockThread(t, true)
		r.locked = true
	} else if s.rq.cpuClock {
		s.lockContended(t)
		r.locked = true
	}
}

// osEndLocked is the mode's part of finish, t ending on its slot: the
// table of task lengths learns t's (cpu is taskCPULocked's reading, or -1), and
// the guard's state of t's thread is cleared.
func (s *Scheduler) osEndLocked(t *Task, cpu int64) {
	if s.os.own {
		s.os.noteLength(t, cpu)
	}
	t.os.raised, t.os.guardWin = false, 0
	if t.os.handoff {
		t.os.tid.Store(0)
	}
}

// threadClock is the mode's reading for readCPU (osMode.clock): the CPU
// clock of t's thread, read on t's goroutine where that is locked to its
// thread for t (a hand-off thread once fn began on it, until it leaves it:
// retire.go, and then the thread it locked instead: lockLanded; its own
// thread while fn runs); -1 elsewhere, at no cost.
func (m *osMode) threadClock(t *Task) int64 {
	if m.s.rq.cpuClock && t.os.tid.Load() != 0 {
		return osprio.ThreadCPU()
	}
	return -1
}

// threadCPUOfLocked is the mode's part of taskCPUOfLocked
// (osMode.cpuOfLocked): running task t's CPU time since fn began, its
// thread's clock read from this thread (osprio.ThreadCPUOf); -1 where
// there is no thread to read, or it cannot be read. Under s.mu.
func (m *osMode) threadCPUOfLocked(t *Task) int64 {
	tid := t.os.tid.Load()
	if !m.s.rq.cpuClock || tid == 0 {
		return -1
	}
	clock := osprio.ThreadCPUOf(int(tid))
	if clock <= 0 {
		return -1 // unreadable (not expected of a thread locked to a running task)
	}
	return m.cpuOfClock(t, clock)
}

// cpuOfClock is, from clock, a reading (at least 0) of t's thread's CPU
// clock, the CPU time t has used on its thread since fn began
// (cpuOfClockLocked): for a hand-off thread, since then (cpuStart); for a
// task on its own goroutine, since the mark its lowering measures from
// (markCPU; taken at its first Checkpoint, or by the monitor, and on each
// thread it moves to: what it computed on earlier threads counts on), and
// once its thread counts as lowered, the same (cpuStart, which lowering
// sets to that mark). It is -1, for its slot time, for a task on its own
// goroutine whose thread has no mark yet. Under s.mu: markTid and markCPU
// are the monitor's too.
func (m *osMode) cpuOfClock(t *Task, clock int64) int64 {
	switch {
	case t.os.handoff || t.os.lowered.Load():
		return clock - t.os.cpuStart
	case t.os.markTid == t.os.tid.Load():
		return clock - t.os.markCPU
	}
	return -1
}

// ownLaneCPU is the lane's measure of a task on its own goroutine whose
// thread is not lowered, slot its slot time (osMode.slotMeasure): that
// less the time it did not compute (t.os.uncomputed), at most
// osLowerAfter. The slot time counts stretches in which it did not
// compute (t.os.uncomputed, and the kernel running other threads), which
// on a busy machine pass the lane's slice on their own and sent small
// tasks behind the long ones: it has computed less than osLowerAfter, or
// the monitor or its own Checkpoint would have lowered its thread
// (lowerIfLongLocked), so it counts as that at most.
func (t *Task) ownLaneCPU(slot int64) int64 {
	return min(max(0, slot-t.os.uncomputed.Load()), int64(osLowerAfter))
}

// osOwn reports whether tasks may run on their own goroutines in
// IsolationOSPriority (osMode.own); false in the other modes.
func (s *Scheduler) osOwn() bool { return s.os != nil && s.os.own }

// osTask is a Task's state in IsolationOSPriority (Task.os), zero in the
// other modes: how the task runs (handoff), its thread, and what the hold
// measures of it. Who writes what:
//   - handoff: fn runs on a hand-off thread (handoff.go), not on the
//     task's own goroutine; set by dispatch before the task is published,
//     never changed after, read without the lock.
//   - tid: the thread fn's goroutine is locked to, 0 while it is not:
//     stored by the task's goroutine (lockThread, unlockThread,
//     unlockThreadToWait, or under s.mu as it parks, parkedLocked; on a
//     hand-off thread, handoffBegin, and finish under s.mu; leaving one,
//     leaveThread and lockLanded under s.mu); read without the lock by
//     the guard, and under it by what lowers a task's own thread
//     (lowerIfLongLocked, relowerLocked), which must not find a thread
//     the goroutine may be leaving.
//   - lowered: set once a task on its own goroutine counts as lowered
//     (lowerIfLongLocked, under s.mu, after loweredFrom and foundLowered),
//     never cleared while it runs; read without the lock.
//   - loweredFrom: the setting to put back when fn returns; foundLowered:
//     the thread was at the lowered setting already, so fn's end leaves
//     it alone (a nested Run, or a thread the program lowered itself).
//   - raised: the task counts as lowered, but its thread is at the
//     setting it had, while other processes keep the CPUs busy
//     (contention.go); under s.mu.
//   - markTid and markCPU: the mark lowerIfLongLocked measures from,
//     under s.mu: the thread the task was first seen on (by it, or by
//     markAfterWait as the task's goroutine locks a thread again), and
//     that thread's CPU clock then less what the task computed before
//     (computed). guardWin is the guard's window (modulo 256) in which
//     it last read the thread's CPU clock, into markCPU (which lowering
//     no longer needs then), under s.mu.
//   - computed: what the task had computed (ns) by its thread's CPU
//     clock at lowerIfLongLocked's last reading, counted on when it
//     moves to another thread; under s.mu. It matters only until the
//     thread is lowered, at osLowerAfter, so 32 bits hold it. A hand-off
//     task, which lowerIfLongLocked never measures, and a task on its own
//     goroutine once it counts as lowered (it never measures it again),
//     hold there the start of a turn (turnClock; turns.go), used only by
//     the task's goroutine.
//   - uncomputed: slot time in which the task did not compute (ns):
//     Blocking calls that kept the slot, and the time its goroutine took
//     to run once given the slot; added to by the task's goroutine.
//     Lowering and the length table do not count it.
//   - lowerSeen is how many Checkpoints the task will have made at the
//     end of its Checkpoint countdown (Task.lowerCheck; lowerSelf paces
//     its checks by it), for a task that takes turns since its turn
//     began (turn paces its checks so). Only the task's goroutine uses
//     it.
//   - waitTid: the id of the thread a parked task waits on, locked,
//     negated by whoever pinned or placed it for the wake (pin.go); set
//     and cleared by the task's goroutine.
//   - markTid of a handed-off task, which lowerIfLongLocked never
//     measures, is threadLeft once its goroutine left its lowered
//     hand-off thread, which could not be raised, to run at normal
//     priority until it ends, locked to the thread it lands on, which
//     is never lowered (retire.go: osTask.left, lockLanded); set under
//     s.mu by the task's goroutine, read by it and under s.mu.
//   - cpuStart: the thread's CPU clock when fn began on it, for
//     taskCPULocked: read by a hand-off thread in handoffBegin; for a
//     task that left its hand-off thread, set again by lockLanded as it
//     locks the thread it lands on, so that its CPU goes on; for a
//     task on its own goroutine, reckoned by lowerIfLongLocked when the
//     task counts as lowered (the clock then, less what the task had
//     computed: markCPU). markCPU, until then, is what taskCPULocked
//     measures such a task from.
//   - blockAvg is the moving average of the task's Blocking calls (hold.go),
//     used only by the task's goroutine; holdStart is when a Blocking call
//     that keeps the slot began, under s.mu.
//   - rare: what only some tasks need (osRare): the hold timer, made by
//     the first hold that sets it (armHoldLocked), and the idle watch of
//     a task with WithIdleRelease (idle.go), made before the task is
//     published. The pointer is set once, under s.mu or before the
//     task is published; its fields are under s.mu.
//
// The fields are packed, 80 bytes with no padding, so that a Task stays
// in the 384-byte size class (TestQueuedTaskMemory, TestQueuedGoBytes).
// That is why the Checkpoint countdown (Task.lowerCheck) and the hold's
// state (Task.hold) are fields of Task, and fn's slot in the table of
// task lengths is worked out again at the task's end (noteLength) rather
// than kept.
type osTask struct {
	cpuStart     int64
	markCPU      int64
	uncomputed   atomic.Int64
	blockAvg     int64
	holdStart    int64
	rare         *osRare
	tid          atomic.Int32
	waitTid      atomic.Int32
	lowered      atomic.Bool
	markTid      int32
	computed     int32
	lowerSeen    int32
	loweredFrom  osprio.Attr
	foundLowered bool
	raised       bool
	guardWin     uint8
	handoff      bool
}

// osRare is the state of an osTask that only some tasks need, kept
// behind one pointer so that a Task stays in its size class: holdTimer,
// the timer that gives a kept slot up (armHoldLocked), and idle, the
// watch of a task with WithIdleRelease (idle.go). Under s.mu.
type osRare struct {
	holdTimer *time.Timer
	idle      idleWatch
}

// osPrioritySlice is IsolationOSPriority's default slice. In that mode the
// kernel protects the rest of the program, so the slice only orders
// cpusched's own tasks, and every switch between tasks there is a switch
// between locked OS threads, which left the CPUs partly idle at 1 ms slices:
// 10 ms slices kept more of the demo's CPU-heavy throughput, with a lower
// probe p99
// (docs/measurements/ospriority-settings.md#slice-ospriorityslice). Small
// tasks pay for it: their p99 rises, within the two slices plus service time
// a queued task may wait.
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

package cpusched

// Outside contention: in IsolationOSPriority, while other processes keep
// the CPUs busy, the scheduler lowers no task thread, and raises back the
// ones it had lowered.
//
// Why. A lowered (SCHED_IDLE) thread runs only when no normal thread wants
// its CPU. Inside one process that is the isolation the mode is for: the
// program's own threads go first, and whenever they stop for a
// stop-the-world the lowered threads get the CPUs they freed. But a task's
// goroutine holds its P while the kernel leaves its thread waiting, and a
// stop-the-world waits for every P. When another process keeps the CPUs
// busy it does not stop with the program, and the kernel runs a
// SCHED_IDLE thread a few milliseconds a second (its weight is 3 against
// a normal thread's 1024): each collection waits that long, so do the
// goroutines queued on those Ps, and the tasks, which are part of the
// service too, get nothing. A lower nice value instead of SCHED_IDLE only
// shortens the waits (docs/design.md#a-busy-machine).
//
// How. While tasks hold slots the monitor closes a window every
// guardWindow and reads the CPU time that each running task's lowered
// thread got in it (its thread's CPU clock) and that the whole process
// got, and every machineEvery the CPU time the other processes got (the
// machine's busy time from /proc/stat, less the process's own). Any of
// these turns the scheduler contended:
//   - others that used more than half the CPU budget (plus busyMargin)
//     over machineEvery, or over the pause before the tasks began;
//   - a lowered thread that got less than starvedShare of starvedWindows
//     windows in a row, while the process got less than its budget less
//     outsideSlack, and the others more than half the budget over the
//     last machineEvery;
//   - the same over longStarvedWindows windows, whatever the others used
//     before. A load generator on the same machine (the bench's own)
//     starves a lowered thread for a window or two at a time and uses
//     about one CPU of two; a CPU-bound process uses all the CPUs the
//     program leaves it, and a lighter one starves a thread for longer.
//
// Contended, the scheduler raises every running task's lowered thread
// back to the setting it had (enterContendedLocked), counts a task that
// has computed for osLowerAfter long as before but leaves its thread as it
// is (taskThread.raised), hands no task off, and gives the rest of the program
// contendedSpareProcs Ps. The tasks then take their share of the machine
// beside the other processes, as the rest of the program does, and the
// kernel runs every thread that holds a P within a few of its slices.
//
// Turning quiet again. While contended a starved thread cannot be seen:
// none is lowered. So the scheduler turns quiet only once the other
// processes used less than calmCPUs over a calmWindow. It does not turn
// quiet to try: beside a busy process each try lowers the threads for the
// stretch it takes to see them starve again, and a collection in that
// stretch stops the world for as long (docs/measurements/busy-machine.md).
// A process that keeps half a CPU busy keeps the scheduler contended.
//
// Raising a thread back needs the privilege that own goroutines need
// (ospriority.go). Without it every task is handed off to a lowered
// thread; contended, new tasks run on their own goroutines at normal
// priority instead, but a task already on a hand-off thread keeps that
// thread until it ends.

import (
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

const (
	// guardWindow is how often the monitor looks for starved task threads
	// while tasks hold slots.
	guardWindow = 5 * time.Millisecond
	// starvedShare, starvedWindows and longStarvedWindows: a lowered
	// task thread that held its slot through a window and got less than
	// starvedShare of it counts as starved in it (see the file comment). SCHED_IDLE beside normal
	// threads that keep its CPU busy gets about 0.3% (weight 3 against
	// 1024); beside the program's own busy threads it gets every
	// stretch they leave, and they stop for a stop-the-world.
	starvedShare       = 0.02
	starvedWindows     = 2
	longStarvedWindows = 10
	// outsideSlack is how many CPUs of its budget the process must have
	// gone without, over those windows, for the scheduler to blame
	// another process.
	outsideSlack = 0.5
	// calmWindow and calmCPUs: the scheduler turns quiet once the other
	// processes used less than calmCPUs on average over calmWindow.
	calmWindow = time.Second
	calmCPUs   = 0.5
	// machineEvery is how often a quiet scheduler reads the machine's
	// busy time while tasks run; with the reading from before they began,
	// the first window after a pause judges the whole pause. Others that
	// used more than half the CPU budget (plus busyMargin) in that time
	// would starve lowered threads.
	machineEvery = 100 * time.Millisecond
	busyMargin   = 0.25
	// contendedSpareProcs is how many Ps beyond the workers the rest of
	// the program gets while contended, in place of spareProcs: a task
	// thread at normal priority is left waiting by the kernel about as
	// often as it runs, with its P, so the rest needs more Ps to find one
	// free.
	contendedSpareProcs = 2
)

// guardSource is what the guard reads: the process's CPU time, a
// thread's, and the machine's busy time (ns; ok false where it cannot be
// read). The package's tests replace it.
type guardSource struct {
	processCPU func() int64
	threadCPU  func(tid int) int64
	machine    func() (busy int64, ok bool)
	// window and calm, when non-zero, replace guardWindow and calmWindow
	// (the machine's watch is then 20 windows, as machineEvery is).
	window, calm time.Duration
}

// realGuardSource reads the operating system's clocks and /proc/stat.
var realGuardSource = guardSource{
	processCPU: osprio.ProcessCPU,
	threadCPU:  osprio.ThreadCPUOf,
	machine: func() (int64, bool) {
		busy, _, ok := osprio.MachineCPU()
		return busy, ok
	},
}

// guard is the monitor's state for outside contention (nil where
// the tests' hooks say so); only the monitor and startLocked use it, under
// s.mu.
type guard struct {
	src          guardSource
	window, calm int64 // guardWindow and calmWindow, or the source's
	win          uint8 // windows closed so far, modulo 256
	winStart     int64 // when the current window began
	procStart    int64 // the process's CPU time then
	// calmStart is when the current calm window began, with the
	// machine's busy time and the process's CPU time then; calmOK is
	// false where /proc/stat cannot be read (the scheduler then turns
	// quiet after each calmWindow, to try). While quiet, the same
	// reading starts the machine's watch (machineEvery).
	calmStart, calmBusy, calmProc int64
	calmOK                        bool

	// contended: other processes keep the CPUs busy, and every task
	// thread runs at normal priority (s.os.keepNormal). starved counts the
	// windows in a row in which a lowered thread starved.
	contended bool
	starved   int
	others    float64 // the CPUs the other processes used over the last machine watch

	contentions uint64 // times the scheduler turned contended
	since       int64  // when it last did
	time        int64  // contended time up to since
}

// newGuard returns a guard that reads src.
func newGuard(src guardSource) *guard {
	g := &guard{src: src, window: int64(guardWindow), calm: int64(calmWindow)}
	if src.window > 0 {
		g.window, g.calm = int64(src.window), int64(src.calm)
	}
	return g
}

// guardLocked is the guard's part of a monitor pass at now: it closes a
// window when one is due and turns the scheduler contended or quiet. It
// returns how long until the next window ends, or 0 when no task holds a
// slot.
func (s *Scheduler) guardLocked(now int64) (next int64) {
	if s.os == nil || s.os.guard == nil || len(s.running) == 0 {
		return 0
	}
	g := s.os.guard
	if g.stale(now) {
		s.guardBeginLocked(now)
		s.markThreadsLocked()
		return g.window
	}
	if d := g.winStart + g.window - now; d > 0 {
		return d
	}
	w := now - g.winStart
	proc := g.src.processCPU()
	ownCPUs := float64(proc-g.procStart) / float64(w)
	starved := s.markThreadsLocked()
	g.win++
	g.winStart, g.procStart = now, proc
	if g.contended {
		for _, t := range s.running {
			s.raiseLocked(t) // one handed off before, that has just begun
		}
		if now-g.calmStart >= g.calm && s.calmLocked(now) {
			s.leaveContendedLocked(now)
		}
		return g.window
	}
	if starved && ownCPUs < s.os.capacity-outsideSlack {
		g.starved++
	} else {
		g.starved = 0
	}
	switch {
	case g.starved >= starvedWindows && g.others > s.os.capacity/2+busyMargin, g.starved >= longStarvedWindows:
		s.enterContendedLocked(now)
	case now-g.calmStart >= 20*g.window:
		if s.busyOthersLocked(now) {
			s.enterContendedLocked(now)
		}
	}
	return g.window
}

// stale reports whether no window is open at now: none began yet, or the
// last began more than a few windows ago (no task held a slot since).
func (g *guard) stale(now int64) bool {
	return g.winStart == 0 || now-g.winStart > 4*g.window
}

// guardBeginLocked opens the guard's first window at now, when a task gets
// a slot while none is open (startLocked, or the monitor). If the other
// processes used more than half the CPU budget over the pause before, the
// scheduler turns contended before any thread is lowered.
func (s *Scheduler) guardBeginLocked(now int64) {
	g := s.os.guard
	if g == nil || !g.stale(now) {
		return
	}
	g.winStart, g.procStart = now, g.src.processCPU()
	g.win++
	g.starved = 0
	if !g.contended && g.calmStart != 0 && now-g.calmStart >= 20*g.window && s.busyOthersLocked(now) {
		s.enterContendedLocked(now)
	}
}

// markThreadsLocked reads the CPU clock of every running task's lowered
// thread and reports whether one that was read at the window's start got
// less than starvedShare of it since.
func (s *Scheduler) markThreadsLocked() (starved bool) {
	g := s.os.guard
	w := float64(g.window)
	for _, t := range s.running {
		// A lowered thread's id does not change while the task runs.
		tid := t.thread.tid.Load()
		if tid == 0 || t.thread.raised || !(t.handoff || t.thread.lowered.Load() && !t.thread.foundLowered) {
			t.thread.guardWin = 0
			continue
		}
		cpu := g.src.threadCPU(int(tid))
		if t.thread.guardWin == g.win && float64(cpu-t.thread.markCPU) < starvedShare*w {
			starved = true
		}
		t.thread.guardWin, t.thread.markCPU = g.win+1, cpu
	}
	return starved
}

// calmLocked closes a calm window at now: it reports whether the other
// processes used less than calmCPUs over it, and starts the next.
func (s *Scheduler) calmLocked(now int64) bool {
	others, ok := s.othersLocked(now)
	return !ok || others < calmCPUs // without /proc/stat, try
}

// busyOthersLocked closes a quiet scheduler's watch of the machine at now:
// it reports whether the other processes used more than half the CPU
// budget, and more than busyMargin besides, since it began.
func (s *Scheduler) busyOthersLocked(now int64) bool {
	others, ok := s.othersLocked(now)
	s.os.guard.others = others
	return ok && others > s.os.capacity/2+busyMargin
}

// othersLocked returns the CPUs that the other processes used on average
// since the last call, from the machine's busy time less the process's
// own, and starts the next period at now; ok is false without two
// readings of /proc/stat.
func (s *Scheduler) othersLocked(now int64) (others float64, ok bool) {
	g := s.os.guard
	busy, read := g.src.machine()
	proc := g.src.processCPU()
	if read && g.calmOK && now > g.calmStart {
		others = float64(busy-g.calmBusy-(proc-g.calmProc)) / float64(now-g.calmStart)
		ok = true
	}
	g.calmStart, g.calmBusy, g.calmProc, g.calmOK = now, busy, proc, read
	return others, ok
}

// enterContendedLocked turns the scheduler contended at now and raises the
// running tasks' lowered threads.
func (s *Scheduler) enterContendedLocked(now int64) {
	g := s.os.guard
	g.contended, g.starved = true, 0
	s.os.keepNormal.Store(true)
	g.contentions++
	g.since = now
	s.othersLocked(now) // the first calm window begins
	s.log.Info("cpusched: other processes keep the CPUs busy; task threads run at normal priority", "cpu_budget", s.os.capacity)
	for _, t := range s.running {
		s.raiseLocked(t)
	}
	s.os.procs.set(s.workers + contendedSpareProcs)
}

// leaveContendedLocked turns the scheduler quiet at now and lowers the
// running tasks' raised threads again.
func (s *Scheduler) leaveContendedLocked(now int64) {
	g := s.os.guard
	g.contended = false
	s.os.keepNormal.Store(false)
	g.time += now - g.since
	s.log.Info("cpusched: the other processes have gone quiet; long tasks' threads are lowered again", "contended_for", time.Duration(now-g.since))
	s.os.procs.set(s.workers + spareProcs)
	for _, t := range s.running {
		s.relowerLocked(t)
	}
}

// contendedTimeLocked is the time the scheduler has been contended up to
// now.
func (s *Scheduler) contendedTimeLocked(now int64) int64 {
	if s.os == nil || s.os.guard == nil {
		return 0
	}
	g := s.os.guard
	if g.contended {
		return g.time + now - g.since
	}
	return g.time
}

// fitThreadLocked makes the thread of t, which has just been given a slot,
// fit the scheduler's state: raised while contended, lowered otherwise.
func (s *Scheduler) fitThreadLocked(t *Task) {
	if s.os.guard == nil {
		return
	}
	if s.os.guard.contended {
		s.raiseLocked(t)
	} else if t.thread.raised {
		s.relowerLocked(t)
	}
}

// fitHandoffThread makes the calling hand-off thread, about to run a task,
// fit the scheduler's state: lowered while quiet, raised while contended
// (where it can be raised); it reports whether it left the thread raised.
// It is the only place a hand-off thread is
// lowered or raised by itself, and it holds no slot's CPU yet: a thread
// that lowered itself with its task done, while other processes kept the
// CPUs busy, could be left waiting with its P before it parked, and stop
// the world meanwhile.
func (s *Scheduler) fitHandoffThread() (raised bool) {
	cur, err := osprio.Current()
	if err != nil {
		return false
	}
	if !s.os.raisable {
		return s.fitUnraisable(cur) // retire.go
	}
	lowered := cur.Lowered()
	switch {
	case !lowered && !s.os.keepNormal.Load():
		if err := osprio.Lower(); err != nil {
			// New's probe succeeded, so this is unexpected; the task still
			// runs, at normal priority.
			s.log.Warn("cpusched: lowering a hand-off thread's priority failed; its tasks run at normal priority", "err", err)
		}
	case lowered && s.os.keepNormal.Load() && s.osOwn():
		s.mu.Lock()
		from := s.os.handoffFrom
		s.mu.Unlock()
		if err := from.Restore(); err != nil {
			s.log.Warn("cpusched: raising a hand-off thread failed; it stays lowered", "err", err)
			return false
		}
		return true
	case !lowered && s.os.keepNormal.Load():
		return true
	}
	return false
}

// raiseLocked puts the thread of t, if lowered, back to the setting it
// had, and marks t raised. Without the privilege to raise, it asks a
// handed-off task to leave its thread at its next Checkpoint instead
// (leaveLocked); a task on its own goroutine has no lowered thread there.
func (s *Scheduler) raiseLocked(t *Task) {
	tid := int(t.thread.tid.Load())
	if !s.os.raisable {
		s.leaveLocked(t) // it leaves the thread instead (retire.go)
	}
	if !s.osOwn() || t.thread.raised || tid == 0 {
		return
	}
	from := t.thread.loweredFrom
	switch {
	case t.handoff:
		from = s.os.handoffFrom
	case !t.thread.lowered.Load() || t.thread.foundLowered:
		return
	}
	if err := from.RestoreThread(tid); err != nil {
		s.log.Warn("cpusched: raising a task's thread failed; it stays lowered", "err", err)
		return
	}
	t.thread.raised = true
}

// relowerLocked lowers the thread of t, raised while contended, again.
func (s *Scheduler) relowerLocked(t *Task) {
	tid := int(t.thread.tid.Load())
	if !t.thread.raised || tid == 0 {
		return
	}
	if !s.os.raisable {
		// Where it could not be raised again, a task whose thread ran at
		// normal priority goes to the milder setting (retire.go).
		if err := osprio.LowerNice(tid, unraisableNice); err != nil {
			s.log.Warn("cpusched: lowering a task's thread again failed; it runs at normal priority", "err", err)
			return
		}
		t.thread.raised = false
		return
	}
	if _, _, err := osprio.LowerThread(tid); err != nil {
		s.log.Warn("cpusched: lowering a task's thread again failed; it runs at normal priority", "err", err)
		return
	}
	t.thread.raised = false
}

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
// got. A lowered thread that got less than starvedShare of the window,
// while the process got less than its CPU budget less outsideSlack, means
// that another process had the CPU: the scheduler turns contended. Then
// it raises every running task's lowered thread back to the setting it had
// (enterContendedLocked), a task that has computed for osLowerAfter is
// counted long as before but its thread left as it is (Task.raised), and
// no task is handed off: the tasks take their share of the machine beside
// the other processes, as the rest of the program does, and the kernel
// runs every thread that holds a P within a few milliseconds. The
// scheduler turns quiet again once the other processes used less than
// calmCPUs over a calmWindow (the machine's busy time from /proc/stat less
// the process's own), and lowers the long tasks' threads again.
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
	guardWindow = 10 * time.Millisecond
	// starvedShare is the share of a window below which a lowered task
	// thread that held its slot throughout counts as starved.
	starvedShare = 0.1
	// outsideSlack is how many CPUs of its budget the process must have
	// gone without, over a window with a starved thread, for the
	// scheduler to blame another process.
	outsideSlack = 0.5
	// calmWindow and calmCPUs: the scheduler turns quiet once the other
	// processes used less than calmCPUs on average over calmWindow.
	calmWindow = time.Second
	calmCPUs   = 0.25
	// machineEvery is how often a quiet scheduler reads the machine's
	// busy time while tasks run; with the reading from before they began,
	// the first window after a pause judges the whole pause. Others that
	// used more than half the CPU budget (plus busyMargin) in that time
	// would starve lowered threads: the scheduler turns contended before
	// it lowers one.
	machineEvery = 100 * time.Millisecond
	busyMargin   = 0.25
)

// guard is the monitor's state for outside contention; only the monitor
// uses it, under s.mu.
type guard struct {
	win       uint8 // windows closed so far, modulo 256
	winStart  int64 // when the current window began
	procStart int64 // the process's CPU time then
	// calmStart is when the current calm window began, with the
	// machine's busy time and the process's CPU time then; calmOK is
	// false where /proc/stat cannot be read (the scheduler then turns
	// quiet after each calmWindow, to try). While quiet, the same
	// reading starts the machine's watch (machineEvery).
	calmStart, calmBusy, calmProc int64
	calmOK                        bool

	contentions uint64 // times the scheduler turned contended
	since       int64  // when it last did
	time        int64  // contended time up to since
}

// guardLocked is the guard's part of a monitor pass at now: it closes a
// window when one is due and turns the scheduler contended or quiet. It
// returns how long until the next window ends, or 0 when no task holds a
// slot.
func (s *Scheduler) guardLocked(now int64) (next int64) {
	g := s.guard
	if g == nil || len(s.running) == 0 {
		return 0
	}
	if g.winStart == 0 || now-g.winStart > 4*int64(guardWindow) {
		// The first window, or the first after the tasks stopped: start
		// afresh, without judging a window nobody watched, but with what
		// the other processes did meanwhile.
		g.winStart, g.procStart = now, osprio.ProcessCPU()
		g.win++
		s.markThreadsLocked()
		if !s.contended.Load() && g.calmStart != 0 && now-g.calmStart >= int64(machineEvery) && s.busyOthersLocked(now) {
			s.enterContendedLocked(now)
		}
		return int64(guardWindow)
	}
	if d := g.winStart + int64(guardWindow) - now; d > 0 {
		return d
	}
	w := now - g.winStart
	proc := osprio.ProcessCPU()
	ownCPUs := float64(proc-g.procStart) / float64(w)
	starved := s.markThreadsLocked()
	g.win++
	g.winStart, g.procStart = now, proc
	contended := s.contended.Load()
	if contended {
		for _, t := range s.running {
			s.raiseLocked(t) // one handed off before, that has just begun
		}
	}
	switch {
	case !contended && starved && ownCPUs < s.capacity-outsideSlack:
		s.enterContendedLocked(now)
	case !contended && now-g.calmStart >= int64(machineEvery):
		if s.busyOthersLocked(now) {
			s.enterContendedLocked(now)
		}
	case contended && now-g.calmStart >= int64(calmWindow):
		if s.calmLocked(now) {
			s.leaveContendedLocked(now)
		}
	}
	return int64(guardWindow)
}

// markThreadsLocked reads the CPU clock of every running task's lowered
// thread and reports whether one that was read at the window's start got
// less than starvedShare of it since.
func (s *Scheduler) markThreadsLocked() (starved bool) {
	g := s.guard
	w := float64(guardWindow)
	for _, t := range s.running {
		// A lowered thread's id does not change while the task runs.
		tid := t.tid.Load()
		if tid == 0 || t.raised || !(t.handoff || t.lowered.Load() && !t.foundLowered) {
			t.guardWin = 0
			continue
		}
		cpu := osprio.ThreadCPUOf(int(tid))
		if t.guardWin == g.win && float64(cpu-t.markCPU) < starvedShare*w {
			starved = true
		}
		t.guardWin, t.markCPU = g.win+1, cpu
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
	return ok && others > s.capacity/2+busyMargin
}

// othersLocked returns the CPUs that the other processes used on average
// since the last call, from the machine's busy time less the process's
// own, and starts the next period at now; ok is false without two
// readings of /proc/stat.
func (s *Scheduler) othersLocked(now int64) (others float64, ok bool) {
	g := s.guard
	busy, _, read := osprio.MachineCPU()
	proc := osprio.ProcessCPU()
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
	g := s.guard
	s.contended.Store(true)
	g.contentions++
	g.since = now
	s.othersLocked(now) // the first calm window begins
	s.log.Info("cpusched: other processes keep the CPUs busy; task threads run at normal priority", "cpu_budget", s.capacity)
	for _, t := range s.running {
		s.raiseLocked(t)
	}
}

// leaveContendedLocked turns the scheduler quiet at now and lowers the
// running tasks' raised threads again.
func (s *Scheduler) leaveContendedLocked(now int64) {
	g := s.guard
	s.contended.Store(false)
	g.time += now - g.since
	s.log.Info("cpusched: the other processes have gone quiet; long tasks' threads are lowered again")
	for _, t := range s.running {
		s.relowerLocked(t)
	}
}

// contendedTimeLocked is the time the scheduler has been contended up to
// now.
func (s *Scheduler) contendedTimeLocked(now int64) int64 {
	g := s.guard
	if g == nil {
		return 0
	}
	if s.contended.Load() {
		return g.time + now - g.since
	}
	return g.time
}

// fitThreadLocked makes the thread of t, which has just been given a slot,
// fit the scheduler's state: raised while contended, lowered otherwise.
func (s *Scheduler) fitThreadLocked(t *Task) {
	if s.contended.Load() {
		s.raiseLocked(t)
	} else if t.raised {
		s.relowerLocked(t)
	}
}

// raiseLocked puts the thread of t, if lowered, back to the setting it
// had, and marks t raised. It does nothing without the privilege to raise
// (s.osOwn).
func (s *Scheduler) raiseLocked(t *Task) {
	tid := int(t.tid.Load())
	if !s.osOwn || t.raised || tid == 0 {
		return
	}
	from := t.loweredFrom
	switch {
	case t.handoff:
		from = s.handoffFrom
	case !t.lowered.Load() || t.foundLowered:
		return
	}
	if err := from.RestoreThread(tid); err != nil {
		s.log.Warn("cpusched: raising a task's thread failed; it stays lowered", "err", err)
		return
	}
	t.raised = true
}

// relowerLocked lowers the thread of t, raised while contended, again.
func (s *Scheduler) relowerLocked(t *Task) {
	tid := int(t.tid.Load())
	if !t.raised || tid == 0 {
		return
	}
	if _, _, err := osprio.LowerThread(tid, s.cfg.osPolicy); err != nil {
		s.log.Warn("cpusched: lowering a task's thread again failed; it runs at normal priority", "err", err)
		return
	}
	t.raised = false
}

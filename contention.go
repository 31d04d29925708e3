package cpusched

// Outside contention: in IsolationOSPriority, while other processes keep
// busy the CPUs that the task threads may run on, the scheduler lowers no
// task thread, and raises back the ones it had lowered.
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
// What the guard reads: the CPUs and threads where that can happen.
//   - The process's CPUs: those in its threads' affinity masks
//     (osprio.ProcessCPUs), which the kernel keeps inside its cpuset (so
//     cpuset.cpus and cpuset.cpus.effective would add nothing), and their
//     busy time from their lines of /proc/stat (internal/cpuscope). The
//     first line, read before, is the whole machine's (a node's, in a
//     container): a busy process on a CPU the task threads cannot use, or
//     a big node's other CPUs, kept the scheduler contended while nothing
//     took the threads' CPUs.
//   - The others: that busy time less the process's CPU time, at least 0,
//     in CPUs over a reading. With N CPUs and a budget of B (at most N)
//     they leave the process N - others. Where N is B the rules below are
//     the ones from before; a quota of B on a big node's every CPU turns
//     contended only when the others leave less than B/2 of them.
//   - A lowered thread's CPU clock each guardWindow and, where it got
//     almost nothing, whether it waited: runnable now (its stat file), or
//     its run delay (schedstat) grown by half a window since the last. A
//     thread blocked with its slot (a mutex, a channel, a system call) is
//     not starved. The run delay alone cannot tell: the kernel adds a wait
//     when it ends, and a SCHED_IDLE thread beside a busy loop on its CPU
//     showed none added over 20 windows of 5 ms, and state R at each.
//   - Under a CPU quota below the process's CPUs, the quota's cgroup's
//     CPU time (cgroupcpu.GroupCPU): its other processes take the
//     budget without keeping the CPUs busy (othersLocked).
//   - With a cgroup v2 of its own, its cpu.pressure "some" total: the time
//     some runnable thread of the cgroup waited for a CPU. It cannot tell
//     who took the CPUs (the program's busy threads leave its lowered ones
//     waiting: the isolation working), so it only confirms: while tasks
//     run, busy others count if the cgroup's threads waited stallShare of
//     the time.
//
// When it turns contended: on any of
//   - others over busyLine (leaving less than half the budget, less
//     busyMargin) over machineEvery, confirmed by cpu.pressure where it
//     can be read; or over the pause before the tasks began, unconfirmed
//     (the threads need not have run in it);
//   - a lowered thread starved (under starvedShare of a window, waiting)
//     for starvedWindows windows in a row, while the process got less
//     than its budget less outsideSlack, with the others over busyLine
//     at the last watch. A thread that waits while the program's own
//     threads fill the CPUs is the isolation working, and counts for
//     nothing;
//   - the same for longStarvedWindows, whatever the last watch of the
//     machine read. That watch is up to machineEvery old, and a process
//     that began since cannot show in it; meanwhile each stop-the-world
//     waits for the starved thread, which the kernel runs a few
//     milliseconds a second: as root, beside a busy process that began
//     with the tasks, the whole program stood still at its first
//     collection, for seconds, in most runs
//     (docs/measurements/busy-machine.md#a-neighbour-that-begins-with-the-tasks).
//     A load generator on the same machine (the bench's own) mostly
//     starves a lowered thread for shorter streaks; as root, beside a
//     busy fast path, it sometimes reaches this rule, and the scheduler
//     is contended for a calm window (the same record).
//
// Contended, the scheduler raises every running task's lowered thread
// back to the setting it had (enterContendedLocked), counts a task that
// has computed for osLowerAfter long as before but leaves its thread as it
// is (osTask.raised), hands no task off, gives the rest of the program
// contendedSpareProcs Ps, lends it no slot (lend.go), and asks the kernel
// for short slices on the process's threads (kslice.go). The tasks then
// take their share of the machine beside the other processes, as the
// rest of the program does, and the kernel runs every thread that holds
// a P within a few of its slices.
//
// Turning quiet again. While contended a starved thread cannot be seen:
// none is lowered. So the scheduler turns quiet only once the others,
// read on the process's CPUs as above, stayed under calmLine (leaving all
// the budget but calmCPUs) over a calmWindow. It does not turn quiet to
// try: beside a busy process each try lowers the threads for the stretch
// it takes to see them starve again, and a collection in that stretch
// stops the world for as long (docs/measurements/busy-machine.md). A
// process that keeps half a CPU of the process's CPUs busy keeps it
// contended.
//
// Without /proc the others are unknown: only a thread starved for
// longStarvedWindows turns the scheduler contended, and it turns quiet
// after each calmWindow, to try. Where a thread's files cannot be read,
// one that got almost nothing counts as waiting.
//
// Raising a thread back needs the privilege that own goroutines need
// (ospriority.go). Without it every task is handed off to a lowered
// thread; contended, new tasks run on their own goroutines at normal
// priority instead, but a task already on a hand-off thread keeps that
// thread until it ends.

import (
	"time"

	"github.com/cpusched/cpusched/internal/cgroupcpu"
	"github.com/cpusched/cpusched/internal/cpuscope"
	"github.com/cpusched/cpusched/internal/osprio"
)

const (
	// guardWindow is how often the monitor looks for starved task threads
	// while tasks hold slots.
	guardWindow = 5 * time.Millisecond
	// starvedShare, starvedWindows and longStarvedWindows: a lowered
	// task thread that held its slot through a window and got less than
	// starvedShare of it, waiting for a CPU, counts as starved in it (see
	// the file comment). SCHED_IDLE beside normal threads that keep its
	// CPU busy gets about 0.3% (weight 3 against 1024); beside the
	// program's own busy threads it gets every stretch they leave, and
	// they stop for a stop-the-world.
	starvedShare       = 0.02
	starvedWindows     = 2
	longStarvedWindows = 4
	// outsideSlack is how many CPUs of its budget the process must have
	// gone without, over those windows, for the scheduler to blame
	// another process.
	outsideSlack = 0.5
	// calmWindow and calmCPUs: the scheduler turns quiet once the other
	// processes left the process all of its budget but calmCPUs, on
	// average over calmWindow (calmLine).
	calmWindow = time.Second
	calmCPUs   = 0.5
	// slackShare caps outsideSlack and calmCPUs at this share of the
	// budget. On one CPU, half of it is what a busy process gets beside
	// the program's raised threads, and what it leaves a program whose
	// own threads run half the time: a server confined to CPU 0 beside a
	// busy loop on that CPU turned contended after 1.4 s, then quiet and
	// contended again, within 5 s; with the cap, after 0.3 and 0.5 s (two
	// runs), for good.
	slackShare = 0.25
	// machineEvery is how often a quiet scheduler reads the process's
	// CPUs while tasks run; with the reading from before they began,
	// the first window after a pause judges the whole pause. Others that
	// left the process less than half its budget (less busyMargin) in that
	// time would starve lowered threads.
	machineEvery = 100 * time.Millisecond
	busyMargin   = 0.25
	// quotaGroupProcs bounds the processes of the quota's cgroup whose
	// times the guard sums, each machineEvery, where the cgroup's own CPU
	// time cannot be read (cgroup v1 without cpuacct beside cpu): a file
	// per process each time. A container holds a few; past the bound the
	// quota's cgroup is not read (othersLocked).
	quotaGroupProcs = 32
	// stallShare: while tasks run, busy others turn the scheduler
	// contended only where the threads of the process's cgroup waited
	// for a CPU for at least this share of the watch, where cpu.pressure
	// can be read. Measured (a cgroup v2 of its own, 2 s each): a starved
	// SCHED_IDLE thread's cgroup 0.99 of the time, a normal thread sharing
	// its CPU with a busy process about 0.6, an idle process 0.004.
	stallShare = 0.25
	// contendedSpareProcs is how many Ps beyond the workers the rest of
	// the program gets while contended, in place of spareProcs: a task
	// thread at normal priority is left waiting by the kernel about as
	// often as it runs, with its P, so the rest needs more Ps to find one
	// free.
	contendedSpareProcs = 2
)

// guardSource is what the guard reads: the process's CPU time and a
// thread's (ns); a thread's run delay (ns) and whether it is runnable now,
// ok false where they cannot be read (a nil threadWait reads none); and
// the CPUs the process may run on (cpuscope.Sample), ok false where they
// cannot be read. The package's tests replace it.
type guardSource struct {
	processCPU func() int64
	threadCPU  func(tid int) int64
	threadWait func(tid int) (delay int64, runnable, ok bool)
	machine    func() (cpuscope.Sample, bool)
	// quotaGroup, where not nil, reads the CPU time (ns) of every process
	// of the cgroup whose CPU quota sets the process's budget (see
	// othersLocked); ok false where it cannot.
	quotaGroup func() (cpu int64, ok bool)
	// window and calm, when non-zero, replace guardWindow and calmWindow
	// (the machine's watch is then 20 windows, as machineEvery is).
	window, calm time.Duration
}

// newRealGuardSource reads the operating system's clocks, the process's
// affinity, and /proc and the process's cgroup (cpuscope).
func newRealGuardSource() guardSource {
	scope := cpuscope.New("/")
	src := guardSource{
		processCPU: osprio.ProcessCPU,
		threadCPU:  osprio.ThreadCPUOf,
		threadWait: scope.ThreadWait,
		machine:    func() (cpuscope.Sample, bool) { return scope.Read(osprio.ProcessCPUs()) },
	}
	if stat, ok, err := cgroupcpu.StatFile(); ok && err == nil {
		src.quotaGroup = func() (int64, bool) {
			cpu, ok := cgroupcpu.GroupCPUUpTo(stat, quotaGroupProcs)
			return int64(cpu), ok
		}
	}
	return src
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
	// process's CPU time and the reading of its CPUs then; calmOK is
	// false where they could not be read (the scheduler then turns quiet
	// after each calmWindow, to try). While quiet, the same reading
	// starts the machine's watch (machineEvery).
	calmStart, calmProc int64
	calmScope           cpuscope.Sample
	calmOK              bool
	// calmGroup is the quota's cgroup's CPU time at calmStart, where
	// calmGroupOK (guardSource.quotaGroup).
	calmGroup   int64
	calmGroupOK bool

	// contended: other processes keep the CPUs busy, and every task
	// thread runs at normal priority (s.os.keepNormal). starved counts the
	// windows in a row in which a lowered thread starved.
	contended bool
	starved   int
	// cpus is how many CPUs the process may run on, at the last reading
	// (0 before one: the CPU budget stands for them). others is the CPUs
	// the other processes used of them over the last machine watch.
	// stalled is the share of the last reading's period in which a
	// thread of the process's cgroup waited for a CPU, where stallOK.
	cpus    float64
	others  float64
	stalled float64
	stallOK bool
	// delays holds the run delay of each thread that starved in this
	// window, read then (waited), and lastDelays those of the last window.
	delays, lastDelays map[int32]int64

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
	g.delays, g.lastDelays = map[int32]int64{}, map[int32]int64{}
	return g
}

// guardLocked is the guard's part of a monitor pass at now: it closes a
// window when one is due and turns the scheduler contended or quiet. It
// returns how long until the next window ends, or 0 when no task holds a
// slot.
func (s *Scheduler) guardLocked(now int64) (next int64) {
	if s.os.guard == nil || len(s.running) == 0 {
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
	capacity := s.os.capacity
	if _, budget := g.scope(capacity); starved && ownCPUs < budget-slack(outsideSlack, budget) {
		g.starved++
	} else {
		g.starved = 0
	}
	switch {
	case g.starved >= starvedWindows && g.others > g.busyLine(capacity):
		s.enterContendedLocked(now, "a lowered thread starved, others busy")
	case g.starved >= longStarvedWindows:
		s.enterContendedLocked(now, "a lowered thread starved long")
	case now-g.calmStart >= 20*g.window:
		if s.busyOthersLocked(now) && (!g.stallOK || g.stalled >= stallShare) {
			s.enterContendedLocked(now, "others busy")
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
// processes left the process less than half its budget over the pause
// before, the scheduler turns contended before any thread is lowered.
func (s *Scheduler) guardBeginLocked(now int64) {
	g := s.os.guard
	if g == nil || !g.stale(now) {
		return
	}
	g.winStart, g.procStart = now, g.src.processCPU()
	g.win++
	g.starved = 0
	if !g.contended && g.calmStart != 0 && now-g.calmStart >= 20*g.window && s.busyOthersLocked(now) {
		s.enterContendedLocked(now, "others busy in the pause")
	}
}

// markThreadsLocked reads the CPU clock of every running task's lowered
// thread and reports whether one that was read at the window's start got
// less than starvedShare of it since, waiting for a CPU (waited).
func (s *Scheduler) markThreadsLocked() (starved bool) {
	g := s.os.guard
	w := float64(g.window)
	g.delays, g.lastDelays = g.lastDelays, g.delays
	clear(g.delays)
	for _, t := range s.running {
		// A lowered thread's id does not change while the task runs.
		tid := t.os.tid.Load()
		if tid == 0 || t.os.raised || t.os.left() || !(t.os.handoff || t.os.lowered.Load() && !t.os.foundLowered) {
			t.os.guardWin = 0
			continue
		}
		cpu := g.src.threadCPU(int(tid))
		if t.os.guardWin == g.win && float64(cpu-t.os.markCPU) < starvedShare*w && g.waited(tid) {
			starved = true
		}
		t.os.guardWin, t.os.markCPU = g.win+1, cpu
	}
	return starved
}

// waited reports whether thread tid, which got almost nothing of the
// window that has just closed, waited for a CPU in it: it is runnable
// now, or its run delay grew by half a window since the last window's
// reading (a wait that ended in this one; only a thread that starved in
// the last window too was read then). Where its files cannot be read it
// counts as waiting.
func (g *guard) waited(tid int32) bool {
	if g.src.threadWait == nil {
		return true
	}
	delay, runnable, ok := g.src.threadWait(int(tid))
	if !ok {
		return true
	}
	g.delays[tid] = delay
	last, seen := g.lastDelays[tid]
	return runnable || seen && delay-last >= g.window/2
}

// scope returns how many CPUs the process may run on (the last
// reading's; before one, or where none can be read, the CPU budget) and
// its budget on them: capacity, at most that many.
func (g *guard) scope(capacity float64) (cpus, budget float64) {
	if g.cpus <= 0 {
		return capacity, capacity
	}
	return g.cpus, min(capacity, g.cpus)
}

// busyLine is the others' CPUs over which they leave the process less
// than half its budget, less busyMargin, of the CPUs it may run on: with
// N of them and a budget of B, N - B/2 + busyMargin.
func (g *guard) busyLine(capacity float64) float64 {
	cpus, budget := g.scope(capacity)
	return cpus - budget/2 + busyMargin
}

// calmLine is the others' CPUs under which they leave the process all of
// its budget but calmCPUs: N - B + calmCPUs.
func (g *guard) calmLine(capacity float64) float64 {
	cpus, budget := g.scope(capacity)
	return cpus - budget + slack(calmCPUs, budget)
}

// slack is cpus (outsideSlack, calmCPUs), at most slackShare of budget.
func slack(cpus, budget float64) float64 { return min(cpus, slackShare*budget) }

// calmLocked closes a calm window at now: it reports whether the others
// were under calmLine over it, and starts the next. Where the process's
// CPUs cannot be read it reports true, to try; where they have changed
// since the window began, false, to judge the next.
func (s *Scheduler) calmLocked(now int64) bool {
	g := s.os.guard
	others, ok := s.othersLocked(now)
	if !ok {
		return !g.calmOK
	}
	return others < g.calmLine(s.os.capacity)
}

// busyOthersLocked closes a quiet scheduler's watch of the machine at now:
// it reports whether the others were over busyLine since it began.
func (s *Scheduler) busyOthersLocked(now int64) bool {
	g := s.os.guard
	others, ok := s.othersLocked(now)
	g.others = others
	return ok && others > g.busyLine(s.os.capacity)
}

// othersLocked returns the CPUs that the other processes used on average
// since the last call, of those the process may run on (their busy time
// less the process's own, at least 0), and starts the next period at now;
// ok is false without two readings of the same CPUs. It notes how many
// CPUs it read (g.cpus) and the share of the period in which the
// cgroup's threads waited for a CPU (g.stalled).
//
// Under a CPU quota the others that count may also be the other
// processes of the quota's cgroup: they take the process's budget B, not
// its CPUs, and with N CPUs and a quota below N the CPUs' busy time
// cannot show it (the quota leaves some idle). Where the cgroup's CPU
// time can be read, the others are then at least N - B + M, M the CPUs
// the cgroup's other processes used: the same lines then judge what they
// leave the process of its budget, B - M. Without it a server under a
// quota beside a busy process of its own cgroup never turned contended,
// and its collections waited for its starved task threads
// (docs/measurements/busy-machine.md#a-quota-shared-with-another-process).
func (s *Scheduler) othersLocked(now int64) (others float64, ok bool) {
	g := s.os.guard
	scope, read := g.src.machine()
	proc := g.src.processCPU()
	var group int64
	groupOK := false
	if g.src.quotaGroup != nil {
		group, groupOK = g.src.quotaGroup()
	}
	g.stallOK = false
	if read && g.calmOK && now > g.calmStart && scope.Set == g.calmScope.Set {
		d := float64(now - g.calmStart)
		others = max(0, float64(scope.Busy-g.calmScope.Busy-(proc-g.calmProc))/d)
		ok = true
		if scope.StallOK && g.calmScope.StallOK {
			g.stalled, g.stallOK = float64(scope.Stall-g.calmScope.Stall)/d, true
		}
		if groupOK && g.calmGroupOK {
			cpus, budget := float64(scope.CPUs), min(s.os.capacity, float64(scope.CPUs))
			mates := max(0, float64(group-g.calmGroup-(proc-g.calmProc))/d)
			others = max(others, cpus-budget+mates)
		}
	}
	if read {
		g.cpus = float64(scope.CPUs)
	}
	g.calmStart, g.calmScope, g.calmProc, g.calmOK = now, scope, proc, read
	g.calmGroup, g.calmGroupOK = group, groupOK
	return others, ok
}

// enterContendedLocked turns the scheduler contended at now, for the rule
// that why names, and raises the running tasks' lowered threads.
func (s *Scheduler) enterContendedLocked(now int64, why string) {
	g := s.os.guard
	starved := g.starved
	g.contended, g.starved = true, 0
	s.os.keepNormal.Store(true)
	g.contentions++
	g.since = now
	// The log gives the reading that decided (the others' CPUs at the
	// last watch of the machine, the windows a thread starved), so that
	// a turn nobody expected can be told apart from a neighbour.
	others, cpus := g.others, g.cpus
	s.othersLocked(now) // the first calm window begins
	s.log.Info("cpusched: other processes keep the CPUs busy; task threads run at normal priority",
		"cpu_budget", s.os.capacity, "rule", why, "others_cpus", others, "cpus", cpus, "starved_windows", starved)
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

// contendedTime is the time the scheduler has been contended up to now;
// under s.mu.
func (g *guard) contendedTime(now int64) int64 {
	if g.contended {
		return g.time + now - g.since
	}
	return g.time
}

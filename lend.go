package cpusched

// Lending slots: in IsolationOSPriority, while the rest of the program
// keeps busy every P the tasks leave it, the scheduler runs fewer tasks at
// once, so that the rest has more Ps.
//
// Why. GOMAXPROCS is the worker count plus spareProcs, so with every slot
// taken the rest of the program has one P. The kernel runs its threads
// ahead of the tasks' lowered ones, but the Go runtime runs a goroutine
// only on a P, and a task's thread holds its P while the kernel leaves it
// waiting. A server whose own work needs more than one CPU then queues for
// that one P, while the tasks' threads, which the kernel hardly runs, hold
// the others; every stop-the-world waits for those threads as well. With
// the same work in a separate SCHED_IDLE process the server has every P
// (docs/measurements/tail-attribution.md#the-busy-fast-path-io-heavy).
//
// How. While tasks run, the monitor samples every lendTick how many
// goroutines outside the tasks and itself run or wait for a P
// (runtime/metrics' /sched/goroutines/running and
// /sched/goroutines/runnable, less the Scheduler's tasks holding slots),
// against the Ps the tasks leave. (With several Schedulers in this mode,
// each counts the others' tasks as the rest of the program: they lend
// sooner, not later.) When over a lendWindow the
// rest of the program kept busy as many Ps as it had, with lendQueue
// goroutines more waiting, one slot is lent: no task gets it, and the
// first task to come to a Checkpoint past the count gives its slot up
// (yield); a task that makes no Checkpoint keeps its slot until it ends. A lent slot comes
// back once the rest of the program, for returnWindows windows in a row,
// kept busy fewer Ps than it had less one, with returnSlack to spare:
// then it would still have a P idle without it. At least one slot always
// runs, so the tasks keep what CPU the kernel leaves them. Lending changes
// no GOMAXPROCS (each change stops the world) and costs the tasks nothing
// while the program is quiet; what it measured is in
// docs/measurements/ospriority-settings.md#lending-slots.
//
// Not while contended. Beside other busy processes (contention.go) the
// rest's goroutines wait for a CPU rather than for a P, so the counts
// above read busy however many Ps it has, and a slot lent then is never
// given back. Lending while contended measured longer collector stops,
// not shorter, and so did a slot still lent from a quiet stretch
// (docs/measurements/busy-machine.md#tried-and-dropped). So once the
// guard turns contended every lent slot comes back, and none is lent
// until it turns quiet.

import (
	"runtime"
	"runtime/metrics"
	"time"
)

const (
	// lendTick is how often the monitor samples the runtime's goroutine
	// counts while tasks run (lender.tick; the tests shorten it).
	lendTick = 5 * time.Millisecond
	// lendWindow is how many samples make one decision: 100 ms.
	lendWindow = 20
	// returnWindows is how many windows in a row the rest of the program
	// must have had a P to spare before a lent slot comes back.
	returnWindows = 5
	// returnSlack is how much of a P the rest of the program must have
	// left idle, on average, after a slot came back.
	returnSlack = 0.5
	// lendQueue is how many of the rest's goroutines must, on average, wait
	// for a P beyond the Ps it keeps busy before a slot is lent. In the demo
	// server on 2 CPUs
	// (docs/measurements/ospriority-settings.md#lending-slots) the rest
	// averaged 0.05-0.95 busy Ps of its one beside the CPU-heavy load with
	// and without small tasks, and 6-16 with the busy fast path.
	lendQueue = 1.0
)

// lendSampler reads the runtime's counts of running and runnable
// goroutines; ok is false where the runtime does not have them. The
// package's tests replace it (testHooks.lendSample).
type lendSampler func() (running, runnable uint64, ok bool)

// readGoroutineCounts is the real lendSampler.
func readGoroutineCounts() lendSampler {
	samples := []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
	}
	return func() (uint64, uint64, bool) {
		metrics.Read(samples)
		if samples[0].Value.Kind() != metrics.KindUint64 || samples[1].Value.Kind() != metrics.KindUint64 {
			return 0, 0, false
		}
		return samples[0].Value.Uint64(), samples[1].Value.Uint64(), true
	}
}

// lender is the monitor's state for lending; only the monitor uses it.
type lender struct {
	sample lendSampler
	tick   int64   // lendTick, or the tests' period
	next   int64   // when to sample next
	n      int     // samples in this window
	busy   float64 // sum over the window of the rest's busy Ps and waiting goroutines
	ps     float64 // sum over the window of the Ps the tasks left
	quiet  int     // windows in a row with a P to spare
	off    bool    // the runtime has no goroutine counts
}

// take records one sample, with tasks holding slots; it returns true when
// a window is complete.
func (l *lender) take(tasks int) bool {
	running, runnable, ok := l.sample()
	if !ok {
		l.off = true
		return false
	}
	procs := runtime.GOMAXPROCS(0)
	tasks = min(tasks, procs)
	// The tasks' goroutines hold Ps while their threads run them, and the
	// monitor, which is sampling, holds one; a task goroutine waiting for
	// its thread counts as the rest's (runnable), a brief overcount.
	l.busy += float64(max(int(running)-tasks-1, 0)) + float64(runnable)
	l.ps += float64(procs - tasks)
	l.n++
	return l.n >= lendWindow
}

// decide ends a window: +1 to lend one more slot, -1 to take one back, 0
// to keep things as they are. slots is how many slots run now.
func (l *lender) decide(slots, lent int) int {
	busy, ps := l.busy/float64(l.n), l.ps/float64(l.n)
	l.n, l.busy, l.ps = 0, 0, 0
	spare := busy <= ps-1-returnSlack
	if spare {
		l.quiet++
	} else {
		l.quiet = 0
	}
	switch {
	case busy >= ps+lendQueue && slots > 1:
		return +1
	case lent > 0 && l.quiet >= returnWindows:
		l.quiet = 0
		return -1
	}
	return 0
}

// setLentLocked sets how many slots are lent, at now, and counts the slot
// time lent so far (Stats.LentTime).
func (m *osMode) setLentLocked(n int, now int64) {
	m.lentTime = m.lentTimeLocked(now)
	m.lent, m.lentSince = n, now
}

// lentTimeLocked is the slot time lent up to now.
func (m *osMode) lentTimeLocked(now int64) int64 {
	return m.lentTime + int64(m.lent)*max(now-m.lentSince, 0)
}

// lendLocked runs the lender's part of a monitor pass at now: it samples
// when due and, at a window's end, lends a slot or takes one back. It
// returns how long until the next sample (0 when the lender has nothing
// to watch) and the tasks given a returned slot, which the caller resumes
// after unlocking.
func (m *osMode) lendLocked(now int64) (next int64, start []startedTask) {
	s := m.s
	l := m.lender
	if l.off || len(s.running) == 0 && s.rq.nwaiting == 0 && now-m.lastLendStart >= int64(lendWindow)*l.tick {
		// Nothing has run for a window: nothing to lend, and the next
		// task starts on every slot again. (Looking on for a window
		// after the last start keeps the monitor from being woken by
		// every one of a stream of short tasks.)
		if m.lent > 0 {
			m.setLentLocked(0, now)
		}
		*l = lender{sample: l.sample, tick: l.tick, off: l.off}
		return 0, nil
	}
	if g := m.guard; g != nil && g.contended {
		// No lending while contended (the file comment): every lent
		// slot comes back, and the windows start afresh once quiet.
		*l = lender{sample: l.sample, tick: l.tick, off: l.off}
		if m.lent == 0 {
			return 0, nil
		}
		m.setLentLocked(0, now)
		return 0, s.pickAllLocked(now)
	}
	if now < l.next {
		return l.next - now, nil
	}
	tick := l.tick
	l.next = now + tick
	if !l.take(len(s.running)) {
		return tick, nil
	}
	switch l.decide(s.slotsLocked(), m.lent) {
	case +1:
		m.setLentLocked(m.lent+1, now)
		m.lends++
		for _, r := range s.running {
			r.preempt.Or(preemptLend) // the first to come gives its slot up
		}
	case -1:
		m.setLentLocked(m.lent-1, now)
		start = s.pickAllLocked(now)
	}
	return tick, start
}

// pickAllLocked gives every free slot to a waiting task, at now, and
// returns those tasks for the caller to resume after unlocking.
func (s *Scheduler) pickAllLocked(now int64) (start []startedTask) {
	for {
		t, first := s.pickLocked(now)
		if t == nil {
			return start
		}
		start = append(start, startedTask{t, first})
	}
}

// startedTask is a task given a slot, to resume (Scheduler.resume).
type startedTask struct {
	t     *Task
	first bool
}

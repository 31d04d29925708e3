package cpusched

// The charge: what a task's stretch on its slot costs it, in the policy
// and in Stats, and where its CPU time is read.
//
// The problem. A task holds its slot from the moment it is given it
// until it comes back to the scheduler (a Checkpoint's slow path, a
// Blocking call, its end): a stretch of slot time, which is wall-clock
// time. The kernel need not run the task's thread all that while: another
// process may take its CPU, and in IsolationOSPriority a lowered thread
// waits while any normal thread wants the CPU. Charged as slot time, such
// a task pays for CPU it did not get: beside a busy neighbour the tasks'
// charge and their real CPU part ways, and so do the shares the weights
// promise, most for the tasks whose threads wait most.
//
// What the kernel can say. Linux counts each thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID, a system call of about half a microsecond).
// A thread's clock is a task's only while the task's goroutine is locked
// to that thread: otherwise the runtime runs other goroutines on it, and
// the task on other threads. So a stretch is measured where the task's
// goroutine was locked to one thread from the reading that began it to
// the one that ends it, which in IsolationOSPriority is: a task on a
// hand-off thread, from fn's start; one that left its hand-off thread,
// which could not be raised (retire.go, which charges it as it leaves),
// on the runtime thread its goroutine lands on and locks until the task
// ends (lockLanded: its CPU goes on from the old thread's last reading,
// so the stretch under way stays measured, all but the retirement
// itself; that thread is never lowered); a task on its own goroutine,
// locked while fn runs, from the mark its lowering measures from
// (lowering.go: taken at its first Checkpoint or the monitor's look, by
// yield at a charge that finds none, and as it locks a thread again
// after it waited unlocked, for its slot or in a Blocking call, until
// its thread counts as lowered: markAfterWait; parkLocked's unmarkCPU
// and unblock's reading, -1 unlocked, leave the stretch unmarked till
// then); where threads cannot be raised, a task on its own goroutine
// (one that started while contended) from fn's start, its goroutine
// locked to its thread until it ends (lockContended). Everywhere else
// (IsolationReserve, IsolationNone, a stretch that ends before its
// task's thread has a mark, the stretch under way as a task left its
// hand-off thread where its old thread's clock could not be read) the
// stretch falls back to its slot time, and Stats says how much did
// (CPUTimeFallback).
//
// Rejected for a task that left its hand-off thread: letting it run
// unlocked, as it did, and measuring only the stretches whose readings
// at both ends found the goroutine on the same thread. An unlocked
// goroutine may leave that thread and come back between the readings,
// and the clock then counts the other goroutines the thread ran
// meanwhile; nothing the task can read tells. Locked, its thread runs
// nothing else, at the cost of a hand-off task's: each wait for its slot
// or in Blocking is a switch between threads, for the few tasks that
// run while contended where threads cannot be raised. The same holds for
// a task that starts on its own goroutine there (lockContended).
//
// The readings are those readCPU already took for the lane (taskCPULocked
// makes them the task's CPU since fn began; Task.cpuUsed keeps the last):
// as a stretch ends (yield, block), as a Blocking call returns (unblock:
// the stretch after it begins there, so the CPU used inside fn is not
// charged), and at the task's end (finish) unless the whole task held its
// slot for less than cpuReadMin; a task on its own goroutine is read
// before its thread is lowered too, which the lane does not use
// (laneCPU). Checkpoint's fast path reads nothing. A Stats snapshot reads
// a running task's thread from its own (osprio.ThreadCPUOf), as does the
// hold timer that ends a Blocking call's hold (releaseHold). cpuUsed is
// negative (^ its value) while the stretch under way is not measured:
// the reading that began it was not one.
//
// What is charged. For a measured stretch of slot time slot that used
// cpu (at most slot), Stats count cpu as CPUTime, and the policy charges
// the task's and its group's vruntimes max(cpu, slot/minChargeDivisor);
// for one not measured, slot for both. Rejected: charging slot time at
// each stretch as before and correcting the vruntimes by (cpu - slot) at
// the next reading. Every stretch that can be measured ends at a reading,
// so the charge can be right the first time; a correction after the fact
// would move an entity back while it waits in a heap or after it has left
// V (depart, leave), where the lag that sums to zero is no longer its
// own. Charging once, as before, with a smaller amount, keeps every EEVDF
// invariant of eevdf.go and runqueue.go: vruntimes only grow, V stays
// their weighted average, and debt stays bounded by maxGroupDebt.
//
// What stays slot time: what is about time rather than CPU. A slice ends
// on the clock (sliceEnd: how long others wait), the overrun estimate
// measures how late a task comes back, the small-task lane's budget and
// the realtime throttle and idle share are shares of the slots' time,
// and a task's bursts (against its Blocking waits) say how long it holds
// its slot. RunTime and the RunTimes histograms stay slot time too.

// minChargeDivisor bounds the charge of a measured stretch from below:
// at least its slot time over minChargeDivisor. A task whose thread does
// not compute while it holds its slot (it waits inside fn without
// Blocking, or in a Blocking call that keeps its slot) would otherwise be
// charged nothing, keep the earliest deadline, and shut the others out
// for as long as it waits; at a quarter it gets at most four times its
// share of the slots. A thread that competes with a busy process for its
// CPU gets half of it, and one beside three such gets a quarter: the
// charge still follows the CPU there. Below that, contended
// IsolationOSPriority raises the lowered threads (contention.go).
const minChargeDivisor = 4

// cpuReadMin is the slot time below which a task's end takes no reading
// of its thread's CPU clock, and its last stretch is charged as slot
// time: for the empty tasks of a hand-off the system call would be a
// good part of the cost, and a task that held its slot for less than
// callerSpin is charged at most that much too much.
const cpuReadMin = int64(callerSpin)

// cpuUnread is chargeLocked's cpu where no reading was taken for the
// stretch (readCPU reads -1 where none can be).
const cpuUnread = -2

// chargeLocked charges t's run time since it last was: to the task, to
// the policy (its vruntimes, at every level) and to the statistics (see
// the file comment). cpu is taskCPULocked's reading as the stretch ended,
// -1 where t's CPU cannot be read, or cpuUnread where none was taken.
func (s *Scheduler) chargeLocked(t *Task, now, cpu int64) {
	slot := max(now-t.since, 0)
	used, measured := t.cpuSince(cpu, slot)
	t.setCPU(cpu, t.runTime+slot)
	if slot == 0 {
		return
	}
	t.since = now
	t.burst += slot
	t.runTime += slot
	service, cpuUsed := slot, int64(-1)
	if measured {
		service, cpuUsed = max(used, slot/minChargeDivisor), used
	} else {
		s.stats.cpuFallback += slot
	}
	if s.rq.charge(t, slot, service, cpuUsed, now) {
		s.stats.laneRunTime += slot
	}
	s.stats.runTime += slot
	s.stats.cpuTime += used
	s.stats.classRunTime[t.classID] += slot
	s.stats.classCPUTime[t.classID] += used
	t.gstats.runTime += slot
	t.gstats.cpuTime += used
}

// cpuSince returns the CPU time t used in its stretch since its last
// charge, which held its slot for slot: measured, the growth of its
// thread's CPU clock up to cpu (taskCPULocked's), at most slot; or,
// where the stretch is not measured, slot (measured false).
func (t *Task) cpuSince(cpu, slot int64) (used int64, measured bool) {
	if cpu < 0 || t.cpuUsed < 0 {
		return slot, false
	}
	return min(max(cpu-t.cpuUsed, 0), slot), true
}

// cpuSoFarLocked is cpuSince for running task t at a Stats snapshot, its
// stretch so far having held the slot for slot: its thread's CPU clock
// read from this thread, or slot where the stretch will be charged as
// slot time (fallback), or 0 where it cannot be read now and may be
// measured when charged (a task on its own goroutine whose thread is not
// lowered, which waits unlocked and is measured from the moment it locks
// a thread again: markAfterWait). So a snapshot never counts more than
// the charge will, and CPUTime never goes back.
func (s *Scheduler) cpuSoFarLocked(t *Task, slot int64) (used int64, fallback bool) {
	switch {
	case !s.readsCPU():
		return slot, true
	case t.cpuUsed < 0 && s.os.waitsUnlocked(t):
		return 0, false
	case t.cpuUsed < 0:
		return slot, true
	}
	cpu := s.taskCPUOfLocked(t)
	if cpu < 0 {
		return 0, false
	}
	return min(max(cpu-t.cpuUsed, 0), slot), false
}

// cpuRead is a reading of a task's thread's CPU clock taken on its
// goroutine before s.mu (readCPU), for taskCPULocked: clock, or -1 where
// none can be taken, or cpuUnread where none was; seq, the count of Stats
// snapshots before it.
type cpuRead struct {
	clock int64
	seq   uint64
}

// noCPURead is a cpuRead of no reading.
var noCPURead = cpuRead{clock: cpuUnread}

// readCPU reads, on t's goroutine, the CPU clock of t's thread, for
// taskCPULocked to make t's CPU time of: in IsolationOSPriority, where the
// goroutine is locked to its thread for t (osMode.clock); -1 elsewhere,
// at no cost. A system call, so it is read before s.mu is taken.
func (s *Scheduler) readCPU(t *Task) cpuRead {
	r := cpuRead{clock: -1, seq: s.statsSeq.Load()}
	if cpu, ok := s.cfg.hooks.taskCPU(t); ok {
		r.clock = cpu
	} else {
		r.clock = s.os.clock(t)
	}
	return r
}

// taskCPULocked is, from r, read on t's goroutine (readCPU), the CPU time
// t has used on its thread since fn began (cpuOfClockLocked). A Stats
// snapshot since r (statsSeq) read the thread's clock later than r: the
// clock is read again, into r, so that the charge counts at least what
// the snapshot did (cpuSoFarLocked). Under s.mu, on t's goroutine.
func (s *Scheduler) taskCPULocked(t *Task, r *cpuRead) int64 {
	if r.clock >= 0 && r.seq != s.statsSeq.Load() {
		*r = s.readCPU(t)
	}
	return s.cpuOfClockLocked(t, r.clock)
}

// cpuOfClockLocked is, from clock, a reading of t's thread's CPU clock,
// the CPU time t has used on its thread since fn began, as the mode
// measures it (osMode.cpuOfClockLocked): -1, for its slot time, where
// clock is -1 or the mode cannot say; cpuUnread, and the tests' readings,
// pass through. Under s.mu.
func (s *Scheduler) cpuOfClockLocked(t *Task, clock int64) int64 {
	if clock < 0 || s.cfg.hooks != nil && s.cfg.hooks.cpuReading != nil {
		return clock
	}
	return s.os.cpuOfClockLocked(t, clock)
}

// taskCPUOfLocked is taskCPULocked's for running task t, its thread's
// clock read from this thread (osMode.cpuOfLocked): for a Stats snapshot,
// and for the hold timer; under s.mu.
func (s *Scheduler) taskCPUOfLocked(t *Task) int64 {
	if cpu, ok := s.cfg.hooks.taskCPU(t); ok {
		return cpu
	}
	return s.os.cpuOfLocked(t)
}

// setCPU records t's CPU time since fn began (taskCPULocked's) as
// t.cpuUsed, the charge's mark and, but for a task on its own goroutine
// whose thread is not lowered, the run queue's measure of t with cpuClock
// (laneCPU); under s.mu. Where cpu is -1 the measure is the mode's of
// slot, t's slot time (osMode.slotMeasure: slot, or for a task on its own
// goroutine, ownLaneCPU's); where cpuUnread (no reading was taken), it
// stays as it was. Without a reading the measure is kept as ^measure,
// which marks the stretch that begins as not measured.
func (t *Task) setCPU(cpu, slot int64) {
	switch {
	case cpu >= 0:
		t.cpuUsed = cpu
		return
	case cpu == cpuUnread:
		cpu = t.laneCPU()
	default:
		cpu = t.s.os.slotMeasure(t, slot)
	}
	t.cpuUsed = ^cpu
}

// laneCPU is t's CPU time as the lane measures it (runQueue.used with
// cpuClock): for a task on its own goroutine whose thread is not lowered
// (osMode.waitsUnlocked), the mode's measure of its slot time
// (ownLaneCPU); for the others, t.cpuUsed, kept as ^measure after a stretch without a reading
// of its thread's clock. Under s.mu.
func (t *Task) laneCPU() int64 {
	switch {
	case t.s.os.waitsUnlocked(t):
		return t.ownLaneCPU(t.runTime)
	case t.cpuUsed < 0:
		return ^t.cpuUsed
	}
	return t.cpuUsed
}

// unmarkCPU marks the stretch t begins as not measured: its goroutine is
// to wait unlocked, and may come back on another thread.
func (t *Task) unmarkCPU() {
	if t.cpuUsed >= 0 {
		t.cpuUsed = ^t.cpuUsed
	}
}

// readsCPU reports whether s reads its tasks' CPU time at all: in
// IsolationOSPriority where the thread clock is (cpuClock), or the tests'
// reading in its place.
func (s *Scheduler) readsCPU() bool {
	return s.rq.cpuClock || s.cfg.hooks != nil && s.cfg.hooks.cpuReading != nil
}

// runningTimes are what the running tasks add to a Stats snapshot's
// counters: their stretches so far, in slot time (run) and in CPU time
// (cpuSoFarLocked).
type runningTimes struct {
	run, cpu int64
}

// add adds o to r.
func (r *runningTimes) add(o runningTimes) {
	r.run += o.run
	r.cpu += o.cpu
}

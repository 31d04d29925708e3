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
// or with CPUSCHED_OS_HANDOFF=1, for every task, a worker goroutine locked
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
	"log/slog"
	"math"
	"os"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/cgroupcpu"
	"github.com/cpusched/cpusched/internal/osprio"
)

// spareProcs is how many Ps IsolationOSPriority adds beyond its workers.
// One: the prototype measured before this project started measured two spare Ps as worse under GC
// (docs/performance.md, "The prototype"), since the collector's background
// workers take 25% of GOMAXPROCS.
const spareProcs = 1

// osWorker is one locked low-priority worker goroutine.
//
// The hand-off. Waking a parked worker is the runtime's locked-thread
// dance: the dispatcher readies the worker goroutine on its own P, that P
// is handed to the worker's thread (a futex wake), and when the task ends
// the caller, readied on the worker's P, needs another thread to run on (a
// second wake): 12-28 us for an empty task on this project's machines
// (BenchmarkRunOSPriority). So a worker whose task (or chain of tasks)
// ended within callerSpin spins for up to workerSpin, holding its P,
// before it parks. A task dispatched meanwhile passes through slot with
// two atomic operations, and its Run caller, which then knows the worker
// is awake, spins for up to callerSpin for the end before it blocks on the
// done channel: an empty task costs no wake at all.
//
// Why only after short tasks: a caller that stopped spinning and blocked
// is readied on the worker's P when the task ends, and while the worker
// spins it waits there; in BenchmarkRunOSPriority/serial-100us that added
// 100 us per Run. A task that ended within callerSpin of its start had a
// spinning caller (or, the first time, one that blocked at once because
// the worker was parked: the one stranded wait that starts a run of fast
// hand-offs). After a longer task the worker parks at once, as before.
// Both spins are bounded, so an idle scheduler costs no CPU, and the
// worker's spin is on its low-priority thread, so it uses only a CPU that
// nothing else wants; the caller's spin is at the caller's priority and
// at most callerSpin per Run.
//
// state is workerParked while the worker waits on next, workerSpinning
// while it polls slot, workerClaimed once a dispatcher has taken it from
// the spin (it then stores the task in slot). Only a worker in s.osIdle
// can be claimed, and a dispatcher takes it out of s.osIdle under s.mu
// first, so there is one dispatcher per spin.
type osWorker struct {
	next  chan *Task
	state atomic.Int32
	slot  atomic.Pointer[Task]
}

const (
	workerParked int32 = iota
	workerSpinning
	workerClaimed
)

// workerSpin and callerSpin bound the two spins of the hand-off.
const (
	workerSpin = 50 * time.Microsecond
	callerSpin = 20 * time.Microsecond
)

// stopWorker tells a worker to exit.
var stopWorker = new(Task)

// give hands t (or stopWorker) to w, which the caller has taken out of
// s.osIdle, and reports whether w was spinning (awake).
func (w *osWorker) give(t *Task) (awake bool) {
	if w.state.CompareAndSwap(workerSpinning, workerClaimed) {
		w.slot.Store(t)
		return true
	}
	w.next <- t
	return false
}

// await waits for w's next task, spinning for up to workerSpin, then
// parked on w.next. w is in s.osIdle, in state workerSpinning. A task
// given meanwhile comes through slot; one given after the spin, through
// next.
func (w *osWorker) await() *Task {
	start := time.Now()
	for i := 1; w.state.Load() != workerClaimed; i++ {
		if i%32 == 0 && time.Since(start) >= workerSpin {
			if w.state.CompareAndSwap(workerSpinning, workerParked) {
				return <-w.next
			}
			break // claimed meanwhile: the task is on its way
		}
	}
	for {
		if t := w.slot.Swap(nil); t != nil {
			return t
		}
	}
}

// awaitEnd waits for the end of Run task t: when t went to a worker that
// was awake, spinning for up to callerSpin first.
func awaitEnd(t *Task, spin bool) error {
	if spin {
		start := time.Now()
		for i := 1; ; i++ {
			if t.handle.ended() {
				return t.handle.err // no channel made
			}
			if i%32 == 0 && time.Since(start) >= callerSpin {
				break
			}
		}
	}
	<-t.handle.Done()
	return t.handle.err
}

// procsState is the process-wide GOMAXPROCS change, shared by every
// Scheduler in IsolationOSPriority mode: the first one raises it, the last
// one to close restores it.
//
// The CPU budget. Since Go 1.25 the runtime sets GOMAXPROCS from the
// cgroup CPU limit (rounded up) when the GOMAXPROCS environment variable is
// not set, and keeps updating it while the limit changes, until the
// program calls runtime.GOMAXPROCS(n). cpusched takes its worker count from
// GOMAXPROCS as it found it (the cgroup limit, the environment variable,
// or the program's own call), never from NumCPU, so a container with a
// 1.5-CPU quota on a 64-core host runs 2 CPU-heavy tasks at once, not 64.
// Raising GOMAXPROCS by spareProcs is a runtime.GOMAXPROCS(n) call, so it
// turns the automatic updates off while any Scheduler in this mode is open;
// the restore hands the default back (runtime.SetDefaultGOMAXPROCS, which
// turns them on again) unless the value found was not the default (the
// environment variable was set, or the program had set another value), in
// which case that value is set again.
var procsState struct {
	sync.Mutex
	refs   int
	before int // GOMAXPROCS as the first Scheduler in this mode found it
	raised int
}

// procsBudget is the CPU budget that worker counts come from: GOMAXPROCS
// as the runtime or the program set it, before any IsolationOSPriority
// Scheduler raised it.
func procsBudget() int {
	procsState.Lock()
	defer procsState.Unlock()
	if procsState.refs > 0 {
		return procsState.before
	}
	return runtime.GOMAXPROCS(0)
}

// cpuLimit is the cgroup CPU limit that IsolationOSPriority's default
// worker count followed, for New's log.
type cpuLimit struct {
	cpus float64 // 0: none applied
	err  error   // reading the limit failed; it was ignored
}

// cgroupLimit reads the process's cgroup CPU limit; tests replace it.
var cgroupLimit = cgroupcpu.Limit

// osPriorityWorkers is IsolationOSPriority's default worker count for the
// CPU budget procs (see quotaWorkers), and the limit it followed.
func osPriorityWorkers(procs int) (int, cpuLimit) {
	cpus, limited, err := cgroupLimit()
	if err != nil {
		return procs, cpuLimit{err: err}
	}
	n := quotaWorkers(procs, runtime.NumCPU(), cpus, limited, os.Getenv("GOMAXPROCS") != "")
	if n == procs {
		return procs, cpuLimit{}
	}
	return n, cpuLimit{cpus: cpus}
}

// quotaWorkers is IsolationOSPriority's default worker count.
//
// Why a CPU limit needs its own rule: SCHED_IDLE (and nice) order threads
// within what the cgroup may use, but a CFS bandwidth limit stops every
// thread of the cgroup once the period's quota is spent, whatever its
// priority, until the next period (100 ms by default). With as many
// workers as GOMAXPROCS (ceil(limit)), CPU-bound workers spend the quota in
// every period and the rest of the program then waits up to the period's
// remainder: docs/bench-quota.md has the measurements (quota 1.5 on 2 CPUs:
// throttled in every period). One worker fewer leaves part of the quota to
// the rest of the program and was never throttled there.
//
// The rule applies only when the limit is below the machine's CPU count
// (else it cannot be spent faster than the CPUs allow) and GOMAXPROCS is
// the value the runtime derives from it (max(2, ceil(limit)), at most
// numCPU): when the operator (the GOMAXPROCS variable, envSet) or the
// program set GOMAXPROCS, that number is the budget, as everywhere else.
func quotaWorkers(procs, numCPU int, limit float64, limited, envSet bool) int {
	if !limited || envSet || limit >= float64(numCPU) {
		return procs
	}
	ceil := int(math.Ceil(limit))
	if procs != min(numCPU, max(2, ceil)) {
		return procs // the program set its own GOMAXPROCS
	}
	return max(1, ceil-1)
}

// raiseProcs makes GOMAXPROCS at least want, for as long as the returned
// function has not been called. It logs the change, and the restore, to
// logger.
func raiseProcs(want int, logger *slog.Logger) (restore func()) {
	procsState.Lock()
	defer procsState.Unlock()
	if procsState.refs == 0 {
		procsState.before = runtime.GOMAXPROCS(0)
		procsState.raised = procsState.before
	}
	procsState.refs++
	if want > procsState.raised {
		logger.Info("cpusched: IsolationOSPriority raised GOMAXPROCS (restored when the last such Scheduler closes)", "from", procsState.raised, "to", want)
		runtime.GOMAXPROCS(want)
		procsState.raised = want
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			procsState.Lock()
			defer procsState.Unlock()
			procsState.refs--
			if procsState.refs == 0 && procsState.raised != procsState.before {
				restoreProcs(procsState.before, logger)
				procsState.raised = procsState.before
			}
		})
	}
}

// restoreProcs sets GOMAXPROCS back to before: the runtime's default when
// that is what it was, so that the runtime follows the cgroup limit again.
func restoreProcs(before int, logger *slog.Logger) {
	how := "default"
	if os.Getenv("GOMAXPROCS") != "" {
		// SetDefaultGOMAXPROCS ignores the environment variable: the
		// operator's number is set again instead.
		how = "set"
		runtime.GOMAXPROCS(before)
	} else {
		runtime.SetDefaultGOMAXPROCS()
		if runtime.GOMAXPROCS(0) != before {
			// The program had set its own value.
			how = "set"
			runtime.GOMAXPROCS(before)
		}
	}
	logger.Info("cpusched: GOMAXPROCS restored", "to", before, "as", how)
}

// probeOSPriority checks that a thread's priority can be lowered here, on a
// throwaway locked thread.
var probeOSPriority = func(p osprio.Policy) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the runtime discards the thread
		errc <- osprio.Lower(p)
	}()
	return <-errc
}

// spawn starts first-run task t: on a new goroutine, or if t is handed off
// (IsolationOSPriority), on an idle low-priority worker. It reports
// whether that worker was awake (see osWorker).
func (s *Scheduler) spawn(t *Task) (awake bool) {
	if !t.handoff {
		go s.runGo(t)
		return false
	}
	s.mu.Lock()
	if n := len(s.osIdle); n > 0 {
		w := s.osIdle[n-1]
		s.osIdle[n-1] = nil
		s.osIdle = s.osIdle[:n-1]
		s.mu.Unlock()
		return w.give(t)
	}
	s.osWorkers.Add(1)
	s.mu.Unlock()
	go s.osWorkerLoop(t)
	return false
}

// osLowerAfter is how long a task on its own goroutine holds its slot at
// its thread's normal priority before the monitor lowers the thread: long
// enough that the tasks of a server that only wraps its handlers (and an
// empty Run) never pay the two system calls, short enough that the rest of
// the program waits behind a task's normal-priority start for no longer
// than a fraction of its own 1 ms-scale work (docs/performance.md,
// "Own goroutines").
const osLowerAfter = 250 * time.Microsecond

// lowerIdle is how long the monitor keeps looking for tasks to lower after
// the last task got a slot, so that back-to-back short Runs do not wake it
// at every start, while tasks that come further apart (a stream of small
// requests) cost one wake each, not one every osLowerAfter.
const lowerIdle = 2 * osLowerAfter

// lockThread locks t's goroutine, which is about to call fn (first) or
// to go on with it after a wait, to its thread, records the thread for the
// monitor, and sets the Checkpoint countdown to t's next lowering check:
// the first Checkpoint when fn begins, the lowerCheckEvery-th after a
// wait (lowerCheckEvery).
func (s *Scheduler) lockThread(t *Task, first bool) {
	runtime.LockOSThread()
	t.tid.Store(int32(osprio.ThreadID()))
	switch {
	case first:
		t.lowerCheck = lowerCheckMark
	case !t.lowered.Load():
		t.countDown(lowerCheckEvery)
	}
}

// countDown sets t's Checkpoint countdown to n (1..127) and counts those
// Checkpoints in t.lowerSeen.
func (t *Task) countDown(n int64) {
	n = min(max(n, 1), math.MaxInt8)
	t.lowerCheck = int8(n)
	if t.lowerSeen < math.MaxInt32-math.MaxInt8 {
		t.lowerSeen += int32(n)
	}
}

// unlockThread is lockThread's undo, once t has ended: the thread's setting
// goes back to what it was if t's lowering changed it.
func (s *Scheduler) unlockThread(t *Task) {
	t.tid.Store(0)
	if t.lowered.Load() && !t.foundLowered {
		if err := t.loweredFrom.Restore(); err != nil {
			// New's probe succeeded, so this is unexpected. The
			// goroutine stays locked to its lowered thread rather
			// than leave the runtime a lowered thread to run others on.
			s.log.Warn("cpusched: putting a task's thread priority back failed; the calling goroutine stays on its lowered thread", "err", err)
			return
		}
	}
	runtime.UnlockOSThread()
}

// unlockThreadToWait unlocks the goroutine of t, a task on its own
// goroutine that has given its slot up to wait, from its thread, unless
// the thread is lowered (then it waits locked, as a worker would); it
// reports whether it did. lockThread is its undo, once t runs again:
// possibly on another thread, which is not lowered either.
func (s *Scheduler) unlockThreadToWait(t *Task) bool {
	if !s.osOwn || t.handoff || t.lowered.Load() {
		return false
	}
	t.tid.Store(0)
	runtime.UnlockOSThread()
	return true
}

// noteWake adds to t.kept, for a task on its own goroutine that has just
// been given a slot (by another goroutine, or by its own at once), the
// time since then: the time its goroutine waited to run, which under load
// (a hundred connections' goroutines on 2 CPUs) can pass osLowerAfter on
// its own. Call it on t's goroutine: nothing else writes t.since while t
// holds its slot and has not run yet.
func (s *Scheduler) noteWake(t *Task) {
	if s.osOwn && !t.handoff {
		t.kept.Add(max(0, s.clock.Now()-t.since))
	}
}

// lowerLongLocked lowers the threads of the running tasks on their own
// goroutines that have computed for osLowerAfter (lowerIfLongLocked). It
// returns how long until the next such task may reach osLowerAfter (at
// most osLowerAfter) and whether the monitor should keep looking: a task
// is running unlowered, or one got a slot within lowerIdle.
func (s *Scheduler) lowerLongLocked(now int64) (next int64, look bool) {
	next = int64(osLowerAfter)
	if s.cfg.noMonitorLower {
		return next, false
	}
	look = now-s.lastStart < int64(lowerIdle)
	for _, t := range s.running {
		if t.lowered.Load() || t.handoff {
			continue
		}
		look = true
		if d := s.lowerIfLongLocked(t, now); d > 0 {
			next = min(next, d)
		}
	}
	return next, look
}

// lowerIfLongLocked lowers the thread of t, a running task on its own
// goroutine whose thread is not lowered, once t has computed for
// osLowerAfter: its thread's CPU time since it was first seen on that
// thread, by the monitor or at a Checkpoint, on top of what it had
// computed on earlier threads as of the last reading there (t.computed).
// It returns how long t has left to compute before that, or 0 once there
// is nothing more to do for it. The monitor calls it for every such task, and the task itself
// at its first Checkpoint and then at checks it paces (lowerSelf), so
// that a task is lowered on time even when the monitor's timer is not: Go
// runs a P's timers when that P schedules, and the P that set the
// monitor's timer is often the one now running the task.
//
// Why not slot time: on a busy machine the kernel runs other threads for
// milliseconds while a normal-priority task holds its slot. Counted as
// computing, that lowered 2% of lab http's short tasks, and in the ab
// check put small tasks, lowered and so long for the lane, behind the long
// ones for 30-100 ms. What t computed before it was first seen is not
// counted: with Checkpoints, one Checkpoint's worth of work.
func (s *Scheduler) lowerIfLongLocked(t *Task, now int64) (left int64) {
	tid := int(t.tid.Load())
	if t.hold.Load() != holdNone || tid == 0 {
		// In a Blocking call that keeps the slot (not computing), or its
		// goroutine has not reached fn yet or waits unlocked.
		return int64(osLowerAfter)
	}
	if int(t.markTid) != tid {
		t.markTid, t.markCPU = int32(tid), osprio.ThreadCPUOf(tid)-int64(t.computed)
		return int64(osLowerAfter) - int64(t.computed)
	}
	// Below osLowerAfter of computingBound, no need to read the clock.
	used := t.computingBound(now)
	if d := int64(osLowerAfter) - used; d > 0 {
		return d
	}
	cpu := osprio.ThreadCPUOf(tid)
	used = cpu - t.markCPU
	t.computed = int32(min(used, math.MaxInt32))
	if d := int64(osLowerAfter) - used; d > 0 {
		return d
	}
	before, lowered, err := osprio.LowerThread(tid, s.cfg.osPolicy)
	if err != nil {
		// The task's own end must not change the thread; look again later.
		s.log.Warn("cpusched: lowering a task's thread failed; it runs at normal priority", "err", err)
		return int64(osLowerAfter)
	}
	// Lowered now, or already at the setting: a Run nested in a lowered
	// task, a thread the program lowered itself, or the outer task of a
	// nested Run that lowered the thread first. Either way the task now
	// counts as lowered (the lane measures it by its thread's CPU time
	// from here on, taskCPU, on top of what it computed so far); its end
	// puts back the setting the thread had only if it lowered the thread
	// itself. (Putting back what it found would lower the thread for good
	// in the last case, once the inner task's end had raised it.)
	t.cpuStart = cpu - used
	t.loweredFrom = before
	t.foundLowered = !lowered
	t.lowered.Store(true)
	return 0
}

// computingBound is t's slot time up to now less the time it did not
// compute (t.kept): what t, holding its slot, has computed, or more
// (the kernel may have run other threads meanwhile). Under s.mu, or on
// t's goroutine outside a Blocking call that keeps its slot (lowerSelf).
func (t *Task) computingBound(now int64) int64 {
	return t.runTime + now - t.since - t.kept.Load()
}

// lowerCheckEvery is how many Checkpoints a task on its own goroutine
// makes before its next check whether to lower its thread (lowerSelf)
// when there is nothing to pace it by: after the first check, and after a
// wait. Later checks are paced by the task's rate of Checkpoints. The
// first check comes at the task's first Checkpoint (call sets the
// countdown to lowerCheckMark), so that its mark is taken close to its
// start; after a wait, at the lowerCheckEvery-th, so that a task that
// waits between short stretches (lab http's 64 KiB writes) does not take
// the lock and read the clock after each.
const lowerCheckEvery = 8

// lowerCheckMark is the countdown of a check that is to mark the thread
// (Checkpoint's slow path calls lowerSelf with mark set at once).
const lowerCheckMark = -1

// lowerSelf is the Checkpoint countdown's check: t, running on its own
// goroutine on an unlowered thread, lowers it if it has computed for
// osLowerAfter, and marks its thread if nobody has (the monitor may have
// first); mark is set for the first check, which is for that. Call it on
// t's goroutine.
//
// Only a check that may lower or must mark takes the lock: t's slot time
// less the time it did not compute bounds what it computed from above,
// and below osLowerAfter there is nothing to do but set the next check,
// paced by the Checkpoints so far. Its goroutine may read runTime and
// since without the lock outside a Blocking call that keeps its slot:
// only this goroutine writes them then (the hold timer writes them only
// while a hold is armed). With a locked check every eighth Checkpoint, a
// task with a Checkpoint every ~55 ns of work ran 10% slower serially and
// half as much again in parallel (docs/performance.md, "The ab check's
// max").
func (s *Scheduler) lowerSelf(t *Task, mark bool) {
	now := s.clock.Now()
	if mark {
		t.lowerSeen++
	} else if t.hold.Load() == holdNone {
		if used := t.computingBound(now); used < int64(osLowerAfter) {
			// The next check when, at the rate of its Checkpoints so
			// far, t may have computed osLowerAfter: slot time runs
			// ahead of computing, so the check comes early, never late.
			n := int64(lowerCheckEvery)
			if used > 0 && t.lowerSeen > 0 {
				n = (int64(osLowerAfter) - used) * int64(t.lowerSeen) / used
			}
			t.countDown(n)
			return
		}
	}
	s.mu.Lock()
	if t.state == stateRunning && !t.lowered.Load() {
		s.lowerIfLongLocked(t, now) // marks the thread if nobody has
	}
	s.mu.Unlock()
	switch {
	case t.lowered.Load():
		t.lowerCheck = 0
	case mark:
		t.countDown(lowerCheckEvery)
	default:
		// Slot time says it may have computed enough, its CPU clock says
		// not yet: its thread is not running much. Check less often.
		t.countDown(4 * lowerCheckEvery)
	}
}

// dispatch returns fn's slot in the table of task lengths and whether a task
// running fn is handed off to a worker thread: always where
// IsolationOSPriority cannot run tasks on their own goroutines, never
// outside that mode, and otherwise when the recent tasks that ran fn (or
// a function sharing its slot in the table) were long.
//
// Why long tasks are handed off. A task on its own goroutine starts on
// whatever runtime thread ran its caller, often the one that just took a
// request off the network poller, and that thread is then lowered and
// held for the task's length; a worker thread only ever runs tasks. With
// long tasks on their own goroutines, examples/httpserver's /hello probe
// under its /hash load (2 connections of 10-14 ms tasks) had a p99 of
// 3.2-3.7 ms against 0.8-1.7 ms for the hand-off, and 2.8-3.0 ms even
// with each thread lowered as its task began, or with each task on a new
// goroutine (docs/performance.md, "Own goroutines"). For a long task the
// hand-off costs under 0.1% of its length; for short ones it is the whole
// cost. So a function's tasks run on their own goroutines until they turn
// out long, and go back to them once they are short again.
func (s *Scheduler) dispatch(fn func(*Task) error) (slot uint8, handoff bool) {
	if !s.osMode {
		return 0, false
	}
	if !s.osOwn {
		return 0, true
	}
	slot = lengthSlot(reflect.ValueOf(fn).Pointer())
	return slot, s.lengths[slot].Load() >= longScore
}

// The table of task lengths: a moving score per slot, 0 (short) to
// 1024 (long), that each ended task moves a quarter of the way toward its
// own length; a function whose score is at least longScore is handed off.
// From either end, three tasks of the other length flip it. Updates are
// not atomic as a whole: a lost one costs one dispatch choice.
const (
	lengthSlots = 64
	longScore   = 512
)

// lengthSlot is the table slot of a function's code pointer.
func lengthSlot(key uintptr) uint8 {
	return uint8(uint64(key>>3) * 0x9E3779B97F4A7C15 >> 58) // Fibonacci hashing to 6 bits
}

// noteLength adds t, which is ending, to the table of task lengths. A task
// on its own goroutine was long if the monitor lowered its thread (it had
// computed for osLowerAfter); one handed off, if it held its slot that
// long, not counting the time it did not compute, and its worker thread
// computed that long too (cpu, from taskCPU: a SCHED_IDLE thread may hold
// its slot without running). Under s.mu, after t's last charge.
func (s *Scheduler) noteLength(t *Task, cpu int64) {
	var isLong bool
	if t.handoff {
		used := t.runTime - t.kept.Load()
		if cpu >= 0 {
			used = min(used, cpu)
		}
		isLong = used >= int64(osLowerAfter)
	} else {
		isLong = t.lowered.Load()
	}
	long := int32(0)
	if isLong {
		long = 1024
	}
	slot := &s.lengths[t.lenSlot]
	old := slot.Load()
	if n := old - old/4 + long/4; n != old {
		slot.Store(n) // only on change: a settled slot's cache line stays shared
	}
}

// probeOSRestore checks, on a throwaway locked thread, that a lowered
// thread can be raised back here.
var probeOSRestore = func(p osprio.Policy) error {
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

// maxIdleOSWorkers bounds the idle pool: enough for every slot to hand off
// without creating a thread.
func (s *Scheduler) maxIdleOSWorkers() int { return s.workers + 1 }

func (s *Scheduler) osWorkerLoop(t *Task) {
	defer s.osWorkers.Done()
	runtime.LockOSThread() // never unlocked, see the file comment
	if err := osprio.Lower(s.cfg.osPolicy); err != nil {
		// New's probe succeeded, so this is unexpected; the task still
		// runs, at normal priority.
		s.log.Warn("cpusched: lowering a worker thread's priority failed; its tasks run at normal priority", "err", err)
	}
	w := &osWorker{next: make(chan *Task, 1)}
	for t != stopWorker {
		start := time.Now()
		s.runGo(t)
		// Spin only after tasks that ended within callerSpin (osWorker).
		spin := time.Since(start) < callerSpin
		s.mu.Lock()
		if s.osStopping || len(s.osIdle) >= s.maxIdleOSWorkers() {
			s.mu.Unlock()
			return
		}
		if spin {
			w.state.Store(workerSpinning)
		} else {
			w.state.Store(workerParked)
		}
		s.osIdle = append(s.osIdle, w)
		s.mu.Unlock()
		if spin {
			t = w.await()
		} else {
			t = <-w.next
		}
	}
}

// stopOSWorkers tells idle workers to exit and waits for all of them.
func (s *Scheduler) stopOSWorkers() {
	if !s.osMode {
		return
	}
	s.mu.Lock()
	s.osStopping = true
	idle := s.osIdle
	s.osIdle = nil
	s.mu.Unlock()
	for _, w := range idle {
		w.give(stopWorker)
	}
	s.osWorkers.Wait()
	s.restoreProcs()
}

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
// (CPUSCHED_THREAD_POLICY; docs/performance.md, "Thread setting").
var defaultOSPolicy = osprio.Idle

// osPolicyEnv names the environment variable that overrides the thread
// setting (idle, batch10, nice19, nice10), for measuring the alternatives
// with cpusched bench; it is read by New only in IsolationOSPriority mode.
const osPolicyEnv = "CPUSCHED_THREAD_POLICY"

// osHandoffEnv names the environment variable that, set to 1, makes
// IsolationOSPriority hand every task to a worker thread even where tasks
// could run on their own goroutines, for measuring the two side by side
// with cpusched bench.
const osHandoffEnv = "CPUSCHED_OS_HANDOFF"

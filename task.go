package cpusched

// Task and Handle: what fn sees (Checkpoint, Context, Blocking, Waited)
// and what Go returns.

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"
)

// Bits of Task.preempt, the word Checkpoint loads.
const (
	preemptSlice     = 1 << iota // the slice is over
	preemptUrgent                // a task of a more urgent class waits
	preemptCancel                // the task's context ended, or Close gave up waiting
	preemptLane                  // a lane task waits: hand it the slot if no other slot has (see runqueue.go)
	preemptLend                  // more tasks hold slots than may: a slot was lent to the rest of the program (lend.go), or a task took one back past them (idle.go); the first task to come gives its slot up
	preemptLeave                 // leave the lowered thread, which cannot be raised, while contended (retire.go)
	preemptIdle                  // the idle watch gave the slot up while the task's thread slept: take one back (idle.go)
	preemptCountdown             // the mode's Checkpoint countdown runs (Task.lowerCheck is not 0); only the task's goroutine sets and clears it (setLowerCheck)
	preemptTurns                 // begin turns: the task's own thread runs at normal priority while contended (turns.go); the task's goroutine clears it (osMode.mayLeave)
)

// preemptKept are the bits that outlive the scheduler's answer to the
// others: a cancellation, the countdown, which is not a request, and the
// start of turns, which the task's goroutine takes.
const preemptKept = preemptCancel | preemptCountdown | preemptTurns

// taskState is where a task is in its lifecycle; the lifecycle comment at
// the top of scheduler.go says who moves it between states, and which
// goroutine owns which field in each.
type taskState uint8

const (
	stateNew      taskState = iota // not yet accepted
	stateQueued                    // waiting for its first slot
	stateRunning                   // holding a slot
	stateParked                    // waiting for its slot back (after a Checkpoint or Blocking)
	stateBlocking                  // inside Blocking's fn, without a slot
	stateDone
)

// Task is one unit of CPU-heavy work run by a Scheduler. The *Task passed to
// fn is valid until fn returns (after that the scheduler may reuse it for
// another task); its methods are meant for the goroutine that runs fn
// (Context may be shared).
//
// A nil *Task is valid: Checkpoint returns nil, Blocking runs fn, Context
// returns context.Background() and Waited returns 0, so one handler serves
// a scheduled route and a direct one (httpsched.TaskFrom returns nil
// outside a scheduled handler).
type Task struct {
	// preempt is non-zero when the task should come to the scheduler at its
	// next Checkpoint. It is first in the struct so the load that
	// Checkpoint's fast path does touches the task's first cache line.
	preempt atomic.Uint32

	classID int8 // Class
	qidx    int8 // the queue it is in: qExit..qIdle
	state   taskState
	// spawned: the scheduler starts the goroutine fn runs on (spawn): a
	// new one for Go's tasks, a hand-off thread's for tasks handed off.
	// Run's other tasks run on the caller's goroutine.
	spawned bool
	// lowerCheck counts Checkpoints down to the next that calls the mode
	// (osMode.countdown: IsolationOSPriority's check whether to lower
	// the task's thread, lowering.go, or on a hand-off thread the end of
	// its turn, turns.go), or is lowerCheckMark for a call at
	// the next; 0, as in the other modes, where none is due. The mode
	// sets it (setLowerCheck); only the task's goroutine uses it. While
	// it is not 0, preempt's bit preemptCountdown is set, so that
	// Checkpoint's fast path tests one word.
	lowerCheck int8
	started    bool
	// callerWaits is set for Run: the caller watches ctx while the task is
	// queued, so no context.AfterFunc is registered until it starts.
	callerWaits bool
	// inLane is set while the task is queued in its group's small-task
	// lane (runqueue.go), linked through laneLink; laneRun
	// while it holds a slot the lane gave it, within its first slice.
	inLane, laneRun bool
	// idleWatched: WithIdleRelease was given, in IsolationOSPriority
	// (osTask.rare.idle watches it); set before the task is published,
	// never changed after. The task's goroutine then reads under s.mu
	// what the watch may write without it (idle.go).
	idleWatched bool
	runIdx      int16 // index in Scheduler.running while it holds a slot (maxWorkers fits)
	// os is the task's state in IsolationOSPriority (osTask,
	// ospriority.go), zero in the other modes.
	os       osTask
	laneLink link[Task]

	s       *Scheduler
	fn      func(*Task) error
	ctx     context.Context // the caller's
	taskCtx atomic.Pointer[taskContext]

	// watch is the watcher of ctx's Done channel; the tasks sharing it form
	// a list through watchLink.
	watch     *ctxWatch
	watchLink link[Task]

	ent       entity
	groupName string         // WithGroup's
	group     *groupNode     // its group's run queue node while active
	gstats    *groupCounters // the counters it adds to, set when accepted
	trace     *taskTrace     // set when runtime/trace was on as it was accepted

	slice int32 // ns, at most maxSlice (int32: the Task's size class)
	// hold: a Blocking call keeps the slot, which the task then holds
	// while it waits (the hold values in hold.go: only IsolationOSPriority
	// keeps slots so, osMode.blocking); here, it fills the rest of slice's
	// word.
	hold     atomic.Int32
	sliceEnd int64 // when the current slice ends
	// since is, while the task holds a slot, when its run time was last
	// charged, and while it waits for one, when it began to wait.
	since    int64
	runTime  int64 // slot time used so far
	waited   int64 // time spent waiting for a slot so far
	burst    int64 // run time since the last Blocking call
	avgBurst int64 // moving averages over Blocking calls
	avgWait  int64

	// cpuUsed is, in IsolationOSPriority, the CPU time the task's thread
	// has used on it (from os.cpuStart), as of the task's last
	// Checkpoint that came to the scheduler or Blocking call: the lane's
	// measure of the task (runQueue.used), written under s.mu by the
	// task's goroutine (and the hold timer). It is also where the charge
	// of the task's next stretch is measured from (charge.go), and holds
	// ^measure, negative, where that stretch is not measured (laneCPU).
	cpuUsed int64

	wake   chan struct{} // the slot is handed over on it
	handle Handle
}

// class returns the task's class.
func (t *Task) class() Class { return Class(t.classID) }

// taskContext is the task's context: the caller's, cancelled too when Close
// gives up waiting.
type taskContext struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool
}

// Checkpoint is the cooperative preemption point: call it from a long task
// at least every tenth of its slice of work (every 100 us under the 1 ms
// default of IsolationReserve and IsolationNone, every 1 ms under the 10 ms
// of IsolationOSPriority; see WithSlice). A task keeps its slot until the
// first Checkpoint after its slice ends, so the work between two calls is
// how late it may yield, and how late it sees a cancellation. Calling it
// more often costs little: an atomic load and a field test when nothing is
// asked of the task (BenchmarkCheckpoint; docs/performance.md#scheduler-calls).
// When the task's slice is over and another task should run, it parks the
// task until the scheduler gives it a slot again; when a more urgent class
// waits, it does so at once. It returns the task's context error once the
// context is done (ErrClosed if Close gave up waiting), and nil otherwise;
// after a non-nil error fn should return. The context is watched with
// context.AfterFunc, so Checkpoint sees a cancellation a few microseconds
// after it happens, not in the same instant. For work that cannot call it,
// see the package doc's "Work that cannot checkpoint".
func (t *Task) Checkpoint() (err error) {
	if t == nil || t.preempt.Load() == 0 {
		return
	}
	return t.checkpointSlow()
}

// checkpointSlow is kept out of Checkpoint so that Checkpoint inlines, as
// sync.Once splits doSlow from Do. Checkpoint's nil test costs the inliner
// the node its named result and bare return save: it stands at the budget
// (go build -gcflags=-m=2: cost 80, budget 80). The fast path loads one
// word: the mode's countdown is a bit of it (preemptCountdown), not a
// second load.
func (t *Task) checkpointSlow() error {
	p := t.preempt.Load()
	if p&preemptCancel != 0 {
		return t.cancelErr()
	}
	if p == preemptCountdown {
		// Only the countdown is set, and only the mode sets it; most of
		// its Checkpoints only count down.
		if t.lowerCheck > 1 {
			t.lowerCheck--
			return nil
		}
		t.s.os.countdown(t)
		return nil
	}
	t.s.yield(t)
	if t.preempt.Load()&preemptCancel != 0 {
		return t.cancelErr()
	}
	return nil
}

// cancelErr is the error Checkpoint returns once the task was cancelled.
func (t *Task) cancelErr() error {
	if err := t.ctx.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Context returns the task's context: the one passed to Run or Go, also
// cancelled (with cause ErrClosed) when Close stops waiting for the task.
// It is cancelled when fn returns.
func (t *Task) Context() context.Context {
	if t == nil {
		return context.Background()
	}
	if tc := t.taskCtx.Load(); tc != nil {
		return tc.ctx
	}
	ctx, cancel := context.WithCancelCause(t.ctx)
	stop := context.AfterFunc(t.s.killCtx, func() { cancel(ErrClosed) })
	tc := &taskContext{ctx: ctx, cancel: cancel, stop: stop}
	if !t.taskCtx.CompareAndSwap(nil, tc) {
		stop()
		cancel(nil)
		return t.taskCtx.Load().ctx
	}
	if t.preempt.Load()&preemptCancel != 0 && t.s.killCtx.Err() != nil {
		cancel(ErrClosed) // Close gave up before the context was asked for
	}
	return ctx
}

// Waited returns how long the task has waited for a worker slot so far:
// for its first slot, and for its slot back each time Checkpoint gave it up
// or Blocking returned. It is the queueing delay the scheduler added to the
// task (time inside Blocking's fn is not counted). Call it from the
// goroutine that runs fn.
func (t *Task) Waited() time.Duration {
	if t == nil {
		return 0
	}
	if t.idleWatched {
		t.s.mu.Lock() // a retake writes it (idle.go)
		defer t.s.mu.Unlock()
	}
	return time.Duration(t.waited)
}

// Blocking runs fn, which should wait (on the network, a lock, a timer)
// rather than compute, without holding a worker slot: the slot goes to
// another task while fn runs, and the task waits for a slot again after it.
// The time fn takes counts as the task's wait: tasks whose CPU bursts are
// short against their waits get earlier deadlines. If fn panics, the task
// gets its slot back first and the panic continues.
//
// In IsolationOSPriority, where giving the slot up and getting it back
// costs a hand-off between threads, a task whose earlier Blocking calls
// have been short (a moving average under 50 us) keeps its slot while fn
// runs, and gives it up only if another task waits and fn is still running
// 50 us after it began; the time it kept the slot counts as run time. A
// task's first call goes by the recent calls of all tasks: where Blocking
// calls really wait, keeping the slot would leave it idle that long each
// time.
func (t *Task) Blocking(fn func()) {
	if t == nil {
		fn()
		return
	}
	start := t.s.clock.Now()
	switch t.s.block(t, start) {
	case blockNested: // the slot is already given up, or kept by an outer call
		fn()
		return
	case blockKept:
		defer t.s.os.endHold(t, start)
		fn()
		return
	}
	// In IsolationOSPriority a task on its own goroutine whose thread is
	// not lowered waits, in fn and for its slot back, unlocked: waking it
	// is a goroutine's wake, not a thread's. One on a lowered thread that
	// cannot be raised leaves it first while contended (retire.go).
	t.s.os.mayLeave(t)
	w := t.s.os.unlockToWait(t)
	t.traceRegion(traceBlocking)
	defer func() {
		t.traceEndRegion()
		d := t.s.clock.Now() - start
		t.s.os.noteBlock(t, d)
		t.s.unblock(t, d)
		t.s.os.relock(t, w)
		t.traceRegion(traceRun)
	}()
	fn()
}

// Handle is a task submitted with Go.
type Handle struct {
	// done is the channel Done returns, made only by a Done or Wait call
	// that comes before the task has ended, so that a task nobody waits
	// on yet (a queued one, say) costs no channel: nil until then, or
	// closedDone if the end comes first (end). It is a chan struct{}
	// held as an unsafe.Pointer for the atomic operations, which order
	// err's write before the waiter's read.
	done unsafe.Pointer
	err  error
}

// closedDone is the channel Done returns for a task that ended before
// anyone asked for one.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// chanPointer and pointerChan convert between a channel and its pointer:
// a channel value is a pointer to the runtime's channel.
func chanPointer(c chan struct{}) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&c)) }
func pointerChan(p unsafe.Pointer) chan struct{} { return *(*chan struct{})(unsafe.Pointer(&p)) }

// Wait blocks until the task has ended and returns what Run would have:
// fn's error, a *PanicError, the context's error for a task that never
// started, or ErrClosed for one that Close removed.
func (h *Handle) Wait() error {
	<-h.Done()
	return h.err
}

// Done returns a channel closed when the task has ended.
func (h *Handle) Done() <-chan struct{} {
	if p := atomic.LoadPointer(&h.done); p != nil {
		return pointerChan(p)
	}
	c := make(chan struct{})
	if atomic.CompareAndSwapPointer(&h.done, nil, chanPointer(c)) {
		return c
	}
	return pointerChan(atomic.LoadPointer(&h.done)) // the end or another call came first
}

// end closes the task's Done channel, or marks it closed if none was made
// yet; h.err must be set before. It is called once, by whoever ends the
// task.
func (h *Handle) end() {
	if !atomic.CompareAndSwapPointer(&h.done, nil, chanPointer(closedDone)) {
		close(pointerChan(atomic.LoadPointer(&h.done))) // a channel Done made, and so never changes
	}
}

// ended reports whether end was called, without making a channel.
func (h *Handle) ended() bool {
	p := atomic.LoadPointer(&h.done)
	if p == nil {
		return false
	}
	select {
	case <-pointerChan(p):
		return true
	default:
		return false
	}
}

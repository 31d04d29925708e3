package cpusched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// The task lifecycle: the mechanism around the run queue (runqueue.go has
// the policy).
//
// Vocabulary. A slot is one of Workers places to run; a task holding one
// is in s.running. Who runs fn: the Run caller's goroutine in
// IsolationNone and IsolationReserve; for Go, a goroutine started when the
// task first gets a slot (runGo, which runs the next never-started Go task
// too); in IsolationOSPriority, for Run and Go alike, a worker goroutine
// locked to a low-priority thread (osmode.go). That goroutine is "the
// task's goroutine" below.
//
// States (Task.state) and who moves a task between them, always under s.mu:
//
//	new      -> queued    submit, no free slot (the caller of Run or Go)
//	new      -> running   submit, a free slot (the caller)
//	new      -> done      submit, ctx already ended (the caller)
//	queued   -> running   startLocked, by whoever frees a slot: finish,
//	                      yield, block (the goroutine of the task that
//	                      gives the slot up)
//	queued   -> done      cancelQueued (the Run caller, ctx ended),
//	                      contextDone (the ctx's AfterFunc), killAll (Close)
//	running  -> parked    yield, at a Checkpoint (the task's goroutine)
//	running  -> blocking  block, entering Blocking (the task's goroutine)
//	running  -> done      finish, fn returned or panicked (the task's goroutine)
//	parked   -> running   startLocked, by whoever frees a slot, or killAll
//	blocking -> running   unblock, a free slot or Close gave up (the task's goroutine)
//	blocking -> parked    unblock, no free slot (the task's goroutine)
//
// A parked task whose ctx ends moves to the exit queue (contextDone) so it
// gets the next slot and can return. The goroutine that moves a task to
// running hands it the slot after unlocking: resume sends on Task.wake, or
// starts the task's goroutine (spawn) if it never ran and is a Go task or
// an IsolationOSPriority task.
//
// Locking and ownership. s.mu guards the Scheduler's mutable fields and
// every Task field except these:
//   - Set before submit publishes the task and never changed after: s, ctx,
//     classID, slice, isGo, callerWaits, groupName, trace, handle.done.
//     Read without the lock.
//   - preempt: atomic. Bits are set by anyone (the monitor, preemptFor,
//     contextDone, killAll); cleared only under s.mu on the slot holder's
//     paths (startLocked, yield, block). Checkpoint loads it without the lock.
//   - taskCtx: atomic pointer, made once by Context.
//   - wake: made once under s.mu by the goroutine that first makes the task
//     wait for a slot (submit, for a queued Run task that runs on its
//     caller; yield or unblock otherwise), received on only by the task's
//     goroutine, sent on by the goroutine that gives it a slot (or that
//     removed a queued Run task), after unlocking. The Run caller in IsolationOSPriority never touches it: it
//     waits on handle.done.
//   - handle.err: written by the goroutine that ends the task, before it
//     closes handle.done or sends on wake; read after that by the waiter.
//   - fn: read by the task's goroutine; set to nil by whoever ends the
//     task, once no one else can reach it.
//   - The accounting fields (since, runTime, waited, burst, avgBurst,
//     avgWait) are written under s.mu, by the task's own goroutine while it
//     holds a slot or is in Blocking, and by startLocked when it gets one;
//     the task's goroutine may read them without the lock (Waited), since
//     nothing else writes them while it runs.
//
// The Scheduler's cfg, clock, workers, osMode, log, killCtx, drained and
// the monitor's channels are set in New and never changed; restoreProcs is
// called once, from release (closeOnce).

// Errors returned by the Scheduler.
var (
	// ErrClosed is returned for work submitted after Close, and for queued
	// tasks that Close removed.
	ErrClosed = errors.New("cpusched: scheduler closed")
	// ErrQueueFull is returned by Run and Go when the queue limit of tasks
	// waiting to start is reached.
	ErrQueueFull = errors.New("cpusched: queue full")
)

// errGoexit is the error recorded for a task whose fn called runtime.Goexit.
var errGoexit = errors.New("cpusched: task called runtime.Goexit")

// PanicError is returned by Run and Wait when the task's fn panicked. The
// panic is recovered: it neither kills the process nor leaks the slot.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack
}

// Error returns the panic value and the stack.
func (p *PanicError) Error() string {
	return fmt.Sprintf("cpusched: task panicked: %v\n\n%s", p.Value, p.Stack)
}

// Unwrap returns the panic value when it is an error.
func (p *PanicError) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}

// Scheduler runs CPU-heavy tasks on a bounded number of worker slots, in
// the order its EEVDF policy chooses. Create one with New; its methods are
// safe for concurrent use. Close it to stop its slice monitor goroutine.
type Scheduler struct {
	cfg     config
	clock   clock
	workers int

	killCtx context.Context // cancelled when Close stops waiting
	kill    context.CancelFunc

	mu         sync.Mutex
	closed     bool
	killing    bool // Close gave up waiting: every task must unwind
	releasing  bool // releaseWhenDrained's goroutine was started
	queues     [numQueues]classQueue
	nqueued    int     // tasks in the heaps and lanes, in every state
	waitingNew int     // queued tasks that never started (the queue limit counts these)
	blocked    int     // tasks inside Blocking
	running    []*Task // tasks holding a slot
	live       int     // accepted tasks not yet ended
	drained    chan struct{}
	// groups holds the tracked groups: the default group "" and every
	// group named by SetGroupWeight, with their weights and counters, kept
	// while idle. Other groups share otherGroups' counters, and their run
	// queue nodes are freed when their last task ends (deactivateTask), so
	// memory does not grow with the number of distinct group names.
	groups      map[string]*groupCounters
	otherGroups groupCounters
	watches     map[<-chan struct{}]*ctxWatch
	periodStart int64
	periodUsed  [numQueues]int64
	laneStart   int64 // the small-task lane's budget period
	laneUsed    int64 // slot time the lane's tasks used in it
	stats       counters
	watching    bool // the monitor is watching slices

	osMode       bool // IsolationOSPriority is in effect
	osIdle       []*osWorker
	osStopping   bool
	osWorkers    sync.WaitGroup
	restoreProcs func()

	log *slog.Logger // WithLogger's, or one that discards

	monitorKick chan struct{}
	monitorStop chan struct{}
	monitorDone chan struct{}
	closeOnce   sync.Once
}

// counters are the Stats kept under mu.
type counters struct {
	submitted, completed, failed, canceled, panicked, rejected, preempted uint64
	queueWait, maxQueueWait, runTime                                      int64
	laneRunTime                                                           int64 // slot time the lane gave (tests)
	classSubmitted                                                        [numClasses]uint64
	classRunTime                                                          [numClasses]int64
	classWaits, classRuns                                                 [numClasses]Histogram
}

// groupCounters are the Stats of a tracked group, or of all the other
// groups together (Scheduler.otherGroups).
type groupCounters struct {
	name             string
	weight           int // SetGroupWeight's, or DefaultGroupWeight
	submitted, ended uint64
	runTime          int64
	waits, runs      Histogram
	// labels are the pprof labels of the group's tasks, per class, made
	// when the first task of that class arrives (see setLabels).
	labels [numClasses]context.Context
}

// New returns a Scheduler configured by opts. It starts one goroutine, the
// slice monitor, which sleeps while no task waits; Close stops it. An
// out-of-range option makes New return an error naming it and its range.
//
// The isolation mode (DefaultIsolation unless WithIsolation says otherwise)
// chooses the worker count from the CPU budget, which is GOMAXPROCS as the
// runtime or the program set it (since Go 1.25, the cgroup CPU limit when
// the GOMAXPROCS environment variable is unset): the budget for
// IsolationNone and IsolationOSPriority, ReserveWorkers of it for
// IsolationReserve.
//
// Process-wide change: IsolationOSPriority raises GOMAXPROCS to the worker
// count plus one (spareProcs) so that the rest of the program always finds
// a free P. It is the only process-wide change cpusched makes; it happens
// here, is shared by every Scheduler in that mode, and is undone when the
// last of them is closed (both are logged to WithLogger's logger). Like any
// runtime.GOMAXPROCS call, the raise turns off the runtime's automatic
// GOMAXPROCS updates (which follow a changing cgroup limit) while such a
// Scheduler is open; the restore hands the runtime's default back
// (runtime.SetDefaultGOMAXPROCS) when the value found was the default, and
// sets the number found otherwise (the environment variable or the
// program's own call). New also
// starts a throwaway thread to check that thread priorities can be lowered;
// if they cannot, it falls back to IsolationReserve, logs a warning and
// Stats.Isolation says so.
func New(opts ...Option) (*Scheduler, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	logger := cfg.logger
	if logger == nil {
		logger = discardLogger
	}
	if cfg.isolation == IsolationOSPriority {
		if err := probeOSPriority(cfg.osPolicy); err != nil {
			logger.Warn("cpusched: IsolationOSPriority unavailable; using IsolationReserve", "err", err)
			cfg.isolation = IsolationReserve
			if !cfg.explicitSlice {
				cfg.slice = DefaultSlice
			}
			if !cfg.explicitWorkers {
				cfg.workers = ReserveWorkers(procsBudget())
			}
		}
	}
	s := &Scheduler{
		cfg:     cfg,
		clock:   cfg.clock,
		workers: cfg.workers,
		drained: make(chan struct{}),
		groups:  map[string]*groupCounters{"": {weight: DefaultGroupWeight}},
		running: make([]*Task, 0, cfg.workers),
		log:     logger,
	}
	if cfg.isolation == IsolationOSPriority {
		s.osMode = true
		s.restoreProcs = raiseProcs(cfg.workers+spareProcs, logger)
	}
	logger.Info("cpusched: scheduler started", "isolation", cfg.isolation.String(), "workers", cfg.workers, "slice", cfg.slice, "gomaxprocs", runtime.GOMAXPROCS(0))
	s.killCtx, s.kill = context.WithCancel(context.Background())
	s.initQueues()
	s.periodStart = s.clock.Now()
	s.laneStart = s.periodStart
	if !cfg.noMonitor {
		s.monitorKick = make(chan struct{}, 1)
		s.monitorStop = make(chan struct{})
		s.monitorDone = make(chan struct{})
		go s.monitor()
	}
	return s, nil
}

// Workers returns the number of worker slots.
func (s *Scheduler) Workers() int { return s.workers }

// Run runs fn as a task and returns its error once it has ended. It blocks
// while the task waits for a slot. In IsolationNone and IsolationReserve fn
// runs on the calling goroutine, so Run costs no goroutine when a slot is
// free; in IsolationOSPriority it runs on a low-priority worker thread. It returns ErrClosed after Close,
// ErrQueueFull when the queue is full, an option's error for an out-of-range
// TaskOption, ctx's error if ctx ends before the task starts (fn is then
// never run), and a *PanicError if fn panicked. On every failure before fn
// starts, the scheduler is left as if Run had not been called, except for
// the Stats counters. A Run nested inside a task of the same Scheduler
// needs a second slot: with every slot held by such callers it waits
// forever, as a nested semaphore acquire would.
//
// Cost: an empty task with a free slot took 0.7x a plain goroutine +
// WaitGroup serially and 0.9x in parallel here (BenchmarkRun, IsolationNone);
// see IsolationOSPriority for its hand-off.
func (s *Scheduler) Run(ctx context.Context, fn func(*Task) error, opts ...TaskOption) error {
	// In IsolationOSPriority fn must run on a low-priority worker thread,
	// so the task is started like Go's and the caller waits for its end.
	t, group, err := s.newTask(ctx, fn, opts, s.osMode)
	if err != nil {
		return err
	}
	t.callerWaits = true
	if s.osMode {
		t.handle.done = make(chan struct{})
	}
	started, err := s.submit(t, group)
	if err != nil {
		return err
	}
	if s.osMode {
		// fn runs on a worker; this goroutine only waits for the end. It
		// must not touch t.wake, which the worker owns once t has started.
		if started {
			s.spawn(t)
			<-t.handle.done
			return t.handle.err
		}
		select {
		case <-t.handle.done:
		case <-ctx.Done():
			if s.cancelQueued(t) {
				return ctx.Err()
			}
			<-t.handle.done // it started meanwhile
		}
		return t.handle.err
	}
	if started {
		return s.execute(t)
	}
	// Queued: watch ctx here rather than with an AfterFunc, so that a
	// queued Run costs no more than the Task (a per-context AfterFunc adds
	// about 570 bytes when every task has its own context). t.wake was
	// made by submit under s.mu, before any other goroutine could see t.
	select {
	case <-t.wake:
	case <-ctx.Done():
		if s.cancelQueued(t) {
			return ctx.Err()
		}
		<-t.wake // it got its slot meanwhile
	}
	if t.state == stateDone { // removed by Close; the send on wake orders this read
		return t.handle.err
	}
	return s.execute(t)
}

// cancelQueued ends t, a Run task whose caller saw ctx end, if it has not
// started; it reports whether it did.
func (s *Scheduler) cancelQueued(t *Task) bool {
	s.mu.Lock()
	if t.state != stateQueued {
		s.mu.Unlock()
		return false
	}
	s.removeQueuedLocked(t)
	s.stats.canceled++
	s.endLocked(t)
	s.mu.Unlock()
	t.fn = nil
	return true
}

// Go queues fn as a task and returns at once; the Handle tells when it has
// ended and its error. A queued task costs no goroutine (one is started
// when the task gets a slot) and 430 bytes (TestQueuedTaskMemory), plus
// about 570 bytes for the first task of each distinct cancelable context,
// which is watched with one context.AfterFunc. Go's own error is only for a task it refused
// (ErrClosed, ErrQueueFull, an out-of-range option, a nil fn); an expired
// ctx is accepted and the task ends at once with ctx's error.
func (s *Scheduler) Go(ctx context.Context, fn func(*Task) error, opts ...TaskOption) (*Handle, error) {
	t, group, err := s.newTask(ctx, fn, opts, true)
	if err != nil {
		return nil, err
	}
	t.handle.done = make(chan struct{})
	started, err := s.submit(t, group)
	if err != nil {
		return nil, err
	}
	if started {
		s.spawn(t)
	}
	return &t.handle, nil
}

func (s *Scheduler) newTask(ctx context.Context, fn func(*Task) error, opts []TaskOption, isGo bool) (t *Task, group string, err error) {
	var tc taskConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyTask(&tc); err != nil {
			s.reject()
			return nil, "", err
		}
	}
	// (CheckTaskOptions runs the same loop without a Scheduler.)
	if fn == nil {
		s.reject()
		return nil, "", errors.New("cpusched: fn is nil")
	}
	if ctx == nil {
		s.reject()
		return nil, "", errors.New("cpusched: ctx is nil")
	}
	t = &Task{
		s:         s,
		fn:        fn,
		ctx:       ctx,
		classID:   int8(tc.class),
		qidx:      int8(queueOf(tc.class)),
		isGo:      isGo,
		slice:     int64(tc.slice),
		groupName: tc.group,
		runIdx:    -1,
	}
	if t.slice == 0 {
		t.slice = int64(s.cfg.slice)
		if tc.class == ClassBatch {
			t.slice = min(t.slice*batchSliceFactor, int64(MaxSlice))
		}
	}
	t.ent = entity{weight: niceWeight(tc.nice), heapIdx: -1, task: t}
	t.startTrace()
	return t, tc.group, nil
}

func (s *Scheduler) reject() {
	s.mu.Lock()
	s.stats.rejected++
	s.mu.Unlock()
}

// submit accepts t and either gives it a slot at once (started) or queues
// it. A task whose ctx has already ended is accepted and ended as canceled.
func (s *Scheduler) submit(t *Task, group string) (started bool, err error) {
	now := s.clock.Now()
	s.mu.Lock()
	if s.closed || (len(s.running) >= s.workers || s.nqueued > 0) && s.waitingNew >= s.cfg.queueLimit {
		err := ErrQueueFull
		if s.closed {
			err = ErrClosed
		}
		s.stats.rejected++
		s.mu.Unlock()
		t.endTrace()
		return false, err
	}
	free := len(s.running) < s.workers && s.nqueued == 0
	s.stats.submitted++
	s.stats.classSubmitted[t.classID]++
	t.gstats = s.groupStatsLocked(t.groupName)
	t.gstats.submitted++
	s.prepareLabelsLocked(t)
	s.live++
	if err := t.ctx.Err(); err != nil {
		// An expired context is never started.
		s.stats.canceled++
		s.endLocked(t)
		s.mu.Unlock()
		t.handle.err = err
		if t.isGo {
			close(t.handle.done)
			return false, nil
		}
		return false, err
	}
	t.since = now
	if !t.callerWaits || free {
		s.addWatchLocked(t)
	}
	s.activateTask(t, true)
	if free {
		s.startLocked(t, now)
	} else {
		t.state = stateQueued
		if !t.isGo {
			t.wake = make(chan struct{}, 1) // a Go task gets a goroutine instead
		}
		s.waitingNew++
		s.enqueueTask(t)
		s.preemptFor(t, now)
		s.watchLocked()
	}
	s.mu.Unlock()
	return free, nil
}

// startLocked gives t a slot and starts its slice; it returns true when t
// never ran before.
func (s *Scheduler) startLocked(t *Task, now int64) (first bool) {
	first = !t.started
	w := now - t.since // since it was queued or parked: 0 if it never waited
	t.waited += w
	if first {
		if t.state == stateQueued {
			s.waitingNew--
			s.stats.queueWait += w
			s.stats.maxQueueWait = max(s.stats.maxQueueWait, w)
		}
		s.stats.classWaits[t.classID].record(w)
		t.gstats.waits.record(w)
	}
	if t.callerWaits && t.watch == nil {
		s.addWatchLocked(t) // it waited unwatched; from now on, watch ctx
	}
	t.started = true
	t.state = stateRunning
	t.runIdx = int32(len(s.running))
	s.running = append(s.running, t)
	t.since = now
	t.sliceEnd = now + s.sliceLeft(t)
	t.preempt.And(preemptCancel)
	if s.killing || t.ctx.Err() != nil {
		// Close gave up, or the context ended unseen (a Run that waited
		// unwatched, or joined a watch that had already fired).
		t.preempt.Or(preemptCancel)
	}
	if s.nqueued > 0 {
		s.watchLocked()
		s.kickMonitor() // this slice may end before the one the monitor waits for
	}
	return first
}

// releaseSlot takes t out of the running set.
func (s *Scheduler) releaseSlot(t *Task) {
	last := len(s.running) - 1
	if i := int(t.runIdx); i != last {
		s.running[i] = s.running[last]
		s.running[i].runIdx = int32(i)
	}
	s.running[last] = nil
	s.running = s.running[:last]
	t.runIdx = -1
	t.laneRun = false
}

// resume lets next run on the slot it was given.
func (s *Scheduler) resume(next *Task, first bool) {
	if next == nil {
		return
	}
	if next.isGo && first {
		s.spawn(next)
		return
	}
	next.wake <- struct{}{}
}

// runGo is the goroutine of Go tasks: after one ends, it runs the next task
// if that is also a Go task that never started, saving a goroutine start.
func (s *Scheduler) runGo(t *Task) {
	for t != nil {
		t, _ = s.call(t, true)
	}
}

// execute runs Run task t, which holds a slot, and ends it.
func (s *Scheduler) execute(t *Task) error {
	_, err := s.call(t, false)
	return err
}

// call runs fn with panic recovery and ends the task. When inline is true
// and the next task is a Go task that never ran, call returns it instead of
// starting a goroutine for it.
func (s *Scheduler) call(t *Task, inline bool) (next *Task, err error) {
	if err := t.ctx.Err(); err != nil {
		// Its context ended while it was being dispatched: an expired
		// context is never started.
		n, first := s.finish(t, err, false)
		if inline && n != nil && n.isGo && first {
			return n, err
		}
		s.resume(n, first)
		return nil, err
	}
	// fn runs under the task's pprof labels and, when tracing, in a
	// "cpusched.run" region of its trace task.
	restore := t.setLabels()
	t.traceRegion(traceRun)
	normal := false
	defer func() {
		if normal {
			return
		}
		t.leave(restore)
		r := recover()
		if r == nil {
			err = errGoexit // runtime.Goexit in fn: end the task, let the goroutine exit
		} else {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
		n, first := s.finish(t, err, r != nil)
		s.resume(n, first)
		next = nil
	}()
	err = t.fn(t)
	normal = true
	t.leave(restore)
	n, first := s.finish(t, err, false)
	if inline && n != nil && n.isGo && first {
		return n, err
	}
	s.resume(n, first)
	return nil, err
}

// finish ends t, which holds a slot, and hands the slot on. The caller must
// resume the returned task.
func (s *Scheduler) finish(t *Task, err error, panicked bool) (next *Task, first bool) {
	now := s.clock.Now()
	s.mu.Lock()
	s.account(t, now)
	s.releaseSlot(t)
	s.deactivateTask(t)
	switch {
	case panicked:
		s.stats.panicked++
	case err == nil:
		s.stats.completed++
	case t.preempt.Load()&preemptCancel != 0 || t.ctx.Err() != nil:
		s.stats.canceled++
	default:
		s.stats.failed++
	}
	s.endLocked(t)
	if next = s.pick(now); next != nil {
		first = s.startLocked(next, now)
	}
	s.mu.Unlock()
	if tc := t.taskCtx.Load(); tc != nil {
		tc.stop()
		tc.cancel(context.Canceled)
	}
	t.fn = nil
	if t.isGo {
		t.handle.err = err
		close(t.handle.done)
	}
	return next, first
}

// endLocked records that t has ended.
func (s *Scheduler) endLocked(t *Task) {
	s.dropWatchLocked(t)
	t.state = stateDone
	t.endTrace()
	g := t.gstats
	g.ended++
	if t.started {
		s.stats.classRuns[t.classID].record(t.runTime)
		g.runs.record(t.runTime)
	}
	s.live--
	if s.closed && s.live == 0 {
		s.closeDrained()
	}
}

func (s *Scheduler) closeDrained() {
	select {
	case <-s.drained:
	default:
		close(s.drained)
	}
}

// yield is Checkpoint's slow path: charge t's run time and, if another task
// should run now, give it t's slot and wait for a slot again.
func (s *Scheduler) yield(t *Task) {
	now := s.clock.Now()
	s.mu.Lock()
	if t.state != stateRunning || t.preempt.Load()&preemptCancel != 0 {
		// Checkpoint inside Blocking's fn (no slot to give), or cancelled
		// meanwhile (keep the slot and unwind).
		s.mu.Unlock()
		return
	}
	asked := t.preempt.Load()
	sliceOver := now >= t.sliceEnd
	s.account(t, now) // renews the deadline when the request is used up
	t.preempt.And(preemptCancel)
	if sliceOver {
		t.sliceEnd = now + s.sliceLeft(t)
	}
	if s.nqueued == 0 || asked == preemptLane && !sliceOver && s.lanePeek(now) == nil {
		// Nobody waits, or only to make room for a lane task that another
		// slot has taken (or whose lane has closed): go on.
		s.mu.Unlock()
		return
	}
	s.enqueueTask(t)
	next := s.pick(now)
	if next == t {
		s.mu.Unlock()
		return
	}
	s.releaseSlot(t)
	t.state = stateParked
	s.stats.preempted++
	first := s.startLocked(next, now)
	if t.wake == nil {
		t.wake = make(chan struct{}, 1)
	}
	s.mu.Unlock()
	s.resume(next, first)
	t.traceEndRegion()
	<-t.wake
	t.traceRegion(traceRun)
}

// block gives up t's slot for a Blocking call.
func (s *Scheduler) block(t *Task) bool {
	now := s.clock.Now()
	s.mu.Lock()
	if t.state != stateRunning { // a nested Blocking call
		s.mu.Unlock()
		return false
	}
	t.preempt.And(preemptCancel) // a slice end or urgent request is moot now
	s.account(t, now)
	t.avgBurst = ewma(t.avgBurst, t.burst)
	t.burst = 0
	s.releaseSlot(t)
	s.deactivateTask(t)
	t.state = stateBlocking
	s.blocked++
	var first bool
	next := s.pick(now)
	if next != nil {
		first = s.startLocked(next, now)
	}
	s.mu.Unlock()
	s.resume(next, first)
	return true
}

// unblock queues t again after a Blocking call and waits for its slot.
func (s *Scheduler) unblock(t *Task, waited int64) {
	now := s.clock.Now()
	s.mu.Lock()
	s.blocked--
	t.avgWait = ewma(t.avgWait, waited)
	t.since = now // from now on it waits for a slot
	if t.preempt.Load()&preemptCancel != 0 && !s.killing {
		t.qidx = qExit
	}
	s.activateTask(t, false)
	if s.killing || len(s.running) < s.workers && s.nqueued == 0 {
		// Once Close gave up, a task back from Blocking gets a slot at
		// once, even past Workers, to return (startLocked cancels it).
		s.startLocked(t, now)
		s.mu.Unlock()
		return
	}
	t.state = stateParked
	if t.wake == nil {
		t.wake = make(chan struct{}, 1)
	}
	s.enqueueTask(t)
	s.preemptFor(t, now)
	s.watchLocked()
	s.mu.Unlock()
	<-t.wake
}

// ewma is a moving average that weighs the newest sample 1/4.
func ewma(avg, sample int64) int64 {
	if avg == 0 {
		return sample
	}
	return (3*avg + sample) / 4
}

// preemptFor asks a running task to yield at its next Checkpoint when
// queued task t should have its slot: exit over everything, realtime
// (unless throttled) over fair and idle, normal over idle, and a task the
// lane would run now over fair tasks past their first slice (wakeup
// preemption, see preemptForLane). Batch and idle never preempt early, nor
// does a task in the lane while the lane would not run it: EEVDF does not
// pick lane tasks, so a yield would not give it the slot.
func (s *Scheduler) preemptFor(t *Task, now int64) {
	if t.inLane {
		if s.lanePeek(now) != nil {
			s.preemptForLane(now)
		}
		return
	}
	var victimMin int // running tasks with qidx >= victimMin may be preempted
	switch {
	case t.qidx == qExit:
		victimMin = qRealtime
	case t.qidx == qRealtime && !s.rtThrottled():
		victimMin = qFair
	case t.qidx == qFair && t.class() == ClassNormal:
		victimMin = qIdle
	default:
		return
	}
	var victim *Task
	for _, r := range s.running {
		if int(r.qidx) < victimMin || r.preempt.Load()&preemptUrgent != 0 {
			continue
		}
		if victim == nil || r.qidx > victim.qidx || r.qidx == victim.qidx && r.sliceEnd < victim.sliceEnd {
			victim = r
		}
	}
	if victim != nil {
		victim.preempt.Or(preemptUrgent)
	}
}

// preemptForLane is wakeup preemption, as EEVDF's, for the lane: it asks
// every running task that is not itself a small task (fair tasks that
// have used a slice, counting the run time since they were last charged,
// and idle tasks) to come to its next Checkpoint rather than at its slice
// end, where the first to come hands its slot to the lane and the others
// go on (yield). This is what lets long slices (fewer switches) and short
// waits for small tasks go together. A task within its first slice is
// never preempted early: it came first, and once preempted it would join
// the lane itself and take the next runner's slot in turn.
//
// Asking all of them, not one: in IsolationOSPriority the one asked may be
// on a thread the kernel is not running, and the lane task would wait for
// the other slot's slice end.
func (s *Scheduler) preemptForLane(now int64) {
	for _, r := range s.running {
		if r.qidx == qIdle || r.qidx == qFair && r.runTime+now-r.since >= s.laneSlice(r) {
			r.preempt.Or(preemptLane)
		}
	}
}

// ctxWatch watches one Done channel for all the tasks whose context has
// it: one context.AfterFunc per distinct context rather than per task keeps
// a queued task's cost low when many tasks share a context.
type ctxWatch struct {
	done  <-chan struct{}
	stop  func() bool
	tasks list[Task] // through Task.watchLink
	n     int
}

func watchLink(t *Task) *link[Task] { return &t.watchLink }

// addWatchLocked starts watching t's context, if it can end.
func (s *Scheduler) addWatchLocked(t *Task) {
	done := t.ctx.Done()
	if done == nil {
		return
	}
	w := s.watches[done]
	if w == nil {
		w = &ctxWatch{done: done, tasks: list[Task]{at: watchLink}}
		if s.watches == nil {
			s.watches = map[<-chan struct{}]*ctxWatch{}
		}
		s.watches[done] = w
		ctx := t.ctx
		w.stop = context.AfterFunc(ctx, func() { s.contextDone(w) })
	}
	t.watch = w
	w.tasks.pushBack(t)
	w.n++
}

// dropWatchLocked stops watching t's context.
func (s *Scheduler) dropWatchLocked(t *Task) {
	w := t.watch
	if w == nil {
		return
	}
	w.tasks.remove(t)
	t.watch = nil
	w.n--
	if w.n == 0 {
		w.stop()
		delete(s.watches, w.done)
	}
}

// contextDone runs (via context.AfterFunc) when a watched context ends:
// queued tasks are removed, running ones see Checkpoint fail, parked ones
// move to the exit queue.
func (s *Scheduler) contextDone(w *ctxWatch) {
	var removed []*Task
	s.mu.Lock()
	for t := w.tasks.head; t != nil; {
		next := t.watchLink.next
		switch t.state {
		case stateQueued:
			s.removeQueuedLocked(t)
			s.stats.canceled++
			s.endLocked(t)
			removed = append(removed, t)
		case stateRunning, stateBlocking:
			t.preempt.Or(preemptCancel)
		case stateParked:
			t.preempt.Or(preemptCancel)
			if t.qidx != qExit {
				s.moveToExit(t)
			}
		}
		t = next
	}
	s.mu.Unlock()
	for _, t := range removed {
		s.notifyRemoved(t, t.ctx.Err())
	}
}

// removeQueuedLocked takes a never-started task out of the queue.
func (s *Scheduler) removeQueuedLocked(t *Task) {
	s.dequeueTask(t)
	s.deactivateTask(t)
	s.waitingNew--
}

// notifyRemoved ends a task removed from the queue before it started.
func (s *Scheduler) notifyRemoved(t *Task, err error) {
	t.handle.err = err
	t.fn = nil
	if t.isGo {
		close(t.handle.done)
		return
	}
	t.wake <- struct{}{}
}

// moveToExit moves parked task t to the exit queue, so that it gets a slot
// before others and can return.
func (s *Scheduler) moveToExit(t *Task) {
	s.dequeueTask(t)
	s.deactivateTask(t)
	t.qidx = qExit
	s.activateTask(t, false)
	s.enqueueTask(t)
	s.preemptFor(t, s.clock.Now())
}

// SetGroupWeight sets the weight of a group, 1..10000 (default 100): groups
// share the slot time in proportion to their weights, whatever their task
// counts. It applies at once, also to tasks already queued or running.
//
// It also makes the group tracked: its weight, its place in the run queue
// (its lag) and its own entry in Stats.Groups are kept while it has no
// task. A group that SetGroupWeight never named is freed when its last
// task ends, and its tasks are counted with the other such groups in
// Stats.OtherGroups, so a program may name a group per tenant or per user
// without its memory or its metrics growing with the number of names. Name
// the groups you want to see apart (bounded label values, as Prometheus'
// guidance on cardinality asks) with SetGroupWeight, at their default
// weight if need be; their statistics count from that call on.
func (s *Scheduler) SetGroupWeight(group string, weight int) error {
	if weight < MinGroupWeight || weight > MaxGroupWeight {
		return fmt.Errorf("cpusched: SetGroupWeight(%q, %d): weight must be in %d..%d", group, weight, MinGroupWeight, MaxGroupWeight)
	}
	if len(group) > maxGroupLen {
		return fmt.Errorf("cpusched: SetGroupWeight: group name is %d bytes, must be at most %d", len(group), maxGroupLen)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gc := s.groups[group]
	if gc == nil {
		gc = &groupCounters{name: group}
		s.groups[group] = gc
	}
	gc.weight = weight
	w := groupWeight(weight)
	for i := range s.queues {
		cq := &s.queues[i]
		g := cq.byName[group]
		switch {
		case g == nil || g.weight == w:
		case g.active > 0:
			queued := g.heapIdx >= 0
			if queued {
				cq.groups.remove(&g.entity)
			}
			cq.groups.reweight(&g.entity, w)
			if queued {
				cq.groups.push(&g.entity)
			}
		default: // inactive: not in V; keep its lag in wall-clock terms
			g.lag = g.lag * g.weight / w
			g.weight = w
		}
	}
	return nil
}

// groupWeightLocked returns the weight of the named group.
func (s *Scheduler) groupWeightLocked(name string) int {
	if g := s.groups[name]; g != nil {
		return g.weight
	}
	return DefaultGroupWeight
}

// groupStatsLocked returns the counters a task of the named group adds to.
func (s *Scheduler) groupStatsLocked(name string) *groupCounters {
	if g := s.groups[name]; g != nil {
		return g
	}
	return &s.otherGroups
}

// Close stops the scheduler: from now on Run and Go return ErrClosed.
// Queued and running tasks go on until they end or ctx ends. If they all
// end first, Close releases what the scheduler holds (the monitor
// goroutine, the idle worker threads of IsolationOSPriority, the raised
// GOMAXPROCS) and returns nil.
//
// If ctx ends first, Close cancels everything and returns ctx's error at
// once, as http.Server.Shutdown does, without waiting for the tasks:
// queued tasks are removed (their Run or Wait returns ErrClosed); tasks
// parked at a Checkpoint get their slot back first so they can return;
// running tasks, and tasks inside Blocking once fn returns, see their
// Context cancelled (cause ErrClosed) and Checkpoint return ErrClosed.
// What is still running after such a Close: each task that has not yet
// returned (on its Run caller's goroutine in IsolationNone and
// IsolationReserve, on its own goroutine for Go, on a worker thread in
// IsolationOSPriority), the monitor goroutine, and one goroutine waiting
// for the last task to end. When it does, that goroutine releases the
// monitor, the worker threads and GOMAXPROCS as above and exits; Stats
// counts the stragglers as they end. To wait for that, call Close again
// with a new ctx: it returns nil once everything is released, or that
// ctx's error.
//
// Close may be called more than once and concurrently; each call waits
// by its own ctx. Calling it from inside a task with a ctx that never
// ends deadlocks: Close waits for that task.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	if s.live == 0 {
		s.closeDrained()
	}
	s.mu.Unlock()
	select {
	case <-s.drained: // preferred when ctx has ended too
	default:
		select {
		case <-s.drained:
		case <-ctx.Done():
			s.killAll()
			s.releaseWhenDrained()
			return ctx.Err()
		}
	}
	s.release()
	return nil
}

// releaseWhenDrained starts, once, the goroutine that releases the
// scheduler when the last straggler of a Close that gave up has ended.
func (s *Scheduler) releaseWhenDrained() {
	s.mu.Lock()
	started := s.releasing
	s.releasing = true
	s.mu.Unlock()
	if !started {
		go func() {
			<-s.drained
			s.release()
		}()
	}
}

// release stops the monitor and the OS-priority workers and restores
// GOMAXPROCS, once every task has ended. Concurrent callers return when it
// is done.
func (s *Scheduler) release() {
	s.closeOnce.Do(func() {
		s.kill()
		if s.monitorStop != nil {
			close(s.monitorStop)
			<-s.monitorDone
		}
		s.stopOSWorkers()
	})
}

// killAll cancels every task: queued ones are removed, the others are asked
// to return.
func (s *Scheduler) killAll() {
	s.mu.Lock()
	s.killing = true // tasks inside Blocking, or started from now on, see it in unblock and startLocked
	// Cancel the tasks' contexts under the lock (kill's AfterFuncs run in
	// their own goroutines), in the same critical section that empties the
	// queue: a running task that returns as its context ends must not find
	// a queued task to start before they are removed below, and a task whose
	// Checkpoint fails must find its Context done.
	s.kill()
	var removed []*Task
	var parked []*Task
	sortQueued := func(t *Task) {
		if t.state == stateQueued {
			removed = append(removed, t)
		} else {
			parked = append(parked, t)
		}
	}
	for i := range s.queues {
		for _, g := range s.queues[i].byName {
			for _, h := range []*entityHeap{&g.tasks.ready, &g.tasks.later} {
				for _, e := range h.items {
					sortQueued(e.task)
				}
			}
			for t := g.lane.head; t != nil; t = t.laneLink.next {
				sortQueued(t)
			}
		}
	}
	for _, t := range removed {
		s.removeQueuedLocked(t)
		s.stats.canceled++
		s.endLocked(t)
	}
	for _, t := range s.running {
		t.preempt.Or(preemptCancel)
	}
	// Parked tasks get a slot now, even past Workers: they only need to
	// return, and must not wait behind a task that never does.
	now := s.clock.Now()
	for _, t := range parked {
		s.dequeueTask(t)
		s.startLocked(t, now) // sets preemptCancel: s.killing
	}
	s.mu.Unlock()
	for _, t := range removed {
		s.notifyRemoved(t, ErrClosed)
	}
	for _, t := range parked {
		s.resume(t, false)
	}
}

// watchLocked makes sure the monitor watches slices while tasks wait.
func (s *Scheduler) watchLocked() {
	if s.watching || s.monitorKick == nil {
		return
	}
	s.watching = true
	s.kickMonitor()
}

// kickMonitor makes the monitor look at the running tasks again.
func (s *Scheduler) kickMonitor() {
	if s.monitorKick == nil {
		return
	}
	select {
	case s.monitorKick <- struct{}{}:
	default:
	}
}

// monitor ends slices. It sleeps until a task waits for a slot (watchLocked
// wakes it), then, while tasks wait, wakes at the earliest end of a running
// task's slice and sets that task's preempt bit. An idle scheduler, or one
// whose tasks all have slots, costs no CPU here.
func (s *Scheduler) monitor() {
	defer close(s.monitorDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-s.monitorStop:
			return
		case <-s.monitorKick:
		}
		for {
			s.mu.Lock()
			if s.nqueued == 0 || len(s.running) == 0 {
				s.watching = false
				s.mu.Unlock()
				break
			}
			next := s.expireSlices(s.clock.Now())
			s.mu.Unlock()
			timer.Reset(time.Duration(next))
			select {
			case <-s.monitorStop:
				timer.Stop()
				return
			case <-timer.C:
			case <-s.monitorKick:
				timer.Stop()
			}
		}
	}
}

// expireSlices flags the running tasks whose slice has ended and returns
// the time until the next one ends (at most one slice).
func (s *Scheduler) expireSlices(now int64) (next int64) {
	next = int64(s.cfg.slice)
	for _, t := range s.running {
		if t.sliceEnd <= now {
			t.preempt.Or(preemptSlice)
		} else if d := t.sliceEnd - now; d < next {
			next = d
		}
	}
	return next
}

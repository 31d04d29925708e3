package cpusched

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
)

// The core, as a map. The policy decides which waiting task gets the next
// free slot; the mechanism moves tasks between slots and goroutines and
// never decides an order; the mode (IsolationOSPriority) decides which
// threads the tasks' goroutines run on, and how, and is called by the
// mechanism only at the transitions in transitions.go.
//
//	policy     runqueue.go  runQueue: class queues, groups, throttling, pick;
//	                        no goroutines, channels, clock, lock or statistics
//	           lane.go      the small-task lane inside the fair class
//	           eevdf.go     the EEVDF arithmetic both levels share
//	           list.go      the intrusive lists (lanes, context watches)
//	mechanism  scheduler.go this map, the lifecycle, the Scheduler, New
//	           submit.go    Run and Go: a task is made, checked and admitted
//	           slots.go     a slot is taken, handed on, given up (Checkpoint,
//	                        Blocking) and asked back (preemption)
//	           charge.go    what a stretch on a slot is charged: the task's
//	                        CPU time where its thread's clock can say
//	           run.go       a task's goroutine is started (spawn), fn is
//	                        called, and the task ended
//	           cancel.go    the one cancel path, and the context watches
//	           monitor.go   the goroutine that ends slices (and, in
//	                        IsolationOSPriority, lowers long tasks' threads,
//	                        samples for lend.go and runs the guard)
//	           close.go     Close and the release of what New started
//	           groups.go    SetGroupWeight and the group counters
//	mode       transitions.go, ospriority.go, procs.go, dispatch.go,
//	           lowering.go, handoff.go, hold.go, idle.go, lend.go,
//	           contention.go, raise.go, retire.go, pin.go
//	                        IsolationOSPriority: the points where the core
//	                        calls it, its state (Scheduler.os,
//	                        Task.os), the CPU budget and GOMAXPROCS,
//	                        which tasks are handed off, lowering a task's own
//	                        thread, the hand-off threads, Blocking calls
//	                        that keep their slots, slots given up while a
//	                        task's thread sleeps, lending slots to the rest
//	                        of the program, the guard against outside
//	                        contention and what it orders, threads that
//	                        cannot be raised back, pins (ospriority.go maps
//	                        them)
//	API        options.go, isolation.go, class.go, taskoptions.go,
//	           task.go (Task, Handle), stats.go, observe.go, errors.go
//	tests      testhooks.go the test seams New reads (nil in production)
//
// Vocabulary, used the same way in names, Stats and docs:
//   - slot: one of Workers places to run. A task holding one is running
//     (stateRunning, in s.running, counted in Stats.Running).
//   - queued: accepted, never started (stateQueued, s.queued, Stats.Queued);
//     parked: started, waiting for its slot back after a Checkpoint or
//     Blocking; waiting: queued or parked, i.e. in the run queue's heaps or
//     small-task lanes (s.rq.nwaiting); blocking: inside Blocking's fn,
//     holding no slot (Stats.Blocked); started: started and not ended
//     (running, parked or blocking: Stats.Started); live: accepted and not
//     ended (s.live); small: a Normal task that has used less than its
//     slice, which waits in its group's lane (lane.go).
//   - active (the policy's word, as the kernel's): waiting or running, so
//     counted in its queue's V (eevdf.go). A group is active while one of
//     its tasks is.
//   - the task's goroutine: the goroutine that runs fn. The Run caller's in
//     IsolationNone and IsolationReserve; for Go, one the scheduler starts
//     when the task first gets a slot (runGo, which runs the next
//     never-started Go task too). In IsolationOSPriority the same, locked
//     to its thread while fn runs (lowering.go); for the tasks dispatch
//     hands off (long ones, or all where a lowered thread cannot be raised
//     back), a hand-off thread's goroutine, locked to a lowered thread for
//     good (handoff.go). The scheduler starts it (spawn, run.go, the one
//     place a task's goroutine starts) when Task.spawned is set. A task's own goroutine is its goroutine when
//     that is not a hand-off thread's.
//   - worker: a slot (Workers, WithWorkers); the pooled low-priority
//     threads are hand-off threads, never workers.
//
// What IsolationOSPriority does to threads (lock, lower, raise, read the
// CPU clock, pin, yield on wake) and who does it: ospriority.go's
// overview.
//
// Naming rule: a Scheduler method whose name ends in Locked must be called
// with s.mu held; every other Scheduler method takes s.mu itself where it
// needs it, and must be called without it. (The run queue's methods, in
// runqueue.go, are all called with s.mu held.)
//
// States (Task.state) and who moves a task between them, always under s.mu:
//
//	new      -> queued    submit, no free slot (the caller of Run or Go)
//	new      -> running   submit, a free slot (the caller)
//	new      -> done      submit, ctx already ended (the caller)
//	queued   -> running   startLocked, by whoever frees a slot: finish,
//	                      yield, block (the goroutine of the task that
//	                      gives the slot up), the hold timer (releaseHold,
//	                      hold.go) and the monitor when a lent slot comes
//	                      back (lendLocked); for a slot finish kept
//	                      (keep.go), the caller of Run or Go whose new
//	                      task ends the keeping (endKeepLocked), or the
//	                      monitor at its time (expireKeptLocked)
//	queued   -> done      cancelLocked, called by cancelQueued (the Run
//	                      caller, ctx ended), contextDone (the ctx's
//	                      AfterFunc) or killAll (Close gave up)
//	running  -> parked    yield, at a Checkpoint (the task's goroutine)
//	running  -> blocking  block, entering Blocking (the task's goroutine),
//	                      or the hold timer, for a call that kept its slot
//	                      (releaseHold), or the monitor, for a task with
//	                      WithIdleRelease whose thread sleeps (idle.go)
//	running  -> done      finish, fn returned or panicked (the task's goroutine)
//	parked   -> running   startLocked, by whoever frees a slot (as above),
//	                      or cancelLocked once Close gave up (killAll)
//	blocking -> running   unblock, a free slot or Close gave up (the task's goroutine);
//	                      retakeLocked, a slot at once, for a task the
//	                      idle watch released (the monitor, once its
//	                      thread computes, or its goroutine at a
//	                      Checkpoint, Blocking call or its end)
//	blocking -> parked    unblock, no free slot (the task's goroutine)
//
// A parked task whose ctx ends moves to the exit queue (cancelLocked) so it
// gets the next slot and can return. The goroutine that moves a task to
// running hands it the slot after unlocking: resume sends on Task.wake, or
// starts the task's goroutine (spawn) if it never ran and spawned is
// set.
//
// Locking and ownership. s.mu guards the Scheduler's mutable fields and
// every Task field except these:
//   - Set before submit publishes the task and never changed after: s, ctx,
//     classID, slice, spawned, callerWaits, groupName, trace (and
//     os.handoff). Read without the lock.
//   - preempt: atomic. Bits are set by anyone (the monitor,
//     preemptForLocked, cancelLocked); cleared only under s.mu on the slot
//     holder's paths (startLocked, yield, block). Checkpoint loads it
//     without the lock.
//   - taskCtx: atomic pointer, made once by Context.
//   - hold: atomic, IsolationOSPriority's hold (hold.go). Set to holdKept
//     under s.mu by the task's goroutine as a Blocking call keeps its
//     slot; moved on by compare-and-swap: to holdArmed under s.mu by
//     whoever makes a task wait (armHoldsLocked), to holdReleased by the
//     hold timer, back to holdNone by the task's goroutine as the call
//     ends (endHold). Read without the lock by the task's goroutine and
//     the monitor.
//   - lowerCheck: the Checkpoint countdown, only the task's goroutine's.
//   - os: IsolationOSPriority's state of the task, whose atomics (tid,
//     waitTid, lowered, uncomputed) are read and some written without the
//     lock; osTask (ospriority.go) says who owns each field.
//   - wake: made once under s.mu by the goroutine that first makes the task
//     wait for a slot (submit, for a queued Run task that runs on its
//     caller; yield or unblock otherwise), unless the Task is a recycled
//     one that has it, empty (recycle); received on only by the task's
//     goroutine, sent on by the goroutine that gives it a slot (or that
//     removed a queued Run task), after unlocking. The caller of a Run
//     whose task is spawned (handed off, in IsolationOSPriority) never
//     touches it: it waits on handle.done.
//   - handle.done: atomic pointer, its channel made on demand by a
//     waiter (Handle.Done) or marked closed by the end (Handle.end).
//   - handle.err: written by the goroutine that ends the task, before it
//     ends handle.done or sends on wake; read after that by the waiter.
//   - fn: read by the task's goroutine; set to nil by whoever ends the
//     task, once no one else can reach it.
//   - The accounting fields (since, runTime, waited, burst, avgBurst,
//     avgWait) are written under s.mu, by the task's own goroutine while it
//     holds a slot or is in Blocking, and by startLocked when it gets one;
//     the task's goroutine may read them without the lock (Waited), since
//     nothing else writes them while it runs, but for a task with
//     WithIdleRelease (Task.idleWatched), whose slot the monitor gives up
//     and takes back without it (idle.go): it reads them under s.mu.
//
// The Scheduler's cfg, clock, workers, os, procs, log, killCtx, drained
// and the monitor's channels are set in New and never changed. os holds
// IsolationOSPriority's state, under s.mu but for its atomics (keepNormal,
// lengths, blockAvg) and what New sets; osMode (ospriority.go) says who
// owns each field. Its procs is released once, from release (closeOnce).

// Scheduler runs CPU-heavy tasks on a bounded number of worker slots, in
// the order its EEVDF policy chooses. Create one with New; its methods are
// safe for concurrent use. Close it to stop its slice monitor goroutine.
type Scheduler struct {
	cfg     config
	clock   clock
	workers int

	killCtx context.Context // cancelled when Close stops waiting
	kill    context.CancelFunc

	mu        sync.Mutex
	closed    bool
	killing   bool     // Close gave up waiting: every task must unwind
	releasing bool     // releaseWhenDrained's goroutine was started
	rq        runQueue // the policy
	queued    int      // queued tasks, which never started (the queue limit counts these)
	blocked   int      // tasks inside Blocking
	running   []*Task  // tasks holding a slot
	live      int      // accepted tasks not yet ended
	drained   chan struct{}
	// groups holds the tracked groups: the default group "" and every
	// group named by SetGroupWeight, with their weights and counters, kept
	// while idle. Other groups share otherGroups' counters, and their run
	// queue nodes are freed when their last task ends (runQueue.deactivate), so
	// memory does not grow with the number of distinct group names.
	groups      map[string]*groupCounters
	otherGroups groupCounters
	lastGroup   *groupCounters // of groups, the one groupStatsLocked last returned
	watches     map[<-chan struct{}]*ctxWatch
	stats       counters
	watching    bool     // the monitor is watching slices
	keep        keptSlot // the slot finish keeps for a task that yields (keep.go)
	keeps       bool     // slots are kept: the monitor, or a test's tick, gives them on
	// statsSeq counts Stats snapshots, each taken under mu: a charge
	// whose CPU reading came before one reads again (taskCPULocked).
	statsSeq atomic.Uint64

	// os is IsolationOSPriority's state (ospriority.go), nil in the other
	// modes.
	os *osMode
	// procs is IsolationReserve's GOMAXPROCS raise (reserveProcs), nil
	// where it needs none and in the other modes (IsolationOSPriority's is
	// os.procs); released once, from release.
	procs *procsHold

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
	laneRunTime                                                           int64  // slot time the small-task lane gave
	cpuTime, cpuFallback                                                  int64  // CPU time charged, and the part of it that is slot time (charge.go)
	kept, keptTaken                                                       uint64 // slots kept at a task's end, and those a new task took (keep.go)
	classSubmitted                                                        [numClasses]uint64
	classRunTime, classCPUTime                                            [numClasses]int64
	classWaits, classRuns                                                 [numClasses]Histogram
	// classQueued counts each class's queued tasks, classQueuedSince sums
	// the times they were queued at, and classQueueDone sums the waits of
	// those that left the queue (started or were removed): with them Stats
	// computes ClassStats.QueueTime, queued tasks included, to the moment.
	classQueued                      [numClasses]int64
	classQueuedSince, classQueueDone [numClasses]int64
}

// New returns a Scheduler configured by opts. It starts one goroutine, the
// slice monitor, which sleeps while no task waits; Close stops it. An
// out-of-range option makes New return an error naming it and its range.
//
// The isolation mode (DefaultIsolation unless WithIsolation says otherwise)
// chooses the worker count from the CPU budget, which is GOMAXPROCS as the
// runtime or the program set it (since Go 1.25, the cgroup CPU limit when
// the GOMAXPROCS environment variable is unset): the whole budget for
// IsolationNone and IsolationOSPriority, the part IsolationReserve's doc
// gives for IsolationReserve. One exception: when GOMAXPROCS came from a
// cgroup CPU limit below the machine's CPU count, IsolationOSPriority runs
// max(1, ceil(limit)-1) workers (2 CPUs with a 1.5 quota: 1 worker), since
// a spent quota throttles its low-priority threads and the rest of the
// program alike; it reads the limit from /proc/self/cgroup and the cgroup
// files once, here, and logs it. WithWorkers overrides all of this.
//
// GOMAXPROCS: in IsolationOSPriority, the default on Linux, New raises
// GOMAXPROCS to the worker count plus one (never lowers it), so that the
// rest of the program always finds a P that no task holds: with the
// default worker count, one more than it was (and one more again while
// other processes keep the CPUs busy; see Stats.Contended). In
// IsolationReserve, New does the same where the worker count is not below
// the CPU budget: at GOMAXPROCS 1 (1 worker: GOMAXPROCS 2 while open), or
// with WithWorkers at or above it; elsewhere reserve leaves Ps free and
// GOMAXPROCS alone. Code that sizes its own pools from
// runtime.GOMAXPROCS(0) after New sees the raised value; Workers gives the
// number of tasks that run at once. It is the only process-wide change
// cpusched makes, and it is shared by every Scheduler that makes it, of
// either mode: Close of the last of them restores what the first found,
// once its tasks have ended: the runtime's default
// (runtime.SetDefaultGOMAXPROCS) when that is what it was, else the number
// found (the environment variable's, or the program's own
// runtime.GOMAXPROCS call). Like any runtime.GOMAXPROCS
// call, the raise turns off the runtime's automatic updates, which follow a
// changing cgroup limit, until that restore. The raise and the restore are
// logged only to the logger of WithLogger, silent by default.
//
// New also starts a throwaway thread to check that thread priorities can
// be lowered; if they cannot, it falls back to IsolationReserve (whose
// worker count and GOMAXPROCS rule then apply), logs a warning and
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
	var hooks testHooks // the tests' (export_test.go); none in production
	if cfg.hooks != nil {
		hooks = *cfg.hooks
	}
	if cfg.isolation == IsolationOSPriority {
		if err := hooks.osAccess().probeLower(); err != nil {
			logger.Warn("cpusched: IsolationOSPriority unavailable; using IsolationReserve", "err", err)
			cfg.isolation = IsolationReserve
			if !cfg.explicitSlice {
				cfg.slice = DefaultSlice
			}
			if !cfg.explicitWorkers {
				cfg.workers = reserveWorkers(procsBudget())
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
	switch cfg.isolation {
	case IsolationOSPriority:
		s.openOSMode(hooks)
	case IsolationReserve:
		s.procs = reserveProcs(cfg.workers, logger)
	}
	if err := cfg.cpuLimit.err; err != nil {
		logger.Warn("cpusched: reading the cgroup CPU limit failed; workers follow GOMAXPROCS", "err", err)
	}
	if cfg.cpuLimit.cpus > 0 && cfg.isolation == IsolationOSPriority {
		logger.Info("cpusched: a cgroup CPU limit applies; IsolationOSPriority runs one worker fewer than the limit rounded up", "cpu_limit", cfg.cpuLimit.cpus, "workers", cfg.workers)
	}
	logger.Info("cpusched: scheduler started", "isolation", cfg.isolation.String(), "workers", cfg.workers, "slice", cfg.slice, "gomaxprocs", runtime.GOMAXPROCS(0))
	s.killCtx, s.kill = context.WithCancel(context.Background())
	laneShare := defaultLaneShare
	if hooks.laneShare != nil {
		laneShare = *hooks.laneShare
	}
	s.rq = newRunQueue(int64(cfg.slice), cfg.workers, laneShare, s.clock.Now())
	s.rq.cpuClock = s.os.cpuClock()
	s.keeps = !hooks.noMonitor || hooks.tickKeeps
	if !hooks.noMonitor {
		s.monitorKick = make(chan struct{}, 1)
		s.monitorStop = make(chan struct{})
		s.monitorDone = make(chan struct{})
		go s.monitor()
	}
	return s, nil
}

// Workers returns the number of worker slots.
func (s *Scheduler) Workers() int { return s.workers }

package cpusched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
)

// The knobs of TestStress.
const (
	stressTasksEnv     = "CPUSCHED_STRESS_TASKS" // accepted tasks per mode
	stressSeedEnv      = "CPUSCHED_STRESS_SEED"  // replays a logged seed
	stressDefaultTasks = 20000
	stressShortTasks   = 3000 // with -short
	// stressStall is how long a mode may go without any call returning
	// before the watchdog dumps every goroutine and fails the test.
	stressStall = 2 * time.Minute
	// stressOwnThreads bounds the process's threads after the
	// IsolationOSPriority rounds with tasks on their own goroutines.
	stressOwnThreads = 400
)

// TestStress drives the Scheduler in every isolation mode, and in
// IsolationOSPriority's hand-off to worker threads, with many random
// concurrent operations and checks that nothing is lost, counted twice or
// leaked.
//
// Each mode runs rounds until its quota of tasks has been accepted. A round
// makes a Scheduler with 1..3 workers, a random queue limit and slice, and
// lets 8-32 submitters call Run (inline or from a goroutine) and Go, with
// every class, nice level, a few groups, task slices, now and then an
// out-of-range option, and contexts cancelled before submission, while
// queued, during the run (by the task itself) or after the end, with short
// deadlines, or shared by many tasks. Task bodies return nil or an error,
// panic, call runtime.Goexit, spin through Checkpoints for tens to hundreds
// of microseconds, or wait in Blocking calls (sleeping, panicking, nested,
// calling Checkpoint inside). Meanwhile one goroutine sets group weights
// (valid and not) and checks Stats, and, in most rounds, another Closes the
// scheduler at a random moment: without a deadline, with one already
// expired, short or long, sometimes twice at once, sometimes while a task
// that only ends when Close gives up is running.
//
// Checks: every call returns exactly once, with what its fn did (fn's
// error, a *PanicError with its value, errGoexit) or, if fn never ran,
// ErrClosed, ErrQueueFull, the option's error or its context's error; fn
// runs at most once; Wait and Done agree; calls made after Close returned
// get ErrClosed; Checkpoint fails only with the context's error, or
// ErrClosed once Close may have given up; Close returns nil or its ctx's
// error, and the error when a task was still running as its ctx ended; at
// every Stats call Submitted == Completed+Failed+Canceled+Panicked+Queued+
// Started, Running <= Workers, Queued <= the queue limit and no counter goes
// back; after the last Close nothing is queued, running or blocked,
// Submitted+Rejected is the number of calls, Completed the number that
// returned nil and Panicked the number that returned a *PanicError. After
// each mode no goroutine is left (leakcheck) and, on Linux, no more than
// GOMAXPROCS+4 threads were added (GOMAXPROCS as IsolationOSPriority
// raised it, plus the workers where it locks the tasks' own goroutines).
// A watchdog dumps every goroutine and
// fails the test if no call returns for stressStall, or if the mode would
// outlive its share of the test's deadline.
//
// Knobs: CPUSCHED_STRESS_TASKS=N accepted tasks per mode (default 20000,
// 3000 with -short; for 1000000 give go test -timeout 0); the seed of the
// random choices is logged, and CPUSCHED_STRESS_SEED=S replays it (the
// choices, not the timing).
func TestStress(t *testing.T) {
	tasks := stressTasks(t)
	seed := stressSeed(t)
	t.Logf("seed %d (replay with %s=%d), %d tasks per mode", seed, stressSeedEnv, seed, tasks)
	// Every mode, and IsolationOSPriority's hand-off to worker threads
	// (where a lowered thread cannot be raised back; withOSHandoff).
	type stressVariant struct {
		name    string
		mode    Isolation
		handoff bool
	}
	var modes []stressVariant
	for _, mode := range IsolationModes() {
		modes = append(modes, stressVariant{mode.String(), mode, false})
	}
	modes = append(modes, stressVariant{"ospriority-handoff", IsolationOSPriority, true})
	for i, v := range modes {
		t.Run(v.name, func(t *testing.T) {
			m := &stressMode{
				t:       t,
				name:    v.name,
				mode:    v.mode,
				handoff: v.handoff,
				seed:    seed,
				tasks:   tasks,
				rng:     rand.New(rand.NewPCG(seed, uint64(i))),
			}
			m.run(len(modes) - i)
		})
	}
}

func stressTasks(t *testing.T) int {
	if v := os.Getenv(stressTasksEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of tasks per mode", stressTasksEnv, v)
		}
		return n
	}
	if testing.Short() {
		return stressShortTasks
	}
	return stressDefaultTasks
}

func stressSeed(t *testing.T) uint64 {
	if v := os.Getenv(stressSeedEnv); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", stressSeedEnv, v)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// countLowered counts the process's lowered threads where it can
// (loweredThreads, on Linux).
var countLowered func(*testing.T) int

// stressMode is one isolation mode's run: its rounds, their totals, and
// what the watchdog looks at.
type stressMode struct {
	t       *testing.T
	name    string // the mode's, or "ospriority-handoff"
	mode    Isolation
	handoff bool // IsolationOSPriority hands tasks to worker threads (withOSHandoff)
	seed    uint64
	tasks   int
	rng     *rand.Rand // the rounds' choices; each goroutine gets its own from it

	// The most GOMAXPROCS and workers of its rounds (written by the rounds'
	// goroutine, read after it is done), for the thread check.
	procsSeen, workersSeen int

	failures atomic.Int64 // reported so far (the first 30 are printed)
	returned atomic.Int64 // calls that have returned: the watchdog's sign of life
	round    atomic.Value // string: the round in progress, for the watchdog
}

// stressTotals add up the rounds of a mode.
type stressTotals struct {
	rounds, calls, gaveUp                 int
	accepted, completed, failed, canceled uint64
	panicked, rejected, preempted         uint64
	maxQueueWait                          time.Duration
}

func (m *stressMode) errorf(format string, args ...any) {
	if m.failures.Add(1) <= 30 {
		m.t.Errorf(format, args...)
	} else {
		m.t.Fail()
	}
}

// run runs the rounds under the watchdog, then checks for leaks.
func (m *stressMode) run(modesLeft int) {
	t := m.t
	ignore := leakcheck.Current()
	threadsBefore := 0
	if runtime.GOOS == "linux" {
		threadsBefore = threadCount(t)
	}
	start := time.Now()
	done := make(chan stressTotals, 1)
	go func() { done <- m.rounds() }()
	tot := m.watch(done, modesLeft)
	t.Logf("%d rounds, %d calls in %v: %d accepted (%d completed, %d failed, %d canceled, %d panicked), %d rejected, %d preemptions, %d Closes gave up, max queue wait %v",
		tot.rounds, tot.calls, time.Since(start).Round(time.Millisecond), tot.accepted, tot.completed, tot.failed, tot.canceled, tot.panicked, tot.rejected, tot.preempted, tot.gaveUp, tot.maxQueueWait)

	leakcheck.VerifyNone(t, ignore)
	if runtime.GOOS == "linux" {
		// Locked worker threads exit with their goroutines; idle Ms the
		// runtime made for the Ps stay (IsolationOSPriority raised
		// GOMAXPROCS during the rounds), so allow a few. Where tasks run
		// on their own goroutines in IsolationOSPriority, every started
		// task's goroutine is locked to its thread until it ends, so the
		// runtime made an M per task parked at once, and keeps them idle
		// (it never ends an M): what must not stay is a lowered thread.
		limit := threadsBefore + max(runtime.GOMAXPROCS(0), m.procsSeen) + 4
		if m.mode == IsolationOSPriority && !m.handoff {
			limit = stressOwnThreads
			if countLowered != nil {
				waitFor(t, func() bool { return countLowered(t) == 0 })
			}
		}
		got := threadCount(t)
		for deadline := time.Now().Add(10 * time.Second); got > limit && time.Now().Before(deadline); got = threadCount(t) {
			time.Sleep(10 * time.Millisecond)
		}
		if got > limit {
			t.Errorf("threads: %d before the mode, %d after, want at most %d", threadsBefore, got, limit)
		} else {
			t.Logf("threads: %d before the mode, %d after (at most %d)", threadsBefore, got, limit)
		}
	}
}

// watch waits for the rounds to end. If no call returns for stressStall,
// or the mode would overrun its share of the test's deadline, it prints
// every goroutine's stack and panics: the rounds' goroutines are stuck, so
// failing the test and going on would only hang later.
func (m *stressMode) watch(done <-chan stressTotals, modesLeft int) stressTotals {
	var hardStop time.Time
	if dl, ok := m.t.Deadline(); ok {
		share := (time.Until(dl) - 10*time.Second) / time.Duration(modesLeft)
		hardStop = time.Now().Add(max(share, 10*time.Second))
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := m.returned.Load(), time.Now()
	for {
		select {
		case tot := <-done:
			return tot
		case now := <-tick.C:
			if n := m.returned.Load(); n != last {
				last, lastChange = n, now
			}
			why := ""
			switch {
			case now.Sub(lastChange) > stressStall:
				why = fmt.Sprintf("no call returned for %v", stressStall)
			case !hardStop.IsZero() && now.After(hardStop):
				why = "the mode would overrun its share of the test's deadline (-timeout)"
			default:
				continue
			}
			buf := make([]byte, 64<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "TestStress/%s (seed %d): %s, %d calls returned, in %v\n\nall goroutines:\n\n%s\n", m.name, m.seed, why, last, m.round.Load(), buf)
			panic(fmt.Sprintf("TestStress/%s (%s=%d): %s; goroutine dump above", m.name, stressSeedEnv, m.seed, why))
		}
	}
}

// rounds runs rounds until m.tasks tasks were accepted or one failed.
func (m *stressMode) rounds() stressTotals {
	var tot stressTotals
	hi := max(100, min(3000, m.tasks/6)) // calls per round: hi/4..hi
	for tot.accepted < uint64(m.tasks) && m.failures.Load() == 0 {
		r := m.newRound(tot.rounds, hi/4+m.rng.IntN(hi-hi/4+1))
		m.round.Store(r.desc)
		st, calls := r.run()
		tot.rounds++
		tot.calls += calls
		tot.accepted += st.Submitted
		tot.completed += st.Completed
		tot.failed += st.Failed
		tot.canceled += st.Canceled
		tot.panicked += st.Panicked
		tot.rejected += st.Rejected
		tot.preempted += st.Preempted
		tot.maxQueueWait = max(tot.maxQueueWait, st.MaxQueueWait)
		if r.gaveUp {
			tot.gaveUp++
		}
	}
	return tot
}

// Kinds of early Close.
const (
	closeNone       = iota // only the final Close(context.Background())
	closeBackground        // Close(context.Background()) while submitting
	closeExpired           // with a context already cancelled
	closeShort             // with a deadline 0..3ms away
	closeLong              // with a deadline 10s away
)

var stressCloseNames = [...]string{"none", "background", "expired", "short", "long"}

// stressRound is one Scheduler's life: submissions, concurrent group
// weights and Stats, an early Close, the final Close and the checks.
type stressRound struct {
	m          *stressMode
	desc       string
	s          *Scheduler
	inline     bool // fn runs on Run's goroutine (not where IsolationOSPriority hands tasks off)
	mixed      bool // either: IsolationOSPriority chooses per task (dispatch)
	workers    int
	queueLimit int
	size       int // tickets: calls the submitters make before stopping
	tickets    atomic.Int64
	submitters []*stressSubmitter
	chaosRng   *rand.Rand

	closeKind     int
	closeAt       int           // tickets taken before the early Close
	closeAfter    time.Duration // closeShort's deadline
	closeTwice    bool          // a second Close(context.Background()) at the same time
	sentinel      *stressCall
	closeStarted  chan struct{}
	closeReturned chan struct{}
	killable      atomic.Bool // a Close whose ctx may end has begun
	gaveUp        bool        // the early Close returned its ctx's error

	shared       [3]context.Context
	sharedCancel [3]context.CancelFunc
	extra        []*stressCall // the sentinel and the calls after the final Close
}

func (m *stressMode) newRound(index, size int) *stressRound {
	rng := m.rng
	r := &stressRound{
		m:             m,
		workers:       1 + rng.IntN(3),
		queueLimit:    []int{1, 2, 4, 16, 64, 256, DefaultQueueLimit}[rng.IntN(7)],
		size:          size,
		chaosRng:      rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())),
		closeStarted:  make(chan struct{}),
		closeReturned: make(chan struct{}),
	}
	opts := []Option{WithIsolation(m.mode), WithWorkers(r.workers), WithQueueLimit(r.queueLimit)}
	if m.handoff {
		opts = append(opts, withOSHandoff())
	}
	slice := "default"
	if d := []time.Duration{0, minSlice, 200 * time.Microsecond, time.Millisecond, 5 * time.Millisecond}[rng.IntN(5)]; d != 0 {
		opts = append(opts, WithSlice(d))
		slice = d.String()
	}
	if rng.IntN(10) < 3 {
		r.closeKind = closeNone
	} else {
		r.closeKind = closeBackground + rng.IntN(4)
		r.closeAt = rng.IntN(size + 1)
		r.closeAfter = time.Duration(rng.Int64N(int64(3 * time.Millisecond)))
		r.closeTwice = rng.IntN(4) == 0
	}
	withSentinel := (r.closeKind == closeExpired || r.closeKind == closeShort) && rng.IntN(2) == 0
	for i := range 8 + rng.IntN(25) {
		r.submitters = append(r.submitters, &stressSubmitter{
			r:          r,
			rng:        rand.New(rand.NewPCG(rng.Uint64(), uint64(i))),
			maxPending: 1 + rng.IntN(8),
			asyncSlots: make(chan struct{}, 4),
		})
	}
	r.desc = fmt.Sprintf("%s round %d: %d workers, queue limit %d, slice %s, %d submitters, %d calls, early Close %s at call %d (twice %v, sentinel %v)",
		m.name, index, r.workers, r.queueLimit, slice, len(r.submitters), size, stressCloseNames[r.closeKind], r.closeAt, r.closeTwice, withSentinel)
	s, err := New(opts...)
	if err != nil {
		panic(fmt.Sprintf("%s: New: %v", r.desc, err))
	}
	r.s = s
	m.procsSeen = max(m.procsSeen, runtime.GOMAXPROCS(0))
	m.workersSeen = max(m.workersSeen, r.workers)
	switch iso := s.Stats().Isolation; {
	case iso == m.mode, m.mode == IsolationOSPriority && iso == IsolationReserve:
		r.inline = !s.osMode || s.osOwn
		r.mixed = s.osOwn
	default:
		r.errorf("Stats().Isolation = %v, want %v", iso, m.mode)
	}
	for i := range r.shared {
		r.shared[i], r.sharedCancel[i] = context.WithCancel(context.Background())
	}
	if withSentinel {
		r.sentinel = &stressCall{r: r, body: bodyUntilClosed, isGo: true, ctx: context.Background(), started: make(chan struct{})}
	}
	return r
}

func (r *stressRound) errorf(format string, args ...any) {
	r.m.errorf("%s: %s", r.desc, fmt.Sprintf(format, args...))
}

// run plays the round and checks it; it returns the final Stats and the
// number of calls made.
func (r *stressRound) run() (Stats, int) {
	s := r.s
	var sentinel *Handle
	if c := r.sentinel; c != nil {
		// Submitted first, so it takes a free slot at once.
		h, err := s.Go(c.ctx, c.fn)
		if err != nil {
			r.errorf("Go(sentinel) = %v", err)
			c.end(err)
			r.sentinel, c.rejectedByGo = nil, true
		} else {
			sentinel = h
			<-c.started
		}
		r.extra = append(r.extra, c)
	}
	stopChaos := make(chan struct{})
	var helpers, submitters sync.WaitGroup
	helpers.Go(func() { r.chaos(stopChaos) })
	if r.closeKind != closeNone {
		helpers.Go(r.closeEarly)
	}
	for _, sub := range r.submitters {
		submitters.Go(sub.run)
	}
	submitters.Wait()
	close(stopChaos)
	helpers.Wait()
	if sentinel != nil {
		r.sentinel.end(sentinel.Wait())
	}
	if err := s.Close(context.Background()); err != nil {
		r.errorf("final Close(context.Background()) = %v, want nil", err)
	}
	// After the final Close: both kinds of call are refused.
	late := &stressSubmitter{r: r, rng: rand.New(rand.NewPCG(r.chaosRng.Uint64(), 0)), maxPending: 1, asyncSlots: make(chan struct{}, 1)}
	late.call(true, false)
	late.call(true, true)
	late.drain()
	r.extra = append(r.extra, late.calls...)
	st := s.Stats()

	for i := range r.shared {
		r.sharedCancel[i]()
	}
	calls := r.extra
	for _, sub := range r.submitters {
		calls = append(calls, sub.calls...)
	}
	for _, c := range calls {
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.cancel != nil {
			c.cancel()
		}
	}
	r.check(st, calls)
	return st, len(calls)
}

// chaos sets group weights, checks Stats and cancels a shared context
// while the submitters work.
func (r *stressRound) chaos(stop <-chan struct{}) {
	rng := r.chaosRng
	cancelShared := time.Now().Add(time.Duration(rng.Int64N(int64(20 * time.Millisecond))))
	var prev Stats
	for {
		select {
		case <-stop:
			r.checkStats(prev)
			return
		default:
		}
		switch rng.IntN(5) {
		case 0, 1:
			group, weight := stressGroups[rng.IntN(len(stressGroups))], minGroupWeight+rng.IntN(maxGroupWeight)
			if err := r.s.SetGroupWeight(group, weight); err != nil {
				r.errorf("SetGroupWeight(%q, %d) = %v, want nil", group, weight, err)
			}
		case 2:
			weight := []int{minGroupWeight - 1, maxGroupWeight + 1, -100}[rng.IntN(3)]
			if err := r.s.SetGroupWeight("a", weight); err == nil {
				r.errorf("SetGroupWeight(%q, %d) = nil, want an error", "a", weight)
			}
		default:
			prev = r.checkStats(prev)
		}
		if !cancelShared.IsZero() && time.Now().After(cancelShared) {
			r.sharedCancel[1]()
			cancelShared = time.Time{}
		}
		time.Sleep(time.Duration(rng.Int64N(int64(200 * time.Microsecond))))
	}
}

// checkStats checks what must hold in any snapshot, and that no counter
// went back since prev.
func (r *stressRound) checkStats(prev Stats) Stats {
	st := r.s.Stats()
	if sum := st.Completed + st.Failed + st.Canceled + st.Panicked + uint64(st.Queued) + uint64(st.Started); st.Submitted != sum {
		r.errorf("Stats: Submitted %d != Completed+Failed+Canceled+Panicked+Queued+Started %d (%s)", st.Submitted, sum, stressStatsString(st))
	}
	// Once Close gives up, parked tasks and tasks back from Blocking get a
	// slot at once to return, even past Workers.
	overbooked := st.Running > st.Workers && !r.killable.Load()
	if st.Workers != r.workers || overbooked || st.Queued < 0 || st.Queued > r.queueLimit || st.Running < 0 || st.Blocked < 0 || st.Running+st.Blocked > st.Started {
		r.errorf("Stats: %s, want Workers %d, Running <= Workers (until a Close gives up), 0 <= Queued <= %d, Running+Blocked <= Started", stressStatsString(st), r.workers, r.queueLimit)
	}
	if st.Submitted < prev.Submitted || st.Completed < prev.Completed || st.Failed < prev.Failed || st.Canceled < prev.Canceled ||
		st.Panicked < prev.Panicked || st.Rejected < prev.Rejected || st.Preempted < prev.Preempted {
		r.errorf("Stats went back: %s, then %s", stressStatsString(prev), stressStatsString(st))
	}
	return st
}

func stressStatsString(st Stats) string {
	return fmt.Sprintf("Submitted %d Completed %d Failed %d Canceled %d Panicked %d Rejected %d Queued %d Started %d Running %d Blocked %d Workers %d",
		st.Submitted, st.Completed, st.Failed, st.Canceled, st.Panicked, st.Rejected, st.Queued, st.Started, st.Running, st.Blocked, st.Workers)
}

// closeEarly Closes the scheduler once closeAt tickets were taken.
func (r *stressRound) closeEarly() {
	defer close(r.closeReturned)
	for r.tickets.Load() < int64(r.closeAt) {
		time.Sleep(20 * time.Microsecond)
	}
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	switch r.closeKind {
	case closeExpired:
		ctx, cancel = context.WithCancel(ctx)
		cancel()
	case closeShort:
		ctx, cancel = context.WithTimeout(ctx, r.closeAfter)
	case closeLong:
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	}
	defer cancel()
	if r.closeKind != closeBackground {
		r.killable.Store(true)
	}
	close(r.closeStarted)
	second := make(chan error, 1)
	if r.closeTwice {
		go func() { second <- r.s.Close(context.Background()) }()
	}
	err := r.s.Close(ctx)
	r.gaveUp = err != nil
	switch {
	case err != nil && (r.closeKind == closeBackground || err != ctx.Err()):
		r.errorf("Close(%s ctx) = %v, want nil or ctx's error %v", stressCloseNames[r.closeKind], err, ctx.Err())
	case err == nil && r.sentinel != nil:
		r.errorf("Close(%s ctx) = nil while a task ran until Close gave up, want %v", stressCloseNames[r.closeKind], ctx.Err())
	case err == nil:
		// Everything had ended, and nothing can be accepted any more.
		if st := r.checkStats(Stats{}); st.Queued != 0 || st.Started != 0 || st.Running != 0 || st.Blocked != 0 {
			r.errorf("after Close returned nil: %s, want nothing queued or running", stressStatsString(st))
		}
	}
	if r.closeTwice {
		if err := <-second; err != nil {
			r.errorf("second Close(context.Background()) = %v, want nil", err)
		}
	}
}

// check checks every call, then the final Stats against the calls.
func (r *stressRound) check(st Stats, calls []*stressCall) {
	var nils, panics, surelyRejected, maybeRejected uint64
	for _, c := range calls {
		r.checkCall(c)
		err := c.result
		if err == nil && !c.goexited {
			nils++
		}
		var pe *PanicError
		if errors.As(err, &pe) {
			panics++
		}
		switch {
		case c.rejectedByGo, c.badOption, !c.isGo && err == ErrQueueFull:
			surelyRejected++
		case !c.isGo && c.ran == 0 && err == ErrClosed:
			maybeRejected++ // refused, or removed from the queue by Close
		}
	}
	if st.Queued != 0 || st.Started != 0 || st.Running != 0 || st.Blocked != 0 {
		r.errorf("after the final Close: %s, want nothing queued, running or blocked", stressStatsString(st))
	}
	if sum := st.Completed + st.Failed + st.Canceled + st.Panicked; st.Submitted != sum {
		r.errorf("after the final Close: Submitted %d != Completed+Failed+Canceled+Panicked %d", st.Submitted, sum)
	}
	if got := st.Submitted + st.Rejected; got != uint64(len(calls)) {
		r.errorf("Submitted %d + Rejected %d = %d, want the %d calls made", st.Submitted, st.Rejected, got, len(calls))
	}
	if st.Rejected < surelyRejected || st.Rejected > surelyRejected+maybeRejected {
		r.errorf("Rejected = %d, want %d..%d", st.Rejected, surelyRejected, surelyRejected+maybeRejected)
	}
	if st.Completed != nils {
		r.errorf("Completed = %d, want %d (the calls that returned nil)", st.Completed, nils)
	}
	if st.Panicked != panics {
		r.errorf("Panicked = %d, want %d (the calls that returned a *PanicError)", st.Panicked, panics)
	}
	var submitted, waits, runs uint64
	var runTime time.Duration
	for _, c := range st.Classes {
		submitted += c.Submitted
		waits += c.QueueWaits.Count()
		runs += c.RunTimes.Count()
		runTime += c.RunTimes.Sum
	}
	if submitted != st.Submitted || waits != runs || runs > st.Submitted || runTime != st.RunTime {
		r.errorf("classes: Submitted %d, QueueWaits %d, RunTimes %d (sum %v); want Submitted %d, equal counts, RunTime %v",
			submitted, waits, runs, runTime, st.Submitted, st.RunTime)
	}
}

// checkCall checks that c returned once, with what its fn did.
func (r *stressRound) checkCall(c *stressCall) {
	if n := c.ends.Load(); n != 1 {
		r.errorf("%s returned %d times, want once", c, n)
		return
	}
	if c.ran > 1 {
		r.errorf("%s: fn ran %d times", c, c.ran)
	}
	err := c.result
	var pe *PanicError
	switch {
	case c.late:
		if err != ErrClosed || c.ran != 0 {
			r.errorf("%s, made after Close returned: got %v (fn ran %d times), want ErrClosed", c, err, c.ran)
		}
	case c.badOption:
		if c.ran != 0 || err == nil || !strings.Contains(err.Error(), "cpusched: With") {
			r.errorf("%s with an out-of-range option: got %v (fn ran %d times), want the option's error", c, err, c.ran)
		}
	case c.rejectedByGo:
		if err != ErrQueueFull && (err != ErrClosed || r.closeKind == closeNone) {
			r.errorf("%s: Go refused it with %v, want ErrQueueFull, or ErrClosed once Close began", c, err)
		}
	case c.goexited:
		if !r.inline || c.body != bodyGoexit || c.ran != 1 { // (with mixed, a Run fn may end its goroutine or not)
			r.errorf("%s: Run's goroutine ended in runtime.Goexit (fn ran %d times)", c, c.ran)
		}
	case c.ran == 0:
		switch {
		case err == ErrQueueFull && !c.isGo:
		case err == ErrClosed && r.killable.Load(): // removed by a Close that gave up
		case err == ErrClosed && !c.isGo && r.closeKind != closeNone: // refused
		case err != nil && err == c.ctxErr:
		default:
			r.errorf("%s: fn never ran and the call returned %v (its ctx.Err() was %v), want ErrClosed, ErrQueueFull or the context's error", c, err, c.ctxErr)
		}
	case c.goexit:
		if err != errGoexit || r.inline && !r.mixed && !c.isGo {
			r.errorf("%s: fn called runtime.Goexit and the call returned %v, want errGoexit (from Go, or Run on a worker)", c, err)
		}
	case c.panicked != nil:
		if !errors.As(err, &pe) || pe.Value != c.panicked {
			r.errorf("%s: fn panicked with %v and the call returned %v, want a *PanicError with that value", c, c.panicked, err)
		} else if perr, ok := c.panicked.(error); ok && !errors.Is(err, perr) {
			r.errorf("%s: the *PanicError does not unwrap to the panic's error %v", c, perr)
		}
	default:
		if err != c.returned {
			r.errorf("%s: fn returned %v and the call returned %v", c, c.returned, err)
		}
	}
}

// stressGroups are the groups tasks and weights are drawn from.
var stressGroups = []string{"", "a", "b", "c", "a-tenant-with-a-longer-name"}

// stressSubmitter makes calls in a loop, keeping up to maxPending Go
// handles and four Run goroutines in flight.
type stressSubmitter struct {
	r          *stressRound
	rng        *rand.Rand
	calls      []*stressCall
	pending    []stressPending
	maxPending int
	async      sync.WaitGroup
	asyncSlots chan struct{}
}

type stressPending struct {
	c *stressCall
	h *Handle
}

func (sub *stressSubmitter) run() {
	r := sub.r
	for {
		select {
		case <-r.closeStarted:
		default:
			if r.tickets.Add(1) <= int64(r.size) {
				sub.call(false, sub.rng.IntN(2) == 0)
				continue
			}
		}
		break
	}
	sub.drain()
	if r.closeKind != closeNone {
		<-r.closeReturned
		for range 1 + sub.rng.IntN(2) {
			sub.call(true, sub.rng.IntN(2) == 0)
		}
		sub.drain()
	}
}

// call makes one call: Go, or Run inline or on its own goroutine.
func (sub *stressSubmitter) call(late, isGo bool) {
	c := sub.newCall(late, isGo)
	sub.calls = append(sub.calls, c)
	s := sub.r.s
	if isGo {
		h, err := s.Go(c.ctx, c.fn, c.opts...)
		if err != nil || h == nil {
			if err == nil {
				sub.r.errorf("%s: Go returned neither a Handle nor an error", c)
			}
			c.rejectedByGo = true
			c.end(err)
			sub.backOff(err)
			return
		}
		sub.pending = append(sub.pending, stressPending{c, h})
		if len(sub.pending) > sub.maxPending {
			sub.waitOldest()
		}
		return
	}
	if c.body == bodyGoexit || sub.rng.IntN(4) == 0 {
		// runtime.Goexit in fn ends Run's goroutine when fn runs on it.
		sub.asyncSlots <- struct{}{}
		sub.async.Go(func() {
			defer func() { <-sub.asyncSlots }()
			c.runRun()
		})
		return
	}
	c.runRun()
	sub.backOff(c.result)
}

// backOff waits a little after ErrQueueFull, so that rounds with short
// queues run tasks rather than mostly refusals.
func (sub *stressSubmitter) backOff(err error) {
	if err == ErrQueueFull {
		time.Sleep(time.Duration(sub.rng.Int64N(int64(500 * time.Microsecond))))
	}
}

// waitOldest waits for the oldest pending Go task, through Done then Wait
// or through Wait then Done.
func (sub *stressSubmitter) waitOldest() {
	p := sub.pending[0]
	sub.pending = sub.pending[1:]
	var err error
	if sub.rng.IntN(2) == 0 {
		<-p.h.Done()
		err = p.h.Wait()
	} else {
		err = p.h.Wait()
		select {
		case <-p.h.Done():
		default:
			sub.r.errorf("%s: Wait returned before Done was closed", p.c)
		}
	}
	if again := p.h.Wait(); again != err {
		sub.r.errorf("%s: Wait returned %v, then %v", p.c, err, again)
	}
	p.c.end(err)
}

func (sub *stressSubmitter) drain() {
	for len(sub.pending) > 0 {
		sub.waitOldest()
	}
	sub.async.Wait()
}

// Task bodies.
type stressBody int

const (
	bodyNil stressBody = iota
	bodyError
	bodyPanic
	bodyGoexit
	bodySpin
	bodyBlocking
	bodyBlockingPanic
	bodyNestedBlocking
	bodyCheckpointInBlocking
	bodyCancelSelf // cancels its own context, then spins
	bodyMixed      // spin, Blocking, spin
	bodyContext    // spins, then returns the cause of Task.Context's end, if any
	bodyUntilClosed
	numStressBodies
)

var stressBodyNames = [numStressBodies]string{"nil", "error", "panic", "goexit", "spin", "blocking", "blocking-panic",
	"nested-blocking", "checkpoint-in-blocking", "cancel-self", "mixed", "context", "until-closed"}

// stressBodyWeights are how often submitters draw each body.
var stressBodyWeights = [numStressBodies]int{20, 8, 5, 3, 15, 8, 4, 4, 4, 5, 5, 4, 0}

// Contexts of calls.
const (
	ctxBackground   = iota
	ctxCancelAfter  // cancelled after the call returned
	ctxPreCancelled // cancelled before submission
	ctxCancelSoon   // cancelled 0..300us after it was made: before, while queued or during the run
	ctxTimeout      // a deadline 0..1ms away
	ctxShared       // one of the round's three (one is cancelled mid-round)
	numStressCtxs
)

var stressCtxNames = [numStressCtxs]string{"background", "cancel-after", "pre-cancelled", "cancel-soon", "timeout", "shared"}

var stressCtxWeights = [numStressCtxs]int{30, 15, 8, 12, 12, 18}

var errStressTask = errors.New("stress: task failed")

// stressPanicValue is what bodies panic with when not with an error.
type stressPanicValue struct{ id int }

// stressCall is one Run or Go call and what its fn did.
type stressCall struct {
	r         *stressRound
	body      stressBody
	ctxKind   int
	isGo      bool
	late      bool // made after Close returned
	badOption bool
	ctx       context.Context
	cancel    context.CancelFunc
	timer     *time.Timer
	opts      []TaskOption
	spinFor   time.Duration
	sleepFor  time.Duration
	panicWith any
	started   chan struct{} // bodyUntilClosed: closed as fn starts

	// Written by fn (plain fields: the race detector checks that the call
	// returns after fn has ended).
	ran      int
	returned error
	panicked any
	goexit   bool

	// Written by the caller as the call returns.
	ends         atomic.Int32
	result       error
	ctxErr       error // ctx.Err() as the call returned
	rejectedByGo bool
	goexited     bool // Run's goroutine ended in runtime.Goexit
}

func (c *stressCall) String() string {
	call := "Run"
	if c.isGo {
		call = "Go"
	}
	return fmt.Sprintf("%s(%s body, %s ctx)", call, stressBodyNames[c.body], stressCtxNames[c.ctxKind])
}

func (sub *stressSubmitter) newCall(late, isGo bool) *stressCall {
	rng := sub.rng
	c := &stressCall{
		r:        sub.r,
		body:     stressBody(stressPick(rng, stressBodyWeights[:])),
		ctxKind:  stressPick(rng, stressCtxWeights[:]),
		isGo:     isGo,
		late:     late,
		spinFor:  10*time.Microsecond + time.Duration(rng.Int64N(int64(290*time.Microsecond))),
		sleepFor: time.Duration(rng.Int64N(int64(200 * time.Microsecond))),
	}
	if rng.IntN(2) == 0 {
		c.panicWith = &stressPanicValue{id: rng.Int()}
	} else {
		c.panicWith = fmt.Errorf("stress: panic %d", rng.Int())
	}
	if c.body == bodyCancelSelf {
		c.ctxKind = ctxCancelAfter // its own context, to cancel
	}
	bg := context.Background()
	switch c.ctxKind {
	case ctxBackground:
		c.ctx = bg
	case ctxCancelAfter:
		c.ctx, c.cancel = context.WithCancel(bg)
	case ctxPreCancelled:
		c.ctx, c.cancel = context.WithCancel(bg)
		c.cancel()
	case ctxCancelSoon:
		c.ctx, c.cancel = context.WithCancel(bg)
		c.timer = time.AfterFunc(time.Duration(rng.Int64N(int64(300*time.Microsecond))), c.cancel)
	case ctxTimeout:
		c.ctx, c.cancel = context.WithTimeout(bg, time.Duration(rng.Int64N(int64(time.Millisecond))))
	case ctxShared:
		c.ctx = sub.r.shared[rng.IntN(len(sub.r.shared))]
	}
	c.opts = []TaskOption{WithClass(Class(rng.IntN(numClasses))), WithNice(MinNice + rng.IntN(MaxNice-MinNice+1))}
	if g := rng.IntN(len(stressGroups) + 1); g < len(stressGroups) {
		c.opts = append(c.opts, WithGroup(stressGroups[g]))
	}
	if rng.IntN(3) == 0 {
		c.opts = append(c.opts, WithTaskSlice(minSlice+time.Duration(rng.Int64N(int64(2*time.Millisecond)))))
	}
	if rng.IntN(20) == 0 {
		c.opts = append(c.opts, nil)
	}
	if !late && rng.IntN(200) == 0 {
		bad := []TaskOption{WithNice(MaxNice + 1), WithClass(Class(numClasses)), WithTaskSlice(minSlice - 1), WithGroup(strings.Repeat("g", 257))}
		c.opts = append(c.opts, bad[rng.IntN(len(bad))])
		c.badOption = true
	}
	rng.Shuffle(len(c.opts), func(i, j int) { c.opts[i], c.opts[j] = c.opts[j], c.opts[i] })
	return c
}

// stressPick returns an index drawn with the given weights.
func stressPick(rng *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	panic("unreachable")
}

// runRun calls Run for c and records its return, or its goroutine's
// runtime.Goexit when fn ran on it.
func (c *stressCall) runRun() {
	returned := false
	defer func() {
		if !returned {
			c.goexited = true
			c.end(nil)
		}
	}()
	err := c.r.s.Run(c.ctx, c.fn, c.opts...)
	returned = true
	c.end(err)
}

// end records that the call returned err.
func (c *stressCall) end(err error) {
	c.result = err
	c.ctxErr = c.ctx.Err()
	c.ends.Add(1)
	c.r.m.returned.Add(1)
	if c.ctxKind == ctxCancelAfter {
		c.cancel()
	}
}

// fn is the task's function.
func (c *stressCall) fn(task *Task) (err error) {
	c.ran++
	switch c.body {
	case bodyError:
		err = errStressTask
	case bodyPanic:
		c.panicked = c.panicWith
		panic(c.panicWith)
	case bodyGoexit:
		c.goexit = true
		runtime.Goexit()
	case bodySpin:
		err = c.spin(task, c.spinFor)
	case bodyBlocking:
		task.Blocking(func() { time.Sleep(c.sleepFor) })
		err = c.checkpoint(task)
	case bodyBlockingPanic:
		task.Blocking(func() {
			c.panicked = c.panicWith
			panic(c.panicWith)
		})
	case bodyNestedBlocking:
		task.Blocking(func() {
			task.Blocking(func() { time.Sleep(c.sleepFor / 2) })
			time.Sleep(c.sleepFor / 2)
		})
		err = c.checkpoint(task)
	case bodyCheckpointInBlocking:
		task.Blocking(func() {
			for range 3 {
				if err = c.checkpoint(task); err != nil {
					return
				}
				time.Sleep(c.sleepFor / 3)
			}
		})
	case bodyCancelSelf:
		c.cancel()
		err = c.spin(task, c.spinFor)
	case bodyMixed:
		if err = c.spin(task, c.spinFor/2); err == nil {
			task.Blocking(func() { time.Sleep(c.sleepFor) })
			err = c.spin(task, c.spinFor/2)
		}
	case bodyContext:
		err = c.spin(task, c.spinFor)
		if tctx := task.Context(); err == nil && tctx.Err() != nil {
			err = context.Cause(tctx)
			c.checkCancelError("context.Cause(Task.Context())", err)
		}
	case bodyUntilClosed:
		close(c.started)
		for {
			if err = c.checkpoint(task); err != nil {
				break
			}
			task.Blocking(func() { time.Sleep(200 * time.Microsecond) })
		}
	}
	c.returned = err
	return err
}

// spin burns the CPU for d, calling Checkpoint all along.
func (c *stressCall) spin(task *Task, d time.Duration) error {
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := c.checkpoint(task); err != nil {
			return err
		}
	}
	return nil
}

// checkpoint calls Checkpoint and checks its error.
func (c *stressCall) checkpoint(task *Task) error {
	err := task.Checkpoint()
	if err != nil {
		c.checkCancelError("Checkpoint", err)
	}
	return err
}

// checkCancelError checks an error that says the task was cancelled: its
// context's error, or ErrClosed once a Close that may give up has begun.
func (c *stressCall) checkCancelError(what string, err error) {
	if err != c.ctx.Err() && (err != ErrClosed || !c.r.killable.Load()) {
		c.r.errorf("%s: %s = %v, but ctx.Err() = %v and no Close may have given up", c, what, err, c.ctx.Err())
	}
}

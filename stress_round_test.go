// TestStress: one round, a Scheduler's life: its setup, the chaos goroutine, the early and final Close.

package cpusched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/cpuscope"
)

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
	// idleStarted and idleReturned count the calls with WithIdleRelease
	// made, and those of them that returned: a task that took its slot
	// back may hold one past Workers (checkStats). Counted from the
	// call, not from fn, so that the count never lags a task's slot.
	idleStarted, idleReturned atomic.Int64
	gaveUp                    bool // the early Close returned its ctx's error

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
	if m.lending {
		opts = append(opts, withLendSample(50*time.Microsecond, stressLoad(rand.New(rand.NewPCG(rng.Uint64(), 0)))))
	}
	if m.unraisable {
		opts = append(opts, withOS(nil, func() error { return errors.New("stress: a lowered thread cannot be raised back") }, nil))
	}
	if m.contention {
		opts = append(opts, withGuardSource(stressMachine(rand.New(rand.NewPCG(rng.Uint64(), 1)))))
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
		// In IsolationOSPriority dispatch chooses per task, and runs
		// every task on its own goroutine while the guard keeps threads
		// at normal priority (contention.go), even where it otherwise
		// hands every task off.
		r.inline = true
		r.mixed = s.os != nil
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

// stressLoad is a lendSampler (lend.go) whose rest of the program keeps
// every P busy and then none, by turns of 10 to 300 samples, so that the
// lender lends slots and takes them back all through a round. Only the
// monitor calls it.
func stressLoad(rng *rand.Rand) func() (running, runnable uint64, ok bool) {
	busy, left := false, 0
	return func() (uint64, uint64, bool) {
		if left--; left <= 0 {
			busy, left = !busy, 10+rng.IntN(291)
		}
		if busy {
			return uint64(runtime.GOMAXPROCS(0)), uint64(rng.IntN(8)), true
		}
		return 0, 0, true
	}
}

// stressMachine is a guard source (contention.go) whose machine turns busy
// and quiet by turns, every few of its short windows, and whose task
// threads are starved at random, so that the guard raises and lowers
// threads while tasks come and go.
func stressMachine(rng *rand.Rand) guardSource {
	var mu sync.Mutex
	var proc, busy int64
	others, left := false, 0
	const window = 100 * time.Microsecond
	return guardSource{
		processCPU: func() int64 {
			mu.Lock()
			defer mu.Unlock()
			proc += rng.Int64N(int64(2 * window))
			return proc
		},
		threadCPU: func(int) int64 {
			mu.Lock()
			defer mu.Unlock()
			return rng.Int64N(int64(window))
		},
		machine: func() (cpuscope.Sample, bool) {
			mu.Lock()
			defer mu.Unlock()
			if left--; left <= 0 {
				others, left = !others, 1+rng.IntN(20)
			}
			if others {
				busy += int64(100 * window) // far more than the CPU budget: contended
			}
			return cpuscope.Sample{Busy: busy + proc}, true
		},
		window: window,
		calm:   5 * window,
	}
}

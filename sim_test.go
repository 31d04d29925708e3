package cpusched

import (
	"context"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// A discrete-event harness for the policy under closed-loop load with a
// fake clock: several slots run at once in fake time, which one goroutine
// advancing the clock (as streamRun does) cannot model.
//
// The scheduler is the real one (Go, Checkpoint, the end of a task); only
// the work and the clients' pauses are simulated. A task's fn asks the
// harness to run d of work (simWork) and waits; a client pausing between
// tasks asks to be woken at a time. Once every goroutine is waiting (the
// run is quiet: each slot holder waits in simWork and no client is between
// two calls), the harness moves the clock to the earliest of those times
// and lets that one goroutine go on. Only that goroutine and those it
// wakes move, and simultaneous events go in the order of their clients,
// so the run does not depend on how the Go runtime schedules goroutines:
// the same spec gives the same shares.

// simClient is a closed-loop client: it keeps one task in flight, and
// submits the next one when the last has ended (after a pause, if
// maxPause is set).
type simClient struct {
	group string
	// run is the task's work, and yields whether it calls Checkpoint
	// every step (simStep) or runs it at once without one.
	run      time.Duration
	yields   bool
	maxPause time.Duration // each pause is drawn in [0, maxPause]
	// kind is its tasks' WithKind, or "" for none: every task then runs
	// one function, the harness's, and so is of one kind.
	kind string
}

// simSpec is a simulated run.
type simSpec struct {
	workers int            // in IsolationReserve (newTestScheduler's)
	weights map[string]int // SetGroupWeight's
	clients []simClient
	total   time.Duration    // fake time to measure over
	seed    uint64           // the pauses' generator
	atEnd   func(*Scheduler) // if set, called at the end of total, the run quiet
}

// simStep is how much work a yielding task does between Checkpoints:
// not a divisor of DefaultSlice, so that it comes to the scheduler up to
// 300us past its slice's end.
const simStep = 300 * time.Microsecond

// simResult is what a simRun measured.
type simResult struct {
	work      map[string]time.Duration // work done per group by the end of total
	byKind    map[string]time.Duration // the same by group and kind: "a/long", "a/yield"
	runTime   map[string]time.Duration // Stats.Groups[g].RunTime at the end of total
	tasks     map[string]int           // tasks ended per group by then
	clients   []time.Duration          // work done per client by the end of total
	kept      uint64                   // slots kept at tasks' ends by then (keep.go)
	keptTaken uint64                   // of those, the ones a new task took
}

// share returns group g's share of the work.
func (r simResult) share(g string) float64 {
	var sum time.Duration
	for _, d := range r.work {
		sum += d
	}
	return float64(r.work[g]) / float64(sum)
}

// simEvent is a goroutine waiting for the clock to reach at.
type simEvent struct {
	at     int64
	client int // its client's index, which orders simultaneous events
	group  string
	kind   string
	start  int64 // when its work began (workers only)
	wake   chan struct{}
}

type simHarness struct {
	clk *fakeClock
	s   *Scheduler

	mu      sync.Mutex
	waiting []*simEvent // in simWork or a pause
	working int         // of waiting, in simWork
	moving  int         // clients between two waits
	stopped bool        // total has passed: clients submit no more
	work    map[string]time.Duration
	byKind  map[string]time.Duration // by group and "/long" or "/yield"
	clients []time.Duration          // by client
}

// runUntil makes a task of client's, in group, wait until the clock reaches
// at, working ("/long" or "/yield").
func (h *simHarness) runUntil(at int64, client int, group, kind string) {
	h.mu.Lock()
	ev := h.atLocked(at, client, group, kind)
	h.working++
	h.mu.Unlock()
	<-ev.wake
}

// pause makes a moving client wait until the clock reaches at: it stops
// moving as its event is registered, so that the run is never quiet
// between the two.
func (h *simHarness) pause(at int64, client int) {
	h.mu.Lock()
	ev := h.atLocked(at, client, "", "")
	h.moving--
	h.mu.Unlock()
	<-ev.wake
}

// atLocked registers an event at time at; its goroutine waits on its
// wake. A client's (kind "") does no work.
func (h *simHarness) atLocked(at int64, client int, group, kind string) *simEvent {
	ev := &simEvent{at: at, client: client, group: group, kind: kind, start: h.clk.Now(), wake: make(chan struct{})}
	if kind == "" {
		ev.start = -1
	}
	h.waiting = append(h.waiting, ev)
	return ev
}

// quiet reports whether every goroutine of the run waits for the harness.
func (h *simHarness) quiet() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.moving > 0 {
		return false
	}
	h.s.mu.Lock()
	running := len(h.s.running)
	h.s.mu.Unlock()
	return running == h.working
}

// next lets the earliest waiting goroutine go on, once the run is quiet,
// at its time; it returns false when nothing waits.
func (h *simHarness) next(t *testing.T) bool {
	deadline := time.Now().Add(10 * time.Second)
	for spins := 0; !h.quiet(); spins++ {
		if spins > 100 {
			time.Sleep(10 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
		if time.Now().After(deadline) {
			t.Fatal("simulation: the run did not come to a quiet point in 10s")
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := 0
	for j, ev := range h.waiting {
		if ev.at < h.waiting[i].at || ev.at == h.waiting[i].at && ev.client < h.waiting[i].client {
			i = j
		}
	}
	if until, kept := h.s.keptUntil(); kept && (len(h.waiting) == 0 || until < h.waiting[i].at) {
		// The slot kept at a task's end goes to whoever waits first
		// (keep.go): the run moves when tick resumes that task.
		if d := until - h.clk.Now(); d > 0 {
			h.clk.Advance(d)
		}
		h.mu.Unlock()
		h.s.tick()
		h.mu.Lock() // for the deferred unlock
		return true
	}
	if len(h.waiting) == 0 {
		return false
	}
	ev := h.waiting[i]
	h.waiting = slices.Delete(h.waiting, i, i+1)
	if d := ev.at - h.clk.Now(); d > 0 {
		h.clk.Advance(d)
	}
	if ev.start >= 0 {
		h.working--
		h.work[ev.group] += time.Duration(ev.at - ev.start)
		h.byKind[ev.group+ev.kind] += time.Duration(ev.at - ev.start)
		h.clients[ev.client] += time.Duration(ev.at - ev.start)
	} else {
		h.moving++ // a client, until it waits again
	}
	close(ev.wake)
	return true
}

// simRun runs spec and returns the work each group did in spec.total of
// fake time, then lets the tasks in flight end.
func simRun(t *testing.T, spec simSpec) simResult {
	t.Helper()
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(spec.workers), withClock(clk), withoutMonitor(), withTickKeeps())
	for g, w := range spec.weights {
		if err := s.SetGroupWeight(g, w); err != nil {
			t.Fatal(err)
		}
	}
	h := &simHarness{clk: clk, s: s, work: map[string]time.Duration{}, byKind: map[string]time.Duration{},
		clients: make([]time.Duration, len(spec.clients))}
	end := clk.Now() + int64(spec.total)

	task := func(i int, c simClient) func(*Task) error {
		return func(task *Task) error {
			if !c.yields {
				h.runUntil(clk.Now()+int64(c.run), i, c.group, "/long")
			} else {
				for done := time.Duration(0); done < c.run; done += simStep {
					if done > 0 {
						// Between steps only: a task parked after its last
						// step would end when it got its slot back, in
						// another goroutine's move, and its client's next
						// task would race with that move's own choices.
						s.tick()
						if err := task.Checkpoint(); err != nil {
							return err
						}
					}
					h.runUntil(clk.Now()+int64(min(simStep, c.run-done)), i, c.group, "/yield")
				}
			}
			h.mu.Lock()
			h.moving++ // its client, until it waits again
			h.mu.Unlock()
			return nil
		}
	}
	var wg sync.WaitGroup
	for i, c := range spec.clients {
		rng := rand.New(rand.NewPCG(spec.seed, uint64(i)))
		h.mu.Lock()
		first := h.atLocked(clk.Now(), i, "", "") // the clients start in order
		h.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-first.wake
			for {
				h.mu.Lock()
				stopped := h.stopped
				if stopped {
					h.moving--
				}
				h.mu.Unlock()
				if stopped {
					return
				}
				opts := []TaskOption{WithGroup(c.group)}
				if c.kind != "" {
					opts = append(opts, WithKind(c.kind))
				}
				hd, err := s.Go(context.Background(), task(i, c), opts...)
				h.mu.Lock()
				h.moving--
				h.mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				hd.Wait() // fn counted this client moving again as it returned
				if c.maxPause > 0 {
					h.pause(clk.Now()+rng.Int64N(int64(c.maxPause)+1), i) // next counts it moving again
				}
			}
		}()
	}
	// A last event at end, so that the work is counted up to it.
	h.mu.Lock()
	last := h.atLocked(end, len(spec.clients), "", "") // after the clients' events at end
	h.mu.Unlock()
	go func() { <-last.wake; h.mu.Lock(); h.moving--; h.mu.Unlock() }()

	var r simResult
	for h.next(t) {
		if clk.Now() < end {
			continue
		}
		if r.work == nil {
			for !h.quiet() {
				runtime.Gosched()
			}
			h.mu.Lock()
			h.stopped = true
			r.work, r.byKind, r.clients = maps.Clone(h.work), maps.Clone(h.byKind), slices.Clone(h.clients)
			for _, ev := range h.waiting {
				if ev.start >= 0 {
					r.work[ev.group] += time.Duration(end - ev.start)
					r.byKind[ev.group+ev.kind] += time.Duration(end - ev.start)
					r.clients[ev.client] += time.Duration(end - ev.start)
				}
			}
			h.mu.Unlock()
			if spec.atEnd != nil {
				spec.atEnd(s)
			}
			st := s.Stats()
			r.kept, r.keptTaken = st.KeptSlots, st.KeptTaken
			r.runTime, r.tasks = map[string]time.Duration{}, map[string]int{}
			for g := range r.work {
				r.runTime[g] = st.Groups[g].RunTime
				r.tasks[g] = int(st.Groups[g].Ended)
			}
		}
	}
	wg.Wait()
	delete(r.work, "")
	return r
}

// Package autoroute sorts a server's routes into heavy and light by the
// CPU their requests use, for the wrappers that serve a whole server
// (httpsched.Auto, echosched.Auto, ginsched.Auto): a heavy route's
// requests run as cpusched tasks, a light one's directly.
//
// How a request's CPU is measured. The thread CPU clock is the only
// cheap measure of one goroutine's work, and it is a goroutine's only
// while the goroutine stays on one thread. A light route's sampled
// request is served with its goroutine locked to its thread
// (MeasureLocked): the clock before and after is its CPU, and the time it
// waits on I/O, a lock or a channel is not counted, so a route that waits
// long and computes little stays light. A heavy route's request runs
// inside a task, where IsolationOSPriority locks and unlocks the
// goroutine itself (and moves it off a thread it cannot raise): locking
// it again there would keep it on that thread. So a task's sample reads
// the thread and its clock at the start and the end (Begin, End) and
// counts only where the thread is the same; where the mode does not lock
// (IsolationReserve, IsolationNone) the wrappers lock it for the sample,
// which those modes allow. CPU that a request's handler hands to other
// goroutines is not counted.
//
// Cost. A route's first warmSamples requests are measured, then one in
// lightEvery of a light route's (two reads of the thread's clock, system
// calls, and a lock of the thread: microseconds, more where a locked
// goroutine blocks), one in tinyEvery of a light route's whose average
// is under a tinyShare of the threshold (a route that grows heavy is
// still seen within a few hundred requests), and one in heavyEvery of a
// heavy route's (inside a task: two thread ids more). The others pay a
// map lookup and an atomic add.
//
// The decision. A route's first request often pays what its later ones
// do not (a sync.Once, a connection's handshake, memory touched for the
// first time), so it only seeds the route's average, and the second
// sample decides, from the lower of the two: a route that waits on I/O
// is not made heavy by its cold start, and a heavy one runs one more
// request directly. Each later sample moves the average a quarter of the
// way to it (avgShift): a route that turns heavy is moved within a few
// samples. A light route turns heavy when the average
// reaches the threshold, a heavy one light when it falls under half of it,
// so that a route near the threshold does not flap.
package autoroute

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/routeledger"
)

// DefaultThreshold is the CPU per request at or above which a route is
// heavy, without a threshold of the user's. docs/performance.md#auto
// gives the measurement behind it.
const DefaultThreshold = time.Millisecond

// Limits of the threshold and of the number of routes tracked, as the
// options' errors quote them.
const (
	MinThreshold     = 10 * time.Microsecond
	MaxThreshold     = 10 * time.Second
	DefaultMaxRoutes = 256
	MinMaxRoutes     = 1
	MaxMaxRoutes     = 1 << 16
)

// OtherRoute names the one route that the requests of every route beyond
// the bound share: the ledger's name for the routes past its own bound
// too, so that both are one series.
const OtherRoute = routeledger.Overflow

const (
	warmSamples = 4   // a route's first requests, all measured
	lightEvery  = 32  // then one in lightEvery of a light route's
	tinyEvery   = 256 // or of one under a tinyShare of the threshold
	tinyShare   = 8
	heavyEvery  = 4 // and one in heavyEvery of a heavy route's
	avgShift    = 2 // each sample moves the average 1/(1<<avgShift) of the way
)

// CheckThreshold returns an error naming d and the valid range if d is
// not a valid threshold.
func CheckThreshold(d time.Duration) error {
	if d < MinThreshold || d > MaxThreshold {
		return fmt.Errorf("%v is out of range (%v..%v)", d, MinThreshold, MaxThreshold)
	}
	return nil
}

// CheckMaxRoutes returns an error naming n and the valid range if n is
// not a valid bound on the routes tracked.
func CheckMaxRoutes(n int) error {
	if n < MinMaxRoutes || n > MaxMaxRoutes {
		return fmt.Errorf("%d is out of range (%d..%d)", n, MinMaxRoutes, MaxMaxRoutes)
	}
	return nil
}

// Table tracks the routes of one wrapped server. Its methods are safe for
// concurrent use.
type Table struct {
	threshold int64 // ns
	max       int
	// routes is read without a lock on every request and replaced, under
	// mu, by a copy with one more route: a route is added once, read on
	// every request after.
	routes atomic.Pointer[map[string]*Route]
	mu     sync.Mutex
	order  []*Route // in the order they were added, under mu
	other  *Route
	// lockInTask: the scheduler's mode does not lock a task's goroutine
	// to its thread (IsolationReserve, IsolationNone), so a heavy
	// request's sample does (ServeInTask; the package comment says why
	// the other mode's must not).
	lockInTask bool
	// ledger is the scheduler's (NewFor), which keeps each route's
	// requests and moves once t is gone; nil for a table of no scheduler.
	ledger *routeledger.Ledger
}

// New returns an empty Table with threshold and a bound of max routes,
// which the caller has checked (CheckThreshold, CheckMaxRoutes).
func New(threshold time.Duration, max int) *Table {
	t := &Table{threshold: int64(threshold), max: max}
	t.other = &Route{name: OtherRoute, table: t, counts: new(routeledger.Block)}
	m := map[string]*Route{}
	t.routes.Store(&m)
	return t
}

// MaxRoutes returns the number of routes t tracks before OtherRoute.
func (t *Table) MaxRoutes() int { return t.max }

// Threshold returns t's threshold.
func (t *Table) Threshold() time.Duration { return time.Duration(t.threshold) }

// Route returns the route name, added at its first request; beyond the
// bound, the route OtherRoute that all the others share.
func (t *Table) Route(name string) *Route {
	if r, ok := (*t.routes.Load())[name]; ok {
		return r
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.routes.Load()
	if r, ok := old[name]; ok {
		return r
	}
	if len(old) >= t.max {
		return t.other
	}
	r := &Route{name: name, table: t, counts: t.newCounts(name)}
	m := make(map[string]*Route, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = r
	t.order = append(t.order, r)
	t.routes.Store(&m)
	return r
}

// Stats are one route's figures.
type Stats struct {
	Route    string
	Heavy    bool
	CPU      time.Duration // average CPU per sampled request
	Requests uint64        // requests served, as a task or directly
	Sampled  uint64        // requests measured
	Moves    uint64        // times it changed between heavy and light
	// Task is what Task made to run its requests as tasks (the wrapper's
	// handler, whose own figures the wrapper reads), nil before its first
	// heavy request.
	Task any
}

// Stats returns the figures of every route t tracks, in the order they
// were added, the shared OtherRoute last if any request used it.
func (t *Table) Stats() []Stats {
	t.mu.Lock()
	routes := append([]*Route(nil), t.order...)
	t.mu.Unlock()
	if t.other.counts.Requests.Load() > 0 {
		routes = append(routes, t.other)
	}
	st := make([]Stats, len(routes))
	for i, r := range routes {
		st[i] = r.Stats()
	}
	return st
}

// newCounts returns the Block of route name's requests and moves: in
// t's scheduler's ledger, t its owner, where t has one.
func (t *Table) newCounts(name string) *routeledger.Block {
	if t.ledger == nil {
		return new(routeledger.Block)
	}
	return routeledger.Add(t.ledger, t, name, routeledger.KindTable)
}

// Route is one route of a Table.
type Route struct {
	name    string
	table   *Table
	counts  *routeledger.Block // its Requests and Moves
	sampled atomic.Uint64
	cpu     atomic.Int64 // average, ns; valid once sampled > 0
	heavy   atomic.Bool
	// task is what the wrapper made to run the route's requests as
	// tasks, at the first heavy request.
	task atomic.Pointer[any]
}

// Name returns r's name.
func (r *Route) Name() string { return r.name }

// Heavy reports whether r's requests are to run as tasks.
func (r *Route) Heavy() bool { return r.heavy.Load() }

// Next counts a request of r and reports whether it is to be measured.
func (r *Route) Next() (sample bool) {
	n := r.counts.Requests.Add(1)
	if n <= warmSamples {
		return true
	}
	var every uint64
	switch {
	case r.heavy.Load():
		every = heavyEvery
	case r.cpu.Load() < r.table.threshold/tinyShare:
		every = tinyEvery
	default:
		every = lightEvery
	}
	return n%every == 0
}

// Record takes cpu, a request's CPU time in ns, into r's average and
// moves r between heavy and light where the average has crossed.
func (r *Route) Record(cpu int64) {
	if cpu < 0 {
		return
	}
	n := r.sampled.Add(1)
	if n == 1 {
		// The seed: the package comment says why it decides nothing. (A
		// second sample recorded before this store takes the lower of 0
		// and its own; this one then replaces it, and the third decides.)
		r.cpu.Store(cpu)
		return
	}
	var avg int64
	for {
		old := r.cpu.Load()
		if n == 2 {
			avg = min(old, cpu)
		} else {
			avg = old + (cpu-old)>>avgShift
		}
		if r.cpu.CompareAndSwap(old, avg) {
			break
		}
	}
	heavy := r.heavy.Load()
	switch {
	case !heavy && avg >= r.table.threshold:
		if r.heavy.CompareAndSwap(false, true) {
			r.counts.Moves.Add(1)
		}
	case heavy && avg < r.table.threshold/2:
		if r.heavy.CompareAndSwap(true, false) {
			r.counts.Moves.Add(1)
		}
	}
}

// Task returns what make made, given r, to run r's requests as tasks:
// made at the first call.
func (r *Route) Task(make func(*Route) any) any {
	if p := r.task.Load(); p != nil {
		return *p
	}
	v := make(r)
	if r.task.CompareAndSwap(nil, &v) {
		return v
	}
	return *r.task.Load()
}

// Stats returns r's figures.
func (r *Route) Stats() Stats {
	st := Stats{
		Route:    r.name,
		Heavy:    r.heavy.Load(),
		Requests: r.counts.Requests.Load(),
		Sampled:  r.sampled.Load(),
		Moves:    r.counts.Moves.Load(),
	}
	if st.Sampled > 0 {
		st.CPU = time.Duration(r.cpu.Load())
	}
	if p := r.task.Load(); p != nil {
		st.Task = *p
	}
	return st
}

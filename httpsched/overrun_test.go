package httpsched

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestOverrunWait(t *testing.T) {
	const ms = time.Millisecond
	reading := func(at, stalled, share time.Duration) clockReading {
		return clockReading{at: at, stalled: stalled, share: share}
	}
	queued := reading(100*ms, 10*ms, 20*ms) // the integrals before the request: they count differences
	tests := []struct {
		name string
		wait time.Duration
		end  clockReading
		want time.Duration
	}{
		{"no overrun", 80 * ms, reading(200*ms, 10*ms, 20*ms), 0},
		{"a stall all its life", 100 * ms, reading(200*ms, 110*ms, 120*ms), 100 * ms},
		{"in Blocking during a stall: at most the wait", 30 * ms, reading(200*ms, 110*ms, 120*ms), 30 * ms},
		// A life of 200 ms: 40 ms of stall, then 160 ms in which overruns
		// held half the slots on average; of the 60 ms it waited then,
		// half is theirs.
		{"a stall, then half the slots", 100 * ms, reading(300*ms, 50*ms, 140*ms), 40*ms + 30*ms},
		{"half the slots, waiting half its life", 50 * ms, reading(200*ms, 10*ms, 70*ms), 25 * ms},
		{"share beyond its life is capped", 50 * ms, reading(200*ms, 10*ms, 500*ms), 50 * ms},
		{"clock raced back: no part", 50 * ms, reading(200*ms, 0, 0), 0},
	}
	for _, tt := range tests {
		if got := overrunWait(tt.wait, queued, tt.end); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestOverrunClockCount(t *testing.T) {
	// Scripted samples of two slots' overruns: each sample counts the part
	// since the one before, the stall while both slots have one.
	const ms = time.Millisecond
	var c overrunClock
	steps := []struct {
		at          time.Duration
		overruns    []time.Duration
		slots       int
		wantStalled time.Duration
		wantShare   time.Duration
	}{
		{10 * ms, nil, 2, 0, 0},
		{20 * ms, []time.Duration{4 * ms}, 2, 0, 2 * ms},                           // one slot for 4 ms
		{30 * ms, []time.Duration{14 * ms, 6 * ms}, 2, 6 * ms, 2*ms + 8*ms},        // both: the first all 10 ms, the second 6
		{25 * ms, []time.Duration{30 * ms, 30 * ms}, 2, 6 * ms, 10 * ms},           // a sample that lost a race: nothing
		{40 * ms, []time.Duration{16 * ms, 24 * ms}, 2, 16 * ms, 20 * ms},          // both all 10 ms
		{50 * ms, []time.Duration{50 * ms}, 1, 26 * ms, 30 * ms},                   // one slot lent: the other is a stall
		{60 * ms, []time.Duration{10 * ms, 10 * ms, 10 * ms}, 2, 36 * ms, 40 * ms}, // after Close: more holders than slots
	}
	for i, st := range steps {
		got := c.countLocked(st.overruns, st.slots, st.at)
		if got.stalled != st.wantStalled || got.share != st.wantShare {
			t.Errorf("step %d: got stalled %v, share %v; want %v, %v", i, got.stalled, got.share, st.wantStalled, st.wantShare)
		}
	}
}

func TestOverrunEstimate(t *testing.T) {
	var e overrunEstimate
	if !e.yields() {
		t.Errorf("a new route: got not yielding, want yielding")
	}
	e.add(40 * time.Millisecond) // one bcrypt call past its slice
	if e.yields() || e.get() != 5*time.Millisecond {
		t.Errorf("after one 40 ms overrun: got %v, yields %t; want 5ms, false", e.get(), e.yields())
	}
	for range 16 {
		e.add(100 * time.Microsecond) // checkpoints again
	}
	if !e.yields() {
		t.Errorf("after 16 requests that yield: got %v, not yielding; want yielding", e.get())
	}
}

// TestMaxQueueWaitBesideNonYielding is the regression test of
// WithMaxQueueWait learning, as its route's own, the waits its requests
// spent behind another route's calls that cannot yield: its limit fell to
// one request and it answered nearly every request 503 (96% in a service
// with d at 5x the route's run time beside bcrypt calls). Here both slots
// are held by requests of a route that never comes to a Checkpoint, while
// four requests of a limited route queue for four times d; they are then
// served one slot at a time. Their waits are stalls: the limit must not
// learn them, so the next rounds of four are admitted, not shed. Under the
// old rule the first wait halved the limit to one, and the second round
// got three 503s.
func TestMaxQueueWaitBesideNonYielding(t *testing.T) {
	const d = 50 * time.Millisecond
	s := schedtest.NewScheduler(t, cpusched.WithWorkers(2))
	calls := newGated()
	t.Cleanup(func() { close(calls.proceed) }) // a failed test's held requests still end
	login := Handler(s, calls)
	render := Handler(s, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), WithMaxQueueWait(d))
	var wg sync.WaitGroup
	for round := range 3 {
		for range 2 {
			wg.Go(func() { serve(login, httptest.NewRequest("POST", "/hold", nil)) })
			<-calls.entered
		}
		codes := make(chan int, 4)
		for range cap(codes) {
			wg.Go(func() { codes <- serve(render, httptest.NewRequest("GET", "/", nil)).Code })
		}
		for deadline := time.Now().Add(10 * time.Second); s.Stats().Queued+len(codes) < cap(codes); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: got %d renders queued and %d answered after 10s, want 4 in all", round, s.Stats().Queued, len(codes))
			}
		}
		time.Sleep(4 * d)
		calls.proceed <- struct{}{} // one call returns: the renders take its slot in turn
		shed := 0
		for range cap(codes) {
			if code := <-codes; code != http.StatusOK {
				shed++
			}
		}
		if shed > 0 {
			t.Errorf("round %d: %d of 4 renders shed, want none", round, shed)
		}
		calls.proceed <- struct{}{}
		wg.Wait()
	}
	rs, _ := RouteStatsOf(render)
	ls, _ := RouteStatsOf(login)
	t.Logf("render %+v; login %+v", rs, ls)
	if rs.Limit < 4 {
		t.Errorf("got render's limit %d, want at least the 4 it has served at once", rs.Limit)
	}
	if rs.OverrunWait < 3*4*2*d {
		t.Errorf("got render's OverrunWait %v, want at least %v: 12 requests waited 4x%v behind the calls", rs.OverrunWait, 3*4*2*d, d)
	}
	if ls.Overrun < yieldingOverrun || rs.Overrun != 0 {
		t.Errorf("got Overrun %v (login), %v (render); want at least %v, and 0", ls.Overrun, rs.Overrun, yieldingOverrun)
	}
}

// TestMaxQueueWaitOwnOverrun: a limited route whose own requests hold
// their slots past their slices (rule 3) learns its whole waits: its
// requests queue behind its own, which its limit shortens.
func TestMaxQueueWaitOwnOverrun(t *testing.T) {
	const d = 50 * time.Millisecond
	s := schedtest.NewScheduler(t, cpusched.WithWorkers(2))
	calls := newGated()
	t.Cleanup(func() { close(calls.proceed) })
	h := asHandler(t, Handler(s, calls, WithMaxQueueWait(d)))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { serve(h, httptest.NewRequest("POST", "/hold", nil)) })
		<-calls.entered
	}
	for range 2 {
		wg.Go(func() { serve(h, httptest.NewRequest("POST", "/hold", nil)) })
	}
	schedtest.WaitQueued(t, s, 2)
	time.Sleep(4 * d)
	for range 2 {
		calls.proceed <- struct{}{} // a holder returns; a queued one takes its slot
		<-calls.entered
	}
	for range 2 {
		calls.proceed <- struct{}{}
	}
	wg.Wait()
	// The holders' samples raised the limit to the 4 in flight, and one
	// more; the first queued one's wait halved it.
	checkLimit(t, "after waits behind its own calls", h, 0, 2)
	if st, _ := RouteStatsOf(h); st.Overrun < yieldingOverrun || st.OverrunWait != 0 {
		t.Errorf("got Overrun %v, OverrunWait %v; want at least %v, and 0", st.Overrun, st.OverrunWait, yieldingOverrun)
	}
}

// sleepWork holds a slot as CPU work would, without using the CPU: n
// sleeps of d, a Checkpoint after each.
func sleepWork(n int, d time.Duration, t *cpusched.Task) {
	for range n {
		time.Sleep(d)
		t.Checkpoint()
	}
}

// TestShedBesideNonYielding: a route that checkpoints, with
// WithMaxQueueWait at 5x its run time, beside a route whose 40 ms calls
// never come to a Checkpoint, 4 clients each, on 2 slots, is not shed:
// its requests wait for those calls, which its limit cannot shorten. The
// work holds the slots by sleeping, so that the machine's load changes the
// waits less; a shed client pauses 50 ms. Under the old rule the limit
// stayed near 3 and 40-55% of the requests were shed here; with the rule,
// none in most runs, and a few where one request waits unusually long
// behind its own route's (the limit halves once, and grows back).
func TestShedBesideNonYielding(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 3 s")
	}
	m := mixedLoad{
		isolation:     cpusched.IsolationNone,
		workers:       2,
		render:        func(t *cpusched.Task) { sleepWork(20, time.Millisecond, t) }, // 20-30 ms with the timers' slack
		login:         func(*cpusched.Task) { time.Sleep(40 * time.Millisecond) },
		renderWait:    150 * time.Millisecond,
		renderClients: 4,
		loginClients:  4,
		shedPause:     50 * time.Millisecond,
		length:        3 * time.Second,
	}
	res := m.run(t)
	t.Logf("served %d, shed %d, by client %v, mean limit %.1f, run %v, wait %v; render %+v; login %+v",
		res.rendered, res.render503, res.byClient, res.meanLimit, res.renderRun, res.renderWait, res.render, res.login)
	if share := float64(res.render503) / float64(max(1, res.rendered+res.render503)); share > 0.25 {
		t.Errorf("%.0f%% of render's requests shed, want at most 25%%", 100*share)
	}
	for i, n := range res.byClient {
		if n == 0 {
			t.Errorf("render client %d not served in %v", i, m.length)
		}
	}
}

func TestRouteStatsOf(t *testing.T) {
	s := schedtest.NewScheduler(t)
	if _, ok := RouteStatsOf(http.NotFoundHandler()); ok {
		t.Errorf("RouteStatsOf(a handler of net/http): got true, want false")
	}
	for _, tc := range []struct {
		opts      []Option
		wantLimit int
	}{
		{nil, 0},
		{[]Option{WithMaxQueueWait(time.Second)}, 4}, // cold: 4 per slot
	} {
		h := Handler(s, http.NotFoundHandler(), tc.opts...)
		st, ok := RouteStatsOf(h)
		if want := (RouteStats{Limit: tc.wantLimit}); !ok || st != want {
			t.Errorf("%s: got %+v, %t; want %+v, true", fmt.Sprint(tc.opts), st, ok, want)
		}
	}
}

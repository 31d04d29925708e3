package routeledger

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/schedtest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

type owner struct{ _ [16]byte } // not zero-sized: each new one is its own object

// collect runs the collector until l has folded every Block whose owner
// is gone, so that only want entries are left.
func collect(t *testing.T, l *Ledger, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		l.Totals() // sweeps
		l.mu.Lock()
		n := len(l.entries)
		l.mu.Unlock()
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after 10 s of collections, want %d", n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLedger: Totals adds every Block of a route, its owner alive or not;
// a Block whose owner is gone is folded and dropped, its counts kept;
// past maxNames folded names, new ones go to Overflow.
func TestLedger(t *testing.T) {
	l := For(schedtest.NewScheduler(t))
	a, b, c := new(owner), new(owner), new(owner)
	ba := Add(l, a, "r", KindTable)
	bb := Add(l, b, "r", KindTable)
	bc := Add(l, c, "s", KindHandler)
	ba.Requests.Add(3)
	ba.Moves.Add(1)
	bb.Requests.Add(2)
	bc.Shed[1].Add(4)
	bc.OverrunWait.Add(int64(time.Millisecond))
	want := map[string]Totals{
		"r": {Requests: 5, Moves: 1, Table: true},
		"s": {OverrunWait: time.Millisecond, Shed: [NumShed]uint64{0, 4, 0, 0}, Handler: true},
	}
	check := func(when string) {
		t.Helper()
		got := l.Totals()
		if len(got) != len(want) {
			t.Errorf("%s: got %d routes, want %d: %+v", when, len(got), len(want), got)
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: route %q: got %+v, want %+v", when, name, got[name], w)
			}
		}
	}
	check("all owners alive")
	a, c = nil, nil
	collect(t, l, 1) // b's is left
	check("two owners gone")
	bb.Requests.Add(1)
	want["r"] = Totals{Requests: 6, Moves: 1, Table: true}
	check("b counted on")
	runtime.KeepAlive(b)

	for i := range maxNames { // fills the folded names
		o := new(owner)
		Add(l, o, fmt.Sprint("n", i), KindTable).Requests.Add(1)
	}
	last := new(owner)
	Add(l, last, "late", KindTable).Requests.Add(7)
	last, b = nil, nil
	collect(t, l, 0)
	got := l.Totals()
	if len(got) != maxNames+1 {
		t.Errorf("got %d routes, want %d folded and %s", len(got), maxNames, Overflow)
	}
	// "r" and "s" took two names, so the last two n's went to Overflow
	// with late's 7.
	if _, ok := got["late"]; ok || got[Overflow].Requests != 7+2 {
		t.Errorf("new names past %d folded ones: late %+v, %s %+v; want none, 9 requests in %s", maxNames, got["late"], Overflow, got[Overflow], Overflow)
	}
}

// TestLedgerStress drives one Ledger from 8 goroutines that make owners
// for random routes, count into their Blocks and drop them, while
// another reads Totals and the collector runs: under -race, with a
// watchdog that dumps the goroutines instead of hanging. No route's
// counter may ever go back, and at the end the totals are every count
// made.
func TestLedgerStress(t *testing.T) {
	l := For(schedtest.NewScheduler(t))
	defer leakcheck.Watchdog(t, time.Minute)()
	ops := 5000
	if testing.Short() {
		ops = 500
	}
	var made atomic.Uint64 // requests counted, in all
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		prev := map[string]uint64{}
		for {
			select {
			case <-done:
				return
			default:
			}
			for name, tot := range l.Totals() {
				if n := tot.Requests + tot.Shed[0]; n < prev[name] {
					t.Errorf("route %q went back from %d to %d", name, prev[name], n)
				} else {
					prev[name] = n
				}
			}
			runtime.GC()
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			var kept []*owner
			for range ops {
				o := new(owner)
				name := fmt.Sprint("route", rng.IntN(50))
				kind := Kind(rng.IntN(2))
				b := Add(l, o, name, kind)
				n := uint64(1 + rng.IntN(3))
				if kind == KindTable {
					b.Requests.Add(n)
				} else {
					b.Shed[0].Add(n)
				}
				made.Add(n)
				if rng.IntN(8) == 0 {
					kept = append(kept, o)
				}
				if len(kept) > 16 {
					kept = kept[1:]
				}
			}
			runtime.KeepAlive(kept)
		})
	}
	wg.Wait()
	close(done)
	reader.Wait()
	var sum uint64
	for _, tot := range l.Totals() {
		sum += tot.Requests + tot.Shed[0]
	}
	if m := made.Load(); sum != m {
		t.Errorf("totals add up to %d, want the %d counted", sum, m)
	}
}

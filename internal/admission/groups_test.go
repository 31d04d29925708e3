package admission

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
)

// TestGroups: each group has a limit of its own, and a call of one group
// is admitted while another group's limit is reached.
func TestGroups(t *testing.T) {
	g := NewGroups[string](time.Second, 1)
	gold, goldRound, _ := g.Admit("gold")
	gold.Observe(2*time.Second, goldRound) // gold's limit, warm, stays at its floor of 1
	gold, goldRound, _ = g.Admit("gold")
	if _, _, ok := g.Admit("gold"); ok {
		t.Errorf("gold's second call in flight at its limit of 1: admitted, want shed")
	}
	bronze, bronzeRound, ok := g.Admit("bronze")
	if !ok || bronze == gold {
		t.Errorf("bronze's first call beside gold's at its limit: admitted %v, its own limit %v; want true, true", ok, bronze != gold)
	}
	def, defRound, ok := g.Admit("")
	if !ok || def != g.def {
		t.Errorf("the default group's first call: admitted %v, the default limit %v; want true, true", ok, def == g.def)
	}
	if got, want := g.Inflight(), int64(3); got != want {
		t.Errorf("got Inflight %d, want %d", got, want)
	}
	if got, want := g.Current(), int64(1+4+4); got != want { // gold's 1, bronze's and the default's cold 4 x 1
		t.Errorf("got Current %d, want %d", got, want)
	}
	gold.Observe(0, goldRound)
	bronze.Observe(0, bronzeRound)
	def.Observe(0, defRound)
	if got := g.Inflight(); got != 0 {
		t.Errorf("after all ended: got Inflight %d, want 0", got)
	}
}

// TestGroupsKept: past groupsKept groups, a new group's first call drops
// the limits of the groups with no call in flight, and keeps those with
// one.
func TestGroupsKept(t *testing.T) {
	g := NewGroups[string](time.Second, 2)
	busy, round, _ := g.Admit("busy")
	for i := range groupsKept - 1 {
		lim, r, ok := g.Admit(fmt.Sprint("idle", i))
		if !ok {
			t.Fatalf("group %d's first call: shed, want admitted", i)
		}
		lim.Observe(0, r)
	}
	if n := len(g.groups); n != groupsKept {
		t.Fatalf("got %d limits kept, want %d", n, groupsKept)
	}
	lim, r, _ := g.Admit("new")
	if _, ok := g.groups["busy"]; len(g.groups) != 2 || !ok || g.groups["new"] != lim {
		t.Errorf("after a new group past %d: got %d limits kept, want 2: busy's and new's", groupsKept, len(g.groups))
	}
	if got := g.Inflight(); got != 2 {
		t.Errorf("got Inflight %d, want 2", got)
	}
	lim.Observe(0, r)
	busy.Observe(0, round)
	if got := g.Inflight(); got != 0 {
		t.Errorf("after both ended: got Inflight %d, want 0", got)
	}
}

// TestGroupsStress drives a Groups keyed by a place (a group name, a
// class and a nice level, as the adapters key theirs) from 8 goroutines
// with random calls: admitted at random places, more than groupsKept of
// them so that new places sweep the idle ones, each ended by Observe or
// Dropped with a wait within or past the budget. Run under -race, with a
// watchdog that dumps the goroutines instead of hanging. It checks that a
// place's limit is never dropped while a call it admitted is in flight
// (Admit returns that same limit), that every limit stays at least 1,
// and that nothing is in flight once all calls have ended.
func TestGroupsStress(t *testing.T) {
	type place struct {
		group       string
		class, nice int8
	}
	g := NewGroups[place](10*time.Millisecond, 2)
	defer leakcheck.Watchdog(t, time.Minute)()
	// held is, per place, the limit its calls in flight were admitted by
	// and how many there are: a sweep must not drop that limit.
	var mu sync.Mutex
	held := map[place]struct {
		lim *Limit
		n   int
	}{}
	ops := 20000
	if testing.Short() {
		ops = 2000
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			type call struct {
				p     place
				lim   *Limit
				round uint64
			}
			var mine []call
			end := func(i int) {
				c := mine[i]
				mine[i] = mine[len(mine)-1]
				mine = mine[:len(mine)-1]
				mu.Lock()
				h := held[c.p]
				if h.n--; h.n == 0 {
					delete(held, c.p)
				} else {
					held[c.p] = h
				}
				mu.Unlock()
				wait := time.Duration(rng.IntN(20)) * time.Millisecond // within or past the budget
				if rng.IntN(4) == 0 {
					c.lim.Dropped(wait, c.round, rng.IntN(2) == 0)
				} else {
					c.lim.Observe(wait, c.round)
				}
			}
			for range ops {
				if len(mine) > 0 && (len(mine) >= 16 || rng.IntN(2) == 0) {
					end(rng.IntN(len(mine)))
					continue
				}
				p := place{} // the default place, lock-free, a quarter of the calls
				if rng.IntN(4) != 0 {
					p = place{group: fmt.Sprint("g", rng.IntN(300)), class: int8(rng.IntN(4)), nice: int8(rng.IntN(3))}
				}
				mu.Lock() // held through Admit: no other call of p ends meanwhile
				lim, round, ok := g.Admit(p)
				h := held[p]
				if h.n > 0 && lim != h.lim {
					mu.Unlock()
					t.Errorf("place %+v: Admit returned another limit while %d calls admitted by its limit are in flight", p, h.n)
					return
				}
				if c := lim.Current(); c < 1 {
					t.Errorf("place %+v: limit %d, want at least 1", p, c)
				}
				if ok {
					held[p] = struct {
						lim *Limit
						n   int
					}{lim, h.n + 1}
				}
				mu.Unlock()
				if ok {
					mine = append(mine, call{p, lim, round})
				}
			}
			for len(mine) > 0 {
				end(len(mine) - 1)
			}
		}()
	}
	wg.Wait()
	if n := g.Inflight(); n != 0 {
		t.Errorf("after every call ended: Inflight %d, want 0", n)
	}
	if n := len(g.groups); n > groupsKept+1 {
		t.Errorf("%d limits kept, want at most %d", n, groupsKept+1)
	}
}

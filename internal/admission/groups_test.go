package admission

import (
	"fmt"
	"testing"
	"time"
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

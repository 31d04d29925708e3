package admission

// Groups: an adapter's limits, one per place of its calls (a task's group,
// class and nice level: cpusched.TaskPlace).
//
// Why per group. A call's wait depends on its group's share of the slots
// (SetGroupWeight) as much as on how many calls are in flight: a tenant
// whose group weighs 25 beside groups of 300, 100 and 100 gets a
// twentieth of the slots while they have work, and its calls wait several
// times longer than theirs on the same route or method. One limit per
// route learned those waits as the route's: each halved it, and the route
// shed the other tenants' requests, whose waits were well within the
// budget (the tenant of weight 300, its logins' waits at most 131 ms
// against a budget of 300 ms, got 275 of the route's 608 answers 503).
// Shedding them does not shorten the light tenant's waits either: each of
// the other groups still has work on other routes, and the groups share
// by weight whatever their task counts. A group's limit learns only its
// own calls' waits, and sheds only its own calls: those whose group has
// too many of them in flight for the budget, which is what the group's
// share of the slots allows.
//
// Why per class and nice level too. Within one group, a ClassBatch task's
// longer slices and a niced task's smaller weight make its waits longer
// than a ClassNormal task's at nice 0, and a ClassRealtime task's far
// shorter; a route whose requests differ only so would learn the slow
// ones' waits as everyone's, as one limit per route did for tenants.

import (
	"sync"
	"sync/atomic"
	"time"
)

// groupsKept is how many groups' limits a Groups keeps before it drops
// those with no call in flight. The scheduler frees a group that
// SetGroupWeight never named when its last task ends, so that a group per
// user does not grow its memory with the number of users; the limits do
// the same past this many, while the few groups of named tenants keep
// what their limits learned through idle spells.
const groupsKept = 256

// Groups is a Limit per group of an adapter's calls (a route's requests,
// a method's calls), a group being a key K (the adapters' is
// cpusched.TaskPlace), each made at its group's first call. The zero K is
// the default group. Its methods are safe for concurrent use.
type Groups[K comparable] struct {
	budget  time.Duration
	initial int         // each limit's start: the scheduler's slots
	def     *Limit      // the default group's (the zero K), made with the Groups
	defUsed atomic.Bool // a call of the default group has come

	mu     sync.Mutex
	groups map[K]*Limit // the other groups', made at their first call
}

// NewGroups returns the limits of an adapter with the budget on a
// scheduler of workers slots; each starts as New(budget, workers) does.
func NewGroups[K comparable](budget time.Duration, workers int) *Groups[K] {
	return &Groups[K]{budget: budget, initial: workers, def: New(budget, workers), groups: map[K]*Limit{}}
}

// Admit returns the limit of group and whether it admits a call now, with
// the round it was admitted in (Limit.Admit). If it does, the caller must
// later call exactly one of that limit's Observe and Dropped with that
// round. The default group's is lock-free; another group's is found in a
// map under a lock, and past 256 groups a new group's first call drops
// the limits of the groups with no call in flight.
func (g *Groups[K]) Admit(group K) (lim *Limit, round uint64, ok bool) {
	var def K
	if group == def { // lock-free, as most calls are
		if !g.defUsed.Load() {
			g.defUsed.Store(true)
		}
		round, ok = g.def.Admit()
		return g.def, round, ok
	}
	g.mu.Lock()
	defer g.mu.Unlock() // held through Admit, so that a sweep never drops a limit being admitted to
	lim = g.groups[group]
	if lim == nil {
		if len(g.groups) >= groupsKept {
			g.sweepLocked()
		}
		lim = New(g.budget, g.initial)
		g.groups[group] = lim
	}
	round, ok = lim.Admit()
	return lim, round, ok
}

// sweepLocked drops the limits of the groups with no call in flight.
func (g *Groups[K]) sweepLocked() {
	for group, lim := range g.groups {
		if lim.Inflight() == 0 {
			delete(g.groups, group)
		}
	}
}

// Current returns the sum of the groups' limits now: the default group's
// if it has had a call or no other group has, and those of the groups
// kept.
func (g *Groups[K]) Current() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var sum int64
	if g.defUsed.Load() || len(g.groups) == 0 {
		sum = g.def.Current()
	}
	for _, lim := range g.groups {
		sum += lim.Current()
	}
	return sum
}

// Inflight returns the calls admitted and not yet ended, in all groups.
func (g *Groups[K]) Inflight() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	sum := g.def.Inflight()
	for _, lim := range g.groups {
		sum += lim.Inflight()
	}
	return sum
}

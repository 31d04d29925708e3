package httpsched

// WithMaxQueueWait's limits: one per group of the handler's requests.
//
// Why per group. A request's wait depends on its group's share of the
// slots (SetGroupWeight) as much as on how many requests are in flight: a
// tenant whose group weighs 25 beside groups of 300, 100 and 100 gets a
// twentieth of the slots while they have work, and its requests wait
// several times longer than theirs on the same route. One limit per route
// learned those waits as the route's: each halved it, and the route shed
// the other tenants' requests, whose waits were well within d (the tenant
// of weight 300, its logins' waits at most 131 ms against a d of 300 ms,
// got 275 of the route's 608 answers 503). Shedding them does not shorten
// the light tenant's waits either: each of the other groups still has
// work on other routes, and the groups share by weight whatever their
// task counts. A group's limit learns only its own requests' waits, and
// sheds only its own requests: those whose group has too many of them in
// flight for d, which is what the group's share of the slots allows.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/admission"
)

// groupLimitsKept is how many groups' limits a handler keeps before it
// drops those with no request in flight. The scheduler frees a group
// that SetGroupWeight never named when its last task ends, so that a
// group per user does not grow its memory with the number of users; the
// limits do the same past this many, while the few groups of named
// tenants keep what their limits learned through idle spells.
const groupLimitsKept = 256

// groupLimits is a handler's limits, one per group. Its methods are safe
// for concurrent use.
type groupLimits struct {
	budget  time.Duration
	initial int              // each limit's start: the scheduler's slots
	def     *admission.Limit // the default group's (""), made with the handler
	defUsed atomic.Bool      // a request of the default group has come

	mu     sync.Mutex
	groups map[string]*admission.Limit // the other groups', made at their first request
}

// newGroupLimits returns the limits of a handler with budget d on a
// scheduler of workers slots.
func newGroupLimits(d time.Duration, workers int) *groupLimits {
	return &groupLimits{budget: d, initial: workers, def: admission.New(d, workers), groups: map[string]*admission.Limit{}}
}

// admit returns the limit of group and whether it admits a request now,
// with the round it was admitted in (admission.Limit.Admit). The caller
// gives the request's place back to that limit (Observe or Dropped).
func (l *groupLimits) admit(group string) (lim *admission.Limit, round uint64, ok bool) {
	if group == "" { // lock-free, as most routes' requests are
		if !l.defUsed.Load() {
			l.defUsed.Store(true)
		}
		round, ok = l.def.Admit()
		return l.def, round, ok
	}
	l.mu.Lock()
	defer l.mu.Unlock() // held through Admit, so that a sweep never drops a limit being admitted to
	lim = l.groups[group]
	if lim == nil {
		if len(l.groups) >= groupLimitsKept {
			l.sweepLocked()
		}
		lim = admission.New(l.budget, l.initial)
		l.groups[group] = lim
	}
	round, ok = lim.Admit()
	return lim, round, ok
}

// sweepLocked drops the limits of the groups with no request in flight.
func (l *groupLimits) sweepLocked() {
	for group, lim := range l.groups {
		if lim.Inflight() == 0 {
			delete(l.groups, group)
		}
	}
}

// Current returns the sum of the groups' limits now: the default group's
// if it has had a request or no other group has, and those of the groups
// kept.
func (l *groupLimits) Current() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum int64
	if l.defUsed.Load() || len(l.groups) == 0 {
		sum = l.def.Current()
	}
	for _, lim := range l.groups {
		sum += lim.Current()
	}
	return sum
}

// Inflight returns the requests admitted and not yet ended, in all groups.
func (l *groupLimits) Inflight() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := l.def.Inflight()
	for _, lim := range l.groups {
		sum += lim.Inflight()
	}
	return sum
}

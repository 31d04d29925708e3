package autoroute

import (
	"sync"
	"time"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/routeledger"
	"github.com/cpusched/cpusched/internal/schedmap"
)

// registries holds each Scheduler's tables, for the figures that
// httpsched.AutoRoutes and promsched report.
var registries schedmap.Map[*registry]

type registry struct {
	mu     sync.Mutex
	tables []weak.Pointer[Table]
}

// NewFor returns a new Table of s, as a wrapper makes it: threshold and
// max, DefaultThreshold and DefaultMaxRoutes where 0 (the caller has
// checked the others), one of s's tables (Tables), its routes' requests
// and moves counted in s's ledger (routeledger), its heavy requests'
// samples locked to their threads where s's mode does not lock them.
func NewFor(s *cpusched.Scheduler, threshold time.Duration, max int) *Table {
	if threshold == 0 {
		threshold = DefaultThreshold
	}
	if max == 0 {
		max = DefaultMaxRoutes
	}
	t := New(threshold, max)
	t.lockInTask = s.Stats().Isolation != cpusched.IsolationOSPriority
	t.ledger = routeledger.For(s)
	t.other.counts = t.newCounts(OtherRoute)
	Register(s, t)
	return t
}

// Register makes t one of s's tables, which Tables returns for as long as
// t is in use.
func Register(s *cpusched.Scheduler, t *Table) {
	reg := registries.For(s, func(weak.Pointer[cpusched.Scheduler]) *registry { return new(registry) })
	reg.mu.Lock()
	defer reg.mu.Unlock()
	live := reg.tables[:0]
	for _, p := range reg.tables {
		if p.Value() != nil {
			live = append(live, p)
		}
	}
	reg.tables = append(live, weak.Make(t))
}

// Tables returns the tables registered for s that are still in use.
func Tables(s *cpusched.Scheduler) []*Table {
	reg, ok := registries.Load(s)
	if !ok {
		return nil
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var ts []*Table
	for _, p := range reg.tables {
		if t := p.Value(); t != nil {
			ts = append(ts, t)
		}
	}
	return ts
}

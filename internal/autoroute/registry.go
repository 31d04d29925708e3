package autoroute

import (
	"sync"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedmap"
)

// registries holds each Scheduler's tables, for the figures that
// httpsched.AutoRoutes and promsched report.
var registries schedmap.Map[*registry]

type registry struct {
	mu     sync.Mutex
	tables []weak.Pointer[Table]
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

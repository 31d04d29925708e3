package routesched

// The figures of the adapters' routes: each Routes is one of its
// Scheduler's, for echosched.RouteStats and ginsched.RouteStats.

import (
	"net/http"
	"sync"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/schedmap"
)

// registries holds each Scheduler's Routes, of every call type.
var registries schedmap.Map[*registry]

type registry struct {
	mu     sync.Mutex
	routes []routesRef // held weakly: a middleware dropped leaves
}

// routesRef is a Routes[C] of some C, held weakly.
type routesRef interface {
	live() bool
	// addStats adds the figures of the Routes, if it is still in use, to
	// stats.
	addStats(stats map[string]httpsched.RouteStats)
}

type weakRoutes[C any] weak.Pointer[Routes[C]]

func (p weakRoutes[C]) live() bool { return weak.Pointer[Routes[C]](p).Value() != nil }

func (p weakRoutes[C]) addStats(stats map[string]httpsched.RouteStats) {
	rs := weak.Pointer[Routes[C]](p).Value()
	if rs == nil {
		return
	}
	rs.handlers.Range(func(key, h any) bool {
		st, _ := httpsched.RouteStatsOf(h.(http.Handler))
		name := key.(routeKey).name()
		if prev, ok := stats[name]; ok {
			st = Add(prev, st)
		}
		stats[name] = st
		return true
	})
}

// register makes rs one of s's Routes, which Stats reads for as long as
// rs is in use.
func register[C any](s *cpusched.Scheduler, rs *Routes[C]) {
	reg := registries.For(s, func(weak.Pointer[cpusched.Scheduler]) *registry { return new(registry) })
	reg.mu.Lock()
	defer reg.mu.Unlock()
	live := reg.routes[:0]
	for _, p := range reg.routes {
		if p.live() {
			live = append(live, p)
		}
	}
	reg.routes = append(live, weakRoutes[C](weak.Make(rs)))
}

// Stats returns the figures of each route of s's Routes of calls of type
// C (one adapter's) that has a handler, keyed by its name as Auto names
// it (Route): httpsched.RouteStatsOf of its handler. A route that several
// of them have gets their figures added up (Add). The map is empty, not
// nil, when there are none.
func Stats[C any](s *cpusched.Scheduler) map[string]httpsched.RouteStats {
	return stats(s, func(p routesRef) bool {
		_, ok := p.(weakRoutes[C])
		return ok
	})
}

// AllStats is Stats of s's Routes of every call type: every adapter's
// (echosched's and ginsched's), a route that two have added up. It is
// for promsched, which cannot name the adapters' call types.
func AllStats(s *cpusched.Scheduler) map[string]httpsched.RouteStats {
	return stats(s, func(routesRef) bool { return true })
}

// stats returns the figures of the routes of s's Routes that keep keeps.
func stats(s *cpusched.Scheduler, keep func(routesRef) bool) map[string]httpsched.RouteStats {
	stats := map[string]httpsched.RouteStats{}
	reg, ok := registries.Load(s)
	if !ok {
		return stats
	}
	reg.mu.Lock()
	var kept []routesRef
	for _, p := range reg.routes {
		if keep(p) {
			kept = append(kept, p)
		}
	}
	reg.mu.Unlock()
	for _, p := range kept {
		p.addStats(stats)
	}
	return stats
}

// Add returns the figures of two handlers of one route: a's and b's
// added up, but Overrun, each request's, the larger.
func Add(a, b httpsched.RouteStats) httpsched.RouteStats {
	return httpsched.RouteStats{
		Overrun:     max(a.Overrun, b.Overrun),
		Limit:       a.Limit + b.Limit,
		InFlight:    a.InFlight + b.InFlight,
		OverrunWait: a.OverrunWait + b.OverrunWait,
		Shed: httpsched.ShedCounts{
			QueueFull:  a.Shed.QueueFull + b.Shed.QueueFull,
			WaitLimit:  a.Shed.WaitLimit + b.Shed.WaitLimit,
			Closed:     a.Shed.Closed + b.Shed.Closed,
			BadOptions: a.Shed.BadOptions + b.Shed.BadOptions,
		},
	}
}

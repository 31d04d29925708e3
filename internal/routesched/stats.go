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
type routesRef interface{ live() bool }

type weakRoutes[C any] weak.Pointer[Routes[C]]

func (p weakRoutes[C]) live() bool { return weak.Pointer[Routes[C]](p).Value() != nil }

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
// of them have gets their figures added up, its Overrun the largest.
// The map is empty, not nil, when there are none.
func Stats[C any](s *cpusched.Scheduler) map[string]httpsched.RouteStats {
	stats := map[string]httpsched.RouteStats{}
	reg, ok := registries.Load(s)
	if !ok {
		return stats
	}
	reg.mu.Lock()
	var all []*Routes[C]
	for _, p := range reg.routes {
		if p, ok := p.(weakRoutes[C]); ok {
			if rs := weak.Pointer[Routes[C]](p).Value(); rs != nil {
				all = append(all, rs)
			}
		}
	}
	reg.mu.Unlock()
	for _, rs := range all {
		rs.handlers.Range(func(key, h any) bool {
			st, _ := httpsched.RouteStatsOf(h.(http.Handler))
			name := key.(routeKey).name()
			if prev, ok := stats[name]; ok {
				st = add(prev, st)
			}
			stats[name] = st
			return true
		})
	}
	return stats
}

// add returns the figures of two handlers of one route: a's and b's
// added up, but Overrun, each request's, the larger.
func add(a, b httpsched.RouteStats) httpsched.RouteStats {
	return httpsched.RouteStats{
		Overrun:     max(a.Overrun, b.Overrun),
		Limit:       a.Limit + b.Limit,
		InFlight:    a.InFlight + b.InFlight,
		OverrunWait: a.OverrunWait + b.OverrunWait,
	}
}

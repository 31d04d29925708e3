package routesched

// Auto: what the adapters' Auto middleware share (echosched.Auto,
// ginsched.Auto), as httpsched.Auto does it for a net/http server: a
// table that sorts the routes into heavy and light by their CPU
// (internal/autoroute), and for each heavy route an httpsched handler
// that runs the rest of the chain as a task, as Routes does.

import (
	"context"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
)

// Auto is one Auto middleware's routes, each request's call of type C.
type Auto[C any] struct {
	run      http.Handler // the task's: run, given the call ServeTask put in the context
	opts     []httpsched.Option
	table    *autoroute.Table
	routeOf  func(*http.Request) string // httpsched.WithRouteOf's, or nil
	makeTask func(*autoroute.Route) any // a heavy route's handler
	// Arrive is what a light route's request does before it is served:
	// it counts in s's load reports and, with
	// httpsched.WithLoadMetricsHeader, carries the report in w's header.
	Arrive func(w http.ResponseWriter)
	// named maps a route's method and template to its entry without
	// building its name, read on every request and replaced, under mu,
	// by a copy with one more key, up to maxNamed keys.
	named    atomic.Pointer[map[routeKey]*autoroute.Route]
	mu       sync.Mutex
	maxNamed int
}

// NewAuto returns the Auto middleware's routes of s, whose table takes
// opts' Auto options (httpsched.WithHeavyThreshold, WithMaxRoutes,
// WithRouteOf) and is one of s's (httpsched.AutoRoutes), and whose heavy
// routes' handlers have the other options and run each request with run,
// as New's do; or, for an invalid option or a nil s, the error httpsched
// gives for it.
func NewAuto[C any](s *cpusched.Scheduler, run func(call C, w http.ResponseWriter, r *http.Request), opts []httpsched.Option) (*Auto[C], error) {
	// httpsched, imported here, has set SplitOptions.
	ao, rest, err := autoroute.SplitOptions(s, opts)
	if err != nil {
		return nil, err
	}
	a := &Auto[C]{
		opts: rest.([]httpsched.Option),
		run: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			run(Call[C](r), w, r)
		}),
		routeOf: ao.RouteOf,
		Arrive:  ao.Arrive,
	}
	a.table = autoroute.NewFor(s, ao.Threshold, ao.MaxRoutes)
	// A route may have an entry per method: bound the keys a little
	// above the routes, past which a request's name is built and looked
	// up in the table.
	a.maxNamed = 2 * a.table.MaxRoutes()
	named := map[routeKey]*autoroute.Route{}
	a.named.Store(&named)
	a.makeTask = func(rt *autoroute.Route) any {
		// SplitOptions has checked s and the options: Handler cannot
		// panic.
		return httpsched.Handler(s, &autoTask[C]{a: a, rt: rt}, a.opts...)
	}
	return a, nil
}

// Table returns a's table.
func (a *Auto[C]) Table() *autoroute.Table { return a.table }

// Route returns the entry of r's route, whose method is method and whose
// template, as the framework registered it, is path: named method (one
// of net/http's, else none), a space and path, as httpsched.Auto names a
// ServeMux pattern; "" for a request no route matched (path ""), whatever
// its method; or what WithRouteOf's function names.
func (a *Auto[C]) Route(method, path string, r *http.Request) *autoroute.Route {
	if a.routeOf != nil {
		return a.table.Route(a.routeOf(r))
	}
	key := routeKey{routeMethod(method), path}
	if rt, ok := (*a.named.Load())[key]; ok {
		return rt
	}
	return a.addRoute(key)
}

// addRoute is Route's slow path, at a key's first request.
func (a *Auto[C]) addRoute(key routeKey) *autoroute.Route {
	rt := a.table.Route(key.name())
	a.mu.Lock()
	defer a.mu.Unlock()
	old := *a.named.Load()
	if _, ok := old[key]; ok || len(old) >= a.maxNamed {
		return rt
	}
	named := maps.Clone(old)
	named[key] = rt
	a.named.Store(&named)
	return rt
}

// ServeTask serves r, whose call is call, with w, as a task of the
// handler of rt, a heavy route, made at its first heavy request.
func (a *Auto[C]) ServeTask(rt *autoroute.Route, call C, w http.ResponseWriter, r *http.Request) {
	rt.Task(a.makeTask).(http.Handler).ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey[C]{}, call)))
}

// autoTask is the http.Handler that a heavy route's handler runs inside
// each request's task: the call, and on a sample of requests the CPU
// time it used.
type autoTask[C any] struct {
	a  *Auto[C]
	rt *autoroute.Route
}

func (t *autoTask[C]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.rt.ServeInTask(t.a.run, w, r)
}

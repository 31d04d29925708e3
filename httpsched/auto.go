package httpsched

// Auto: one wrapper for a whole server, whose heavy routes are found by
// the CPU their requests use (internal/autoroute has the design).

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/autoroute"
)

// DefaultHeavyThreshold is the CPU per request at or above which Auto
// runs a route's requests as tasks, without WithHeavyThreshold: the
// measurement behind it is in docs/performance.md#auto.
const DefaultHeavyThreshold = autoroute.DefaultThreshold

// AutoIdleRelease is the cpusched.WithIdleRelease of Auto's tasks,
// unless WithTaskOptions sets another: a heavy request whose thread has
// slept this long (from one to two times it, as the slice monitor looks)
// gives its slot to the next task, and takes one back when it computes
// again. Two hand-offs between threads cost far less than the slot idle
// for a database call's milliseconds.
const AutoIdleRelease = 2 * time.Millisecond

// DefaultMaxRoutes is the number of routes Auto tracks without
// WithMaxRoutes.
const DefaultMaxRoutes = autoroute.DefaultMaxRoutes

// OtherRoute is the route that, once Auto tracks as many routes as
// WithMaxRoutes allows, the requests of every other route share.
const OtherRoute = autoroute.OtherRoute

// autoConfig is what Auto's own options set; zero values are unset.
type autoConfig struct {
	threshold time.Duration
	maxRoutes int
	routeOf   func(*http.Request) string
	names     []string // the options given, for NewHandler's error
}

// WithHeavyThreshold sets the CPU per request at or above which Auto
// runs a route's requests as tasks (DefaultHeavyThreshold without it),
// in 10us..10s. A heavy route whose average falls under half of it is
// served directly again. Auto's option only: NewHandler refuses it.
func WithHeavyThreshold(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if err := autoroute.CheckThreshold(d); err != nil {
			return fmt.Errorf("httpsched: WithHeavyThreshold(%v): %w", d, err)
		}
		c.auto.threshold = d
		c.auto.names = append(c.auto.names, "WithHeavyThreshold")
		return nil
	})
}

// WithMaxRoutes bounds the routes Auto tracks, in 1..65536
// (DefaultMaxRoutes without it): the requests of every route past the
// bound share one, OtherRoute. Auto's option only: NewHandler refuses
// it.
func WithMaxRoutes(n int) Option {
	return optionFunc(func(c *config) error {
		if err := autoroute.CheckMaxRoutes(n); err != nil {
			return fmt.Errorf("httpsched: WithMaxRoutes(%d): %w", n, err)
		}
		c.auto.maxRoutes = n
		c.auto.names = append(c.auto.names, "WithMaxRoutes")
		return nil
	})
}

// WithRouteOf sets the function that names a request's route for Auto,
// in place of the pattern of h's ServeMux: for a router that is not one.
// It runs on every request, so it should be cheap, and name routes, not
// paths (a template, not the user's id in it): the names past
// WithMaxRoutes share one route. Auto's option only: NewHandler refuses
// it.
func WithRouteOf(fn func(*http.Request) string) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return errors.New("httpsched: WithRouteOf(nil): the function must not be nil")
		}
		c.auto.routeOf = fn
		c.auto.names = append(c.auto.names, "WithRouteOf")
		return nil
	})
}

// router is what Auto finds a request's route with: *http.ServeMux's
// Handler method, which routes without serving.
type router interface {
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// autoHandler is what Auto returns.
type autoHandler struct {
	sched    *cpusched.Scheduler
	next     http.Handler
	cfg      config
	routeOf  func(*http.Request) string
	table    *autoroute.Table
	makeTask func(*autoroute.Route) any // a heavy route's Handler
	// light is a Handler of h with the options, never served: the light
	// requests count in its meter (s's) and carry its load header.
	light *handler
}

// NewAuto returns a handler that serves h, a whole server, as Auto says.
// An invalid option, a nil s or a nil h makes it return an error naming
// it (and the option's valid range) and no handler.
func NewAuto(s *cpusched.Scheduler, h http.Handler, opts ...Option) (http.Handler, error) {
	cfg, err := checkConfig(s, h, opts)
	if err != nil {
		return nil, err
	}
	cfg.taskOpts = autoTaskOptions(cfg.taskOpts)
	a := &autoHandler{sched: s, next: h, cfg: cfg, routeOf: cfg.auto.routeOf}
	if a.routeOf == nil {
		if mux, ok := h.(router); ok {
			a.routeOf = func(r *http.Request) string {
				_, pattern := mux.Handler(r)
				return pattern
			}
		} else {
			a.routeOf = methodPath
		}
	}
	a.table = autoroute.NewFor(s, cfg.auto.threshold, cfg.auto.maxRoutes)
	cfg.auto = autoConfig{}
	a.makeTask = func(rt *autoroute.Route) any {
		hd := newHandler(s, &autoTask{a: a, rt: rt}, cfg)
		hd.CountAs(rt.Name())
		return hd
	}
	a.light = newHandler(s, h, cfg)
	return a, nil
}

// Auto returns a handler that serves h, a whole server (an
// *http.ServeMux, or any handler with WithRouteOf), and finds its
// CPU-heavy routes itself: it measures the CPU each route's requests use
// and runs the requests of a route at or above WithHeavyThreshold's
// threshold as tasks of s, as Handler does (each route its own Handler,
// with opts: its WithMaxQueueWait limit, its RouteStats, which
// AutoRoute.Stats gives), and the others directly. No handler needs an
// edit; one that calls TaskFrom(r.Context()).Checkpoint() in its loops
// yields when it runs as a task, and pays a nil check when it runs
// directly.
//
//	s, err := cpusched.New()
//	...
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: httpsched.Auto(s, mux)}
//
// A request's route is the pattern of h's ServeMux that serves it
// (*http.ServeMux's Handler method), or what WithRouteOf's function
// names; for any other h, its method and path (bound them with
// WithMaxRoutes or name them with WithRouteOf). Auto tracks
// WithMaxRoutes routes; the others share OtherRoute.
//
// A request's CPU is its goroutine's thread CPU time while it is served,
// measured on a sample of requests (a route's first four, then one in 32
// of a light route's, one in 256 of one under an eighth of the threshold,
// and one in 4 of a heavy one's), never on the others.
// A light route's sampled request runs with its goroutine locked to its
// thread. So time spent waiting (on the network, a database, a lock)
// counts for nothing: a route that waits long and computes little stays
// light. CPU that the handler hands to other goroutines is not counted,
// and a long-lived stream (a WebSocket, server-sent events) counts as one
// request, its whole life's CPU: serve such routes beside Auto, not
// through it.
// A route's first request often pays a one-time cost (a sync.Once, a
// connection's handshake), so it decides nothing: the second takes the
// lower of the two as the route's average, and a heavy route runs its
// first two requests directly. A route turns heavy when its average
// reaches the threshold, and light again when it falls under half of it.
// Measuring needs Linux's thread
// CPU clocks: elsewhere every route stays light.
//
// A heavy route's handler that waits mid-way (a database call, a request
// to another service) gives its task's slot up while its thread sleeps:
// Auto's tasks have cpusched.WithIdleRelease(AutoIdleRelease) before the
// task options of WithTaskOptions, which may set another d. That works
// where the mode reads the task's thread clock (IsolationOSPriority, the
// default on Linux; WithIdleRelease's doc says where it does not);
// elsewhere the slot stays held while the handler waits, unless it wraps
// the wait in TaskFrom(r.Context()).Blocking.
//
// The options other than Auto's own apply to each heavy route's Handler
// as Handler says. A light route's request counts in s's load reports
// too (their rates), and with WithLoadMetricsHeader its response carries
// the report as it was when the request came.
//
// Cost on a light route's request, once classified
// (BenchmarkAutoLight against BenchmarkAutoMuxDirect): the route lookup
// (for a ServeMux, its Handler method: the mux routes the request twice),
// a few atomic operations, and a sample's clock reads spread over the
// requests; no allocation. AutoRoutesOf and AutoRoutes give each
// route's figures, its Handler's RouteStats among them; promsched
// exports them all.
//
// One set of opts serves every route: each heavy route learns a
// WithMaxQueueWait limit of its own, but all toward the same target d.
// For a route that needs a target of its own (a 60 ms login beside 5 ms
// renders), serve it outside Auto with its own Handler, from an outer
// mux: outer.Handle("POST /login", httpsched.Handler(s, login,
// httpsched.WithMaxQueueWait(time.Second))); outer.Handle("/",
// httpsched.Auto(s, inner, opts...)). Do not give a route both: its
// Handler's task inside Auto's would be a task inside a task of the same
// Scheduler, which can deadlock.
//
// An invalid option, a nil s or a nil h makes Auto panic with the error
// NewAuto would return.
func Auto(s *cpusched.Scheduler, h http.Handler, opts ...Option) http.Handler {
	a, err := NewAuto(s, h, opts...)
	if err != nil {
		panic(err)
	}
	return a
}

// autoTaskOptions returns the task options of Auto's tasks, given those
// of WithTaskOptions: WithIdleRelease(AutoIdleRelease), then opts, whose
// own WithIdleRelease, later, wins.
func autoTaskOptions(opts []cpusched.TaskOption) []cpusched.TaskOption {
	return append([]cpusched.TaskOption{cpusched.WithIdleRelease(AutoIdleRelease)}, opts...)
}

// methodPath names the route of a request to a handler that is not a
// ServeMux: its method (one of net/http's, else "") and its path.
func methodPath(r *http.Request) string {
	switch m := r.Method; m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m + " " + r.URL.Path
	}
	return r.URL.Path
}

func (a *autoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := a.table.Route(a.routeOf(r))
	if rt.Heavy() {
		rt.Task(a.makeTask).(http.Handler).ServeHTTP(w, r)
		return
	}
	a.light.meter.Arrive()
	if a.cfg.loadHeader {
		a.light.addLoadHeader(w)
	}
	if rt.Next() {
		a.serveLocked(rt, w, r)
		return
	}
	a.next.ServeHTTP(w, r)
}

// serveLocked serves a light route's sampled request on a locked thread,
// and records its CPU time.
func (a *autoHandler) serveLocked(rt *autoroute.Route, w http.ResponseWriter, r *http.Request) {
	defer rt.Unlock(autoroute.Lock())
	a.next.ServeHTTP(w, r)
}

// autoTask is the http.Handler that a heavy route's Handler runs inside
// each request's task: h, and on a sample of requests the CPU time it
// used.
type autoTask struct {
	a  *autoHandler
	rt *autoroute.Route
}

func (t *autoTask) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.rt.ServeInTask(t.a.next, w, r)
}

// AutoRoute is one route's figures in a handler Auto made.
type AutoRoute struct {
	// Route is the route's name: its ServeMux pattern, what WithRouteOf
	// named, or for the adapters the framework's route template;
	// OtherRoute for the routes past WithMaxRoutes.
	Route string
	// Heavy is true while its requests run as tasks.
	Heavy bool
	// CPU is its moving average of CPU time per sampled request: the
	// first sample, then the lower of the first two, then each sample
	// moves it a quarter of the way; 0 before the first.
	CPU time.Duration
	// Requests counts its requests, and Sampled those measured.
	Requests, Sampled uint64
	// Moves counts its moves between heavy and light.
	Moves uint64
	// Stats are the figures of the route's own Handler, which runs its
	// requests as tasks (RouteStatsOf): WithMaxQueueWait's limit, the
	// requests in flight, the overrun estimate, the requests it shed
	// (Shed: a light route's requests, served directly, are never shed).
	// The Handler is made at the route's first heavy request and kept if
	// it turns light again, its figures with it; they are zero for a
	// route that has never been heavy.
	Stats RouteStats
}

// AutoRoutesOf returns the figures of every route h tracks and true, if
// Auto or NewAuto returned h; nil and false for any other handler.
func AutoRoutesOf(h http.Handler) ([]AutoRoute, bool) {
	a, ok := h.(*autoHandler)
	if !ok {
		return nil, false
	}
	return autoRoutes(a.table.Stats()), true
}

// AutoRoutes returns the figures of every route of every wrapper of s
// (Auto's, and echosched's and ginsched's) still in use: promsched
// exports them, Stats of the routes that have been heavy included. A
// wrapper that is gone takes its figures with it here; promsched's route
// counters keep its counts.
func AutoRoutes(s *cpusched.Scheduler) []AutoRoute {
	var all []AutoRoute
	for _, t := range autoroute.Tables(s) {
		all = append(all, autoRoutes(t.Stats())...)
	}
	return all
}

func autoRoutes(st []autoroute.Stats) []AutoRoute {
	out := make([]AutoRoute, len(st))
	for i, r := range st {
		out[i] = AutoRoute{Route: r.Route, Heavy: r.Heavy, CPU: r.CPU, Requests: r.Requests, Sampled: r.Sampled, Moves: r.Moves}
		if h, ok := r.Task.(http.Handler); ok { // the route's Handler, Auto's or an adapter's
			out[i].Stats, _ = RouteStatsOf(h)
		}
	}
	return out
}

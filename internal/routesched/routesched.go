// Package routesched is what the framework adapters (echosched,
// ginsched) share: an httpsched handler per route, made at the route's
// first request, whose http.Handler runs the rest of the framework's
// chain inside the task.
//
// A framework's middleware cannot simply wrap its chain in
// httpsched.Handler: echo applies a route's middleware anew for each
// request, and a gin middleware serves every route of its group, so a
// handler made in the middleware would last one request or be shared by
// routes, and WithMaxQueueWait's limit, learned from one route's
// requests, would never shed or be every route's. And the
// chain to run changes with each request (echo's next, gin's Context),
// while an httpsched handler's http.Handler is fixed. So the adapter puts
// the request's call (its framework state) in the request's context and
// gives it to Serve; the route's handler, made once, finds it there.
// Each Routes is one of its Scheduler's, whose routes' figures Stats
// gives (echosched.RouteStats, ginsched.RouteStats), and AllStats for
// every adapter together (promsched).
package routesched

import (
	"context"
	"net/http"
	"sync"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// Routes has an httpsched handler per route, each running its requests'
// calls of type C.
type Routes[C any] struct {
	sched    *cpusched.Scheduler
	opts     []httpsched.Option
	run      http.Handler
	handlers sync.Map // routeKey: http.Handler
}

// routeKey names a route: its method (one of net/http's, else "", so
// that what clients send cannot grow the map) and its path as the
// framework registered it.
type routeKey struct{ method, path string }

// name returns the route's name: its method, a space and its path, as
// httpsched.Auto names a ServeMux pattern; its path alone without a
// method; "" for a request no route matched (path ""), whatever its
// method.
func (k routeKey) name() string {
	if k.method != "" && k.path != "" {
		return k.method + " " + k.path
	}
	return k.path
}

// callKey is the request context's key of a call of type C.
type callKey[C any] struct{}

// New returns the Routes of s whose handlers have opts and run each
// request with run, given its call, httpsched's response writer and the
// task's request, and which Stats reads while they are in use; or, for an
// invalid option or a nil s, the error httpsched.NewHandler returns for
// it.
func New[C any](s *cpusched.Scheduler, run func(call C, w http.ResponseWriter, r *http.Request), opts []httpsched.Option) (*Routes[C], error) {
	rs := &Routes[C]{
		sched: s,
		opts:  opts,
		run: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			run(Call[C](r), w, r)
		}),
	}
	if _, err := httpsched.NewHandler(s, rs.run, opts...); err != nil {
		return nil, err
	}
	register(s, rs)
	return rs, nil
}

// Serve serves r, whose call is call, with w, through the handler of
// the route method and path.
func (rs *Routes[C]) Serve(method, path string, call C, w http.ResponseWriter, r *http.Request) {
	rs.handler(routeKey{routeMethod(method), path}).ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey[C]{}, call)))
}

// Call returns the call that Serve put in r's context: for run, and for
// the function of httpsched.WithErrorHandler.
func Call[C any](r *http.Request) C {
	return r.Context().Value(callKey[C]{}).(C)
}

// handler returns the handler of route, made at its first request.
func (rs *Routes[C]) handler(route routeKey) http.Handler {
	if h, ok := rs.handlers.Load(route); ok {
		return h.(http.Handler)
	}
	// New has checked s and the options: Handler cannot panic.
	made := httpsched.Handler(rs.sched, rs.run, rs.opts...)
	// Its sheds and overrun waits are counted as the route's in the
	// scheduler's ledger, where promsched's counters outlive rs
	// (routeledger): before it serves.
	made.(interface{ CountAs(string) }).CountAs(route.name())
	h, _ := rs.handlers.LoadOrStore(route, made)
	return h.(http.Handler)
}

// routeMethod returns method if it is one of net/http's, else "".
func routeMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return ""
}
